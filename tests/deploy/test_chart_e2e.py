"""The Helm chart and the host service on a real single-node Kubernetes (v1.36), with the image
scripts/image.sh built, imported with ctr (no registry) and ``image.pullPolicy: Never``.

The chart's probes run as on any node: the cluster's private network routes each pod's address
(and nothing off the machine), so the kubelet's HTTP probes reach the daemon's /healthz and /readyz.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from kubedevice.testing.waiting import budget

from . import clusterkit, imagekit
from .clusterkit import delete_pods, device_pod, unique, wait_for
from .helmkit import CHART, Helm

pytestmark = pytest.mark.e2e

NAMESPACE = "kube-system"
RELEASE = "kubedevice"
RESOURCE = "example.com/e2e"
CDI_RESOURCE = "example.com/e2e-cdi"
DEVICES = 12
RESULTS: dict[str, Any] = {}


def record(key: str, value: Any) -> None:
    """Measured figures, printed as they come (run with -s to see them)."""
    RESULTS[key] = value
    print(f"e2e: {key} = {json.dumps(value)}")


def values(count: int = DEVICES) -> dict[str, Any]:
    return {
        "image": {"pullPolicy": "Never"},
        "log": {"level": "debug"},
        "config": {
            "resources": [
                {"name": RESOURCE, "static": {"count": count, "paths": ["/dev/null"]}},
                {"name": CDI_RESOURCE, "static": {"count": 2, "paths": ["/dev/zero"]}, "cdi": {}},
            ]
        },
    }


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with clusterkit.module_cluster("kd-h-") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def chart(cluster: Any, image_archive: Path, helm: Helm, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chart]:
    clusterkit.import_image(cluster, image_archive)
    chart = Chart(cluster, helm, tmp_path_factory.mktemp("values"))
    yield chart
    chart.helm("uninstall", RELEASE, check=False)


class Chart:
    def __init__(self, cluster: Any, helm: Helm, scratch: Path) -> None:
        self.cluster, self.api, self.scratch, self._helm = cluster, cluster.api(), scratch, helm

    def helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = self._helm.run("--kubeconfig", str(self.cluster.kubeconfig), "--namespace", NAMESPACE, *args)
        assert not check or result.returncode == 0, result.stderr
        return result

    def apply(self, verb: str, vals: dict[str, Any], *extra: str) -> None:
        path = self.scratch / f"values-{time.monotonic_ns()}.yaml"
        path.write_text(json.dumps({**vals, **clusterkit.api_access(self.cluster)}))
        self.helm(verb, RELEASE, str(CHART), "--values", str(path), *extra)

    def daemon_pods(self, terminating: bool = False) -> list[dict[str, Any]]:
        return [
            p
            for p in self.api.pods(NAMESPACE)
            if p["metadata"]["name"].startswith(f"{RELEASE}-")
            and (terminating or not p["metadata"].get("deletionTimestamp"))
        ]

    def running_daemon(self, timeout: float = 120) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            pods = self.daemon_pods()
            statuses = [s for p in pods for s in p["status"].get("containerStatuses", [])]
            if len(pods) == 1 and statuses and "running" in statuses[0]["state"]:
                return pods[0]
            return None

        return wait_for("the DaemonSet's pod to run", ready, timeout, interval=0.2)

    def ready(self, name: str) -> bool:
        conditions = self.api.pod(name, NAMESPACE)["status"].get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def capacity(self, resource: str = RESOURCE) -> tuple[int, int]:
        result: tuple[int, int] = self.api.resource(self.cluster.node_name, resource)
        return result


class PodLog:
    """A daemon pod's log files in the kubelet's pod log directory, held open: the kubelet removes
    them with the pod, and what the daemon logged while stopping is what the tests read."""

    def __init__(self, chart: Chart, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        paths = chart.cluster.pod_log_dir.glob(f"{NAMESPACE}_{meta['name']}_{meta['uid']}/*/*.log")
        self.files = [path.open("rb") for path in paths]
        assert self.files, f"no log of {meta['name']}"

    def read(self, close: bool = True) -> str:
        text = ""
        for file in self.files:
            file.seek(0)
            text += file.read().decode(errors="replace")
            if close:
                file.close()
        return text


OWNER_VERDICT = re.compile(r"keeping our CDI specs|uninstalled: removed \d+ CDI spec")
"""What the daemon logs last, after its sockets are gone: whether it removed its CDI specs (node/owner.py)."""


def log_time(text: str, message: str) -> float:
    """The container runtime's timestamp (seconds) of the first log line containing ``message``."""
    line = next(line for line in text.splitlines() if message in line)
    stamp = datetime.fromisoformat(line.split()[0][:26] + "+00:00")
    return stamp.timestamp()


