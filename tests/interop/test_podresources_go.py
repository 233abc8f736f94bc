"""The simulators' PodResources API read by the official Go stubs of k8s.io/kubelet v0.36.3.

``podresources/`` is a small Go client on those stubs. For each answer it reports what the
stubs decoded, the bytes that came over the wire and Go's deterministic encoding of the decoded
message. The simulators' bytes must be Go's encoding exactly, the Go and Python clients must
read the same bytes and the same content, and ``Get`` of an unknown pod must fail as the
kubelet's does.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from google.protobuf.message import Message

from kubedevice.api import podresources_v1_pb2 as prpb
from kubedevice.api.convert import allocatable_to_pb, pod_resources_to_pb
from kubedevice.device import Device, Health
from kubedevice.dra.driver import DraDriver
from kubedevice.kubelet import Container, KubeletSimulator, Pod
from kubedevice.kubelet.dra.simulator import DraKubelet
from kubedevice.plugin.base import Plugin
from kubedevice.plugin.manager import Manager
from kubedevice.podresources.client import PodResourcesClient, socket_in
from kubedevice.testing import gobuild
from kubedevice.testing.dradriver import DRIVER, Node, claim_object, null_plugin, running

pytestmark = pytest.mark.interop
HERE = Path(__file__).resolve().parent
GPU = "example.com/gpu"


@pytest.fixture(scope="module")
def go_client() -> Path:
    binary = gobuild.build(HERE / "podresources", ".", "podresources")
    if binary is None:
        pytest.skip("Go toolchain not installed: cannot build the k8s.io/kubelet v0.36.3 PodResources client")
    return binary


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))  # unix socket paths end at 107 bytes
    yield path
    shutil.rmtree(path)


async def go_read(binary: Path, socket: Path, *pods: str) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        str(binary), str(socket), *pods, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    answer: dict[str, Any] = json.loads(out)
    return answer


async def raw_call(socket: Path, method: str, request: Message) -> bytes:
    async with grpc.aio.insecure_channel(f"unix:{socket}") as channel:
        answer: bytes = await channel.unary_unary(f"/v1.PodResourcesLister/{method}")(request.SerializeToString())
        return answer


def as_dict(message: Message) -> dict[str, Any]:
    """proto3 JSON with the proto field names, as Go's protojson writes it with UseProtoNames."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def same_as_go(answer: dict[str, Any], raw: bytes, ours: Message) -> None:
    """Our server's bytes are Go's encoding of them; both clients got those bytes and read the same."""
    assert "code" not in answer, answer
    go_raw, go_canonical = base64.b64decode(answer["raw"]), base64.b64decode(answer["canonical"])
    assert go_raw == go_canonical, "the server's bytes are not Go's encoding of the same message"
    assert go_raw == raw
    assert answer["response"] == as_dict(type(ours).FromString(raw)) == as_dict(ours)


def test_device_plugin_state_reads_the_same_with_the_official_go_stubs(go_client: Path, root: Path) -> None:
    async def scenario() -> None:
        plugin_dir = root / "device-plugins"
        plugin_dir.mkdir()
        gpus = [Device("gpu-0", numa_nodes=(0,)), Device("gpu-1", numa_nodes=(0, 1)), Device("gpu-2")]
        nics = [Device("nic-0", numa_nodes=(1,)), Device("nic-1", Health.UNHEALTHY)]
        manager = Manager([Plugin(GPU, gpus), Plugin("example.com/nic", nics)], plugin_dir)
        sim = KubeletSimulator(plugin_dir)
        await sim.start()
        try:
            await manager.start()
            await sim.wait_until(lambda: sim.capacity() == {GPU: 3, "example.com/nic": 2}, 10)
            await sim.admit(Pod("u1", "trainer", [Container("main", {GPU: 2}), Container("log")], "ml"))
            await sim.admit(Pod("u2", "web", [Container("nginx", {"example.com/nic": 1})]))
            await sim.admit(Pod("u3", "idle", [Container("c")]))
            socket = socket_in(root)
            answer = await go_read(go_client, socket, "ml/trainer", "default/absent")
            async with PodResourcesClient(socket) as client:
                listed = prpb.ListPodResourcesResponse(
                    pod_resources=[pod_resources_to_pb(p) for p in await client.list()]
                )
                same_as_go(answer["list"], await raw_call(socket, "List", prpb.ListPodResourcesRequest()), listed)
                allocatable = allocatable_to_pb(await client.allocatable())
                raw = await raw_call(socket, "GetAllocatableResources", prpb.AllocatableResourcesRequest())
                same_as_go(answer["allocatable"], raw, allocatable)
                trainer = prpb.GetPodResourcesResponse(
                    pod_resources=pod_resources_to_pb(await client.get("ml", "trainer"))
                )
                request = prpb.GetPodResourcesRequest(pod_name="trainer", pod_namespace="ml")
                same_as_go(answer["get"]["ml/trainer"], await raw_call(socket, "Get", request), trainer)
            assert [p["name"] for p in answer["list"]["response"]["pod_resources"]] == ["trainer", "web", "idle"]
            assert answer["get"]["default/absent"] == {
                "code": "Unknown",
                "message": "pod absent in namespace default not found",
            }
        finally:
            await manager.stop()
            await sim.stop()

    asyncio.run(asyncio.wait_for(scenario(), 120))


def test_dra_claims_read_the_same_with_the_official_go_stubs(go_client: Path, root: Path) -> None:
    node = Node(root)
    node.add_claim(claim_object("pair", ["null0", "null1"], namespace="ml"))
    node.add_claim(claim_object("solo", ["null2"], namespace="ml"))

    async def scenario() -> None:
        kubelet = DraKubelet(node.kubelet_dir, node.claims_dir)
        await kubelet.start()
        try:
            async with running(node, DraDriver(DRIVER, [null_plugin()])):
                await kubelet.wait_until(lambda: DRIVER in kubelet.drivers, 10)
                pod = Pod(
                    "u1", "job", [Container("a", claims=("pair",)), Container("b", claims=("pair", "solo"))], "ml"
                )
                assert await kubelet.admit(pod)
                socket = socket_in(node.kubelet_dir)
                answer = await go_read(go_client, socket, "ml/job")
                async with PodResourcesClient(socket) as client:
                    listed = prpb.ListPodResourcesResponse(
                        pod_resources=[pod_resources_to_pb(p) for p in await client.list()]
                    )
                    same_as_go(answer["list"], await raw_call(socket, "List", prpb.ListPodResourcesRequest()), listed)
                [b] = [
                    c for c in answer["get"]["ml/job"]["response"]["pod_resources"]["containers"] if c["name"] == "b"
                ]
                pair = b["dynamic_resources"][0]["claim_resources"]
                assert [len(r["cdi_devices"]) for r in pair] == [1, 2]  # the kubelet's accumulated CDI list
                assert answer["allocatable"]["response"] == {}  # DRA devices are not allocatable resources
        finally:
            await kubelet.stop()

    asyncio.run(asyncio.wait_for(scenario(), 120))
