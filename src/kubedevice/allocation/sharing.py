"""Preferred allocation for shared and NUMA-placed devices.

The answer is filled node by node — the nodes ``must_include`` already uses first, then the
best-fitting node, then the nearest by the kernel's SLIT distance — and inside a node replicas
are *spread* over distinct physical devices (NVIDIA's default for time-slicing) or *packed* onto
as few as possible. A :class:`Layout` (devices by NUMA node and physical device) is built once
per device-list change, so a request over 10,000 devices costs set operations, not a Python
loop over every device.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Literal

from ..device import Device, DeviceError, Health

Policy = Literal["spread", "pack"]
_NO_NODE = -1
_ID = attrgetter("id")


def physical(device: Device) -> str:
    """The physical device behind an ID (itself when unshared)."""
    return device.group if device.group is not None else device.id


def check_one_replica_per_device(devices: Sequence[Device]) -> None:
    """Refuse a container that would get two replicas of one physical device (NVIDIA #1208)."""
    seen: dict[str, list[str]] = {}
    for device in devices:
        seen.setdefault(physical(device), []).append(device.id)
    shared = {group: ids for group, ids in seen.items() if len(ids) > 1}
    if shared:
        detail = "; ".join(f"{', '.join(ids)} share {group}" for group, ids in sorted(shared.items()))
        raise DeviceError(f"at most one replica per physical device may be allocated: {detail}")


@dataclass(frozen=True, slots=True)
class Layout:
    """Device IDs by NUMA node and by physical device (groups in name order, replicas in ID order)."""

    node_ids: Mapping[int, frozenset[str]]
    node_groups: Mapping[int, Sequence[tuple[str, tuple[str, ...]]]]
    node_of: Mapping[str, int]
    unhealthy: frozenset[str]

    @classmethod
    def of(cls, devices: Iterable[Device]) -> Layout:
        groups: dict[int, dict[str, list[str]]] = {}
        node_of: dict[str, int] = {}
        unhealthy: list[str] = []
        for device in devices:
            node = device.numa_nodes[0] if device.numa_nodes else _NO_NODE
            groups.setdefault(node, {}).setdefault(physical(device), []).append(device.id)
            node_of[device.id] = node
            if device.health is not Health.HEALTHY:
                unhealthy.append(device.id)
        return cls(
            {n: frozenset(i for ids in g.values() for i in ids) for n, g in groups.items()},
            {n: [(name, tuple(g[name])) for name in sorted(g)] for n, g in groups.items()},
            node_of,
            frozenset(unhealthy),
        )


@dataclass(frozen=True, slots=True)
class SharingPolicy:
    """A ``preferred_allocation`` implementation; ``distances`` are SLIT rows per NUMA node."""

    policy: Policy = "spread"
    one_per_device: bool = False
    distances: Mapping[int, Sequence[int]] = field(default_factory=dict)

    def choose(
        self,
        available: Sequence[Device],
        must_include: Sequence[Device],
        size: int,
        layout: Layout | None = None,
    ) -> list[str]:
        """``size`` IDs from ``available``; pass the ``layout`` of all devices to skip rebuilding it."""
        chosen = [d.id for d in must_include][:size]
        layout = layout or Layout.of(available)
        free = set(map(_ID, available))
        free.difference_update(chosen)
        free.difference_update(layout.unhealthy)
        used: dict[str, int] = {}
        for device in must_include:
            used[physical(device)] = used.get(physical(device), 0) + 1
        anchors = [layout.node_of.get(d.id, _NO_NODE) for d in must_include]
        for node in self._node_order(layout, free, anchors, size - len(chosen)):
            if len(chosen) >= size:
                break
            chosen.extend(self._take(layout.node_groups[node], free, used, size - len(chosen)))
        if len(chosen) < size:  # only one_per_device can fall short: answer in full, Allocate refuses
            taken = set(chosen)
            chosen.extend([d.id for d in available if d.id not in taken][: size - len(chosen)])
        return chosen

    def _node_order(self, layout: Layout, free: set[str], anchors: Sequence[int], need: int) -> list[int]:
        """Nodes already in use, then the smallest node that fits, then the nearest ones."""
        counts = _free_per_node(layout, free)
        order = list(dict.fromkeys(n for n in anchors if n in counts))
        rest = [n for n in counts if n not in order]
        if not order and rest:
            first = self._best_fit(layout, free, counts, rest, need)
            order.append(first)
            rest.remove(first)
        origin = order[0] if order else _NO_NODE
        rest.sort(key=lambda n: (n == _NO_NODE, self._distance(origin, n), -counts[n], n))
        return order + rest

    def _best_fit(
        self, layout: Layout, free: set[str], counts: Mapping[int, int], candidates: Sequence[int], need: int
    ) -> int:
        """The smallest node that holds the request — on distinct physical devices when spreading."""
        placed = sorted((n for n in candidates if n != _NO_NODE), key=lambda n: (counts[n], n))
        if self.policy == "spread" or self.one_per_device:
            for node in placed:
                if _distinct_at_least(layout.node_groups[node], free, need):
                    return node
        for node in placed:
            if counts[node] >= need:
                return node
        return max(candidates, key=lambda n: (n != _NO_NODE, counts[n], -n))

    def _distance(self, origin: int, node: int) -> int:
        row = self.distances.get(origin)
        if row is None or not 0 <= node < len(row):
            return 0
        return row[node]

    def _take(
        self, groups: Sequence[tuple[str, tuple[str, ...]]], free: set[str], used: dict[str, int], need: int
    ) -> list[str]:
        if self.one_per_device:
            groups = [(g, ids) for g, ids in groups if not used.get(g)]
            return _round_robin(groups, free, used, need, max_depth=1)
        if self.policy == "pack":
            return _pack(groups, free, used, need)
        ordered = [g for g in groups if g[0] not in used] + [g for g in groups if g[0] in used] if used else groups
        return _round_robin(ordered, free, used, need)


def _free_per_node(layout: Layout, free: set[str]) -> dict[int, int]:
    """Free IDs per node, counting the (usually few) missing IDs rather than the many free ones."""
    counts = {n: len(ids) for n, ids in layout.node_ids.items()}
    if len(free) * 2 < len(layout.node_of):
        return {n: c for n, ids in layout.node_ids.items() if (c := len(ids & free))}
    for missing in layout.node_of.keys() - free:
        counts[layout.node_of[missing]] -= 1
    return {n: c for n, c in counts.items() if c}


def _distinct_at_least(groups: Sequence[tuple[str, tuple[str, ...]]], free: set[str], need: int) -> bool:
    found = 0
    for _, ids in groups:
        if not free.isdisjoint(ids):
            found += 1
            if found >= need:
                return True
    return need <= 0


def _pack(groups: Sequence[tuple[str, tuple[str, ...]]], free: set[str], used: dict[str, int], need: int) -> list[str]:
    """Fill the physical devices already in use, then the ones with the most free replicas."""
    sized = [(g, [i for i in ids if i in free]) for g, ids in groups]
    sized.sort(key=lambda item: (-used.get(item[0], 0), -len(item[1])))
    taken: list[str] = []
    for group, members in sized:
        batch = members[: need - len(taken)]
        taken.extend(batch)
        used[group] = used.get(group, 0) + len(batch)
        if len(taken) >= need:
            break
    free.difference_update(taken)
    return taken


def _round_robin(
    groups: Sequence[tuple[str, tuple[str, ...]]],
    free: set[str],
    used: dict[str, int],
    need: int,
    max_depth: int | None = None,
) -> list[str]:
    """One free replica per physical device per round, least-used devices first."""
    taken: list[str] = []
    live = [(g, ids) for g, ids in groups if not free.isdisjoint(ids)] if need > len(groups) else list(groups)
    depth = 0
    while len(taken) < need and live and (max_depth is None or depth < max_depth):
        next_round = []
        for group, ids in live:
            pick = next((i for i in ids if i in free), None)
            if pick is None:
                continue
            taken.append(pick)
            free.discard(pick)
            used[group] = used.get(group, 0) + 1
            next_round.append((group, ids))
            if len(taken) >= need:
                break
        live = next_round
        depth += 1
    return taken