def start_device_pods(api: Any, node: str, count: int, resource: str = RESOURCE) -> list[str]:
    names = [unique("dev") for _ in range(count)]
    for name in names:
        api.create_pod(device_pod(name, {resource: 1}, node))
    return names


def container(api: Any, name: str) -> dict[str, Any] | None:
    pod = api.pod(name)
    statuses = (pod or {}).get("status", {}).get("containerStatuses") or [{}]
    result: dict[str, Any] = statuses[0]
    return result


def wait_running(api: Any, names: list[str], timeout: float = 90) -> dict[str, str]:
    """Container ID of each pod once all run."""

    def ids() -> dict[str, str] | None:
        found = {n: (container(api, n) or {}) for n in names}
        if all("running" in c.get("state", {}) for c in found.values()):
            return {n: c["containerID"] for n, c in found.items()}
        return None

    return wait_for(f"{len(names)} device pods to run", ids, timeout, interval=0.2)


# --- the chart ---------------------------------------------------------------------------------


def test_install_runs_confined_registers_and_a_pod_gets_devices(chart: Chart) -> None:
    chart.apply("install", values())
    pod = chart.running_daemon()
    (status,) = pod["status"]["containerStatuses"]
    assert status["imageID"] and status["image"].endswith(f"kubedevice/kubedevice:{imagekit.version()}")
    # The chart's security context as the kernel sees the process: uid 0, no capability, no new
    # privileges, a read-only root filesystem.
    pid = clusterkit.container_pid(chart.cluster, status["containerID"])
    proc = Path(f"/proc/{pid}/status").read_text()
    assert re.search(r"^Uid:\t0\t", proc, re.M) and "NoNewPrivs:\t1" in proc
    for caps in ("CapEff", "CapPrm", "CapBnd"):
        assert re.search(rf"^{caps}:\t0+$", proc, re.M), proc
    assert "Seccomp:\t2" in proc, "RuntimeDefault seccomp"
    root = next(line for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines() if line.split()[4] == "/")
    assert "ro" in root.split()[5].split(","), root
    wait_for("capacity", lambda: chart.capacity() == (DEVICES, DEVICES), 30)
    wait_for("CDI capacity", lambda: chart.capacity(CDI_RESOURCE) == (2, 2), 30)
    # The kubelet's startup and readiness probes (HTTP on the pod's address) passed.
    wait_for("the daemon's pod Ready", lambda: chart.ready(pod["metadata"]["name"]), 60, interval=0.2)
    # A workload gets devices: the kubelet allocated them (its checkpoint) and the pod runs.
    names = start_device_pods(chart.api, chart.cluster.node_name, 2)
    (cdi_pod,) = start_device_pods(chart.api, chart.cluster.node_name, 1, CDI_RESOURCE)
    wait_running(chart.api, [*names, cdi_pod])
    entries = clusterkit.checkpoint(chart.cluster)["Data"]["PodDeviceEntries"]
    pods = {chart.api.pod(n)["metadata"]["uid"]: n for n in [*names, cdi_pod]}
    allocated = {pods[e["PodUID"]]: e["ResourceName"] for e in entries if e["PodUID"] in pods}
    assert allocated == {**dict.fromkeys(names, RESOURCE), cdi_pod: CDI_RESOURCE}
    # CDI: the spec file is in the node's CDI directory and containerd injected the device.
    assert list(chart.cluster.cdi_dir.glob("*.json")), "the daemon wrote a CDI spec"
    cdi_pid = clusterkit.container_pid(chart.cluster, container(chart.api, cdi_pod)["containerID"])
    assert Path(f"/proc/{cdi_pid}/root/dev/zero").exists()
    delete_pods(chart.api, [cdi_pod])
    RESULTS["keep"] = names


def test_upgrade_with_a_changed_config_reloads_without_touching_device_pods(chart: Chart) -> None:
    names = RESULTS["keep"]
    before = wait_running(chart.api, names)
    daemon = chart.running_daemon()
    started = time.monotonic()
    chart.apply("upgrade", values(DEVICES + 2))
    # The kubelet swaps in the ConfigMap on its own sync (up to about a minute); the daemon reloads.
    wait_for("the new capacity", lambda: chart.capacity() == (DEVICES + 2, DEVICES + 2), 150, interval=0.5)
    record("config_reload_s", round(time.monotonic() - started, 1))
    after = chart.running_daemon()
    assert after["metadata"]["uid"] == daemon["metadata"]["uid"]
    assert after["status"]["containerStatuses"][0]["restartCount"] == 0, "reloaded, not restarted"
    assert wait_running(chart.api, names) == before, "device pods untouched"


