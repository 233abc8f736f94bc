"""Preferred-allocation policies and the contract every answer must meet.

The kubelet asks for ``allocation_size`` IDs out of ``available``, including
``must_include``. It trusts nothing: it intersects the answer with what is available and
falls back to its own choice when short, so a wrong answer silently loses the plugin's
topology knowledge. The runtime therefore checks requests and answers here, around any
policy, and policies only decide *which* devices.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from ..api.convert import ids
from ..device import Device
from ..errors import KubedeviceError


class AllocationRequestError(KubedeviceError, ValueError):
    """A preferred-allocation request that contradicts itself or names unknown devices."""


def check_request(pool: AbstractSet[str], must_include: Sequence[str], size: int) -> None:
    """Refuse requests no answer can satisfy (``pool``: the available IDs), naming the offending IDs."""
    if size < 0:
        raise AllocationRequestError(f"allocation_size {size} is negative")
    must = set(must_include)
    missing = sorted(must - pool)
    if missing:
        raise AllocationRequestError(f"must_include devices not in available: {ids(missing)}")
    if size < len(must):
        raise AllocationRequestError(f"allocation_size {size} is smaller than the {len(must)} must_include devices")
    if size > len(pool):
        raise AllocationRequestError(f"allocation_size {size} is larger than the {len(pool)} available devices")


def check_answer(answer: Sequence[str], pool: AbstractSet[str], must_include: Sequence[str], size: int) -> None:
    """Raise ``ValueError`` if a policy's answer breaks the contract (a bug in the policy)."""
    chosen, must = set(answer), set(must_include)
    problems = []
    if len(chosen) != len(answer):
        problems.append("repeats devices")
    if len(answer) != size:
        problems.append(f"has {len(answer)} devices, not {size}")
    if not must <= chosen:
        problems.append(f"omits must_include {ids(must - chosen)}")
    outside = chosen - pool
    if outside:
        problems.append(f"names unavailable {ids(outside)}")
    if problems:
        raise ValueError(f"preferred allocation policy answer [{ids(answer)}] " + "; ".join(problems))


def pack_numa(available: Sequence[Device], must_include: Sequence[Device], size: int) -> list[str]:
    """Choose ``size`` devices on as few NUMA nodes as possible, deterministically.

    Must-include devices come first; then nodes already in use are filled, then the
    fullest remaining nodes (fewest nodes to cover the rest). Devices without topology
    count as a node of their own, used last. Ties break by node, then by device ID.
    """
    chosen = [d.id for d in must_include]
    taken = set(chosen)
    used_nodes = {n for d in must_include for n in d.numa_nodes}
    groups: dict[tuple[int, ...], list[str]] = defaultdict(list)
    for device in available:
        if device.id not in taken:
            groups[device.numa_nodes].append(device.id)

    def rank(key: tuple[int, ...]) -> tuple[bool, bool, int, tuple[int, ...]]:
        return (not key, not set(key) <= used_nodes, -len(groups[key]), key)

    for key in sorted(groups, key=rank):
        need = size - len(chosen)
        if need <= 0:
            break
        chosen.extend(heapq.nsmallest(need, groups[key]))  # the first few IDs, without sorting them all
    return chosen


class NumaPacking:
    """Mixin that offers GetPreferredAllocation with :func:`pack_numa` (the default policy)."""

    def preferred_allocation(
        self, available: Sequence[Device], must_include: Sequence[Device], size: int
    ) -> Sequence[str]:
        return pack_numa(available, must_include, size)
