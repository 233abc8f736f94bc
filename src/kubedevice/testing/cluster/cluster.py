"""The cluster: its directory and state, the control plane and relays started in order, its nodes
(:class:`~.node.Node`) started after, everything stopped at ``down``. See the package's docstring."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from .. import components, pki
from ..components import Binaries
from ..images import write_oci_archive
from ..kubeapi import KubeApi
from . import configs, files
from .cgroups import cgroup_dirs, remove_cgroups
from .configs import HIDDEN, PAUSE_IMAGE, TEST_IMAGE
from .files import MAX_NODES
from .node import RELAY, Node
from .processes import accepts, alive, http_ok, listening, stop_namespace, wait_ready
from .state import ClusterError, NodeState, Ports, State, relayed_ports

_ADMIN_GET = """
import ssl, sys, urllib.request
context = ssl.create_default_context()
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
context.load_cert_chain(sys.argv[2], sys.argv[3])
print(urllib.request.urlopen(sys.argv[1], context=context, timeout=30).read().decode())
"""
"""What :meth:`Cluster.admin_get` runs in the cluster's network namespace (the components'
certificates name the cluster, not 127.0.0.1, so the name is not checked)."""

DEFAULT_DIR = Path("/tmp/kubedevice-cluster")
DIR_ENV = "KUBEDEVICE_CLUSTER_DIR"
NODE_NAME = "kubedevice-node"


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

    def admin_get(self, port: int, path: str) -> str:
        """``GET https://127.0.0.1:{port}{path}`` of a component (the kubelet's ``/configz``, the
        scheduler's ``/metrics``) as the admin, from inside the cluster's network namespace, where
        the components listen: the host cannot reach them."""
        pki = self.dir / "pki"
        argv = ["nsenter", "-t", str(self.namespace_pid), "-n", "--", sys.executable, "-c", _ADMIN_GET,
                f"https://127.0.0.1:{port}{path}", str(pki / "admin.crt"), str(pki / "admin.key")]  # fmt: skip
        return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout

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
        found = {name: alive(pid) for name, pid in {"namespace": state.init_pid, **state.pids}.items()}
        for node in state.nodes:
            found |= {
                f"{node.name}/{name}": alive(pid) for name, pid in {"namespace": node.init_pid, **node.pids}.items()
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
            stop_namespace(node.pids, node.namespace_pid, node.init_pid)
        stop_namespace(state.pids, state.namespace_pid, state.init_pid)
        remove_cgroups(state.cluster_id)
        shutil.rmtree(self.relay_dir, ignore_errors=True)
        self.state_file.unlink(missing_ok=True)
        return was_running

    def remove_files(self) -> tuple[int, int] | None:
        """After :meth:`down`: remove what ``up`` made here but the logs (:func:`files.remove_made`)."""
        return files.remove_made(self.dir)

    def disk_usage(self) -> int:
        """Bytes the directory takes on disk (as ``du``)."""
        return files.disk_usage(self.dir)

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
        skew = configs.kubelet_skew_error(version, kubelet_version)
        if skew is not None:
            raise ClusterError(f"kubelet version: {skew}")
        if kubelet_version != version:
            components.kubernetes(kubelet_version)
        self.down()  # a previous run interrupted before its own down
        for sub in ("ns", "config", "pki", *files.NODE_DIRS):
            shutil.rmtree(self.dir / sub, ignore_errors=True)
        shutil.rmtree(self.dir / "etcd", ignore_errors=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        marker = "made by kubedevice's `cluster.sh up`: `down` removes what `up` made here\n"
        (self.dir / files.MARKER).write_text(marker)
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
        inside = self.spawn("relay-inside", [sys.executable, str(RELAY), "inside", str(self.relay_dir), *ports], state)
        wait_ready(
            "the relay inside the namespace",
            30.0,
            lambda: all(accepts(self.relay_dir / f"{port}.sock") for port in ports),
            self.logs / "relay-inside.log",
            inside,
        )
        log = (self.logs / "relay-host.log").open("ab")
        process = subprocess.Popen(
            [sys.executable, str(RELAY), "host", str(self.relay_dir), *ports],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        state.pids["relay-host"] = process.pid
        self.save(state)
        wait_ready(
            "the relay on the host",
            30.0,
            lambda: all(listening(int(port)) for port in ports),
            self.logs / "relay-host.log",
            process.pid,
        )

    def spawn(self, name: str, argv: list[str], state: State | None = None, env: dict[str, str] | None = None) -> int:
        """Start ``argv`` inside the first node's namespaces (where /var/lib/kubelet is the cluster's);
        its host PID. Its output goes to ``logs/<name>.log``; :meth:`stop` ends it, :meth:`down` in any case.
        """
        return self.node(1).spawn(name, argv, state, env)

    def _start_control_plane(self, state: State) -> None:
        ports, bins = state.ports, self.binaries
        self.spawn("etcd", configs.etcd_argv(bins.etcd, self.dir, ports), state)
        etcd_health = f"http://127.0.0.1:{ports.etcd_client}/health"
        wait_ready("etcd /health", 30.0, lambda: http_ok(etcd_health), self.logs / "etcd.log", state.pids["etcd"])
        self.spawn(
            "kube-apiserver",
            configs.apiserver_argv(bins.kube("kube-apiserver"), self.dir, ports, state.kubernetes_version),
            state,
        )
        api, log = self.api(), self.logs / "kube-apiserver.log"
        wait_ready("kube-apiserver /readyz", 90.0, api.ready, log, state.pids["kube-apiserver"])
        self.spawn("kube-scheduler", configs.scheduler_argv(bins.kube("kube-scheduler"), self.dir, ports), state)
        manager = configs.controller_manager_argv(bins.kube("kube-controller-manager"), self.dir, ports)
        self.spawn("kube-controller-manager", manager, state)

    def _start_node(self, state: State) -> None:
        node = self.node(1)
        node.start_runtime(state)
        node.wait_kubelet_healthy(state)
        node.wait_ready(state)
        api = self.api()
        wait_ready(
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


def leftovers(directory: Path, state: State) -> list[str]:
    """What a stopped cluster left on the host: processes, mounts below its directory, cgroups."""
    pids = [state.init_pid, state.namespace_pid, *state.pids.values()]
    for node in state.nodes:
        pids += [node.init_pid, node.namespace_pid, *node.pids.values()]
    found = [f"process {pid}" for pid in pids if alive(pid)]
    prefix = str(directory.resolve())
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        root, target = line.split()[3:5]
        if target.startswith(prefix) or root.startswith(prefix):
            found.append(f"mount {target}")
    found += [f"cgroup {path}" for path in cgroup_dirs(state.cluster_id)]
    return found


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
    for hidden in HIDDEN:
        if cluster.dir.is_relative_to(hidden):
            raise ClusterError(f"the cluster directory may not be under {hidden}: the namespace hides it")
    cluster.up(components.ensure_all(version), node_name, version, nodes, kubelet_version)
    return cluster
