"""Device health through DRA: the resource health stream (``v1`` and ``v1alpha1``, over real
sockets) and the ``<driver>/unhealthy`` taint in the slices, with the per-slice limits."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from grpc import aio

from kubedevice.api import dra_health_v1_pb2 as h1
from kubedevice.api import dra_health_v1_pb2_grpc as h1_grpc
from kubedevice.api import pluginregistration_v1_pb2 as regpb
from kubedevice.api import pluginregistration_v1_pb2_grpc as regpb_grpc
from kubedevice.config import ConfigError, parse_config
from kubedevice.device import Device, Health
from kubedevice.dra import features
from kubedevice.dra.driver import DraDriver
from kubedevice.dra.driver.daemon import build_driver
from kubedevice.dra.driver.health import REFRESH_SECONDS, DeviceHealth, HealthFeed
from kubedevice.dra.models import to_document
from kubedevice.dra.validation import validate
from kubedevice.kubelet.dra.plugin import DraClient, register
from kubedevice.plugin.base import Plugin
from kubedevice.testing.dradriver import DRIVER, NODE, Node, null_plugin, running

V1, V1ALPHA1 = "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"
TAINT = {"key": f"{DRIVER}/unhealthy", "effect": "NoSchedule"}


@pytest.fixture
def node() -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))  # unix socket paths end at 107 bytes
    yield Node(root)
    shutil.rmtree(root)


async def test_get_info_lists_both_health_versions_newest_first(node: Node) -> None:
    async with running(node, DraDriver(DRIVER, [null_plugin()])) as service:
        async with aio.insecure_channel(f"unix://{service.sockets.registration}") as channel:
            info = await regpb_grpc.RegistrationStub(channel).GetInfo(regpb.InfoRequest(), timeout=5)
        # A 1.37 kubelet takes the first of (v1, v1alpha1) it finds; 1.36 always watches v1alpha1.
        assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin", V1, V1ALPHA1]
        registered = await register(service.sockets.registration)
        assert registered.health_service == V1


async def test_v1_and_v1alpha1_streams_report_the_same_changes_at_once(node: Node) -> None:
    plugin = null_plugin(2)
    async with running(node, DraDriver(DRIVER, [plugin])) as service:
        registered = await register(service.sockets.registration)
        async with DraClient(registered) as client:
            new, old = client.watch_health(V1), client.watch_health(V1ALPHA1)  # a 1.37 and a 1.36 kubelet
            healthy = {(NODE, "null0"): "HEALTHY", (NODE, "null1"): "HEALTHY"}
            assert await anext(new) == await anext(old) == healthy
            plugin.set_health("null1", Health.UNHEALTHY)
            sick = {(NODE, "null0"): "HEALTHY", (NODE, "null1"): "UNHEALTHY"}
            assert await asyncio.wait_for(anext(new), 1) == await asyncio.wait_for(anext(old), 1) == sick
            plugin.set_health("null1", Health.HEALTHY)
            assert await asyncio.wait_for(anext(new), 1) == await asyncio.wait_for(anext(old), 1) == healthy
            await new.aclose()
            await old.aclose()


async def test_v1_messages_carry_the_time_and_a_message_for_unhealthy_devices(node: Node) -> None:
    plugin = null_plugin(1)
    plugin.set_health("null0", Health.UNHEALTHY)
    async with (
        running(node, DraDriver(DRIVER, [plugin])) as service,
        aio.insecure_channel(f"unix://{service.sockets.dra}") as channel,
    ):
        stream = h1_grpc.DRAResourceHealthStub(channel).NodeWatchResources(h1.NodeWatchResourcesRequest())
        message = await stream.read()
        stream.cancel()
    [device] = message.devices
    assert (device.device.pool_name, device.device.device_name, device.health) == (NODE, "null0", h1.UNHEALTHY)
    assert device.message == "reported unhealthy" and device.last_updated_time > 1_700_000_000


async def test_streams_end_when_the_driver_stops(node: Node) -> None:
    async with running(node, DraDriver(DRIVER, [null_plugin(1)])) as service:
        registered = await register(service.sockets.registration)
        client = DraClient(registered)
        stream = client.watch_health(V1)
        await anext(stream)
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(stream), 5)
    await client.__aexit__(None, None, None)


def devices(n: int) -> list[Device]:
    return [Device(f"d{i}") for i in range(n)]


def test_an_unhealthy_device_is_tainted_and_recovery_clears_it() -> None:
    plugin = Plugin("example.com/null", devices(3))
    driver = DraDriver(DRIVER, [plugin])

    def taints() -> dict[str, object]:
        [slice_] = driver.slices(NODE)
        assert validate(slice_) == []
        return {d.name: d.taints for d in slice_.spec.devices}

    assert taints() == {"d0": None, "d1": None, "d2": None}
    plugin.set_health("d1", Health.UNHEALTHY)
    assert taints() == {"d0": None, "d1": [TAINT], "d2": None}
    assert to_document(driver.slices(NODE)[0])["spec"]["devices"][1]["taints"] == [TAINT]
    plugin.set_health("d1", Health.HEALTHY)
    assert taints() == {"d0": None, "d1": None, "d2": None}


@pytest.mark.parametrize(("effect", "expected"), [("NoExecute", "NoExecute"), ("None", "None")])
def test_the_effect_is_configurable(effect: str, expected: str) -> None:
    plugin = Plugin("example.com/null", [Device("d0", Health.UNHEALTHY)])
    [slice_] = DraDriver(DRIVER, [plugin], effect).slices(NODE)
    assert slice_.spec.devices[0].taints == [{"key": f"{DRIVER}/unhealthy", "effect": expected}]


def test_with_taints_off_an_unhealthy_device_is_left_out() -> None:
    plugin = Plugin("example.com/null", [Device("d0"), Device("d1", Health.UNHEALTHY)])
    [slice_] = DraDriver(DRIVER, [plugin], None).slices(NODE)
    assert [d.name for d in slice_.spec.devices] == ["d0"]


def test_a_pool_with_a_tainted_device_is_cut_at_64_per_slice() -> None:
    plugin = Plugin("example.com/many", devices(200))
    driver = DraDriver(DRIVER, [plugin])
    assert [len(s.spec.devices) for s in driver.slices(NODE)] == [128, 72]
    plugin.set_health("d150", Health.UNHEALTHY)
    tainted = driver.slices(NODE)
    assert [len(s.spec.devices) for s in tainted] == [64, 64, 64, 8]
    assert {s.spec.pool.resource_slice_count for s in tainted} == {4}
    assert all(validate(s) == [] for s in tainted)  # 128 with a taint would be refused
    plugin.set_health("d150", Health.HEALTHY)
    assert [len(s.spec.devices) for s in driver.slices(NODE)] == [128, 72]


def test_a_pool_with_list_attributes_is_cut_at_64_per_slice() -> None:
    class Listed(Plugin):
        def dra_attributes(self) -> dict[str, dict[str, dict[str, object]]]:
            return {d.id: {"links": {"ints": [1, 2]}} for d in self.devices()}

    slices = DraDriver(DRIVER, [Listed("example.com/listed", devices(100))]).slices(NODE)
    assert [len(s.spec.devices) for s in slices] == [64, 36]
    assert all(validate(s, features.all_on()) == [] for s in slices)  # as the publisher checks them


NULL = "resources: [{name: example.com/null, static: {count: 2, paths: [/dev/null]}}]\n"


@pytest.mark.parametrize(
    ("value", "effect"), [("NoSchedule", "NoSchedule"), ("NoExecute", "NoExecute"), ("None", "None"), ("off", None)]
)
def test_the_dra_section_sets_the_taint(value: str, effect: str | None) -> None:
    config = parse_config(NULL + f"dra: {{driver: {DRIVER}, unhealthy_taint: {value}}}")
    assert config.dra is not None and config.dra.taint_effect == effect
    assert build_driver(config, Path("/")).taint_effect == effect


def test_the_default_taint_is_no_schedule_and_a_bad_one_names_the_field() -> None:
    config = parse_config(NULL + f"dra: {{driver: {DRIVER}}}")
    assert config.dra is not None and config.dra.taint_effect == "NoSchedule"
    with pytest.raises(ConfigError, match=r"dra\.unhealthy_taint"):
        parse_config(NULL + f"dra: {{driver: {DRIVER}, unhealthy_taint: PreferNoSchedule}}")


def test_dra_slices_prints_what_the_driver_publishes(tmp_path: Path) -> None:
    """Same code path: with all devices healthy (no health check runs offline) the output of
    ``kubedevice dra slices`` is the driver's slices, whatever the taint setting."""
    path = tmp_path / "c.yaml"
    text = NULL + f"dra: {{driver: {DRIVER}, unhealthy_taint: NoExecute}}\n"
    path.write_text(text)
    out = subprocess.run(
        [sys.executable, "-m", "kubedevice", "dra", "slices", "--config", str(path), "--node", NODE, "-o", "json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    printed = json.loads(out)
    printed = printed if isinstance(printed, list) else printed.get("items", [printed])
    driver = build_driver(parse_config(text), Path("/"))
    assert printed == [to_document(s) for s in driver.slices(NODE)]


async def test_the_list_is_sent_again_before_the_kubelet_would_read_it_as_unknown() -> None:
    """The kubelet reads a device not reported for 30 s (its default timeout) as Unknown."""
    assert REFRESH_SECONDS <= 30 / 3
    states = [DeviceHealth(NODE, "d0", True)]
    feed = HealthFeed(lambda: states, refresh=0.3)
    loop = asyncio.get_running_loop()
    stream = feed.watch()
    stamps = []
    for _ in range(3):
        _, devices = await asyncio.wait_for(anext(stream), 5)
        stamps.append(loop.time())
        assert devices == states
    assert stamps[1] - stamps[0] >= 0.25 and stamps[2] - stamps[1] >= 0.25, stamps  # not much before it is due
    feed.stop()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(stream), 5)


async def test_a_change_goes_out_at_once_not_at_the_next_refresh() -> None:
    states = [DeviceHealth(NODE, "d0", True)]
    feed = HealthFeed(lambda: states, refresh=60)
    stream = feed.watch()
    assert (await anext(stream))[1] == states
    states = [DeviceHealth(NODE, "d0", False, "reported unhealthy")]
    feed.changed()
    assert (await asyncio.wait_for(anext(stream), 5))[1] == states
    feed.changed()  # a wake-up that changes nothing sends nothing
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(anext(stream), 0.3)
