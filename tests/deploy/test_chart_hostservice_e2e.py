"""The chart's ``hostService`` on the real cluster: a node reboot loses no device pod, and
``helm uninstall`` removes every file the install wrote on the node and nothing else.

The test cluster has no systemd, so the two chart values that reach it point at test parts:
``nodeRoot`` is a directory standing for the node's ``/`` (with ``/run/systemd/system``, as on a
systemd host), and ``systemctl`` is a script in it that hands each call to :class:`Systemd`, this
test acting as the node's systemd: ``start``/``restart`` run the unit from the files the init
container wrote (:func:`unitkit.installed_unit_script`, in the node's namespaces), answering once
it sent ``READY=1`` (``Type=notify``); ``reload`` is SIGHUP, ``stop`` SIGTERM. On the simulated
reboot the unit is started from those files, because its ``kubelet.service.wants`` link is there,
after containerd and before the kubelet, as its ``Before=kubelet.service`` orders.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubedevice import __version__

from . import clusterkit, unitkit
from .clusterkit import delete_pods, device_pod, unique, wait_for
from .helmkit import CHART, Helm

pytestmark = pytest.mark.e2e

NAMESPACE = "kube-system"
RELEASE = "kubedevice"
RESOURCE = "example.com/e2e"
DEVICES = 12
PODS = 6
UNIT = "kubedevice.service"
SPOOL = "run/test-systemd"  # under the node root: where the systemctl script and systemd meet
SYSTEMCTL = f"""#!/bin/sh
# systemctl for the test's systemd: each call a request file, answered with its exit code.
dir=/node/{SPOOL}
id=$(date +%s%N)-$$
printf '%s\\n' "$*" >"$dir/.request.$id" && mv "$dir/.request.$id" "$dir/request.$id"
i=0
until [ -e "$dir/done.$id" ]; do
  sleep 0.1; i=$((i + 1))
  [ "$i" -lt 1200 ] || {{ echo "systemd did not answer: systemctl $*" >&2; exit 1; }}
done
code=$(cat "$dir/done.$id"); rm -f "$dir/done.$id"; exit "$code"
"""
# Files a node already has where ours go, which the install and uninstall must leave alone.
FOREIGN = {
    "etc/systemd/system/other.service": "[Service]\nExecStart=/bin/true\n",
    "etc/kubedevice/notes.txt": "the admin's\n",
    "opt/other/tool": "#!/bin/sh\n",
}
RESULTS: dict[str, Any] = {}


def record(key: str, value: Any) -> None:
    RESULTS[key] = value
    print(f"e2e: {key} = {json.dumps(value)}")


class Systemd:
    """The node's systemd for one unit, driven by the systemctl script's requests."""

    def __init__(self, cluster: Any, node: Path, scratch: Path) -> None:
        self.cluster, self.node, self.scratch = cluster, node, scratch
        self.spool = node / SPOOL
        self.calls: list[str] = []
        self.pid = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> Systemd:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(90)  # a start in progress ends within its READY=1 wait
        self.stop_unit()

    def _serve(self) -> None:
        while not self._stop.is_set():
            for request in sorted(self.spool.glob("request.*")):
                args = request.read_text().split()
                request.unlink()
                self.calls.append(" ".join(args))
                code = self._act(args)
                answer = self.spool / f".answer.{request.name}"
                answer.write_text(str(code))
                answer.rename(self.spool / f"done.{request.name.removeprefix('request.')}")
            time.sleep(0.05)

    def _act(self, args: list[str]) -> int:
        verb, *units = args
        if units not in ([], [UNIT]):
            return 5  # systemctl's "unit not found"
        if verb == "reload" and not self.running():
            return 7  # systemctl's "not active"
        try:
            if verb == "restart":
                self.stop_unit()
            if verb in ("start", "restart") and not self.running():
                self.start_unit()
            elif verb == "reload":
                os.kill(self.pid, signal.SIGHUP)
            elif verb == "stop":
                self.stop_unit()
        except (AssertionError, OSError) as err:
            print(f"systemd: {verb} failed: {err}")
            return 1
        return 0

    def running(self) -> bool:
        return self.pid != 0 and Path(f"/proc/{self.pid}").exists()

    def start_unit(self) -> None:
        """As systemd starts the unit (Type=notify): returns once the daemon sent READY=1."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
            (self.scratch / "sock").unlink(missing_ok=True)
            notify.bind(str(self.scratch / "sock"))
            notify.settimeout(60)
            script = unitkit.installed_unit_script(self.node, self._source, self.scratch)
            self.pid = self.cluster.spawn(
                "kubedevice-unit", ["unshare", "--mount", "--propagation", "private", "sh", "-ec", script]
            )
            try:
                assert notify.recv(64) == b"READY=1"
            except TimeoutError:
                text = (self.cluster.logs / "kubedevice-unit.log").read_text(errors="replace")
                raise AssertionError(f"no READY=1; the unit's output:\n{text[-3000:]}") from None

    def stop_unit(self) -> None:
        if self.pid:
            self.cluster.stop("kubedevice-unit")
            self.pid = 0

    def boot(self) -> None:
        """What systemd does for the unit on boot: started if enabled (its wants link is there)."""
        if (self.node / "etc/systemd/system/kubelet.service.wants" / UNIT).is_symlink():
            self.start_unit()

    def _source(self, path: str) -> str:
        """The node's own directories (the kubelet's, /run/cdi, /dev, /sys) stay; what the install
        wrote (/etc/kubedevice) is under the node root."""
        if path.startswith(("/var/lib/kubelet", "/run/", "/dev", "/sys")):
            return path
        return str(self.node / path.lstrip("/"))


