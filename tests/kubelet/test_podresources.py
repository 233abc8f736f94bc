"""The simulators' PodResources API, read by our client over real unix sockets.

Device plugins: a raw plugin with NUMA-placed devices and the device-plugin simulator in a
``<root>/device-plugins`` directory. DRA: our real DRA driver and the DRA simulator, claims as
files. Each answer is checked against what the kubelet (v1.36.3) would send for that state.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest

from kubedevice.api import podresources_v1_pb2 as prpb
from kubedevice.dra.driver import DraDriver
from kubedevice.kubelet import Container, KubeletSimulator, Pod
from kubedevice.kubelet.dra.simulator import DraKubelet
from kubedevice.kubelet.podresources import PodResourcesServer, PodResourcesView, RateLimiter, kubelet_root_of
from kubedevice.podresources.client import PodResourcesClient, PodResourcesUnavailable, read_holders, socket_in
from kubedevice.podresources.model import (
    Allocatable,
    ClaimDevice,
    ClaimResources,
    ContainerResources,
    DeviceIds,
    Holder,
    PodResources,
    by_dra_device,
    holders,
)
from kubedevice.testing.dradriver import DRIVER, NODE, Node, claim_object, null_plugin, running

from .rawplugin import RawPlugin, device, run

GPU = "example.com/gpu"
NIC = "example.com/nic"


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))  # unix socket paths end at 107 bytes
    yield path
    shutil.rmtree(path)


@asynccontextmanager
async def node(root: Path, *plugins: RawPlugin) -> AsyncIterator[KubeletSimulator]:
    sim = KubeletSimulator(root / "device-plugins")
    await sim.start()
    try:
        for plugin in plugins:
            await plugin.serve()
            await plugin.register()
            await sim.wait_until(lambda p=plugin: sim.capacity().get(p.resource) == len(p.devices), 5)
        yield sim
    finally:
        await sim.stop()
        for plugin in plugins:
            await plugin.stop()


def gpus(plugin_dir: Path) -> RawPlugin:
    """gpu-0 on NUMA 0, gpu-1 on nodes 0 and 1, gpu-2 without topology."""
    return RawPlugin(plugin_dir, GPU, [device("gpu-0", numa=[0]), device("gpu-1", numa=[1, 0]), device("gpu-2")])


def nics(plugin_dir: Path) -> RawPlugin:
    return RawPlugin(plugin_dir, NIC, [device("nic-0", numa=[1]), device("nic-1", "Unhealthy", numa=[1])])


def test_the_simulator_serves_pod_resources_only_in_a_kubelet_layout(root: Path) -> None:
    assert kubelet_root_of(root / "device-plugins") == root
    assert kubelet_root_of(root) is None  # a test's own directory: no socket beside it
    assert KubeletSimulator(root).pod_resources is None


def test_list_get_and_allocatable_as_the_kubelet_fills_them(root: Path) -> None:
    async def scenario() -> None:
        plugin_dir = root / "device-plugins"
        plugin_dir.mkdir()
        async with node(root, gpus(plugin_dir), nics(plugin_dir)) as sim:
            assert sim.pod_resources is not None and sim.pod_resources.serving
            trainer = Pod("uid-1", "trainer", [Container("main", {GPU: 3}), Container("sidecar")], "ml")
            await sim.admit(trainer)
            await sim.admit(Pod("uid-2", "web", [Container("nginx")]))
            await sim.admit(Pod("uid-3", "router", [Container("main", {NIC: 1})], "net"))
            async with PodResourcesClient(socket_in(root)) as client:
                pods = await client.list()
                assert pods == [
                    PodResources(
                        "trainer",
                        "ml",
                        (
                            ContainerResources(
                                "main",
                                (
                                    DeviceIds(GPU, ("gpu-0",), (0,)),
                                    DeviceIds(GPU, ("gpu-1",), (0,)),
                                    DeviceIds(GPU, ("gpu-1",), (1,)),
                                    DeviceIds(GPU, ("gpu-2",), None),
                                ),
                            ),
                            ContainerResources("sidecar"),
                        ),
                    ),
                    PodResources("web", "default", (ContainerResources("nginx"),)),  # no devices: listed all the same
                    PodResources("router", "net", (ContainerResources("main", (DeviceIds(NIC, ("nic-0",), (1,)),)),)),
                ]
                assert await client.get("ml", "trainer") == pods[0]
                with pytest.raises(PodResourcesUnavailable, match="Get: unknown: pod trainer in namespace default not"):
                    await client.get("default", "trainer")
                assert await client.allocatable() == Allocatable(
                    (
                        DeviceIds(GPU, ("gpu-0",), (0,)),
                        DeviceIds(GPU, ("gpu-1",), (0,)),
                        DeviceIds(GPU, ("gpu-1",), (1,)),
                        DeviceIds(GPU, ("gpu-2",), None),
                        DeviceIds(NIC, ("nic-0",), (1,)),  # nic-1 is unhealthy: not allocatable
                    )
                )
                assert holders_of(pods) == {
                    ("ml", "trainer", "main", GPU, "gpu-0"),
                    ("ml", "trainer", "main", GPU, "gpu-1"),
                    ("ml", "trainer", "main", GPU, "gpu-2"),
                    ("net", "router", "main", NIC, "nic-0"),
                }

                sim.remove_pod("uid-2")
                assert [p.name for p in await client.list()] == ["trainer", "router"]
            await sim.restart()  # pods stay on the node; their devices come back from the checkpoint
            assert await read_holders(socket_in(root)) == [
                Holder("ml", "trainer", "main", d, resource=GPU) for d in ("gpu-0", "gpu-1", "gpu-2")
            ] + [Holder("net", "router", "main", "nic-0", resource=NIC)]
        assert not socket_in(root).exists()  # stopped: the socket goes, as Go's listener removes it

    run(scenario())


def holders_of(pods: list[PodResources]) -> set[tuple[str, str, str, str, str]]:
    return {(h.namespace, h.pod, h.container, h.resource, h.device) for h in holders(pods)}


def test_the_wire_bytes_are_the_messages_the_kubelet_would_send(root: Path) -> None:
    """A device without topology carries no topology field, one with NUMA node 0 an entry whose
    ID is the default (an empty NUMANode): as Go's encoder writes them."""

    async def scenario() -> None:
        plugin_dir = root / "device-plugins"
        plugin_dir.mkdir()
        async with node(root, gpus(plugin_dir)) as sim:
            await sim.admit(Pod("uid-1", "p", [Container("c", {GPU: 1})]))
            async with grpc.aio.insecure_channel(f"unix:{socket_in(root)}") as channel:
                raw = await channel.unary_unary("/v1.PodResourcesLister/List")(b"")
            expected = prpb.ListPodResourcesResponse(
                pod_resources=[
                    prpb.PodResources(
                        name="p",
                        namespace="default",
                        containers=[
                            prpb.ContainerResources(
                                name="c",
                                devices=[
                                    prpb.ContainerDevices(
                                        resource_name=GPU,
                                        device_ids=["gpu-0"],
                                        topology=prpb.TopologyInfo(nodes=[prpb.NUMANode(ID=0)]),
                                    )
                                ],
                            )
                        ],
                    )
                ]
            )
            assert raw == expected.SerializeToString(deterministic=True)
            assert raw.hex() == (
                "0a2f0a0170120764656661756c741a210a0163121c0a0f6578616d706c652e636f6d2f67707512056770752d301a020a00"
            )

    run(scenario())


