"""The DRA driver's node side over real unix sockets: registration, prepare/unprepare (v1 and
v1beta1), CDI specs, checkpoint across restarts and reboots, health stream, sockets."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import socket
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
import pytest
from grpc import aio
from prometheus_client import CollectorRegistry

from kubedevice.api import dra_v1_pb2 as v1
from kubedevice.api import dra_v1_pb2_grpc as v1_grpc
from kubedevice.device import ContainerAllocation, Device, Health
from kubedevice.dra.driver import DraDriver, DriverService
from kubedevice.dra.driver.cdi import ClaimSpecs
from kubedevice.dra.driver.checkpoint import CheckpointError, load
from kubedevice.dra.driver.claims import FileClaims
from kubedevice.dra.driver.metrics import DraMetrics
from kubedevice.kubelet.dra.plugin import DraClient, Registered, RegistrationRefused, register
from kubedevice.plugin.base import Plugin
from kubedevice.testing.dradriver import DRIVER, NODE, Node, claim_object, kubelet, null_plugin, running
from kubedevice.unixsocket import SocketInUse

KIND = f"k8s.{DRIVER}/device"


@pytest.fixture
def node() -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))  # unix socket paths end at 107 bytes
    yield Node(root)
    shutil.rmtree(root)


def driver() -> DraDriver:
    return DraDriver(DRIVER, [null_plugin()])


def spec_file(node: Node, uid: str) -> Path:
    return node.cdi_dir / f"kubedevice-dra-{DRIVER}-{uid}.json"


async def test_registration_answers_like_kubeletplugin(node: Node) -> None:
    async with running(node, driver()) as service:
        assert service.sockets.registration == node.kubelet_dir / "plugins_registry" / f"{DRIVER}-reg.sock"
        assert not service.options.ready.is_set()
        registered = await register(service.sockets.registration)
        assert registered == Registered(
            DRIVER,
            str(node.kubelet_dir / "plugins" / DRIVER / "dra.sock"),
            "v1.DRAPlugin",
            health_service="v1.DRAResourceHealth",
        )
        assert service.registered and service.options.ready.is_set()  # no publisher: registered is enough


async def test_a_refused_registration_leaves_the_driver_not_ready(node: Node) -> None:
    async with running(node, driver()) as service:
        with pytest.raises(RegistrationRefused, match="testing"):
            await register(service.sockets.registration, accept=False, error="testing")
        assert not service.registered and not service.options.ready.is_set()


async def test_prepare_writes_one_cdi_spec_per_claim_and_unprepare_removes_it(node: Node) -> None:
    ref = node.add_claim(claim_object("one", ["null1"]))
    uid = ref[2]
    async with running(node, driver()) as service, kubelet(service) as client:
        response = await client.prepare([ref])
        answer = response.claims[uid]
        assert answer.error == ""
        [device] = answer.devices
        assert (list(device.request_names), device.pool_name, device.device_name) == (["req"], NODE, "null1")
        assert list(device.cdi_device_ids) == [f"{KIND}={uid}-null1"]
        spec = json.loads(spec_file(node, uid).read_text())
        assert spec["kind"] == KIND
        assert spec["devices"] == [
            {
                "name": f"{uid}-null1",
                "containerEdits": {
                    "env": ["NULL_DEVICE=null1"],
                    "deviceNodes": [{"path": "/dev/null", "hostPath": "/dev/null", "permissions": "rw"}],
                },
            }
        ]
        assert oct(spec_file(node, uid).stat().st_mode & 0o777) == "0o644"

        unprepared = await client.unprepare([ref])
        assert unprepared.claims[uid].error == ""
        assert not spec_file(node, uid).exists()
        assert service.state.prepared() == {}


async def test_v1beta1_gets_the_same_answer(node: Node) -> None:
    ref = node.add_claim(claim_object("beta", ["null2"]))
    async with running(node, driver()) as service:
        registered = await register(service.sockets.registration)
        beta = dataclasses.replace(registered, service="v1beta1.DRAPlugin")
        async with DraClient(beta) as client:
            answer = (await client.prepare([ref])).claims[ref[2]]
            assert [d.device_name for d in answer.devices] == ["null2"]
            assert list(answer.devices[0].cdi_device_ids) == [f"{KIND}={ref[2]}-null2"]
            assert (await client.unprepare([ref])).claims[ref[2]].error == ""


async def test_prepare_is_idempotent_and_restores_a_removed_spec(node: Node) -> None:
    ref = node.add_claim(claim_object("again", ["null0"]))
    async with running(node, driver()) as service, kubelet(service) as client:
        first = await client.prepare([ref])
        spec_file(node, ref[2]).unlink()
        (node.claims_dir / "default-again.json").unlink()  # answered from the checkpoint, not fetched again
        second = await client.prepare([ref])
        assert second == first
        assert spec_file(node, ref[2]).exists()


async def test_every_claim_gets_its_own_answer(node: Node) -> None:
    good = node.add_claim(claim_object("good", [("a", "null0"), ("b", "null1")]))
    replaced = node.add_claim(claim_object("replaced", ["null2"]))
    unallocated = node.add_claim(claim_object("pending", ["null2"], allocated=False))
    unknown = node.add_claim(claim_object("unknown", ["gpu7"]))
    foreign = node.add_claim(claim_object("foreign", ["null3"], driver="other.example.com"))
    missing = ("default", "missing", "uid-missing")
    stale = (replaced[0], replaced[1], "uid-old")
    async with running(node, driver()) as service, kubelet(service) as client:
        response = await client.prepare([good, stale, unallocated, unknown, foreign, missing])
        claims = response.claims
        assert set(claims) == {good[2], "uid-old", unallocated[2], unknown[2], foreign[2], "uid-missing"}
        assert claims[good[2]].error == ""
        assert [(list(d.request_names), d.device_name) for d in claims[good[2]].devices] == [
            (["a"], "null0"),
            (["b"], "null1"),
        ]
        assert "was replaced" in claims["uid-old"].error and replaced[2] in claims["uid-old"].error
        assert "is not allocated" in claims[unallocated[2]].error
        assert "gpu7" in claims[unknown[2]].error and not claims[unknown[2]].devices
        assert claims[foreign[2]].error == "" and not claims[foreign[2]].devices
        assert "default/missing" in claims["uid-missing"].error
        assert set(node.cdi_specs()) == {spec_file(node, good[2]).name}
        assert set(service.state.prepared()) == {good[2], foreign[2]}
        assert (await client.unprepare([("default", "never", "uid-never")])).claims["uid-never"].error == ""


async def test_a_repeated_uid_under_a_wrong_name_does_not_fail_the_right_one(node: Node) -> None:
    ref = node.add_claim(claim_object("right", ["null0"]))
    async with running(node, driver()) as service, kubelet(service) as client:
        answer = (await client.prepare([ref, (ref[0], "wrong", ref[2])])).claims[ref[2]]
        assert answer.error == "" and [d.device_name for d in answer.devices] == ["null0"]


async def test_envs_are_rendered_per_request_and_subrequests_are_stripped(node: Node) -> None:
    ref = node.add_claim(claim_object("sub", [("gpu/large", "null0"), ("gpu/large", "null3")]))
    async with running(node, driver()) as service, kubelet(service) as client:
        answer = (await client.prepare([ref])).claims[ref[2]]
        assert [list(d.request_names) for d in answer.devices] == [["gpu"], ["gpu"]]
        devices = json.loads(spec_file(node, ref[2]).read_text())["devices"]
        assert devices[0]["containerEdits"]["env"] == ["NULL_DEVICE=null0"]  # merge_grants: first in ID order wins
        assert "env" not in devices[1]["containerEdits"]
        assert devices[1]["containerEdits"]["deviceNodes"][0]["path"] == "/dev/null"


async def test_concurrent_prepares_of_one_claim_prepare_it_once(node: Node) -> None:
    refs = [node.add_claim(claim_object(f"c{i}", [f"null{i % 4}"])) for i in range(8)]
    async with running(node, driver()) as service, kubelet(service) as client:
        answers = await asyncio.gather(*(client.prepare(refs) for _ in range(4)))
        assert all(a == answers[0] for a in answers)
        assert all(answers[0].claims[uid].error == "" for _, _, uid in refs)
        assert len(node.cdi_specs()) == 8
        await client.unprepare(refs)
        assert node.cdi_specs() == {}


async def test_after_a_driver_restart_specs_stay_and_unprepare_still_works(node: Node) -> None:
    ref = node.add_claim(claim_object("kept", ["null1"]))
    async with running(node, driver()) as service, kubelet(service) as client:
        await client.prepare([ref])
    assert spec_file(node, ref[2]).exists()  # a running pod's container may still be created from it
    spec_file(node, ref[2]).unlink()
    orphan = spec_file(node, "uid-orphan")  # a crash between writing a spec and the checkpoint
    orphan.write_text(json.dumps({"cdiVersion": "0.6.0", "kind": KIND, "devices": []}))
    async with running(node, driver()) as service, kubelet(service) as client:
        assert spec_file(node, ref[2]).exists() and not orphan.exists()
        assert set(service.state.prepared()) == {ref[2]}
        assert (await client.unprepare([ref])).claims[ref[2]].error == ""
        assert node.cdi_specs() == {}


async def test_a_restart_leaves_the_specs_of_a_driver_whose_name_extends_ours(node: Node) -> None:
    other = ClaimSpecs(node.cdi_dir, f"{DRIVER}-x")  # its files also start with our prefix
    other.write("uid-of-x", other.spec("uid-of-x", [("dev0", ContainerAllocation(envs={"A": "1"}))]))
    stranger = node.cdi_dir / f"kubedevice-dra-{DRIVER}-not-a-spec.json"  # our prefix, not our kind
    stranger.write_text("not json")
    async with running(node, driver()):
        pass
    assert other.exists("uid-of-x") and stranger.exists()


async def test_claim_uids_that_differ_only_in_unsafe_characters_get_their_own_specs(node: Node) -> None:
    colon = node.add_claim(claim_object("colon", ["null1"], uid="a:b"))
    underscore = node.add_claim(claim_object("underscore", ["null2"], uid="a_b"))
    async with running(node, driver()) as service, kubelet(service) as client:
        await client.prepare([colon, underscore])
        assert len(node.cdi_specs()) == 2
    async with running(node, driver()) as service, kubelet(service) as client:  # recovery keeps both
        assert len(node.cdi_specs()) == 2
        await client.unprepare([colon])
        [(name, spec)] = node.cdi_specs().items()
        assert spec["devices"][0]["name"] == "a_b-null2" and "a_5f_b" in name


async def test_a_driver_with_nothing_prepared_leaves_no_file_when_it_stops(node: Node) -> None:
    ref = node.add_claim(claim_object("brief", ["null1"]))
    plugin_dir = node.kubelet_dir / "plugins" / DRIVER
    async with running(node, driver()) as service, kubelet(service) as client:
        await client.prepare([ref])
    assert (plugin_dir / "checkpoint.json").exists()  # a prepared claim: the next start needs it
    async with running(node, driver()) as service, kubelet(service) as client:
        await client.unprepare([ref])
    assert not plugin_dir.exists()
    plugin_dir.mkdir(parents=True)
    (plugin_dir / "notes.txt").write_text("not ours")
    async with running(node, driver()):
        pass
    assert [p.name for p in plugin_dir.iterdir()] == ["notes.txt"]


async def test_after_a_reboot_stale_claims_are_dropped(node: Node) -> None:
    ref = node.add_claim(claim_object("old", ["null1"]))
    async with running(node, driver()) as service, kubelet(service) as client:
        await client.prepare([ref])
    node.boot_id.write_text("boot-2\n")
    async with running(node, driver()) as service:
        assert service.state.prepared() == {}
        assert node.cdi_specs() == {}
        checkpoint = json.loads((node.kubelet_dir / "plugins" / DRIVER / "checkpoint.json").read_text())
        assert checkpoint == {"version": 1, "bootID": "boot-2", "claims": {}}


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json", "corrupt checkpoint"), ('{"version": 2, "bootID": "b", "claims": {}}', "version 2")],
)
async def test_a_bad_checkpoint_stops_the_driver_and_is_kept(node: Node, content: str, message: str) -> None:
    path = node.kubelet_dir / "plugins" / DRIVER / "checkpoint.json"
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(CheckpointError, match=message):
        async with running(node, driver()):
            pass
    assert path.read_text() == content


async def test_health_changes_reach_the_stream(node: Node) -> None:
    plugin = null_plugin(2)
    async with running(node, DraDriver(DRIVER, [plugin])) as service, kubelet(service) as client:
        stream = client.watch_health()
        assert await anext(stream) == {(NODE, "null0"): "HEALTHY", (NODE, "null1"): "HEALTHY"}
        plugin.set_health("null1", Health.UNHEALTHY)
        assert await anext(stream) == {(NODE, "null0"): "HEALTHY", (NODE, "null1"): "UNHEALTHY"}
        plugin.set_health("null1", Health.HEALTHY)
        assert await anext(stream) == {(NODE, "null0"): "HEALTHY", (NODE, "null1"): "HEALTHY"}
        await stream.aclose()


async def test_claims_without_uid_are_invalid_argument(node: Node) -> None:
    async with running(node, driver()) as service, aio.insecure_channel(f"unix://{service.sockets.dra}") as channel:
        stub = v1_grpc.DRAPluginStub(channel)
        request = v1.NodePrepareResourcesRequest(claims=[v1.Claim(namespace="default", name="x", uid="")])
        with pytest.raises(aio.AioRpcError) as info:
            await stub.NodePrepareResources(request)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "default/x" in (info.value.details() or "")
        huge = v1.NodePrepareResourcesRequest(claims=[v1.Claim(namespace="default", name="n" * 20_000, uid="")])
        with pytest.raises(aio.AioRpcError) as info:  # a long message would exceed the client's 8 KiB trailer cap
            await stub.NodePrepareResources(huge)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "'default/nnnn" in (info.value.details() or "") and len(info.value.details() or "") < 4096


async def test_undecodable_requests_are_invalid_argument(node: Node) -> None:
    """Invalid UTF-8 in a claim's UID: INVALID_ARGUMENT with the reason, not grpcio's UNKNOWN."""
    async with running(node, driver()) as service, aio.insecure_channel(f"unix://{service.sockets.dra}") as channel:
        prepare = channel.unary_unary("/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources")
        with pytest.raises(aio.AioRpcError) as info:
            await prepare(b"\x0a\x03\x1a\x01\xff")
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "malformed request" in (info.value.details() or "")


async def test_a_stale_socket_is_replaced_and_a_live_one_is_left_alone(node: Node) -> None:
    dra = node.kubelet_dir / "plugins" / DRIVER / "dra.sock"
    dra.parent.mkdir(parents=True)
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(dra))  # bound, never listening: a crashed predecessor's socket
    async with running(node, driver()) as service:
        assert (await register(service.sockets.registration)).driver == DRIVER
        with pytest.raises(SocketInUse):
            async with running(node, driver()):
                pass
        assert service.sockets.dra.exists()


def test_driver_names_are_checked() -> None:
    with pytest.raises(ValueError, match="not a valid DRA driver name: a lowercase RFC 1123 subdomain"):
        DraDriver("Not_A_Name", [null_plugin()])


async def test_prepare_and_unprepare_are_counted_in_metrics(node: Node) -> None:
    registry = CollectorRegistry()
    metrics = DraMetrics(registry)
    good = node.add_claim(claim_object("m", ["null0"]))
    options = node.options()
    options.observe = metrics.observe_rpc
    service = DriverService(driver(), FileClaims(node.claims_dir), options, None)
    await service.start()
    try:
        async with kubelet(service) as client:
            await client.prepare([good, ("default", "absent", "uid-x")])
            await client.unprepare([good])
    finally:
        await service.stop()

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("kubedevice_dra_claims_total", method="NodePrepareResources", result="ok") == 1
    assert value("kubedevice_dra_claims_total", method="NodePrepareResources", result="error") == 1
    assert value("kubedevice_dra_claims_total", method="NodeUnprepareResources", result="ok") == 1
    assert value("kubedevice_dra_rpc_duration_seconds_count", method="NodePrepareResources") == 1


class Failing(Plugin):
    def allocate(self, devices: Sequence[Device]) -> ContainerAllocation:
        raise RuntimeError("firmware not loaded")


async def test_a_failing_allocate_hook_fails_only_its_claim(node: Node) -> None:
    broken = Failing("example.com/broken", [Device("b0")])
    ref_bad = node.add_claim(claim_object("bad", ["broken-b0"]))
    ref_good = node.add_claim(claim_object("good", ["null-null0"]))
    async with running(node, DraDriver(DRIVER, [null_plugin(), broken])) as service, kubelet(service) as client:
        claims = (await client.prepare([ref_bad, ref_good])).claims
        assert "firmware not loaded" in claims[ref_bad[2]].error and "b0" in claims[ref_bad[2]].error
        assert claims[ref_good[2]].error == ""
        assert set(service.state.prepared()) == {ref_good[2]}


async def test_devices_published_from_another_thread_reach_the_health_stream(node: Node) -> None:
    plugin = null_plugin(1)
    async with running(node, DraDriver(DRIVER, [plugin])) as service, kubelet(service) as client:
        stream = client.watch_health()
        assert await anext(stream) == {(NODE, "null0"): "HEALTHY"}
        await asyncio.to_thread(plugin.publish, [Device("null0"), Device("null1", Health.UNHEALTHY)])
        assert await anext(stream) == {(NODE, "null0"): "HEALTHY", (NODE, "null1"): "UNHEALTHY"}
        await stream.aclose()


async def test_two_instances_of_a_rolling_update_share_claims(node: Node) -> None:
    refs = [node.add_claim(claim_object(f"r{i}", [f"null{i % 4}"])) for i in range(6)]
    old_options, new_options = node.options(), node.options()
    old_options.rolling_update_uid, new_options.rolling_update_uid = "pod-old", "pod-new"
    old = DriverService(driver(), FileClaims(node.claims_dir), old_options, None)
    await old.start()
    new = DriverService(driver(), FileClaims(node.claims_dir), new_options, None)
    await new.start()
    try:
        assert old.sockets.registration.name == f"{DRIVER}-pod-old-reg.sock"
        assert new.sockets.dra.name == "dra-pod-new.sock"
        async with kubelet(old) as old_client, kubelet(new) as new_client:
            await asyncio.gather(old_client.prepare(refs[:3]), new_client.prepare(refs[3:]))
            assert len(node.cdi_specs()) == 6
            checkpoint = node.kubelet_dir / "plugins" / DRIVER / "checkpoint.json"
            assert len(load(checkpoint, "boot-1")[0].claims) == 6  # neither instance lost the other's
            # the old pod goes away; the new one unprepares what the old one prepared
            await old.stop()
            answers = (await new_client.unprepare(refs)).claims
            assert all(answers[uid].error == "" for _, _, uid in refs)
            assert node.cdi_specs() == {}
            assert load(checkpoint, "boot-1")[0].claims == {}
    finally:
        await old.stop()
        await new.stop()
