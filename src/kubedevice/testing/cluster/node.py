"""One node of a test cluster: its namespace, relays, containerd and kubelet.

The first node lives in the control plane's namespace; each further one (``up --nodes N``) is a
namespace of its own with the same layout under ``node<N>/``. A node's kubelet can be restarted,
reconfigured or swapped for another release's in place (:meth:`Node.upgrade_kubelet`), its pods
and plugins left running.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .. import components
from . import configs
from .processes import accepts, child_of, http_ok, terminate, wait_ready
from .state import ClusterError, NodeState, State

if TYPE_CHECKING:
    from .cluster import Cluster

RELAY = Path(__file__).resolve().parents[1] / "relay.py"
"""Run by file path in the cluster's processes (see :mod:`kubedevice.testing.relay`)."""


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
        child = child_of(process.pid)
        self.pids(state)[name] = child
        self.cluster.save(state)
        return child

    def stop(self, name: str) -> None:
        """SIGTERM a process started by :meth:`spawn` (SIGKILL after 20 s)."""
        state = self.cluster._require_state()
        terminate(self.pids(state).pop(name, 0), timeout=20.0)
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
        skew = configs.kubelet_skew_error(state.kubernetes_version, version)
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
        terminate(self.pids(state)["kubelet"], timeout=20.0)
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
        wait_ready(
            f"{self._name(state)}'s kubelet healthz on 127.0.0.1:{port}",
            timeout,
            lambda: http_ok(f"http://127.0.0.1:{port}/healthz"),
            self._log(state, "kubelet"),
            self.pids(state).get("kubelet"),
        )

    def wait_ready(self, state: State) -> None:
        """Until the Node is Ready and the node lifecycle controller has lifted the not-ready taint the
        kubelet registers with (as its own service account: --use-service-account-credentials)."""
        api, name = self.cluster.api(), self._name(state)
        wait_ready(
            f"node {name} Ready",
            90.0,
            lambda: api.node_ready(name),
            self._log(state, "kubelet"),
            self.pids(state).get("kubelet"),
        )
        wait_ready(
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
        for path in configs.SYSCTLS:
            source = Path("/proc/sys") / path
            if source.exists():
                (ns / "sysctl" / path.replace("/", ".")).write_text(source.read_text())
        config = self.root / "config"
        config.mkdir(exist_ok=True)
        # Cgroups of further nodes are siblings of the first's (never nested in a kubelet's root).
        cgroup_root = f"/kubedevice/{state.cluster_id}" + ("" if self.number == 1 else f"-{self.number}")
        (config / "kubelet.yaml").write_text(
            configs.kubelet_config(*self._ports(state), self.cluster.dir / "pki" / "ca.crt", cgroup_root)
        )
        (config / "containerd.toml").write_text(configs.containerd_config(self.root, self.cluster.binaries))
        cni = self.root / "cni"
        shutil.rmtree(cni, ignore_errors=True)
        (cni / "bin").mkdir(parents=True)
        (cni / "net.d").mkdir()
        plugin = cni / "bin" / "kubedevice-veth"
        plugin.write_text(configs.CNI_PLUGIN.replace("@IPAM@", str(cni / "ipam")).replace("@NODE_IP@", configs.NODE_IP))
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
                configs.namespace_script(self.root),
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
        wait_ready(f"the private namespace of {self._name(state)}", 30.0, ready.exists, log_path, process.pid)
        return process.pid, child_of(process.pid)

    def start_relays(self, state: State) -> None:
        """A further node's ways in and out, one process: its kubelet's 127.0.0.1:APISERVER to the
        control plane's unix socket (served by the first node's inside relay), and its kubelet's
        healthz to the unix socket the host's relay (started with every node's port) forwards to.
        No address off the node is dialled."""
        relays = self.cluster.relay_dir
        healthz = str(self._ports(state)[1])
        relay = self.spawn(
            "relay",
            [sys.executable, str(RELAY), "host", str(relays), str(state.ports.apiserver), "--also-inside", healthz],
            state,
        )
        wait_ready(
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
        wait_ready(
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
                f"--node-ip={configs.NODE_IP}",
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