def test_a_kubelet_without_the_socket_or_a_dead_one_is_one_line(root: Path) -> None:
    async def scenario() -> None:
        with pytest.raises(PodResourcesUnavailable, match=r"kubelet.sock: no such file or directory$"):
            await read_holders(socket_in(root))
        socket_in(root).parent.mkdir()
        socket_in(root).write_text("")
        with pytest.raises(PodResourcesUnavailable, match=r"kubelet.sock: not a unix socket$"):
            await read_holders(socket_in(root))
        socket_in(root).unlink()
        server = grpc.aio.server()  # a socket nobody serves PodResources on
        server.add_insecure_port(f"unix:{socket_in(root)}")
        await server.start()
        try:
            with pytest.raises(PodResourcesUnavailable, match=r"List: this kubelet does not serve it$"):
                await read_holders(socket_in(root))
        finally:
            await server.stop(None)

    run(scenario())


def test_calls_beyond_the_rate_limit_are_refused_as_the_kubelet_does(root: Path) -> None:
    bucket = RateLimiter(qps=0, burst=10)
    assert [bucket.allow() for _ in range(11)] == [True] * 10 + [False]

    async def scenario() -> None:
        events: list[str] = []
        view = PodResourcesView(lambda: [Pod("u", "p", [Container("c")])])
        server = PodResourcesServer(socket_in(root), view, events.append, RateLimiter(qps=0, burst=2))
        await server.start()
        try:
            async with PodResourcesClient(server.socket) as client:
                assert len(await client.list()) == 1
                assert await client.allocatable() == Allocatable()  # no device manager: nothing, no CPUs
                with pytest.raises(PodResourcesUnavailable, match=r"rate limit \(rejected by rate limit\)"):
                    await client.list()
            assert server.calls == ["List", "GetAllocatableResources", "List"]
        finally:
            await server.stop()
        assert events == [f"serving PodResources at {server.socket}"]

    run(scenario())


