"""Scenarios on a real cluster shared by the e2e tests and ``benchmarks/real_kubelet.py``.

Pods use the cluster's one image (it prints its environment, then :data:`OUTPUT_END`, then
sleeps), ``imagePullPolicy: Never`` (there is no registry) and no service-account token (nothing
in them talks to the API). Waits go through :func:`kubedevice.testing.waiting.wait_for`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cluster import TEST_IMAGE, Cluster, Node
from .kubeapi import KubeApi
from .waiting import wait_for

OUTPUT_END = "--- envsleep: end of output ---"
"""The last line the test image prints (``cluster/go/image/main.go``): its output is complete once
the log holds it."""
_COUNTER = itertools.count()


def device_pod(name: str, resources: dict[str, int], node: str | None = None) -> dict[str, Any]:
    """A pod whose one container requests ``resources``; bound to ``node`` directly when given.

    Binding with ``nodeName`` skips the scheduler, as a DaemonSet or a restarted node's existing
    pods do: the kubelet's admission is then the only gate, which is what the restart race is about.
    """
    limits = {key: str(value) for key, value in resources.items()}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": TEST_IMAGE,
                "imagePullPolicy": "Never",
                "resources": {"limits": limits, "requests": limits},
            }
        ],
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 1,
        "tolerations": [{"operator": "Exists"}],
    }
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def char_node(path: Path, mode: int = 0o666, gid: int = 0) -> Path:
    """A character device with the null device's numbers (a write succeeds and goes nowhere) at
    ``path``, owned by root and ``gid`` with ``mode`` whatever the umask; its directories made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mknod(path, mode | stat.S_IFCHR, os.makedev(1, 3))
    os.chown(path, 0, gid)
    os.chmod(path, mode)
    return path


@contextlib.contextmanager
def node_on_this_machine(path: Path, mode: int = 0o666, gid: int = 0) -> Iterator[Path]:
    """:func:`char_node` at ``path`` on the machine for the block's length: a node a fake host
    names under ``/dev`` must exist where containerd opens it (the cluster shares the machine's
    ``/dev``). Only what was made here is removed after (the inode made, the directories made for
    it once empty); a path that exists is not ours to use and fails at once."""
    if path.exists():
        raise AssertionError(f"{path} exists on this machine: not ours to use")
    made_dirs = [parent for parent in reversed(path.parents) if not parent.exists()]
    made = char_node(path, mode, gid).stat().st_ino
    try:
        yield path
    finally:
        if path.exists() and path.stat().st_ino == made:
            path.unlink()
        for directory in reversed(made_dirs):
            with contextlib.suppress(OSError):  # another test's node in it keeps it
                directory.rmdir()


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_COUNTER)}"


@contextlib.contextmanager
def own_namespace(api: KubeApi, prefix: str) -> Iterator[str]:
    """A namespace of a test's own (``<prefix>-<random>``), deleted afterwards. Yielded once the
    controller-manager has made its default service account: pods are admitted only then."""
    namespace = f"{prefix}-{uuid.uuid4().hex[:6]}"
    api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    try:
        wait_for(
            "the namespace's default service account",
            lambda: api.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default"),
            30,
        )
        yield namespace
    finally:
        api.request("DELETE", f"/api/v1/namespaces/{namespace}")


def pod_outcome(api: KubeApi, name: str) -> tuple[str, str, str] | None:
    """(phase, reason, message) once the pod runs or failed; None while undecided."""
    pod = api.pod(name)
    if pod is None:
        return None
    status = pod.get("status", {})
    phase = status.get("phase", "")
    if phase == "Failed":
        return phase, status.get("reason", ""), status.get("message", "")
    if phase == "Running":
        return phase, "", ""
    return None


def wait_outcome(api: KubeApi, name: str, timeout: float = 60.0) -> tuple[str, str, str]:
    return wait_for(f"pod {name} to run or fail", lambda: pod_outcome(api, name), timeout)


def container_log(cluster: Cluster | Node, pod: dict[str, Any], container: str = "main") -> str:
    """What the container has written so far, read from the kubelet's pod log directory on
    ``cluster``'s first node or on ``Node`` (``kubectl logs`` cannot reach a kubelet without a node
    IP): the text of each complete line (CRI log lines are ``<time> <stream> <tag> <text>``; a last
    line still being written is left out). For the test image's output use :func:`container_output`,
    which waits until it is whole."""
    meta = pod["metadata"]
    path = cluster.pod_log_dir / f"{meta['namespace']}_{meta['name']}_{meta['uid']}" / container / "0.log"
    try:
        lines = path.read_text().split("\n")[:-1]
    except OSError:
        return ""
    return "\n".join(line.split(" ", 3)[3] for line in lines if line.count(" ") >= 3)


