"""Health checks over a fake node: each kind, recovery, anti-flapping, and streaming at once."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kubedevice.device import Health
from kubedevice.health import HealthChecker, HealthTracker
from kubedevice.sources.base import Found
from kubedevice.sources.configured import ConfiguredPlugin
from kubedevice.sources.hostroot import HostRoot
from kubedevice.sources.schema import HealthConfig, ResourceConfig
from kubedevice.testing import FakeHost

H, U = Health.HEALTHY, Health.UNHEALTHY


def checker(host: FakeHost, *checks: dict[str, Any]) -> HealthChecker:
    return HealthChecker(HealthConfig.model_validate({"checks": list(checks)}).checks, HostRoot(host.root))


def run(host: FakeHost, target: Found, *checks: dict[str, Any]) -> str | None:
    failure = asyncio.run(checker(host, *checks).run([target]))[target.key]
    return None if failure is None else f"{failure.check}: {failure}"


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path / "root")


def test_tracker_needs_consecutive_failures_and_recovers() -> None:
    tracker = HealthTracker(failure_threshold=3, recovery_threshold=2)
    results = [False, False, True, False, False, False, True, False, True, True]
    states = [tracker.observe("d", ok) for ok in results]
    assert states == [H, H, H, H, H, U, U, U, U, H]


def test_tracker_forgets_vanished_devices() -> None:
    tracker = HealthTracker(1, 5)
    tracker.observe("d", False)
    tracker.retain([])
    assert tracker.health("d") is H


def test_present_and_openable(host: FakeHost) -> None:
    host.device_node("/dev/ttyUSB0")
    target = Found("t", ("/dev/ttyUSB0",))
    assert run(host, target, {"type": "present"}, {"type": "openable"}) is None
    host.remove("/dev/ttyUSB0")
    assert run(host, target, {"type": "present"}) == "present: missing /dev/ttyUSB0"
    assert "cannot open /dev/ttyUSB0" in (run(host, target, {"type": "openable"}) or "")


def test_openable_fails_on_a_dangling_node(host: FakeHost) -> None:
    host.symlink("/dev/gone", "/dev/nothing")
    reason = run(host, Found("t", ("/dev/gone",)), {"type": "openable"})
    assert reason is not None and "cannot open /dev/gone" in reason


def test_sysfs_attribute_relative_to_the_device(host: FakeHost) -> None:
    name = host.usb_device(1, 3, "1a6e", "089a")
    target = Found("t", ("/dev/bus/usb/001/003",), sysfs=f"/sys/bus/usb/devices/{name}")
    host.write(f"/sys/bus/usb/devices/{name}/authorized", "1\n")
    check = {"type": "sysfs", "attribute": "authorized", "equals": "1"}
    assert run(host, target, check) is None
    host.write(f"/sys/bus/usb/devices/{name}/authorized", "0\n")
    assert run(host, target, check) == f"sysfs: /sys/bus/usb/devices/{name}/authorized is '0', want '1'"


def test_exec_argv_with_placeholders_exit_code_and_timeout(host: FakeHost, tmp_path: Path) -> None:
    target = Found("dev-1", ("/dev/a",), sysfs="/sys/x")
    record = tmp_path / "argv.txt"
    script = (
        f"import sys; open({str(record)!r}, 'w').write(' '.join(sys.argv[1:])); sys.exit(int(sys.argv[1] == 'dev-1'))"
    )
    reason = run(host, target, {"type": "exec", "argv": [sys.executable, "-c", script, "{id}", "{path}", "{sysfs}"]})
    assert record.read_text() == "dev-1 /dev/a /sys/x" and reason is not None and "exited with 1" in reason
    started = time.monotonic()
    slow = {"type": "exec", "argv": [sys.executable, "-c", "import time; time.sleep(30)"], "timeout_seconds": 0.3}
    assert "timed out after 0.3s" in (run(host, target, slow) or "")
    assert time.monotonic() - started < 25  # killed at its timeout: well before the 30 s it sleeps
    assert "cannot run" in (run(host, target, {"type": "exec", "argv": ["/nonexistent/probe"]}) or "")
    assert run(host, target, {"type": "exec", "argv": ["true"]}) is None


def test_exec_check_does_not_block_the_event_loop(host: FakeHost) -> None:
    slow = checker(host, {"type": "exec", "argv": [sys.executable, "-c", "import time; time.sleep(0.5)"]})

    async def main() -> int:
        ticks = 0
        task = asyncio.create_task(slow.run([Found("t", ())]))
        while not task.done():
            ticks += 1
            await asyncio.sleep(0.01)
        return ticks

    assert asyncio.run(main()) > 10


def test_unhealthy_device_recovers_with_anti_flapping(host: FakeHost, tmp_path: Path) -> None:
    """A probe that fails while a flag file exists; two failures are needed to go Unhealthy."""
    flag = tmp_path / "broken"
    probe = [sys.executable, "-c", f"import os, sys; sys.exit(os.path.exists({str(flag)!r}))"]
    host.device_node("/dev/accel0")
    config = ResourceConfig.model_validate(
        {
            "name": "example.com/accel",
            "glob": {"paths": ["/dev/accel*"]},
            "health": {"checks": [{"type": "exec", "argv": probe}], "failure_threshold": 2, "recovery_threshold": 1},
        }
    )
    plugin = ConfiguredPlugin(config, host.root)
    changes: list[str] = []
    plugin.subscribe(lambda: changes.append(plugin.devices()[0].health.value))

    async def main() -> None:
        flag.touch()
        await plugin.check_health()
        assert plugin.devices()[0].health is H  # one failure is not enough
        await plugin.check_health()
        assert plugin.devices()[0].health is U
        flag.unlink()
        await plugin.check_health()
        assert plugin.devices()[0].health is H

    asyncio.run(main())
    assert changes == ["Unhealthy", "Healthy"]  # each change notified at once, no spurious ones