def test_a_live_socket_of_another_process_is_left_alone(root: Path) -> None:
    async def scenario() -> None:
        events: list[str] = []
        first = PodResourcesServer(socket_in(root), PodResourcesView(list), events.append)
        second = PodResourcesServer(socket_in(root), PodResourcesView(list), events.append)
        await first.start()
        try:
            await second.start()
            assert not second.serving
            assert events[-1] == f"not serving PodResources: {socket_in(root)} is served by another process"
            assert await read_holders(socket_in(root)) == []  # still the first one's
        finally:
            await second.stop()
            await first.stop()

    run(scenario())


@pytest.fixture
def dra_node() -> Iterator[Node]:
    path = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))
    dra = Node(path)
    dra.claims_dir.mkdir()
    yield dra
    shutil.rmtree(path)


def test_dra_claims_prepared_for_pods_with_the_kubelets_cdi_lists(dra_node: Node) -> None:
    """Per claim and container: a claim shared by two containers is listed under each; a
    container whose claim is not prepared gets no claims at all; each ClaimResource carries its
    driver's CDI IDs so far, as the 1.36 kubelet hands them out."""
    _, _, pair_uid = dra_node.add_claim(claim_object("pair", ["null0", "null1"], namespace="ml"))
    _, _, solo_uid = dra_node.add_claim(claim_object("solo", ["null2"], namespace="ml"))

    async def scenario() -> None:
        kubelet = DraKubelet(dra_node.kubelet_dir, dra_node.claims_dir)
        await kubelet.start()
        try:
            async with running(dra_node, DraDriver(DRIVER, [null_plugin()])):
                await kubelet.wait_until(lambda: DRIVER in kubelet.drivers, 10)
                job = Pod(
                    "uid-1", "job", [Container("a", claims=("pair",)), Container("b", claims=("pair", "solo"))], "ml"
                )
                assert await kubelet.admit(job)
                assert not await kubelet.admit(Pod("uid-2", "waiting", [Container("c", claims=("absent",))], "ml"))
                cdi = f"k8s.{DRIVER}/device="
                pair = ClaimResources(
                    "pair",
                    "ml",
                    (
                        ClaimDevice(DRIVER, NODE, "null0", (f"{cdi}{pair_uid}-null0",)),
                        ClaimDevice(DRIVER, NODE, "null1", (f"{cdi}{pair_uid}-null0", f"{cdi}{pair_uid}-null1")),
                    ),
                )
                solo = ClaimResources("solo", "ml", (ClaimDevice(DRIVER, NODE, "null2", (f"{cdi}{solo_uid}-null2",)),))
                async with PodResourcesClient(socket_in(dra_node.kubelet_dir)) as client:
                    assert await client.list() == [
                        PodResources(
                            "job",
                            "ml",
                            (ContainerResources("a", claims=(pair,)), ContainerResources("b", claims=(pair, solo))),
                        ),
                        PodResources("waiting", "ml", (ContainerResources("c"),)),
                    ]
                    assert await client.allocatable() == Allocatable()  # DRA devices are not in it
                    held = await read_holders(client.socket)
                    assert list(by_dra_device(held)) == [(DRIVER, NODE, f"null{i}") for i in (0, 1, 2)]
                    assert {(h.container, h.device, h.claim) for h in held} == {
                        ("a", "null0", "pair"),
                        ("a", "null1", "pair"),
                        ("b", "null0", "pair"),
                        ("b", "null1", "pair"),
                        ("b", "null2", "solo"),
                    }
                    await kubelet.remove_pod("uid-1")
                    assert kubelet.prepared == {}  # no other pod used them: unprepared
                    assert [p.name for p in await client.list()] == ["waiting"]
        finally:
            await kubelet.stop()
        assert not socket_in(dra_node.kubelet_dir).exists()

    run(scenario())
