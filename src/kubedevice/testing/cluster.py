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
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import components, pki
from .components import Binaries
from .gobuild import BuildError
from .images import write_oci_archive
from .kubeapi import KubeApi
from .waiting import wait_for

DEFAULT_DIR = Path("/tmp/kubedevice-cluster")
DIR_ENV = "KUBEDEVICE_CLUSTER_DIR"
NODE_NAME = "kubedevice-node"
PAUSE_IMAGE = "kubedevice.test/pause:1"
"""containerd's sandbox image (its config names it; the kubelet does not)."""
TEST_IMAGE = "kubedevice.test/envsleep:1"
"""Both tags name the same static program: it prints its environment, then sleeps until SIGTERM."""

_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
"""The kubelet's kernel tunables (container_manager_linux.go): private copies inside the namespace."""
_HIDDEN = ("/var/lib", "/run", "/var/log")
NODE_IP = "10.87.0.1"
"""The node's address, on a veth pair inside the cluster's network namespace (the kubelet refuses
a loopback node IP). Nothing outside that namespace has it: a host route to it leads nowhere."""
_RELAY = Path(__file__).with_name("relay.py")
MARKER = ".kubedevice-cluster"
"""Written by ``up`` into the cluster directory: ``down`` removes files only where it finds it (its own)."""
MAX_NODES = 5
"""``up --nodes`` at most: each node costs a containerd and a kubelet (~150 MB idle, docs/real-cluster.md)."""
_NODE_DIRS = tuple(f"node{number}" for number in range(2, MAX_NODES + 1))
"""The further nodes' directories (the first node's is the cluster directory itself, as with one node)."""
_MADE_BY_UP = (
    "etcd",
    "ns",
    "config",
    "pki",
    "cni",
    "relay",
    "ns.ready",
    "state.json",
    "state.tmp",
    "kubeconfig",
    "kubelet.kubeconfig",
    "scheduler.kubeconfig",
    "controller-manager.kubeconfig",
    *_NODE_DIRS,
)
"""What ``up`` creates in the directory besides ``logs/`` and the marker: all that ``down`` may remove."""
_KEPT = ("logs", "ns/var-log", *(f"{name}/ns/var-log" for name in _NODE_DIRS))
"""Kept by ``down`` for debugging: the components' logs and the pods' (small next to etcd's and containerd's data)."""
_STOP_ORDER = ("kube-scheduler", "kube-controller-manager", "kubelet", "containerd", "kube-apiserver", "etcd")
"""The API server before etcd: with etcd gone first its shutdown hangs for more than 90 s."""


class ClusterError(RuntimeError):
    """The cluster cannot start here; the message says exactly which part and why."""


@dataclass
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    kubelet: int
    kubelet_healthz: int
    scheduler: int
    controller_manager: int

    @classmethod
    def free(cls, extra: int = 0) -> tuple[Ports, list[int]]:
        """The cluster's ports and ``extra`` more (further nodes'), none repeated."""
        with contextlib.ExitStack() as stack:  # all bound at once so none repeats
            sockets = [stack.enter_context(socket.socket()) for _ in range(7 + extra)]
            for sock in sockets:
                sock.bind(("127.0.0.1", 0))
            ports = [sock.getsockname()[1] for sock in sockets]
        return cls(*ports[:7]), ports[7:]


@dataclass
class State:
    """What ``down`` needs after ``up`` has returned, kept in ``<dir>/state.json``."""

    ports: Ports
    node_name: str
    cluster_id: str
    binaries: dict[str, str] = field(default_factory=dict)
    init_pid: int = 0
    """unshare(1), outside the namespace; its child is the namespace's init."""
    namespace_pid: int = 0
    """Host PID of the namespace's init, for nsenter."""
    pids: dict[str, int] = field(default_factory=dict)
    kubernetes_version: str = components.KUBERNETES_VERSION
    nodes: list[NodeState] = field(default_factory=list)
    """The nodes after the first (``up --nodes N``); empty for one node."""
    kubelet_versions: dict[str, str] = field(default_factory=dict)
    """Node name → the version of the kubelet it runs, where that is not ``kubernetes_version``
    (``up --kubelet-version``, :meth:`Node.upgrade_kubelet`)."""


@dataclass
class NodeState:
    """A further node's namespace and processes (the first node's are :class:`State`'s own)."""

    name: str
    kubelet: int
    kubelet_healthz: int
    init_pid: int = 0
    namespace_pid: int = 0
    pids: dict[str, int] = field(default_factory=dict)