def container_output(
    cluster: Cluster | Node, pod: dict[str, Any], timeout: float = 30.0, container: str = "main"
) -> str:
    """The test image's whole output (its environment, the ``--write`` probe's lines): the lines
    before :data:`OUTPUT_END`, once the log holds that line. A log read as soon as it is not empty
    may hold the first variable only: the runtime copies each line as the program prints it."""

    def whole() -> str | None:
        lines = container_log(cluster, pod, container).split("\n")
        return "\n".join(lines[: lines.index(OUTPUT_END)]) if OUTPUT_END in lines else None

    return wait_for(
        f"the whole output of {pod['metadata']['name']}/{container} (up to {OUTPUT_END!r})",
        whole,
        timeout,
        0.1,
        seen=lambda: container_log(cluster, pod, container) or "(no log yet)",
    )


def delete_pods(api: KubeApi, names: list[str], timeout: float = 60.0) -> None:
    for name in names:
        api.delete_pod(name)
    wait_for("pods to be deleted", lambda: all(api.pod(name) is None for name in names), timeout)


@dataclass
class RestartRound:
    """One kubelet restart: when it answered healthz and what happened to the pods created then."""

    healthy_after_s: float
    outcomes: dict[str, tuple[str, str, str]] = field(default_factory=dict)

    @property
    def admission_errors(self) -> int:
        return sum(1 for _, reason, _ in self.outcomes.values() if reason == "UnexpectedAdmissionError")


def kubelet_restart_round(cluster: Cluster, resource: str, pods: int) -> RestartRound:
    """Restart only the kubelet; as soon as it answers healthz create ``pods`` pods bound to the node,
    each requesting one ``resource``; wait for every outcome, then delete them. (When the plugin
    is back, read from the kubelet's log: right after a restart the Node object still shows the
    old status.)
    """
    api = cluster.api()
    healthy = cluster.restart_kubelet()
    names = [unique("race") for _ in range(pods)]
    for name in names:
        api.create_pod(device_pod(name, {resource: 1}, cluster.node_name))
    result = RestartRound(healthy)
    for name in names:
        result.outcomes[name] = wait_outcome(api, name)
    delete_pods(api, names)
    settle_checkpoint(cluster, resource)
    return result


def settle_checkpoint(cluster: Cluster, resource: str) -> None:
    """Make the kubelet forget deleted pods' devices before the next restart.

    The kubelet rewrites its device checkpoint only on an allocation, and purges deleted pods from
    it only once its pod sources are ready (about a second after a start). When every allocation
    happens in the first second after a restart, deleted pods pile up in the checkpoint and hold
    their devices after the next restart (``Available: 0``) whatever the plugin does. One allocation
    well after the restart purges them; its own pod then holds one device at the next restart.
    """
    api = cluster.api()
    deadline = time.monotonic() + 60.0
    while True:  # a slow plugin is not back yet: its pods fail until it is
        name = unique("settle")
        api.create_pod(device_pod(name, {resource: 1}, cluster.node_name))
        phase = wait_outcome(api, name)[0]
        delete_pods(api, [name])
        if phase == "Running":
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"no pod with {resource} could run within 60 s after a kubelet restart")
        time.sleep(0.5)


class Daemon:
    """``kubedevice serve`` (this checkout's code) against a cluster's (or a simulator's) plugin directory."""

    def __init__(self, target: Cluster | Path, config: Path, log: Path, *extra: str) -> None:
        """``extra``: more ``serve`` arguments (``--node``, ``--kubeconfig``, ...)."""
        self.log = log
        plugin_dir = target.plugin_dir if isinstance(target, Cluster) else target
        cdi_dir = target.cdi_dir if isinstance(target, Cluster) else target / "cdi"
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "kubedevice",
                    "serve",
                    "--config",
                    str(config),
                    "--plugin-dir",
                    str(plugin_dir),
                    "--cdi-dir",
                    str(cdi_dir),
                    *extra,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": _src_path()},
            )

    @property
    def tail(self) -> str:
        """The end of the daemon's log, for failure messages."""
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return "(no log)"

    def signal(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            return self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def _src_path() -> str:
    src = str(Path(__file__).resolve().parents[2])
    return os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])])
