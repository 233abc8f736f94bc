"""Admission: device choice, GetPreferredAllocation, Allocate, PreStartContainer, merging."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest

from kubedevice.device import DeviceSpec, Mount
from kubedevice.kubelet import AdmissionError, Container, ContainerStartError, KubeletSimulator, Pod

from .rawplugin import RawPlugin, device, run

NULL = "example.com/null"


@asynccontextmanager
async def node(tmp_path: Path, *plugins: RawPlugin, **kwargs: float) -> AsyncIterator[KubeletSimulator]:
    """A started simulator with every plugin served, registered and listed."""
    sim = KubeletSimulator(tmp_path, **kwargs)
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


def pod(uid: str, count: int = 2, resource: str = NULL) -> Pod:
    return Pod(uid, f"pod-{uid}", [Container("main", {resource: count})])


def test_allocate_without_preferred_allocation(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = RawPlugin(tmp_path)
        async with node(tmp_path, plugin) as sim:
            first = (await sim.admit(pod("p1")))["main"]
            second = (await sim.admit(pod("p2")))["main"]
            assert len(first.device_ids[NULL]) == 2
            assert set(first.device_ids[NULL]).isdisjoint(second.device_ids[NULL])
            assert first.preferred == {}
            assert [list(r.container_requests[0].devices_ids) for r in plugin.requests["Allocate"]] == [
                first.device_ids[NULL],
                second.device_ids[NULL],
            ]
            assert all(len(r.container_requests) == 1 for r in plugin.requests["Allocate"])
            assert plugin.requests["GetPreferredAllocation"] == []
            assert first.allocation.envs["DEVICES"] == ",".join(first.device_ids[NULL])
            assert first.allocation.devices[0] == DeviceSpec(f"/dev/{first.device_ids[NULL][0]}")
            assert [c.method for c in sim.calls] == ["Allocate", "Allocate"]
            assert sim.calls[0].request == {"container_requests": [{"devices_ids": first.device_ids[NULL]}]}
            with pytest.raises(AdmissionError) as caught:
                await sim.admit(pod("p3", 1))
            assert caught.value.reason == "UnexpectedAdmissionError"
            assert caught.value.message == (
                "Allocate failed due to requested number of devices unavailable for example.com/null. "
                "Requested: 1, Available: 0, which is unexpected"
            )

    run(main())


def test_unhealthy_devices_are_not_allocated(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = RawPlugin(tmp_path, devices=[device("a"), device("b", "Unhealthy"), device("c")])
        async with node(tmp_path, plugin) as sim:
            got = (await sim.admit(pod("p1")))["main"]
            assert got.device_ids[NULL] == ["a", "c"]

    run(main())


def test_preferred_allocation_is_asked_and_honoured(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = RawPlugin(tmp_path, preferred_available=True)
        plugin.preferred_answer = lambda r: ["dev-3", "dev-1"]
        async with node(tmp_path, plugin) as sim:
            got = (await sim.admit(pod("p1")))["main"]
            assert got.device_ids[NULL] == ["dev-1", "dev-3"]
            assert got.preferred == {NULL: ["dev-3", "dev-1"]}
            request = plugin.requests["GetPreferredAllocation"][0].container_requests[0]
            assert sorted(request.available_deviceIDs) == ["dev-0", "dev-1", "dev-2", "dev-3"]
            assert list(request.must_include_deviceIDs) == []
            assert request.allocation_size == 2
            assert [c.method for c in sim.calls] == ["GetPreferredAllocation", "Allocate"]
            assert sim.calls[0].response == {"container_responses": [{"deviceIDs": ["dev-3", "dev-1"]}]}

    run(main())


def test_preferred_answer_is_intersected_and_topped_up(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = RawPlugin(tmp_path, preferred_available=True)
        plugin.preferred_answer = lambda r: ["dev-2", "no-such-device"]
        async with node(tmp_path, plugin) as sim:
            got = (await sim.admit(pod("p1", 3)))["main"]
            assert len(got.device_ids[NULL]) == 3
            assert "dev-2" in got.device_ids[NULL]
            assert "no-such-device" not in got.device_ids[NULL]

    run(main())


def test_preferred_allocation_error_fails_admission(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = RawPlugin(tmp_path, preferred_available=True)
        plugin.fail["GetPreferredAllocation"] = grpc.StatusCode.INTERNAL
        async with node(tmp_path, plugin) as sim:
            with pytest.raises(AdmissionError) as caught:
                await sim.admit(pod("p1"))
            assert caught.value.message == (
                "Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: "
                "rpc error: code = Internal desc = GetPreferredAllocation refused by test, which is unexpected"
            )
            assert plugin.requests["Allocate"] == []
            assert sim.calls[-1].error is not None

    run(main())


def test_allocate_error_fails_admission_and_frees_devices(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = RawPlugin(tmp_path)
        async with node(tmp_path, plugin) as sim:
            plugin.fail["Allocate"] = grpc.StatusCode.UNKNOWN
            with pytest.raises(AdmissionError) as caught:
                await sim.admit(pod("p1", 4))
            assert caught.value.message == (
                "Allocate failed due to rpc error: code = Unknown desc = Allocate refused by test, which is unexpected"
            )
            del plugin.fail["Allocate"]
            got = (await sim.admit(pod("p2", 4)))["main"]
            assert len(got.device_ids[NULL]) == 4

    run(main())


def test_allocate_without_container_response_fails(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = RawPlugin(tmp_path)
        plugin.empty_allocate = True
        async with node(tmp_path, plugin) as sim:
            with pytest.raises(AdmissionError) as caught:
                await sim.admit(pod("p1"))
            assert caught.value.message == (
                "Allocate failed due to no containers return in allocation response "
                "&AllocateResponse{ContainerResponses:[]*ContainerAllocateResponse{},}, which is unexpected"
            )

    run(main())


def test_unregistered_resource_is_admitted_without_devices(tmp_path: Path) -> None:
    """The real kubelet drops extended resources missing from the node before its predicates
    (removeMissingExtendedResources in lifecycle/predicate.go, "kubelet will not fail admission
    while it should"), and the device manager skips them: tests/e2e/test_fidelity.py saw it."""

    async def main() -> None:
        async with node(tmp_path) as sim:
            admitted = await sim.admit(pod("p1", 1, "example.com/absent"))
            assert all(not a.device_ids for a in admitted.values())
            assert sim.calls == []

    run(main())


def test_allocations_merge_across_resources_first_wins(tmp_path: Path) -> None:
    async def main() -> None:
        gpu = RawPlugin(tmp_path, "example.com/gpu", [device("g0")])
        nic = RawPlugin(tmp_path, "example.com/nic", [device("n0")])
        gpu.grant_env, nic.grant_env = {"SHARED": "gpu"}, {"SHARED": "nic"}
        gpu.grant_mount, nic.grant_mount = ("/opt/gpu", "/opt/lib"), ("/opt/nic", "/opt/lib")
        async with node(tmp_path, gpu, nic) as sim:
            spec = Pod("p1", "both", [Container("main", {"example.com/gpu": 1, "example.com/nic": 1})])
            got = (await sim.admit(spec))["main"]
            assert got.device_ids == {"example.com/gpu": ["g0"], "example.com/nic": ["n0"]}
            assert got.allocation.envs["SHARED"] == "gpu"
            assert list(got.allocation.mounts) == [Mount("/opt/gpu", "/opt/lib")]
            assert [d.container_path for d in got.allocation.devices] == ["/dev/g0", "/dev/n0"]

    run(main())


def test_pre_start_container_when_required(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = RawPlugin(tmp_path, pre_start_required=True)
        async with node(tmp_path, plugin, pre_start_timeout=0.5) as sim:
            got = (await sim.admit(pod("p1")))["main"]
            await sim.start_container("p1", "main")
            await sim.start_container("p1", "main")  # a restart of the container calls it again
            assert [list(r.devices_ids) for r in plugin.requests["PreStartContainer"]] == [got.device_ids[NULL]] * 2
            plugin.pre_start_delay = 2.0
            with pytest.raises(ContainerStartError, match="code = DeadlineExceeded"):
                await sim.start_container("p1", "main")
            plugin.pre_start_delay = 0.0
            plugin.fail["PreStartContainer"] = grpc.StatusCode.UNAVAILABLE
            with pytest.raises(ContainerStartError) as caught:
                await sim.start_container("p1", "main")
            assert str(caught.value) == (
                "device plugin PreStartContainer rpc failed with err: "
                "rpc error: code = Unavailable desc = PreStartContainer refused by test"
            )

    run(main())


def test_no_pre_start_unless_required(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = RawPlugin(tmp_path)
        async with node(tmp_path, plugin) as sim:
            await sim.admit(pod("p1"))
            await sim.start_container("p1", "main")
            assert plugin.requests["PreStartContainer"] == []

    run(main())


def test_removed_pod_frees_devices_at_next_allocation(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = RawPlugin(tmp_path)
        async with node(tmp_path, plugin) as sim:
            await sim.admit(pod("p1", 4))
            sim.remove_pod("p1")
            got = (await sim.admit(pod("p2", 4)))["main"]
            assert len(got.device_ids[NULL]) == 4
            assert list(sim.assignments()) == ["p2"]

    run(main())