def files(root: Path) -> set[str]:
    """Every path under the node root but the test systemd's spool."""
    return {str(p.relative_to(root)) for p in root.rglob("*") if SPOOL not in str(p.relative_to(root))}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with clusterkit.module_cluster("kd-hs-") as cluster:
        yield cluster


@pytest.fixture
def node() -> Iterator[Path]:
    """The node root: a host directory, the same path in the node's namespace."""
    root = Path(tempfile.mkdtemp(prefix="kd-noderoot-"))
    (root / "run/systemd/system").mkdir(parents=True)
    (root / SPOOL).mkdir(parents=True)
    (root / SPOOL / "systemctl").write_text(SYSTEMCTL)
    for path, text in FOREIGN.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    (root / "etc/systemd/system/multi-user.target.wants").mkdir()
    (root / "etc/systemd/system/multi-user.target.wants/other.service").symlink_to("/etc/systemd/system/other.service")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def see_plugin_dir(cluster: Any, node: Path) -> None:
    """The node's plugin directory at its place under the node root, in the node's namespace only
    (the host's view of the node root stays as the install left it): the supervising pod checks
    the unit's sockets there, as it does under a real node's ``/``."""
    target = node / "var/lib/kubelet/device-plugins"
    target.mkdir(parents=True)
    clusterkit.in_namespace(cluster, f"mount --bind /var/lib/kubelet/device-plugins '{target}'")


def values(cluster: Any, node: Path) -> dict[str, Any]:
    return {
        "image": {"pullPolicy": "Never"},
        "cdi": {"dir": "/run/cdi"},
        "hostService": {"enabled": True, "nodeRoot": str(node), "systemctl": f"sh /node/{SPOOL}/systemctl"},
        "config": {"resources": [{"name": RESOURCE, "static": {"count": DEVICES, "paths": ["/dev/null"]}}]},
        **clusterkit.api_access(cluster),
    }


def daemon_pod(api: Any) -> dict[str, Any] | None:
    """The DaemonSet's pod once its main container runs and is Ready."""
    pods = [
        p
        for p in api.pods(NAMESPACE)
        if p["metadata"]["name"].startswith(f"{RELEASE}-") and not p["metadata"].get("deletionTimestamp")
    ]
    for pod in pods:
        conditions = pod["status"].get("conditions", [])
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
            return pod  # type: ignore[no-any-return]
    return None


