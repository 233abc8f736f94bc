"""Preferred allocation: NUMA packing, SLIT distance, replica spread/pack, must-include."""

from __future__ import annotations

from collections import Counter

import pytest

from kubedevice.allocation.sharing import SharingPolicy, check_one_replica_per_device, physical
from kubedevice.device import Device, DeviceError, Health


def replicas(physical_ids: dict[str, int], per_device: int) -> list[Device]:
    """``per_device`` replicas of each physical device, keyed to its NUMA node."""
    return [
        Device(f"{name}::{i}", numa_nodes=(node,), group=name)
        for name, node in physical_ids.items()
        for i in range(per_device)
    ]


def groups_of(devices: list[Device], ids: list[str]) -> Counter[str]:
    index = {d.id: d for d in devices}
    return Counter(physical(index[i]) for i in ids)


def test_spread_puts_replicas_on_distinct_devices_of_one_node() -> None:
    devices = replicas({"a": 0, "b": 0, "c": 0, "d": 1}, 4)
    answer = SharingPolicy("spread").choose(devices, [], 3)
    assert groups_of(devices, answer) == Counter({"a": 1, "b": 1, "c": 1})


def test_pack_fills_one_device_first() -> None:
    devices = replicas({"a": 0, "b": 0}, 4)
    answer = SharingPolicy("pack").choose(devices, [], 3)
    assert list(groups_of(devices, answer).values()) == [3]


def test_pack_continues_on_the_device_must_include_already_uses() -> None:
    devices = replicas({"a": 0, "b": 0}, 4)
    answer = SharingPolicy("pack").choose(devices, [devices[5]], 3)  # b::1
    assert answer[0] == "b::1" and groups_of(devices, answer) == Counter({"b": 3})


def test_spread_avoids_the_device_must_include_already_uses() -> None:
    devices = replicas({"a": 0, "b": 0, "c": 0}, 2)
    answer = SharingPolicy("spread").choose(devices, [devices[0]], 3)
    assert answer[0] == "a::0" and groups_of(devices, answer) == Counter({"a": 1, "b": 1, "c": 1})


def test_numa_packing_picks_the_smallest_node_that_fits() -> None:
    devices = [Device(f"d{i}", numa_nodes=(0 if i < 6 else 1,)) for i in range(8)]
    answer = SharingPolicy().choose(devices, [], 2)
    assert {d.numa_nodes for d in devices if d.id in answer} == {(1,)}


def test_numa_spills_over_to_the_nearest_node_by_slit_distance() -> None:
    devices = [Device(f"n{node}-{i}", numa_nodes=(node,)) for node in range(4) for i in range(2)]
    distances = {0: (10, 30, 12, 40), 1: (30, 10, 40, 12), 2: (12, 40, 10, 30), 3: (40, 12, 30, 10)}
    answer = SharingPolicy(distances=distances).choose(devices, [devices[0]], 4)  # n0-0 already taken
    assert sorted(answer) == ["n0-0", "n0-1", "n2-0", "n2-1"]


def test_must_include_comes_first_and_unhealthy_devices_are_avoided() -> None:
    devices = [Device("x", Health.UNHEALTHY, (0,)), Device("y", numa_nodes=(0,)), Device("z", numa_nodes=(0,))]
    assert SharingPolicy().choose(devices, [devices[2]], 2) == ["z", "y"]


def test_one_per_device_prefers_distinct_devices_and_answers_in_full_when_it_cannot() -> None:
    devices = replicas({"a": 0, "b": 0}, 3)
    policy = SharingPolicy("pack", one_per_device=True)
    assert groups_of(devices, list(policy.choose(devices, [], 2))) == Counter({"a": 1, "b": 1})
    full = policy.choose(devices, [], 3)
    assert len(set(full)) == 3


def test_check_one_replica_per_device_names_the_offenders() -> None:
    devices = replicas({"a": 0, "b": 0}, 2)
    check_one_replica_per_device([devices[0], devices[2]])
    with pytest.raises(DeviceError, match=r"a::0, a::1 share a"):
        check_one_replica_per_device(devices[:2])


@pytest.mark.parametrize("policy", ["spread", "pack"])
@pytest.mark.parametrize("size", [2, 5, 17, 40])
def test_answers_are_valid_for_any_size(policy: str, size: int) -> None:
    devices = replicas({f"g{i}": i % 3 for i in range(10)}, 4)
    must = devices[3:5]
    answer = SharingPolicy(policy).choose(devices, must, size)  # type: ignore[arg-type]
    assert len(answer) == len(set(answer)) == size
    assert answer[:2] == [d.id for d in must]
    assert set(answer) <= {d.id for d in devices}
