"""`kubedevice serve` under the real kubelet, API server and scheduler."""

from __future__ import annotations

import contextlib
import signal
import stat
import time
from pathlib import Path

import pytest

from kubedevice.testing.cluster import Cluster
from kubedevice.testing.scenarios import Daemon, container_output, delete_pods, device_pod, unique, wait_for
from kubedevice.testing.waiting import budget

pytestmark = pytest.mark.e2e


def null_config(path: Path, resources: dict[str, int], broken: Path) -> Path:
    """Each resource: ``count`` devices granting /dev/null and env KD_<NAME>=<ids>; a device is
    unhealthy while ``broken/<id>`` exists (checked every 0.2 s)."""
    entries = []
    for name, count in resources.items():
        var = "KD_" + name.split("/")[1].upper().replace("-", "_")
        entries.append(f"""  - name: {name}
    static: {{count: {count}, paths: [/dev/null]}}
    env: {{{var}: "{{ids}}"}}
    health:
      checks: [{{type: exec, argv: [/usr/bin/test, "!", -e, "{broken}/{{id}}"]}}]
      interval_seconds: 0.2
      failure_threshold: 1
""")
    path.write_text("resources:\n" + "".join(entries))
    return path


def resource_is(cluster: Cluster, name: str, capacity: int, allocatable: int) -> bool:
    return cluster.api().resource(cluster.node_name, name) == (capacity, allocatable)


@pytest.mark.release
def test_capacity_within_seconds_then_pod_with_two_devices_sees_env(cluster: Cluster, short_tmp: Path) -> None:
    resource = "example.com/e2e-null"
    config = null_config(short_tmp / "config.yaml", {resource: 4}, short_tmp)
    started = time.monotonic()
    daemon = Daemon(cluster, config, short_tmp / "serve.log")
    try:
        wait_for("capacity 4 / allocatable 4", lambda: resource_is(cluster, resource, 4, 4), 10.0)
        took = time.monotonic() - started
        # from the process's spawn (its imports included) to the kubelet's Node update: 2.3 s was seen
        # on an idle machine, so a bound of seconds, stretched for load; the figure (0.87 s median
        # after the daemon starts) is benchmarks/real_kubelet.py's
        assert took < budget(5.0), f"devices showed in the Node object after {took:.2f} s"

        api = cluster.api()
        name = unique("two-devices")
        api.create_pod(device_pod(name, {resource: 2}))  # placed by the real scheduler
        pod = wait_for(
            "pod running", lambda: (p := api.pod(name)) and p["status"].get("phase") == "Running" and p, 60.0
        )
        assert pod["spec"]["nodeName"] == cluster.node_name
        log = container_output(cluster, pod)
        granted = dict(line.split("=", 1) for line in log.splitlines() if "=" in line)
        ids = granted["KD_E2E_NULL"].split(",")
        assert len(ids) == 2 and len(set(ids)) == 2, log
        assert resource_is(cluster, resource, 4, 4)  # allocatable counts healthy devices, used or not
        delete_pods(api, [name])
    finally:
        assert daemon.stop() == 0


def test_unhealthy_device_lowers_allocatable_and_recovery_raises_it(cluster: Cluster, short_tmp: Path) -> None:
    resource = "example.com/e2e-health"
    config = null_config(short_tmp / "config.yaml", {resource: 3}, short_tmp)
    daemon = Daemon(cluster, config, short_tmp / "serve.log")
    try:
        wait_for("3 healthy devices", lambda: resource_is(cluster, resource, 3, 3), 10.0)
        (short_tmp / "e2e-health-1").touch()
        wait_for("allocatable 2 after a failed check", lambda: resource_is(cluster, resource, 3, 2), 10.0)
        (short_tmp / "e2e-health-1").unlink()
        wait_for("allocatable 3 after recovery", lambda: resource_is(cluster, resource, 3, 3), 10.0)
    finally:
        assert daemon.stop() == 0


@pytest.mark.release
def test_sigterm_drops_allocatable_removes_only_its_sockets(cluster: Cluster, short_tmp: Path) -> None:
    resource = "example.com/e2e-term"
    config = null_config(short_tmp / "config.yaml", {resource: 2}, short_tmp)
    before = _listing(cluster.plugin_dir)
    foreign = cluster.plugin_dir / "someone-elses-file"
    foreign.write_text("keep me")
    daemon = Daemon(cluster, config, short_tmp / "serve.log")
    try:
        wait_for("2 devices", lambda: resource_is(cluster, resource, 2, 2), 10.0)
        ours = _listing(cluster.plugin_dir) - before - {foreign.name}
        assert ours, "the daemon's socket is not in the plugin directory"
        daemon.signal(signal.SIGTERM)
        assert daemon.process.wait(timeout=15) == 0
        wait_for("allocatable 0", lambda: cluster.api().resource(cluster.node_name, resource)[1] == 0, 10.0)
        after = _listing(cluster.plugin_dir)
        assert not ours & after, f"sockets left behind: {ours & after}"
        assert before <= after, f"removed what was not its own: {before - after}"
        assert foreign.read_text() == "keep me"
    finally:
        foreign.unlink(missing_ok=True)
        daemon.stop()


def test_sighup_reload_keeps_untouched_resource_pods_running(cluster: Cluster, short_tmp: Path) -> None:
    kept, changed = "example.com/e2e-kept", "example.com/e2e-changed"
    config = null_config(short_tmp / "config.yaml", {kept: 2, changed: 2}, short_tmp)
    daemon = Daemon(cluster, config, short_tmp / "serve.log")
    api = cluster.api()
    name = unique("kept")
    try:
        wait_for(
            "both resources", lambda: resource_is(cluster, kept, 2, 2) and resource_is(cluster, changed, 2, 2), 10.0
        )
        api.create_pod(device_pod(name, {kept: 1}))
        pod = wait_for(
            "pod running", lambda: (p := api.pod(name)) and p["status"].get("phase") == "Running" and p, 60.0
        )
        null_config(config, {kept: 2, changed: 5}, short_tmp)
        daemon.signal(signal.SIGHUP)
        try:
            wait_for("capacity 5 of the changed resource", lambda: resource_is(cluster, changed, 5, 5), 10.0)
        except AssertionError as err:
            raise AssertionError(f"{err}; serve log ends:\n{daemon.tail}") from None
        assert resource_is(cluster, kept, 2, 2)
        time.sleep(2.0)  # a restart of the container would show within the kubelet's next sync
        now = api.pod(name)
        assert now["metadata"]["uid"] == pod["metadata"]["uid"]
        assert now["status"]["phase"] == "Running"
        assert now["status"]["containerStatuses"][0]["restartCount"] == 0
        assert daemon.process.poll() is None
    finally:
        delete_pods(api, [name])
        assert daemon.stop() == 0


def _listing(directory: Path) -> set[str]:
    """The sockets and files that stay in ``directory``. The kubelet writes its checkpoint
    (``kubelet_internal_checkpoint``) through a temporary ``.<digits>`` file beside it, renamed
    over it (``tmpPrefix = "."`` in pkg/kubelet/util/store/filestore.go): such a file comes and
    goes by itself, so it is nobody's to keep or remove (a CI run saw one in ``before`` only)."""
    kept = set()
    for path in directory.iterdir():
        if path.name.startswith(".") and path.name[1:].isdigit():
            continue
        with contextlib.suppress(FileNotFoundError):  # gone between the listing and its stat
            if stat.S_ISSOCK(path.lstat().st_mode) or path.is_file():
                kept.add(path.name)
    return kept