def missing_prerequisite() -> str | None:
    """Why a cluster cannot run on this machine at all, or None."""
    if sys.platform != "linux":
        return "a real cluster needs Linux"
    if os.geteuid() != 0:
        return "a real cluster needs root (private mount and PID namespaces, cgroups, container sandboxes)"
    for tool in ("unshare", "nsenter", "openssl", "ip", "flock", "mount"):
        if shutil.which(tool) is None:
            return f"{tool}(1) is not installed"
    probe = subprocess.run(
        ["unshare", "--mount", "--pid", "--net", "--fork", "--propagation", "private", "true"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        return f"unshare --mount --pid --net failed: {probe.stderr.strip()}"
    return None


class Cluster:
    """A cluster directory, running or not."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory.resolve()
        self._api: tuple[int, KubeApi] | None = None

    # Paths other tools need (printed by ``up``).
    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    @property
    def kubelet_dir(self) -> Path:
        return self.dir / "ns" / "var-lib" / "kubelet"

    @property
    def plugin_dir(self) -> Path:
        return self.kubelet_dir / "device-plugins"

    @property
    def pod_log_dir(self) -> Path:
        return self.dir / "ns" / "var-log" / "pods"

    @property
    def cdi_dir(self) -> Path:
        return self.dir / "ns" / "run" / "cdi"

    @property
    def containerd_socket(self) -> Path:
        return self.dir / "ns" / "run" / "containerd" / "containerd.sock"

    @property
    def relay_dir(self) -> Path:
        """The relays' unix sockets, one per forwarded port."""
        return self.dir / "relay"

    @property
    def logs(self) -> Path:
        return self.dir / "logs"

    @property
    def namespace_pid(self) -> int:
        """Host PID of the first node's (and the control plane's) namespace init, for nsenter."""
        return self._require_state().namespace_pid

    @property
    def state_file(self) -> Path:
        return self.dir / "state.json"

    def state(self) -> State | None:
        try:
            data = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return None
        nodes = [NodeState(**node) for node in data.pop("nodes", [])]
        return State(ports=Ports(**data.pop("ports")), nodes=nodes, **data)

    def save(self, state: State) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=1))
        tmp.replace(self.state_file)

    def api(self) -> KubeApi:
        """The admin's client, one per API server port: callers ask for it in polling loops, and each
        new one would decode the kubeconfig's certificates into files and open its own connections."""
        port = self._require_state().ports.apiserver
        if self._api is None or self._api[0] != port:
            if self._api is not None:
                self._api[1].close()
            self._api = (port, KubeApi(self.kubeconfig))
        return self._api[1]

    @property
    def node_name(self) -> str:
        return self._require_state().node_name

    def summary(self) -> dict[str, str]:
        state = self._require_state()
        return {
            "kubeconfig": str(self.kubeconfig),
            "plugin-dir": str(self.plugin_dir),
            "kubelet-dir": str(self.kubelet_dir),
            "pod-logs": str(self.pod_log_dir),
            "cdi-dir": str(self.cdi_dir),
            "containerd": str(self.containerd_socket),
            "ctr": shlex.join(self.ctr_command(state)),
            "apiserver": f"https://127.0.0.1:{state.ports.apiserver}",
            "node": state.node_name,
            "kubernetes": state.kubernetes_version,
            "logs": str(self.logs),
            **({"kubelets": ", ".join(sorted(set(state.kubelet_versions.values())))} if state.kubelet_versions else {}),
            **{key: value for node in self.nodes()[1:] for key, value in node.summary(state).items()},
        }

    def node(self, number: int) -> Node:
        """Node ``number`` (1 is the first, in the control plane's namespace; ``up --nodes N`` adds 2 … N)."""
        count = 1 + len(self._require_state().nodes)
        if not 1 <= number <= count:
            raise ClusterError(f"node {number}: the cluster has nodes 1 to {count}")
        return Node(self, number)

    def nodes(self) -> list[Node]:
        return [Node(self, number) for number in range(1, 2 + len(self._require_state().nodes))]

    def ctr_command(self, state: State | None = None) -> list[str]:
        """containerd's ``ctr`` as run inside the cluster's namespaces, where the socket is containerd's
        own ``/run/containerd/containerd.sock`` and paths, mounts and PIDs are the ones it sees."""
        state = state or self._require_state()
        return [
            "nsenter",
            "-t",
            str(state.namespace_pid),
            "-m",
            "-p",
            "-n",
            "--",
            str(self.binaries.containerd / "ctr"),
            "--address",
            "/run/containerd/containerd.sock",
            "-n",
            "k8s.io",
        ]

    def _require_state(self) -> State:
        state = self.state()
        if state is None:
            raise ClusterError(f"no cluster in {self.dir} (no state.json): run `up` first")
        return state

    # --- lifecycle -------------------------------------------------------------------------------

    def running(self) -> dict[str, bool]:
        state = self.state()
        if state is None:
            return {}
        found = {name: _alive(pid) for name, pid in {"namespace": state.init_pid, **state.pids}.items()}
        for node in state.nodes:
            found |= {
                f"{node.name}/{name}": _alive(pid) for name, pid in {"namespace": node.init_pid, **node.pids}.items()
            }
        return found

    def down(self) -> list[str]:
        """Stop everything in order, then kill the namespace and remove the pods' cgroups; the names of
        the processes that were still running. Files stay where they are (see :meth:`remove_files`).

        Safe to call on a half-started or already stopped cluster.
        """
        state = self.state()
        if state is None:
            return []
        was_running = [name for name, alive in self.running().items() if alive]
        for node in state.nodes:  # their kubelets while the API server still answers
            _stop_namespace(node.pids, node.namespace_pid, node.init_pid)
        _stop_namespace(state.pids, state.namespace_pid, state.init_pid)
        _remove_cgroups(state.cluster_id)
        shutil.rmtree(self.relay_dir, ignore_errors=True)
        self.state_file.unlink(missing_ok=True)
        return was_running

    def remove_files(self) -> tuple[int, int] | None:
        """After :meth:`down`: remove what ``up`` made here (etcd's data, containerd's images and
        snapshots, the kubelet's directory, certificates, kubeconfigs) but the logs; (bytes removed,
        bytes of logs kept), or None where ``up`` left no marker.

        Only in a directory that carries ``up``'s marker, owned by this user, and only the names ``up``
        creates; never below a mount point (rmtree would descend into a mounted file system).
        """
        marker = self.dir / MARKER
        if not os.path.lexists(marker):
            return None
        if marker.is_symlink() or not marker.is_file() or marker.stat().st_uid != os.geteuid():
            raise ClusterError(f"removed nothing: {marker} is not a file of this user")
        if os.path.lexists(self.state_file):
            raise ClusterError(f"{self.dir} still has a cluster (state.json): run `down` first")
        mounted = _mounts_below(self.dir)
        if mounted:
            raise ClusterError(f"removed nothing: something is mounted below {self.dir}: {', '.join(mounted)}")
        kept = [self.dir / name for name in _KEPT]
        removed = 0
        for name in _MADE_BY_UP:
            removed += _remove_except(self.dir / name, kept)
        return removed, sum(_disk_usage(path) for path in kept)

    def disk_usage(self) -> int:
        """Bytes the directory takes on disk (as ``du``)."""
        return _disk_usage(self.dir)

    def restart_kubelet(self, wait_healthy: bool = True) -> float:
        """The first node's :meth:`Node.restart_kubelet`."""
        return self.node(1).restart_kubelet(wait_healthy)

    def stop(self, name: str) -> None:
        """SIGTERM a process started by :meth:`spawn` (SIGKILL after 20 s)."""
        self.node(1).stop(name)

    def wait_kubelet_healthy(self, state: State | None = None, timeout: float = 60.0) -> None:
        self.node(1).wait_kubelet_healthy(state, timeout)

    # --- start -----------------------------------------------------------------------------------

    @property
    def binaries(self) -> Binaries:
        paths = self._require_state().binaries
        return Binaries(**{key: Path(value) for key, value in paths.items()})

    def up(
        self,
        binaries: Binaries,
        node_name: str = NODE_NAME,
        version: str = components.KUBERNETES_VERSION,
        nodes: int = 1,
        kubelet_version: str | None = None,
    ) -> None:
        """Start a fresh cluster of ``version`` (``binaries`` built for it) with ``nodes`` nodes, whose
        kubelets run ``kubelet_version`` (None: ``version``; built if not cached, before anything
        starts); on any failure everything started so far is stopped again."""
        if not 1 <= nodes <= MAX_NODES:
            raise ClusterError(f"nodes: {nodes} is not between 1 and {MAX_NODES}")
        kubelet_version = kubelet_version or version
        skew = kubelet_skew_error(version, kubelet_version)
        if skew is not None:
            raise ClusterError(f"kubelet version: {skew}")
        if kubelet_version != version:
            components.kubernetes(kubelet_version)
        self.down()  # a previous run interrupted before its own down
        for sub in ("ns", "config", "pki", *_NODE_DIRS):
            shutil.rmtree(self.dir / sub, ignore_errors=True)
        shutil.rmtree(self.dir / "etcd", ignore_errors=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        (self.dir / MARKER).write_text("made by kubedevice's `cluster.sh up`: `down` removes what `up` made here\n")
        cluster_id = hashlib.sha256(str(self.dir).encode()).hexdigest()[:12]
        ports, more = Ports.free(extra=2 * (nodes - 1))
        # The further nodes' ports are known before the host's relay starts: it serves their healthz too.
        state = State(
            ports=ports,
            node_name=node_name,
            cluster_id=cluster_id,
            binaries={key: str(value) for key, value in asdict(binaries).items()},
            kubernetes_version=version,
            nodes=[
                NodeState(f"{node_name}-{number}", more[2 * number - 4], more[2 * number - 3])
                for number in range(2, nodes + 1)
            ],
        )
        if kubelet_version != version:
            names = [node_name, *(node.name for node in state.nodes)]
            state.kubelet_versions = dict.fromkeys(names, kubelet_version)
        self.save(state)
        try:
            self._prepare(state)
            self._start_namespace(state)
            self._start_relays(state)
            self._start_control_plane(state)
            self._start_node(state)
            self._start_more_nodes(state)
        except BaseException:
            self.down()
            raise

    def _prepare(self, state: State) -> None:
        pki.create(self.dir / "pki", state.node_name)
        api = f"https://127.0.0.1:{state.ports.apiserver}"
        for name, user in (
            ("kubeconfig", "admin"),
            ("kubelet.kubeconfig", "kubelet"),
            ("scheduler.kubeconfig", "scheduler"),
            ("controller-manager.kubeconfig", "controller-manager"),
        ):
            (self.dir / name).write_text(pki.kubeconfig(api, self.dir / "pki", user))
        self.node(1).write_files(state)
        write_oci_archive(self.binaries.image_program, [PAUSE_IMAGE, TEST_IMAGE], self.dir / "config" / "image.tar")

    def _start_namespace(self, state: State) -> None:
        state.init_pid, state.namespace_pid = self.node(1).start_namespace(state)
        self.save(state)

    def _start_relays(self, state: State) -> None:
        """The host's way in: its 127.0.0.1:PORT to the namespace's, through unix sockets in ``relay/``.

        Only the ports something outside uses: the API server (kubeconfigs), etcd and the kubelet's
        healthz (``up`` and the tests wait on them).
        """
        ports = [str(port) for port in relayed_ports(state)]
        inside = self.spawn("relay-inside", [sys.executable, str(_RELAY), "inside", str(self.relay_dir), *ports], state)
        _wait(
            "the relay inside the namespace",
            30.0,
            lambda: all(accepts(self.relay_dir / f"{port}.sock") for port in ports),
            self.logs / "relay-inside.log",
            inside,
        )
        log = (self.logs / "relay-host.log").open("ab")
        process = subprocess.Popen(
            [sys.executable, str(_RELAY), "host", str(self.relay_dir), *ports],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        state.pids["relay-host"] = process.pid
        self.save(state)
        _wait(
            "the relay on the host",
            30.0,
            lambda: all(_listening(int(port)) for port in ports),
            self.logs / "relay-host.log",
            process.pid,
        )

    def spawn(self, name: str, argv: list[str], state: State | None = None, env: dict[str, str] | None = None) -> int:
        """Start ``argv`` inside the first node's namespaces (where /var/lib/kubelet is the cluster's);
        its host PID. Its output goes to ``logs/<name>.log``; :meth:`stop` ends it, :meth:`down` in any case.
        """
        return self.node(1).spawn(name, argv, state, env)

    def _start_control_plane(self, state: State) -> None:
        ports, pkidir, bins = state.ports, self.dir / "pki", self.binaries
        etcd_url = f"http://127.0.0.1:{ports.etcd_client}"
        peer_url = f"http://127.0.0.1:{ports.etcd_peer}"
        self.spawn(
            "etcd",
            [
                str(bins.etcd),
                f"--data-dir={self.dir / 'etcd'}",
                "--name=default",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
            state,
        )
        _wait("etcd /health", 30.0, lambda: _http_ok(f"{etcd_url}/health"), self.logs / "etcd.log", state.pids["etcd"])
        self.spawn(
            "kube-apiserver",
            [
                str(bins.kube("kube-apiserver")),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={ports.apiserver}",
                f"--tls-cert-file={pkidir / 'apiserver.crt'}",
                f"--tls-private-key-file={pkidir / 'apiserver.key'}",
                f"--client-ca-file={pkidir / 'ca.crt'}",
                f"--service-account-key-file={pkidir / 'sa.pub'}",
                f"--service-account-signing-key-file={pkidir / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--authorization-mode=Node,RBAC",
                "--service-cluster-ip-range=10.96.0.0/24",
                "--allow-privileged=true",
                "--profiling=false",
                f"--kubelet-client-certificate={pkidir / 'admin.crt'}",
                f"--kubelet-client-key={pkidir / 'admin.key'}",
                *_apiserver_release_flags(state.kubernetes_version),
            ],
            state,
        )
        api = self.api()
        _wait("kube-apiserver /readyz", 90.0, api.ready, self.logs / "kube-apiserver.log", state.pids["kube-apiserver"])
        self.spawn(
            "kube-scheduler",
            [
                str(bins.kube("kube-scheduler")),
                f"--kubeconfig={self.dir / 'scheduler.kubeconfig'}",
                f"--authentication-kubeconfig={self.dir / 'scheduler.kubeconfig'}",
                f"--authorization-kubeconfig={self.dir / 'scheduler.kubeconfig'}",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports.scheduler}",
                "--leader-elect=false",
            ],
            state,
        )
        self.spawn(
            "kube-controller-manager",
            [
                str(bins.kube("kube-controller-manager")),
                f"--kubeconfig={self.dir / 'controller-manager.kubeconfig'}",
                f"--authentication-kubeconfig={self.dir / 'controller-manager.kubeconfig'}",
                f"--authorization-kubeconfig={self.dir / 'controller-manager.kubeconfig'}",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports.controller_manager}",
                "--leader-elect=false",
                f"--service-account-private-key-file={pkidir / 'sa.key'}",
                f"--root-ca-file={pkidir / 'ca.crt'}",
                "--use-service-account-credentials=true",
            ],
            state,
        )

    def _start_node(self, state: State) -> None:
        node = self.node(1)
        node.start_runtime(state)
        node.wait_kubelet_healthy(state)
        node.wait_ready(state)
        api = self.api()
        _wait(
            "service account default/default",
            60.0,
            lambda: api.get("/api/v1/namespaces/default/serviceaccounts/default") is not None,
            self.logs / "kube-controller-manager.log",
            state.pids["kube-controller-manager"],
        )

    def _start_more_nodes(self, state: State) -> None:
        """Nodes 2 … N: every kubelet started before any is waited for, so they register together."""
        more = []
        for number in range(2, 2 + len(state.nodes)):
            node = Node(self, number)
            pki.node_client(self.dir / "pki", f"kubelet-{number}", node.name)
            (node.root / "kubelet.kubeconfig").parent.mkdir(parents=True, exist_ok=True)
            (node.root / "kubelet.kubeconfig").write_text(
                pki.kubeconfig(f"https://127.0.0.1:{state.ports.apiserver}", self.dir / "pki", f"kubelet-{number}")
            )
            node.write_files(state)
            record = state.nodes[number - 2]
            record.init_pid, record.namespace_pid = node.start_namespace(state)
            self.save(state)
            node.start_relays(state)
            node.start_runtime(state)
            more.append(node)
        for node in more:
            node.wait_kubelet_healthy(state)
            node.wait_ready(state)


class Node:
    """One node of a cluster. The first lives in the control plane's namespace (with one node, all
    there is); each further one is a namespace of its own with the same layout under ``node<N>/``:
    ``ns/`` (its /var/lib, /run, /var/log), ``config/``, ``cni/`` and its kubelet's kubeconfig.
    Its processes are named in ``state.json`` under its :class:`NodeState`."""

    def __init__(self, cluster: Cluster, number: int) -> None:
        self.cluster = cluster
        self.number = number
        self.root = cluster.dir if number == 1 else cluster.dir / f"node{number}"

    @property
    def name(self) -> str:
        return self._name(self.cluster._require_state())

    @property
    def kubelet_dir(self) -> Path:
        return self.root / "ns" / "var-lib" / "kubelet"

    @property
    def plugin_dir(self) -> Path:
        return self.kubelet_dir / "device-plugins"

    @property
    def pod_log_dir(self) -> Path:
        return self.root / "ns" / "var-log" / "pods"

    @property
    def cdi_dir(self) -> Path:
        return self.root / "ns" / "run" / "cdi"

    @property
    def containerd_socket(self) -> Path:
        return self.root / "ns" / "run" / "containerd" / "containerd.sock"

    @property
    def namespace_pid(self) -> int:
        """Host PID of the node's namespace init: ``nsenter -t`` it to be on the node."""
        state = self.cluster._require_state()
        return state.namespace_pid if self.number == 1 else self._record(state).namespace_pid

    def pids(self, state: State) -> dict[str, int]:
        """The node's processes by name (the first node's include the control plane's)."""
        return state.pids if self.number == 1 else self._record(state).pids

    def log(self, name: str) -> Path:
        """Where the output of the node's process ``name`` goes."""
        return self._log(self.cluster._require_state(), name)

    def summary(self, state: State) -> dict[str, str]:
        """What ``up`` prints about a further node (the first node's is the cluster's own summary)."""
        name = self._name(state)
        nsenter = f"nsenter -t {self._record(state).namespace_pid} -m -p -n --"
        return {
            f"{name} {key}": value
            for key, value in (
                ("kubelet-dir", str(self.kubelet_dir)),
                ("plugin-dir", str(self.plugin_dir)),
                ("pod-logs", str(self.pod_log_dir)),
                ("cdi-dir", str(self.cdi_dir)),
                ("containerd", str(self.containerd_socket)),
                ("run-on-node", nsenter),
            )
        }

    def spawn(self, name: str, argv: list[str], state: State | None = None, env: dict[str, str] | None = None) -> int:
        """Start ``argv`` inside the node's namespaces (its /var/lib/kubelet, /run and network); its
        host PID. Output to :meth:`log`; :meth:`stop` ends it, the cluster's ``down`` in any case."""
        state = state or self.cluster._require_state()
        namespace_pid = state.namespace_pid if self.number == 1 else self._record(state).namespace_pid
        log = self._log(state, name).open("ab")
        path = f"{self.cluster.binaries.containerd}:{self.root / 'cni' / 'bin'}:{os.environ['PATH']}"
        process = subprocess.Popen(
            ["nsenter", "-t", str(namespace_pid), "-m", "-p", "-n", "--", *argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env={**os.environ, **(env or {}), "PATH": path},
            cwd=self.cluster.dir,
        )
        log.close()
        child = _child_of(process.pid)
        self.pids(state)[name] = child
        self.cluster.save(state)
        return child

    def stop(self, name: str) -> None:
        """SIGTERM a process started by :meth:`spawn` (SIGKILL after 20 s)."""
        state = self.cluster._require_state()
        _terminate(self.pids(state).pop(name, 0), timeout=20.0)
        self.cluster.save(state)

    @property
    def kubelet_version(self) -> str:
        """The version of the kubelet the node runs (or ran last)."""
        state = self.cluster._require_state()
        return state.kubelet_versions.get(self._name(state), state.kubernetes_version)

    def restart_kubelet(self, wait_healthy: bool = True) -> float:
        """Stop the node's kubelet (SIGTERM) and start it again; seconds until it answers healthz."""
        return self._swap_kubelet(None, wait_healthy)

    def upgrade_kubelet(self, release: str, wait_healthy: bool = True) -> float:
        """Upgrade (or downgrade) the node's kubelet in place, as an operator does a node: stop it
        (SIGTERM), start the kubelet of ``release`` (``1.37``) on the same directory, config and
        kubeconfig, with the node's pods and plugins left running. Seconds from its start until it
        answers healthz. The binary is built (if need be) before the old kubelet stops, and a
        release the version skew policy forbids beside this API server is refused (ClusterError)."""
        version = components.version_of(release)
        state = self.cluster._require_state()
        skew = kubelet_skew_error(state.kubernetes_version, version)
        if skew is not None:
            raise ClusterError(f"{self._name(state)}: {skew}")
        components.kubernetes(version)
        return self._swap_kubelet(version, wait_healthy)

    def reconfigure_kubelet(self, settings: Mapping[str, object | None]) -> float:
        """Change the node's KubeletConfiguration (a setting None: removed, so the kubelet's default
        applies) and restart its kubelet; seconds until it answers healthz. For measurements that
        need a production node's settings where the test cluster's differ (its node status is
        sent every second: ``_kubelet_config``)."""
        path = self.root / "config" / "kubelet.yaml"
        config = json.loads(path.read_text())
        for key, value in settings.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        path.write_text(json.dumps(config, indent=1))
        return self.restart_kubelet()

    def _swap_kubelet(self, version: str | None, wait_healthy: bool) -> float:
        """Stop the kubelet, start it again (``version``'s binary when given); seconds until healthz."""
        state = self.cluster._require_state()
        _terminate(self.pids(state)["kubelet"], timeout=20.0)
        if version is not None:
            state.kubelet_versions.pop(self._name(state), None)
            if version != state.kubernetes_version:
                state.kubelet_versions[self._name(state)] = version
            self.cluster.save(state)
        started = time.monotonic()
        self.start_kubelet(state)
        if wait_healthy:
            self.wait_kubelet_healthy(state)
        return time.monotonic() - started

    def wait_kubelet_healthy(self, state: State | None = None, timeout: float = 60.0) -> None:
        state = state or self.cluster._require_state()
        port = self._ports(state)[1]
        _wait(
            f"{self._name(state)}'s kubelet healthz on 127.0.0.1:{port}",
            timeout,
            lambda: _http_ok(f"http://127.0.0.1:{port}/healthz"),
            self._log(state, "kubelet"),
            self.pids(state).get("kubelet"),
        )

    def wait_ready(self, state: State) -> None:
        """Until the Node is Ready and the node lifecycle controller has lifted the not-ready taint the
        kubelet registers with (as its own service account: --use-service-account-credentials)."""
        api, name = self.cluster.api(), self._name(state)
        _wait(
            f"node {name} Ready",
            90.0,
            lambda: api.node_ready(name),
            self._log(state, "kubelet"),
            self.pids(state).get("kubelet"),
        )
        _wait(
            f"node {name} untainted",
            60.0,
            lambda: not api.node_taints(name),
            self.cluster.logs / "kube-controller-manager.log",
            state.pids.get("kube-controller-manager"),
        )

    # --- start -----------------------------------------------------------------------------------

    def write_files(self, state: State) -> None:
        """The node's private directories, sysctl copies, kubelet and containerd configs and CNI plugin."""
        ns = self.root / "ns"
        for sub in ("var-lib/kubelet/device-plugins", "run/cdi", "var-log", "sysctl"):
            (ns / sub).mkdir(parents=True, exist_ok=True)
        for path in _SYSCTLS:
            source = Path("/proc/sys") / path
            if source.exists():
                (ns / "sysctl" / path.replace("/", ".")).write_text(source.read_text())
        config = self.root / "config"
        config.mkdir(exist_ok=True)
        # Cgroups of further nodes are siblings of the first's (never nested in a kubelet's root).
        cgroup_root = f"/kubedevice/{state.cluster_id}" + ("" if self.number == 1 else f"-{self.number}")
        (config / "kubelet.yaml").write_text(
            _kubelet_config(*self._ports(state), self.cluster.dir / "pki" / "ca.crt", cgroup_root)
        )
        (config / "containerd.toml").write_text(_containerd_config(self.root, self.cluster.binaries))
        cni = self.root / "cni"
        shutil.rmtree(cni, ignore_errors=True)
        (cni / "bin").mkdir(parents=True)
        (cni / "net.d").mkdir()
        plugin = cni / "bin" / "kubedevice-veth"
        plugin.write_text(_CNI_PLUGIN.replace("@IPAM@", str(cni / "ipam")).replace("@NODE_IP@", NODE_IP))
        plugin.chmod(0o755)
        (cni / "net.d" / "10-kubedevice.conflist").write_text(
            json.dumps({"cniVersion": "1.0.0", "name": "kubedevice", "plugins": [{"type": "kubedevice-veth"}]})
        )

    def start_namespace(self, state: State) -> tuple[int, int]:
        """The node's private mount, PID and network namespace; (unshare's PID, the init's host PID)."""
        log_path = self._log(state, "namespace")
        log = log_path.open("ab")
        process = subprocess.Popen(
            [
                "unshare",
                "--mount",
                "--pid",
                "--net",
                "--fork",
                "--mount-proc",
                "--propagation",
                "private",
                "--kill-child",
                "sh",
                "-c",
                _namespace_script(self.root),
                "sh",
                sys.executable,
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        if self.number > 1:  # down finds it even if the wait below fails
            self._record(state).init_pid = process.pid
        else:
            state.init_pid = process.pid
        self.cluster.save(state)
        ready = self.root / "ns.ready"
        ready.unlink(missing_ok=True)
        _wait(f"the private namespace of {self._name(state)}", 30.0, ready.exists, log_path, process.pid)
        return process.pid, _child_of(process.pid)

    def start_relays(self, state: State) -> None:
        """A further node's ways in and out, one process: its kubelet's 127.0.0.1:APISERVER to the
        control plane's unix socket (served by the first node's inside relay), and its kubelet's
        healthz to the unix socket the host's relay (started with every node's port) forwards to.
        No address off the node is dialled."""
        relays = self.cluster.relay_dir
        healthz = str(self._ports(state)[1])
        relay = self.spawn(
            "relay",
            [sys.executable, str(_RELAY), "host", str(relays), str(state.ports.apiserver), "--also-inside", healthz],
            state,
        )
        _wait(
            f"the relay of {self._name(state)}",
            30.0,
            lambda: accepts(relays / f"{healthz}.sock"),
            self._log(state, "relay"),
            relay,
        )

    def start_runtime(self, state: State) -> None:
        """containerd, the test images imported into it, then the kubelet (not waited for)."""
        containerd = self.cluster.binaries.containerd
        config = self.root / "config" / "containerd.toml"
        self.spawn("containerd", [str(containerd / "containerd"), f"--config={config}"], state)
        _wait(
            f"{self._name(state)}'s containerd socket",
            30.0,
            lambda: accepts(self.containerd_socket),
            self._log(state, "containerd"),
            self.pids(state)["containerd"],
        )
        ctr = [str(containerd / "ctr"), "--address", str(self.containerd_socket), "-n", "k8s.io"]
        done = subprocess.run(
            [
                *ctr,
                "images",
                "import",
                "--platform",
                "linux/amd64",
                "--snapshotter",
                "native",
                str(self.cluster.dir / "config" / "image.tar"),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if done.returncode != 0:
            raise ClusterError(f"ctr images import failed on {self._name(state)}: {done.stderr.strip()[-2000:]}")
        self.start_kubelet(state)

    def start_kubelet(self, state: State | None = None) -> int:
        """Start the node's kubelet (not waited for: :meth:`wait_kubelet_healthy`); its host PID."""
        state = state or self.cluster._require_state()
        version = state.kubelet_versions.get(self._name(state), state.kubernetes_version)
        binary = (
            self.cluster.binaries.kube("kubelet")
            if version == state.kubernetes_version
            else components.kubernetes(version) / "kubelet"
        )
        return self.spawn(
            "kubelet",
            [
                str(binary),
                f"--config={self.root / 'config' / 'kubelet.yaml'}",
                f"--kubeconfig={self.root / 'kubelet.kubeconfig'}",
                f"--hostname-override={self._name(state)}",
                f"--node-ip={NODE_IP}",
                "--v=2",
            ],
            state,
        )

    def _record(self, state: State) -> NodeState:
        return state.nodes[self.number - 2]

    def _name(self, state: State) -> str:
        return state.node_name if self.number == 1 else self._record(state).name

    def _ports(self, state: State) -> tuple[int, int]:
        """(kubelet, kubelet healthz): each node's own, so the host can relay every healthz."""
        if self.number == 1:
            return state.ports.kubelet, state.ports.kubelet_healthz
        return self._record(state).kubelet, self._record(state).kubelet_healthz

    def _log(self, state: State, name: str) -> Path:
        prefix = "" if self.number == 1 else f"{self._name(state)}-"
        return self.cluster.logs / f"{prefix}{name}.log"


# --- helpers -------------------------------------------------------------------------------------


def _apiserver_release_flags(version: str) -> list[str]:
    """What one release's API server needs beyond the rest.

    From 1.37 the default endpoint reconciler refuses a loopback ``--advertise-address`` ("cannot use
    public IP 127.0.0.1 with endpoint reconciler"); nothing here uses the ``kubernetes`` Service's
    endpoints (pods that call the API server are given ``KUBERNETES_SERVICE_HOST``), so ``none``.
    Earlier releases keep their default, as proven before.
    """
    minor = int(version.lstrip("v").split(".")[1])
    return ["--endpoint-reconciler-type=none"] if minor >= 37 else []


def kubelet_skew_error(apiserver: str, kubelet: str) -> str | None:
    """Why a kubelet of version ``kubelet`` may not run beside an API server of ``apiserver``, or None.

    Kubernetes' version skew policy (kubernetes.io/releases/version-skew-policy): a kubelet must not
    be newer than the API server and may be up to three minor releases older. So an upgrade
    runs the control plane first and the kubelets after it.
    """
    server, node = (int(version.lstrip("v").split(".")[1]) for version in (apiserver, kubelet))
    if node > server:
        return f"a kubelet {kubelet} may not be newer than the API server {apiserver} (upgrade the control plane first)"
    if server - node > 3:
        return f"a kubelet {kubelet} is more than 3 minor releases older than the API server {apiserver}"
    return None


def relayed_ports(state: State) -> list[int]:
    """The cluster's ports the host reaches (through :mod:`relay`), under the same numbers: every
    node's kubelet healthz among them (a further node's own relay serves its socket)."""
    return [
        state.ports.apiserver,
        state.ports.etcd_client,
        state.ports.kubelet_healthz,
        *(node.kubelet_healthz for node in state.nodes),
    ]


def _namespace_script(directory: Path) -> str:
    """Inside the new namespaces: the network, the private directories, then become a reaping init."""
    ns = directory / "ns"
    lines = [
        "set -e",
        "ip link set lo up",
        # Both ends inside: the node gets a local address (the kubelet checks it is) and no way out.
        "ip link add kdnode0 type veth peer name kdnode1",
        f"ip addr add {NODE_IP}/32 dev kdnode0",
        "ip link set kdnode0 up",
        "ip link set kdnode1 up",
    ]
    for target in _HIDDEN:
        lines.append(f"mount --bind '{ns / target.strip('/').replace('/', '-')}' {target}")
    for path in _SYSCTLS:
        copy = ns / "sysctl" / path.replace("/", ".")
        lines.append(f"[ ! -e '{copy}' ] || mount --bind '{copy}' /proc/sys/{path}")
    lines.append(f"touch '{directory / 'ns.ready'}'")
    lines.append(f"exec \"$1\" -c '{_REAPER}'")
    return "\n".join(lines)


_REAPER = """
import os, signal, sys, time
# PID 1 of the namespace: reap orphans (container shims re-parent here) and stay until killed.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.5)
"""


def _kubelet_config(port: int, healthz_port: int, client_ca: Path, cgroup_root: str) -> str:
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "127.0.0.1",
        "port": port,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "readOnlyPort": 0,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": False,
        "cgroupRoot": cgroup_root,
        "enforceNodeAllocatable": [],
        "failSwapOn": False,
        "failCgroupV1": False,
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "nodeStatusUpdateFrequency": "500ms",
        "nodeStatusReportFrequency": "1s",
        "resolvConf": "",
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
    }
    return json.dumps(config, indent=1)


def _containerd_config(directory: Path, bins: Binaries) -> str:
    cni = directory / "cni"
    return f"""version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.cri.v1.runtime"]
  enable_cdi = true
  cdi_spec_dirs = ["/run/cdi"]
  # the sandbox lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj below containerd's own
  restrict_oom_score_adj = true
  # device nodes from device plugins are owned by the pod's runAsUser/runAsGroup, so a non-root
  # pod can open its device (kubernetes#92211); docs/sources.md tells users to set it too
  device_ownership_from_security_context = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      snapshotter = "native"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "{bins.runc}"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{cni / "bin"}"]
    conf_dir = "{cni / "net.d"}"
    use_internal_loopback = true  # no standard CNI plugins here, not even loopback

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "native"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{PAUSE_IMAGE}"

# ctr import unpacks through the transfer service: it needs the snapshotter named per platform
[[plugins."io.containerd.transfer.v1.local".unpack_config]]
  platform = "linux/amd64"
  snapshotter = "native"

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


_CNI_PLUGIN = r"""#!/bin/sh
# The cluster's CNI plugin (the kernel here has no dummy/ipvlan links, which the standard plugins
# need): a veth pair between the pod's network namespace and the cluster's, with a /32 route each
# way (pod <-> node address), so the kubelet's probes reach the pod. Both namespaces are the
# cluster's own; neither has any other route, so nothing leaves the machine.
set -e
config=$(cat)
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0","1.1.0"]}'; exit 0 ;;
ADD) ;;
*) exit 0 ;;
esac
mkdir -p '@IPAM@'
n=$(flock '@IPAM@/lock' sh -c 'n=$(cat "$0/next" 2>/dev/null || echo 2); echo $((n + 1)) > "$0/next"; echo $n' '@IPAM@')
addr="10.88.$((n / 250)).$((n % 250 + 2))"
nsenter --net="$CNI_NETNS" sh -c '
  ip link add "$1" type veth peer name "kd$3"
  ip link set "kd$3" netns "$4"
  ip link set lo up && ip link set "$1" up
  ip addr add "$2/32" dev "$1"
  ip route add "$5/32" dev "$1"' sh "$CNI_IFNAME" "$addr" "$n" "$$" '@NODE_IP@'
ip link set "kd$n" up
ip route add "$addr/32" dev "kd$n" src '@NODE_IP@'
printf '{"cniVersion":"1.0.0","interfaces":[{"name":"%s","sandbox":"%s"}],' "$CNI_IFNAME" "$CNI_NETNS"
printf '"ips":[{"address":"%s/32","interface":0}]}\n' "$addr"
"""


def _child_of(pid: int, timeout: float = 30.0) -> int:
    """The host PID of the process nsenter forked into the namespace."""

    def child() -> int | None:
        with contextlib.suppress(OSError):
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            return int(children[0]) if children else None
        return None

    try:
        return wait_for(f"the command of nsenter (pid {pid})", child, timeout, 0.01)
    except AssertionError:
        raise ClusterError(f"nsenter (pid {pid}) did not start its command") from None


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _terminate(pid: int, timeout: float) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; returns once the process is gone."""
    if not _alive(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    try:
        wait_for(f"process {pid} to stop", lambda: not _alive(pid), timeout)
    except AssertionError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        try:
            wait_for(f"process {pid} killed", lambda: not _alive(pid), 60.0)
        except AssertionError:
            raise ClusterError(f"process {pid} still alive 60 s after SIGKILL") from None


def _descendants(roots: list[int]) -> set[int]:
    """``roots`` and every live process below them."""
    parents: dict[int, list[int]] = {}
    for pid in _all_pids():
        with contextlib.suppress(OSError, IndexError, ValueError):
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = [pid for pid in roots if _alive(pid)]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(parents.get(pid, []))
    return found


def _stop_namespace(pids: dict[str, int], namespace_pid: int, init_pid: int) -> None:
    """Stop one namespace's processes in order (plugins started with spawn() and relays first), then
    its init.

    When the namespace's init exits, the kernel kills every process of the PID namespace (container
    processes in nested namespaces too); unshare(1) then exits. unshare blocks SIGTERM while it
    waits, so it is only the fallback: --kill-child SIGKILLs the init.
    """
    members = _descendants([init_pid, *pids.values()])
    extra = [name for name in pids if name not in _STOP_ORDER]
    for name in [*extra, *_STOP_ORDER]:
        pid = pids.get(name, 0)
        if pid:
            _terminate(pid, timeout=20.0)
    _terminate(namespace_pid, timeout=5.0)
    _terminate(init_pid, timeout=5.0)
    _wait_gone(members | _descendants([init_pid, *pids.values()]))


def _wait_gone(pids: set[int], timeout: float = 20.0) -> None:
    """Until none of ``pids`` is alive (the kernel kills a PID namespace's processes after its init)."""

    def left() -> list[int]:
        return sorted(pid for pid in pids if _alive(pid))

    try:
        wait_for("the cluster's processes gone", lambda: not left(), timeout)
    except AssertionError:
        raise ClusterError(f"processes of the cluster still alive after stop: {left()}") from None


def _all_pids() -> Iterator[int]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def cgroup_dirs(cluster_id: str) -> list[Path]:
    """The cluster's cgroup directories in every mounted hierarchy (v1 controllers and v2)."""
    root = Path("/sys/fs/cgroup")
    names = (cluster_id, f"{cluster_id}-*")  # the first node's and further nodes' (``-<number>``)
    found = [
        path
        for name in names
        for path in [*root.glob(f"kubedevice/{name}"), *root.glob(f"*/kubedevice/{name}")]
        if path.is_dir()
    ]
    return found


def _remove_cgroups(cluster_id: str, timeout: float = 10.0) -> None:
    """rmdir the pods' cgroups bottom-up; the kernel frees a cgroup shortly after its last task."""
    deadline = time.monotonic() + timeout
    while True:
        left = []
        for top in cgroup_dirs(cluster_id):
            for path in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    path.rmdir()
            try:
                top.rmdir()
                with contextlib.suppress(OSError):
                    top.parent.rmdir()  # kubedevice/, if no other cluster uses it
            except OSError:
                left.append(top)
        if not left:
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"cgroups still busy after stop: {', '.join(map(str, left))}")
        time.sleep(0.2)


def leftovers(directory: Path, state: State) -> list[str]:
    """What a stopped cluster left on the host: processes, mounts below its directory, cgroups."""
    pids = [state.init_pid, state.namespace_pid, *state.pids.values()]
    for node in state.nodes:
        pids += [node.init_pid, node.namespace_pid, *node.pids.values()]
    found = [f"process {pid}" for pid in pids if _alive(pid)]
    prefix = str(directory.resolve())
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        root, target = line.split()[3:5]
        if target.startswith(prefix) or root.startswith(prefix):
            found.append(f"mount {target}")
    found += [f"cgroup {path}" for path in cgroup_dirs(state.cluster_id)]
    return found


def _mounts_below(directory: Path) -> list[str]:
    """Mount points below ``directory`` in this mount namespace (the directory itself may be one)."""
    prefix = str(directory.resolve()) + "/"
    targets = (line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines())
    return [target for target in targets if target.startswith(prefix)]


def _remove_except(path: Path, kept: list[Path]) -> int:
    """Remove ``path`` (a symlink as a link) but whatever of ``kept`` is below it; bytes freed."""
    if path in kept or not os.path.lexists(path):
        return 0
    if path.is_symlink() or not path.is_dir():  # files, sockets, links
        size = _disk_usage(path)
        path.unlink()
        return size
    if not any(keep.is_relative_to(path) for keep in kept):
        size = _disk_usage(path)
        shutil.rmtree(path)
        return size
    freed = sum(_remove_except(child, kept) for child in path.iterdir())
    own = path.lstat().st_blocks * 512
    with contextlib.suppress(OSError):
        path.rmdir()  # empty when nothing kept was there (a node directory without pod logs)
        freed += own
    return freed


def _disk_usage(path: Path) -> int:
    """Bytes ``path`` takes on disk, symlinks not followed (as ``du -s``)."""
    try:
        top = path.lstat()
    except OSError:
        return 0
    total = top.st_blocks * 512
    if path.is_dir() and not path.is_symlink():
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


def accepts(path: Path) -> bool:
    """Whether the unix socket at ``path`` takes a connection. Its file appears at bind(), before
    listen(): a client that dials as soon as the file exists may be refused."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(str(path)) == 0


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _wait(what: str, timeout: float, ready: Callable[[], bool], log: Path, pid: int | None) -> None:
    """Poll ``ready`` (:func:`waiting.wait_for`); ClusterError with the log's tail if the process
    dies or time runs out."""

    def check() -> bool:
        if ready():
            return True
        if pid is not None and not _alive(pid):
            raise ClusterError(f"{what}: the process exited; {log} ends with:\n{_tail(log)}")
        return False

    try:
        wait_for(what, check, timeout, 0.1)
    except AssertionError:
        raise ClusterError(f"{what}: not ready after {timeout:.0f} s; {log} ends with:\n{_tail(log)}") from None


def _tail(log: Path, size: int = 3000) -> str:
    try:
        return log.read_text(errors="replace")[-size:]
    except OSError:
        return "(no log)"


def up(
    directory: Path,
    node_name: str = NODE_NAME,
    release: str | None = None,
    nodes: int = 1,
    kubelet_release: str | None = None,
) -> Cluster:
    """Build (cached) and start a cluster of ``release`` (``1.37``; None: the default) with ``nodes``
    nodes in ``directory``, their kubelets of ``kubelet_release`` (None: ``release``); ClusterError/
    BuildError say why not."""
    version = components.version_of(release)
    kubelet_version = components.version_of(kubelet_release) if kubelet_release else None
    reason = missing_prerequisite()
    if reason is not None:
        raise ClusterError(reason)
    cluster = Cluster(directory)
    cluster.dir.mkdir(parents=True, exist_ok=True)
    for hidden in _HIDDEN:
        if cluster.dir.is_relative_to(hidden):
            raise ClusterError(f"the cluster directory may not be under {hidden}: the namespace hides it")
    cluster.up(components.ensure_all(version), node_name, version, nodes, kubelet_version)
    return cluster


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cluster.sh", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("up", "down", "status"))
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(os.environ.get(DIR_ENV, DEFAULT_DIR)),
        help=f"the cluster directory (default ${DIR_ENV} or {DEFAULT_DIR})",
    )
    parser.add_argument("--node-name", default=NODE_NAME)
    parser.add_argument(
        "--version",
        dest="release",
        choices=list(components.RELEASES),
        default=None,
        help=f"up: the Kubernetes release (default {components.DEFAULT_RELEASE}: "
        f"{components.KUBERNETES_VERSION}); each is built once and cached",
    )
    parser.add_argument(
        "--nodes",
        type=int,
        default=1,
        help=f"up: how many nodes, 1 to {MAX_NODES} (default 1): each a kubelet and containerd "
        "in a private namespace of its own, named <node-name>, <node-name>-2, ...",
    )
    parser.add_argument(
        "--kubelet-version",
        dest="kubelet_release",
        choices=list(components.RELEASES),
        default=None,
        help="up: the kubelets' release (default: --version's), at most 3 minor "
        "releases older than the control plane and never newer",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="down: keep etcd's data, containerd's images and the rest (default: keep only the logs)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.nodes <= MAX_NODES:
        print(f"kubedevice: --nodes: {args.nodes} is not between 1 and {MAX_NODES}", file=sys.stderr)
        return 2
    if args.kubelet_release is not None:
        skew = kubelet_skew_error(components.version_of(args.release), components.version_of(args.kubelet_release))
        if skew is not None:
            print(f"kubedevice: --kubelet-version: {skew}", file=sys.stderr)
            return 2
    signal.signal(signal.SIGTERM, _interrupt)  # an interrupted `up` stops what it started
    try:
        if args.command == "up":
            _up_command(args.dir, args.node_name, args.release, args.nodes, args.kubelet_release)
        elif args.command == "down":
            _down_command(Cluster(args.dir), args.keep)
        else:
            return _status_command(Cluster(args.dir))
    except (ClusterError, BuildError) as err:
        print(f"kubedevice: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kubedevice: interrupted; stopped what was started", file=sys.stderr)
        return 130
    return 0


def _up_command(directory: Path, node_name: str, release: str | None, nodes: int, kubelet_release: str | None) -> None:
    """Start, then build kubectl if it is not cached yet: after the cluster, so that a cold kubectl
    build never delays the cluster itself; interrupted, it stops the cluster as any part of ``up``."""
    cluster = up(directory, node_name, release, nodes, kubelet_release)
    version = components.version_of(release)
    try:
        kubectl: Path | str = components.kubectl(version)
    except BuildError as err:  # the cluster runs without it; say why there is none
        kubectl = str(err).splitlines()[0]
    except BaseException:
        cluster.down()
        raise
    for key, value in cluster.summary().items():
        print(f"{key}: {value}")
    print(
        f"kubectl: not built: {kubectl}"
        if isinstance(kubectl, str)
        else f"kubectl: {kubectl} ({version}, as the cluster)"
    )
    sudo = "sudo " if os.environ.get("SUDO_USER") else ""  # kubectl is in root's cache, nsenter needs root
    print("# to use them in this shell:")
    print(f"export KUBECONFIG={shlex.quote(str(cluster.kubeconfig))}")
    if not isinstance(kubectl, str):
        print(f"alias kubectl={shlex.quote(f'{sudo}{kubectl} --kubeconfig {cluster.kubeconfig}')}")
    print(f"alias ctr={shlex.quote(sudo + shlex.join(cluster.ctr_command()))}")


def _down_command(cluster: Cluster, keep: bool) -> None:
    """Stop, then one line on the files: removed but the logs, or all kept (``--keep``)."""
    stopped = cluster.down()
    print(f"stopped: {', '.join(stopped)}" if stopped else f"stopped: nothing was running in {cluster.dir}")
    if keep:
        print(
            f"kept: {_megabytes(cluster.disk_usage())} in {cluster.dir} (--keep): etcd's data, containerd's "
            "images, certificates and logs; `down` without --keep removes all but the logs"
        )
        return
    result = cluster.remove_files()
    if result is None:
        print(f"removed: nothing ({cluster.dir} has no {MARKER}: `up` did not make it)")
        return
    removed, logs = result
    pod_logs = [
        cluster.pod_log_dir,
        *(path for name in _NODE_DIRS if (path := cluster.dir / name / "ns" / "var-log" / "pods").exists()),
    ]
    print(
        f"removed: {_megabytes(removed)} from {cluster.dir} (etcd's data, containerd's images and snapshots, the "
        f"kubelets' directories, certificates, kubeconfigs); kept the logs for debugging, {_megabytes(logs)}: "
        f"{cluster.logs} and {', '.join(map(str, pod_logs))}"
    )


def _status_command(cluster: Cluster) -> int:
    running = cluster.running()
    if not running:
        print(f"no cluster in {cluster.dir}")
        return 1
    for name, alive in running.items():
        print(f"{name}: {'running' if alive else 'stopped'}")
    return 0 if all(running.values()) else 1


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


if __name__ == "__main__":
    sys.exit(main())
