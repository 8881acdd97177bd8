"""The manager's Job admission webhook: the review, its serving certificate and its
registration with kube-apiserver.
"""
