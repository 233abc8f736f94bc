"""A real single-node Kubernetes (etcd, API server, scheduler, controller-manager, kubelet, containerd).

Everything runs inside one private PID, mount and network namespace whose only host-visible trace
is the cluster directory: the kubelet hard-codes ``/var/lib/kubelet/device-plugins``, so
``/var/lib``, ``/run`` and ``/var/log`` are bind mounts of directories under it there, and so are
the few ``/proc/sys`` files the kubelet writes. The network namespace has loopback, the node's
address on a veth pair with both ends inside, a /32 route to each pod's veth and no route off the
machine: whatever a pod or a component dials outside the cluster's namespaces fails (ENETUNREACH).
The host reaches the ports it needs through :mod:`relay` (same port numbers on the host's
127.0.0.1, free ports chosen at start, so two clusters can run at once). Killing the namespace's
init kills every process in it (containers included), its mounts and network vanish with it, and
the pods' cgroups live under ``kubedevice/<cluster id>`` in each hierarchy and are removed at
``down``.

With ``nodes`` > 1 (``up --nodes N``) every further node is a namespace of the same kind of its
own (:class:`Node`): its own containerd, ``/var/lib/kubelet``, ``/run``, ``/var/log``, CNI, cgroup
root and network without routes; its kubelet reaches the API server through a relay in its own
network (127.0.0.1:PORT there to the control plane's unix socket), and the host reaches its
kubelet's healthz through a relay pair as for the first node.

The kubelets may run an older release than the control plane (``up --kubelet-version``, within
the version skew policy), and :meth:`Node.upgrade_kubelet` swaps one node's kubelet for another
release's in place, its pods and plugins left running.

``python -m kubedevice.testing.cluster up|down|status`` (or ``scripts/cluster.sh``) drives it;
tests use :func:`up` and :meth:`Cluster.down`.

The modules: ``cluster`` (:class:`Cluster`, :func:`up`), ``node`` (:class:`Node`), ``processes``
(started, waited for, stopped in order), ``cgroups``, ``configs`` (what each process is given),
``files`` (what ``up`` made and ``down`` may remove), ``state`` (``state.json``'s records and
:class:`ClusterError`), ``__main__`` (the command line).
"""

from .cgroups import cgroup_dirs
from .cluster import DEFAULT_DIR, DIR_ENV, NODE_NAME, Cluster, leftovers, missing_prerequisite, up
from .configs import NODE_IP, PAUSE_IMAGE, TEST_IMAGE, kubelet_skew_error
from .files import MARKER, MAX_NODES
from .node import Node
from .processes import accepts
from .state import ClusterError, NodeState, Ports, State, relayed_ports

__all__ = [
    "DEFAULT_DIR",
    "DIR_ENV",
    "MARKER",
    "MAX_NODES",
    "NODE_IP",
    "NODE_NAME",
    "PAUSE_IMAGE",
    "TEST_IMAGE",
    "Cluster",
    "ClusterError",
    "Node",
    "NodeState",
    "Ports",
    "State",
    "accepts",
    "cgroup_dirs",
    "kubelet_skew_error",
    "leftovers",
    "missing_prerequisite",
    "relayed_ports",
    "up",
]