def test_rolling_update_to_a_new_tag_loses_no_device_pod(chart: Chart) -> None:
    names = RESULTS["keep"]
    before = wait_running(chart.api, names)
    version = imagekit.version()
    clusterkit.ctr(
        chart.cluster,
        "images",
        "tag",
        f"docker.io/kubedevice/kubedevice:{version}",
        f"docker.io/kubedevice/kubedevice:{version}-next",
    )
    old = chart.running_daemon()
    socket = chart.cluster.plugin_dir / f"kubedevice-{RESOURCE.replace('/', '_')}.sock"
    assert socket.exists()
    specs = {p.name: p.stat().st_ino for p in chart.cluster.cdi_dir.glob("kubedevice-*.json")}
    assert specs
    old_log = PodLog(chart, old)
    chart.apply("upgrade", {**values(DEVICES + 2), "image": {"pullPolicy": "Never", "tag": f"{version}-next"}})
    # The gap: from the old daemon removing its socket (its exit) to the new one serving it again.
    gone = wait_for("the old daemon's exit", lambda: time.monotonic() if not socket.exists() else None, 60, 0.005)
    back = wait_for("the new daemon's socket", lambda: time.monotonic() if socket.exists() else None, 120, 0.005)
    record("rolling_gap_s", round(back - gone, 2))
    new = chart.running_daemon()
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert new["spec"]["containers"][0]["image"].endswith(f"{version}-next")
    wait_for("capacity again", lambda: chart.capacity() == (DEVICES + 2, DEVICES + 2), 30)
    assert wait_running(chart.api, names) == before, "no device pod lost or restarted"
    # The old daemon saw its DaemonSet still there and kept its CDI specs: the same files (inodes),
    # not removed and written again by the new one.
    assert {p.name: p.stat().st_ino for p in chart.cluster.cdi_dir.glob("kubedevice-*.json")} == specs
    # Its socket goes before it decides about the specs (and containerd copies its output to the
    # log as it comes): wait for the decision, the last thing it logs.
    wait_for(
        "the old daemon's decision on its CDI specs",
        lambda: OWNER_VERDICT.search(old_log.read(False)),
        30,
        seen=lambda: old_log.read(False)[-3000:],
    )
    text = old_log.read()
    assert "keeping our CDI specs" in text, text[-3000:]
    record("old_daemon_stop_s", round(log_time(text, "keeping our CDI specs") - log_time(text, "received SIGTERM"), 3))
    delete_pods(chart.api, names)


def test_uninstall_drops_allocatable_and_removes_our_sockets(chart: Chart) -> None:
    RESULTS["cdi_specs"] = sorted(p.name for p in chart.cluster.cdi_dir.glob("*.json"))
    assert RESULTS["cdi_specs"]
    log = PodLog(chart, chart.running_daemon())
    # The clean-up needs the daemon to have seen its DaemonSet (a pod uninstalled before its first
    # look keeps its specs, docs/deploy.md); under load that look can come seconds after start.
    wait_for(
        "the daemon to see its DaemonSet",
        lambda: f"DaemonSet {NAMESPACE}/{RELEASE}: present" in log.read(False),
        60,
        interval=0.2,
    )
    chart.helm("uninstall", RELEASE, "--wait", "--timeout", "90s")
    wait_for("the pod to be gone", lambda: not chart.daemon_pods(terminating=True), 90, interval=0.2)
    wait_for("allocatable 0", lambda: chart.capacity()[1] == 0 and chart.capacity(CDI_RESOURCE)[1] == 0, 60)
    # The pod is gone, but what it logged last (after its sockets went) may still be on its way to the file.
    wait_for(
        "the daemon's decision on its CDI specs in its log",
        lambda: OWNER_VERDICT.search(log.read(False)),
        30,
        seen=lambda: log.read(False)[-3000:],
    )
    RESULTS["last_log"] = log.read()
    assert sorted(p.name for p in chart.cluster.plugin_dir.iterdir()) == ["kubelet.sock", "kubelet_internal_checkpoint"]


