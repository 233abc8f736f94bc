"""Plugins that break one rule each: the checker must fail exactly the check for that rule.

The baseline test shows the scripted plugin passes everything, so each failure below comes
from the one knob that test turns.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from kubedevice.api import pb
from kubedevice.conformance import CheckOptions, Report, Status, run_checks
from tests.plugin.conftest import null_devices, running
from tests.plugin.test_rpcs import DevicesNotIds

from .conftest import by_status, check_plugin, result, run, scripted
from .scripted import ScriptedPlugin, device, good_grant

SCRIPTED = Path(__file__).with_name("scripted.py")


def test_conformant_plugin_passes_everything_including_restart(tmp_path: Path) -> None:
    plugin = scripted(tmp_path)
    # the verdict's own bound is tested with a slow plugin below; here a loaded machine must not fail it
    report = run(check_plugin(plugin, restart=True, restart_timeout=5, reregister_pass=5.0))
    assert by_status(report, Status.FAIL) == set()
    assert by_status(report, Status.WARN) == set()
    assert by_status(report, Status.SKIP) == set()
    assert result(report, "restart.reregister").value < 5.0
    assert plugin.registrations == 2


def _with(**knobs: object) -> Callable[[ScriptedPlugin], None]:
    def apply(plugin: ScriptedPlugin) -> None:
        for name, value in knobs.items():
            setattr(plugin, name, value)

    return apply


def _grant_with(**fields: object) -> Callable[[list[str]], pb.ContainerAllocateResponse]:
    def grant(ids: list[str]) -> pb.ContainerAllocateResponse:
        response = good_grant(ids)
        for name, value in fields.items():
            field = getattr(response, name)
            field.extend(value) if isinstance(value, list) else field.update(value)  # type: ignore[arg-type]
        return response

    return grant


BROKEN = {
    "long ID": (_with(devices=[device("d" * 64), device("dev-1")]), {"devices.ids"}),
    "empty ID": (_with(devices=[device(""), device("dev-1")]), {"devices.ids"}),
    "duplicate IDs": (_with(devices=[device("dev-0"), device("dev-0"), device("dev-1")]), {"devices.ids"}),
    "health typo": (_with(devices=[device("dev-0", "healthy"), device("dev-1")]), {"devices.health"}),
    "negative NUMA node": (_with(devices=[device("dev-0", numa=[-1]), device("dev-1")]), {"devices.topology"}),
    "relative device path": (
        _with(grant=_grant_with(devices=[pb.DeviceSpec(host_path="dev/null", container_path="/dev/x")])),
        {"allocate.paths"},
    ),
    "relative mount path": (
        _with(grant=_grant_with(mounts=[pb.Mount(host_path="/tmp", container_path="tmp")])),
        {"allocate.paths"},
    ),
    "permission outside rwm": (
        _with(
            grant=_grant_with(
                devices=[pb.DeviceSpec(host_path="/dev/zero", container_path="/dev/zero", permissions="rwx")]
            )
        ),
        {"allocate.permissions"},
    ),
    "bad env name": (_with(grant=_grant_with(envs={"1-BAD": "x"})), {"allocate.envs"}),
    "unqualified CDI name": (_with(grant=_grant_with(cdi_devices=[pb.CDIDevice(name="dev-0")])), {"allocate.cdi"}),
    "bad CDI annotation": (
        _with(grant=_grant_with(annotations={"cdi.k8s.io/x": "vendor/class=-bad"})),
        {"allocate.cdi"},
    ),
    "missing container response": (_with(drop_responses=1), {"allocate.responses"}),
    "unknown IDs accepted": (_with(accept_unknown=True), {"allocate.unknown"}),
    "options mismatch": (_with(register_options=pb.DevicePluginOptions()), {"registration.options"}),
    "preferred outside available": (
        _with(preference=lambda r: [*r.must_include_deviceIDs, "elsewhere"][: r.allocation_size]),
        {"preferred.available"},
    ),
    "preferred repeats an ID": (
        _with(preference=lambda r: list(r.must_include_deviceIDs or r.available_deviceIDs[:1]) * r.allocation_size),
        {"preferred.available"},
    ),
    "preferred drops must_include": (
        _with(
            preference=lambda r: [i for i in r.available_deviceIDs if i not in r.must_include_deviceIDs][
                : r.allocation_size
            ]
        ),
        {"preferred.must_include"},
    ),
    "preferred too large": (_with(preference=lambda r: list(r.available_deviceIDs)), {"preferred.size"}),
    "PreStartContainer fails": (_with(pre_start_error=grpc.StatusCode.INTERNAL), {"prestart.call"}),
    "invalid resource name": (_with(resource="scripted"), {"registration.resource_name", "registration.accepted"}),
    "unsupported version": (_with(version="v1alpha"), {"registration.version", "registration.accepted"}),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_each_broken_rule_fails_exactly_its_check(tmp_path: Path, name: str) -> None:
    breaks, expected = BROKEN[name]
    plugin = scripted(tmp_path)
    breaks(plugin)
    report = run(check_plugin(plugin))
    assert by_status(report, Status.FAIL) == expected, [r.to_json() for r in report.results if r.status is Status.FAIL]


def test_absolute_endpoint_is_refused_and_its_socket_not_found(tmp_path: Path) -> None:
    plugin = scripted(tmp_path)
    plugin.register_endpoint = str(plugin.socket)  # the common mistake: the full path
    report = run(check_plugin(plugin, rpc_timeout=1.0))
    assert by_status(report, Status.FAIL) == {"registration.endpoint", "registration.accepted", "devices.options"}
    assert "failed to dial device plugin" in result(report, "registration.accepted").detail


def test_short_preferred_answer_is_a_warning_the_kubelet_tops_up(tmp_path: Path) -> None:
    plugin = scripted(tmp_path)
    plugin.preference = lambda r: list(r.must_include_deviceIDs)
    report = run(check_plugin(plugin))
    assert by_status(report, Status.FAIL) == set()
    assert by_status(report, Status.WARN) == {"preferred.size"}
    assert "0 IDs for allocation_size 1" in result(report, "preferred.size").detail


def test_no_reregistration_after_restart_fails_within_the_restart_timeout(tmp_path: Path) -> None:
    plugin = scripted(tmp_path)
    plugin.reregister = False
    report = run(check_plugin(plugin, restart=True, restart_timeout=1.5))
    assert by_status(report, Status.FAIL) == {"restart.reregister"}
    assert "1.5 s" in result(report, "restart.reregister").detail
    assert result(report, "restart.devices").status is Status.SKIP


def test_slow_reregistration_fails_with_its_latency(tmp_path: Path) -> None:
    """The real kubelet loses every pod admitted before a plugin is back (tests/e2e/test_check_calibration.py)."""
    plugin = scripted(tmp_path)
    plugin.reregister_delay = 1.5
    report = run(check_plugin(plugin, restart=True, restart_timeout=5))
    assert by_status(report, Status.FAIL) == {"restart.reregister", "restart.devices"}
    assert by_status(report, Status.WARN) == set()
    assert 1.5 <= result(report, "restart.reregister").value < 5


def test_slow_first_list_is_a_warning(tmp_path: Path) -> None:
    plugin = scripted(tmp_path)
    plugin.first_list_delay = 1.3
    report = run(check_plugin(plugin))
    assert by_status(report, Status.WARN) == {"devices.first_list"}
    assert result(report, "devices.first_list").value >= 1.3


def test_hung_allocate_is_reported_not_waited_for(tmp_path: Path) -> None:
    """The hung plugin runs in its own process: grpc.aio may deadlock stopping a server under a hung handler."""

    async def scenario() -> Report:
        plugin_dir = tmp_path / "dp"
        checker = asyncio.create_task(run_checks(CheckOptions(plugin_dir=plugin_dir, restart=False, rpc_timeout=0.5)))
        proc = await asyncio.create_subprocess_exec(sys.executable, str(SCRIPTED), str(plugin_dir), "3600")
        try:
            return await checker
        finally:
            proc.kill()
            await proc.wait()

    report = run(scenario(), timeout=30)
    assert by_status(report, Status.FAIL) == {"allocate.responses", "allocate.unknown"}
    assert "DeadlineExceeded" in result(report, "allocate.responses").detail


def test_plugin_that_never_registers_fails_registration_and_skips_the_rest(tmp_path: Path) -> None:
    plugin = scripted(tmp_path)
    plugin.register = False
    report = run(check_plugin(plugin, timeout=1.0, restart=True))
    assert by_status(report, Status.FAIL) == {"registration.register"}
    assert len(by_status(report, Status.SKIP)) == len(report.results) - 1


def test_unhealthy_devices_are_not_allocated(tmp_path: Path) -> None:
    plugin = scripted(tmp_path)
    plugin.devices = [device("dev-0", "Unhealthy"), device("dev-1", numa=[0])]
    allocated: list[list[str]] = []
    plugin.grant = lambda ids: (allocated.append(ids), good_grant(ids))[1]
    report = run(check_plugin(plugin))
    assert by_status(report, Status.FAIL) == set()
    assert ["dev-0"] not in allocated and ["dev-1"] in allocated


def test_a_preferred_allocation_returning_devices_fails_its_check_in_words(tmp_path: Path) -> None:
    """A library plugin whose hook returns Devices (not IDs) fails preferred.responses with the
    reason and the fix, as the kubelet would fail admission; no TypeError reaches the report."""

    async def scenario() -> Report:
        async with running([DevicesNotIds(devices=null_devices())], tmp_path):
            return await run_checks(CheckOptions(plugin_dir=tmp_path, restart=False, timeout=20))

    report = run(scenario(), timeout=90)
    assert by_status(report, Status.FAIL) == {"preferred.responses"}, report.to_json()
    detail = result(report, "preferred.responses").detail
    assert "preferred_allocation returned Device objects, not device IDs" in detail, detail
    assert "TypeError" not in detail