def restarted(api: Any, old_container: str) -> dict[str, Any] | None:
    """The DaemonSet's pod Ready again in a new container."""
    pod = daemon_pod(api)
    if pod is None or pod["status"]["containerStatuses"][0]["containerID"] == old_container:
        return None
    return pod


def open_logs(cluster: Any, pod: dict[str, Any]) -> list[Any]:
    """The running supervisor's log file, held open: the kubelet removes it with the pod, and what
    the supervisor logged while uninstalling is what the test reads. Only the current container's:
    the one before the reboot saw its DaemonSet too, which says nothing of this one."""
    meta, (status,) = pod["metadata"], pod["status"]["containerStatuses"]
    path = cluster.pod_log_dir / f"{NAMESPACE}_{meta['name']}_{meta['uid']}/kubedevice/{status['restartCount']}.log"
    return [path.open("rb")]


def read_logs(files: list[Any], close: bool = True) -> str:
    text = ""
    for file in files:
        file.seek(0)
        text += file.read().decode(errors="replace")
        if close:
            file.close()
    return text


def capacity(cluster: Any, api: Any) -> tuple[int, int]:
    result: tuple[int, int] = api.resource(cluster.node_name, RESOURCE)
    return result


def running(api: Any, names: list[str]) -> dict[str, str] | None:
    """Each pod's container ID once all run."""
    states = {n: (api.pod(n)["status"].get("containerStatuses") or [{}])[0] for n in names}
    if all("running" in s.get("state", {}) for s in states.values()):
        return {n: s["containerID"] for n, s in states.items()}
    return None


def fates(api: Any, names: list[str], before: dict[str, str]) -> dict[str, str] | None:
    """After the reboot: 'Running' in a new container, or the pod's failure reason; None until all settled."""
    found: dict[str, str] = {}
    for name in names:
        status = api.pod(name)["status"]
        state = (status.get("containerStatuses") or [{}])[0]
        if status.get("phase") == "Failed":
            found[name] = status.get("reason", "Failed")
        elif "running" in state.get("state", {}) and state.get("containerID") != before[name]:
            found[name] = "Running"
        else:
            return None
    return found


