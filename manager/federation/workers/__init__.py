"""The worker clusters: their kubeconfigs (read and validated), connections, fencing leases and
informers.
"""