def test_uninstall_removes_our_cdi_specs(chart: Chart) -> None:
    """The daemon saw its DaemonSet deleted before its SIGTERM (--owner-daemonset, docs/deploy.md)."""
    assert RESULTS["cdi_specs"], "the previous test saw our specs"
    log = RESULTS["last_log"]
    left = [p.name for p in chart.cluster.cdi_dir.glob("*.json") if p.name in RESULTS["cdi_specs"]]
    owner = "\n".join(line for line in log.splitlines() if "kubedevice.node.owner" in line)
    assert not left, f"{left} left; what the daemon logged about its DaemonSet:\n{owner[-5000:]}"
    assert f"uninstalled: removed {len(RESULTS['cdi_specs'])} CDI spec(s) of ours" in log, log[-3000:]


# --- node reboot -------------------------------------------------------------------------------

PODS = 6


def _after_reboot(api: Any, names: list[str], before: dict[str, str], timeout: float = 120) -> dict[str, str]:
    """Each pod's fate after the reboot: 'Running' in a new container, or its failure reason."""

    def settled() -> dict[str, str] | None:
        fates: dict[str, str] = {}
        for name in names:
            pod = api.pod(name)
            status = pod["status"]
            state = (status.get("containerStatuses") or [{}])[0]
            if status.get("phase") == "Failed":
                fates[name] = status.get("reason", "Failed")
            elif "running" in state.get("state", {}) and state.get("containerID") != before[name]:
                fates[name] = "Running"
            else:
                return None
        return fates

    return wait_for("every pod to come back or fail", settled, timeout, interval=0.5)


def test_node_reboot_with_the_daemonset(chart: Chart) -> None:
    chart.apply("install", values())
    chart.running_daemon()
    wait_for("capacity", lambda: chart.capacity() == (DEVICES, DEVICES), 30)
    names = start_device_pods(chart.api, chart.cluster.node_name, PODS)
    before = wait_running(chart.api, names)
    clusterkit.reboot(chart.cluster)
    fates = _after_reboot(chart.api, names, before)
    record("reboot_daemonset", fates)
    lost = [n for n, fate in fates.items() if fate != "Running"]
    record("reboot_daemonset_lost", f"{len(lost)} of {PODS}")
    chart.running_daemon()
    delete_pods(chart.api, names)
    chart.helm("uninstall", RELEASE, "--wait", "--timeout", "90s")
    wait_for("allocatable 0", lambda: chart.capacity()[1] == 0, 60)


def test_node_reboot_with_the_host_service_loses_no_pod(chart: Chart, tmp_path: Path) -> None:
    """The host service as deploy/systemd orders it: started after containerd, before the kubelet."""
    cluster, api = chart.cluster, chart.api
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"resources": values()["config"]["resources"][:1]}))
    argv = [
        sys.executable,
        "-m",
        "kubedevice",
        "serve",
        "--config",
        str(config),
        "--plugin-dir",
        "/var/lib/kubelet/device-plugins",
        "--cdi-dir",
        "/run/cdi",
    ]
    src = str(Path(__file__).resolve().parents[2] / "src")

    notify = tmp_path / "notify"

    def start_service() -> None:
        """As systemd starts the unit (Type=notify): the kubelet's start waits for READY=1."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
            notify.unlink(missing_ok=True)
            listener.bind(str(notify))
            listener.settimeout(budget(60))
            cluster.spawn("kubedevice-host", argv, env={"PYTHONPATH": src, "NOTIFY_SOCKET": str(notify)})
            try:
                assert listener.recv(64) == b"READY=1"
            except TimeoutError:
                log = cluster.node(1).log("kubedevice-host").read_text(errors="replace")
                raise AssertionError(f"no READY=1 from the host service; its log ends:\n{log[-3000:]}") from None

    # The last test's `helm uninstall` returns once the DaemonSet is deleted; its pod may still be
    # stopping, its socket still live at the endpoint this service serves (which it then refuses).
    wait_for("the DaemonSet's pod gone", lambda: not chart.daemon_pods(terminating=True), 120)
    start_service()
    try:
        wait_for("capacity", lambda: chart.capacity() == (DEVICES, DEVICES), 30)
        names = start_device_pods(api, cluster.node_name, PODS)
        before = wait_running(api, names)
        cluster.stop("kubedevice-host")  # the reboot ends it with everything else ...
        clusterkit.reboot(cluster, before_kubelet=start_service)  # ... and systemd starts it before the kubelet
        fates = _after_reboot(api, names, before)
        record("reboot_host_service", fates)
        lost = [n for n, fate in fates.items() if fate != "Running"]
        record("reboot_host_service_lost", f"{len(lost)} of {PODS}")
        assert not lost, fates
        delete_pods(api, names)
    finally:
        cluster.stop("kubedevice-host")