def test_reboot_with_the_charts_host_service_loses_no_pod_and_uninstall_removes_it(
    cluster: Any, node: Path, image_archive: Path, helm: Helm, tmp_path_factory: pytest.TempPathFactory
) -> None:
    api = cluster.api()
    clusterkit.import_image(cluster, image_archive)
    see_plugin_dir(cluster, node)
    foreign = files(node)
    scratch = Path(tempfile.mkdtemp(prefix="kd-sd-"))  # short: the notify socket's path
    vals = tmp_path_factory.mktemp("values") / "values.yaml"
    vals.write_text(json.dumps(values(cluster, node)))
    run_helm = ["--kubeconfig", str(cluster.kubeconfig), "--namespace", NAMESPACE]
    with Systemd(cluster, node, scratch) as systemd:
        try:
            started = time.monotonic()
            done = helm.run(*run_helm, "install", RELEASE, str(CHART), "--values", str(vals))
            assert done.returncode == 0, done.stderr
            wait_for("allocatable from the unit", lambda: capacity(cluster, api) == (DEVICES, DEVICES), 300)
            record("install_to_allocatable_s", round(time.monotonic() - started, 1))
            wait_for("the supervising pod Ready", lambda: daemon_pod(api), 120, interval=0.5)
            record("install_to_pod_ready_s", round(time.monotonic() - started, 1))
            # The first install copied the image, so it restarts (here: starts) the unit.
            assert systemd.calls[:2] == ["daemon-reload", f"restart {UNIT}"], systemd.calls
            written = sorted(files(node) - foreign)
            top = sorted({p for p in written if not p.startswith("opt/kubedevice/")})
            record("written_on_node", top)
            units = "etc/systemd/system"
            assert top == [
                "etc/kubedevice/config.yaml",
                f"{units}/{UNIT}",
                f"{units}/kubelet.service.wants",
                f"{units}/kubelet.service.wants/{UNIT}",
                f"{units}/multi-user.target.wants/{UNIT}",
                "opt/kubedevice",
            ], top
            assert (node / f"opt/kubedevice/{__version__}/rootfs/opt/kubedevice/bin/kubedevice").exists()
            record(
                "rootfs_mib",
                int(
                    subprocess.run(
                        ["du", "-sm", str(node / "opt/kubedevice")], capture_output=True, text=True, check=True
                    ).stdout.split()[0]
                ),
            )

            names = [unique("dev") for _ in range(PODS)]
            for name in names:
                api.create_pod(device_pod(name, {RESOURCE: 1}, cluster.node_name))
            before = wait_for(f"{PODS} device pods to run", lambda: running(api, names), 120, interval=0.2)
            pod = daemon_pod(api)
            assert pod is not None
            calls = len(systemd.calls)

            systemd.stop_unit()  # the reboot ends it with everything else ...
            kubelet_started = clusterkit.reboot(cluster, before_kubelet=systemd.boot)  # ... systemd starts it first
            settled = wait_for("every pod to come back or fail", lambda: fates(api, names, before), 180, interval=0.5)
            record("reboot_pods_back_s", round(time.monotonic() - kubelet_started, 1))
            record("reboot_chart_host_service", settled)
            lost = [n for n, fate in settled.items() if fate != "Running"]
            record("reboot_chart_host_service_lost", f"{len(lost)} of {PODS}")
            assert not lost, settled

            # The DaemonSet's pod comes back later: its init container finds everything in place
            # and only asks for a start of the running unit.
            old = pod["status"]["containerStatuses"][0]["containerID"]
            again = wait_for("the supervising pod back", lambda: restarted(api, old), 180, interval=0.5)
            record("reboot_daemon_pod_ready_s", round(time.monotonic() - kubelet_started, 1))
            assert again and systemd.calls[calls : calls + 2] == ["daemon-reload", f"start {UNIT}"], systemd.calls
            assert sorted(files(node) - foreign) == written, "the second install rewrote nothing"
            delete_pods(api, names)

            logs = open_logs(cluster, again)
            # The uninstall needs the supervisor to have seen its DaemonSet (a pod uninstalled
            # before its first look keeps the unit, as the daemon keeps its CDI specs: docs/deploy.md).
            wait_for(
                "the supervisor to see its DaemonSet",
                lambda: f"DaemonSet {NAMESPACE}/{RELEASE}: present" in read_logs(logs, close=False),
                60,
                0.2,
            )
            started = time.monotonic()
            done = helm.run(*run_helm, "uninstall", RELEASE, "--wait", "--timeout", "120s")
            assert done.returncode == 0, done.stderr
            try:
                wait_for("the unit stopped", lambda: not systemd.running(), 120, interval=0.2)
            except AssertionError as err:
                raise AssertionError(f"{err}; the supervisor's log:\n{read_logs(logs)[-4000:]}") from None
            assert f"stop {UNIT}" in systemd.calls, systemd.calls
            wait_for(
                "the pod gone",
                lambda: not any(p["metadata"]["name"].startswith(f"{RELEASE}-") for p in api.pods(NAMESPACE)),
                120,
                interval=0.2,
            )
            record("uninstall_s", round(time.monotonic() - started, 1))
            supervisor = read_logs(logs)
            wait_for("allocatable 0", lambda: capacity(cluster, api)[1] == 0, 60)
            left = files(node)
            record("left_on_node_after_uninstall", sorted(left - foreign))
            assert left == foreign, (sorted(left ^ foreign)[:20], supervisor[-3000:])
            for path, text in FOREIGN.items():
                assert (node / path).read_text() == text
        finally:
            print(f"systemd calls: {systemd.calls}")
            helm.run(*run_helm, "uninstall", RELEASE)
            shutil.rmtree(scratch, ignore_errors=True)
