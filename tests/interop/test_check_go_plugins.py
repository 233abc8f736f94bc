"""``kubedevice check`` against a real Go plugin: the Kubernetes sample device plugin.

Its findings are asserted, not excused: it answers every RPC correctly, but it re-registers
seconds after a kubelet restart (it notices its socket is gone only after a long sleep), the
window in which pods fail with UnexpectedAdmissionError (kubernetes #109595).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kubedevice.api import KUBELET_SOCKET
from kubedevice.conformance import CheckOptions, Report, Status, run_checks
from kubedevice.conformance.model import REREGISTER_PASS_S
from kubedevice.testing.waiting import eventually
from tests.interop.deviceplugin.gobuild import SAMPLE_RESOURCE, GoPlugin

pytestmark = pytest.mark.interop
RESTART_TIMEOUT = 30.0  # the sample plugin comes back after about 10 s


async def check_go_plugin(start: GoPlugin, plugin_dir: Path) -> Report:
    """Start the checker (it serves kubelet.sock), then the plugin, which registers at once."""
    options = CheckOptions(plugin_dir=plugin_dir, timeout=30, restart_timeout=RESTART_TIMEOUT)
    checker = asyncio.create_task(run_checks(options))
    await eventually("the checker's kubelet.sock", (plugin_dir / KUBELET_SOCKET).exists, 30, 0.02)
    async with start(plugin_dir) as process:
        report = await checker
        assert process.returncode is None, "the plugin exited during the check"
    return report


def test_sample_plugin_conforms_but_reregisters_slowly(sample_device_plugin: GoPlugin, plugin_dir: Path) -> None:
    report = asyncio.run(asyncio.wait_for(check_go_plugin(sample_device_plugin, plugin_dir), 120))
    statuses = {r.check.id: r.status for r in report.results}
    by_id = {r.check.id: r for r in report.results}
    assert report.resources() == [SAMPLE_RESOURCE]
    # Every RPC-level rule holds (Dev-1, Dev-2; mounts of /tmp/<id>; unknown IDs refused).
    rpc_checks = [i for i in statuses if i.split(".")[0] in ("registration", "devices", "allocate")]
    assert {i: statuses[i] for i in rpc_checks if statuses[i] is not Status.PASS} == {}
    assert "non-existing device" in by_id["allocate.unknown"].detail
    # The finding: re-registration after a kubelet restart takes seconds, not milliseconds.
    reregister = by_id["restart.reregister"]
    assert reregister.status is Status.FAIL
    assert reregister.value is not None and reregister.value > REREGISTER_PASS_S
    assert f"{reregister.value:.3f} s" in reregister.detail
    assert by_id["restart.devices"].value is not None and by_id["restart.devices"].value >= reregister.value
