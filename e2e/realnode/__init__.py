"""A real node in the local test bed: Debian's containerd and a kubelet built from
``k8s.io/kubernetes`` (``e2e/binaries/build.sh``), joined to one LocalCluster, so that
``deploy/`` runs as real Pods from kfed's image.

Host-network Pods only (no CNI: containerd gets a loopback-only network list so the node
reports Ready); each node has its own containerd (state, root and socket under the node's
directory), its own cgroup root and kubelet directories, so two nodes on one machine never
see each other's containers. The kernel settings the kubelet changes are saved before the
first node starts and restored after the last one stops (``kernel.py``). ``host.py`` says in
one sentence why a machine cannot run a node. docs/kind.md ("A real node") walks through it.
"""
