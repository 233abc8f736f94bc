"""The scheduler's structured-parameters allocator for one node: ``k8s.io/dynamic-resource-allocation/structured``.

A port of v0.37.2 (and v0.36.3 where 1.36 differs) in upstream's files, so each module opens
beside its Go twin (``internal/incubating/`` unless named):

- :mod:`.allocator`: ``allocator_incubating.go``'s search (``Allocate``, ``validateDeviceRequest``,
  ``allocateOne``, ``isSelectable``, ``allocateDevice``, ``rollbackDevice``); :mod:`.results` the
  tail of ``Allocate`` and ``createNodeSelector``;
- :mod:`.pools`: ``pools_incubating.go`` (``GatherPools``, ``buildPool``, counter sets);
- :mod:`.constraint`: ``constraint.go`` and ``matchAttributeConstraint``;
- :mod:`.consumable_capacity`: ``consumable_capacity.go``, and ``resource.Quantity`` as the
  allocator needs it;
- :mod:`.allocatedstate`: ``internal/allocatedstate.go`` with what the allocator tracks while it
  allocates (devices, capacity and counters); :mod:`.types`: ``schedulerapi/types.go`` and the results;
- :mod:`.gates`: which variant runs (``internal/{stable,incubating,experimental}``, picked by
  ``NewAllocator`` from the scheduler's ``AllocatorFeatures``); one class serves all three;
- :mod:`.taints`: ``resourceclaim/devicetoleration.go`` and ``taintPreventsAllocation``.

kubedevice's own: :mod:`.prune` (cuts that spare branches the scheduler walks in vain, each with
why it cannot change the answer) and :mod:`.reasons` (why claims cannot be allocated).

:func:`allocate` is the package's entry, as ``structured/allocator.go``'s ``NewAllocator`` and
``Allocate`` are upstream's: the variant from the gates, then the search.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterable, Iterator, Mapping, Sequence

from ..models import DeviceClass, ResourceClaim, ResourceSlice
from .allocatedstate import Ledger, allocated_devices
from .allocator import Allocator
from .gates import Features
from .pools import Pool, gather_pools, node_selector_matches
from .reasons import reason
from .results import allocation_results
from .shared import OneCall, Shared
from .types import (
    MAX_RESULTS,
    AllocationError,
    ClaimAllocation,
    DeviceID,
    DeviceResult,
    Node,
    SharedDevice,
    TooMany,
    Unallocatable,
    claim_ref,
)

__all__ = [
    "MAX_RESULTS",
    "AllocationError",
    "ClaimAllocation",
    "DeviceID",
    "DeviceResult",
    "Node",
    "Pool",
    "Shared",
    "SharedDevice",
    "Unallocatable",
    "allocate",
    "allocated_devices",
    "claim_ref",
    "gather_pools",
    "node_selector_matches",
]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while an allocation runs, back on after (if it was on).

    The search makes many short-lived objects and no reference cycles (tests/dra/test_allocator.py
    checks), so refcounting frees all of it; but those objects trigger collections, and each
    older-generation one walks the caller's whole heap (the decoded slices: tens of thousands of
    objects) to find nothing: a fifth of the CPU time of 100 claims on 1,000 devices
    (benchmarks/allocate_vs_go.py). An error path may leave a cycle (an exception's traceback);
    the next collection after this frees it.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def allocate(
    claims: Sequence[ResourceClaim],
    classes: Iterable[DeviceClass],
    slices: Iterable[ResourceSlice],
    node: Node,
    in_use: Iterable[DeviceID | SharedDevice] = (),
    *,
    features: Mapping[str, bool] | None = None,
    release: str | None = None,
    shared: Shared | None = None,
) -> list[ClaimAllocation]:
    """Allocate all ``claims`` together on ``node`` or raise :class:`Unallocatable` with a reason.

    ``in_use`` lists devices, and shares of devices, already allocated to other claims. Claims
    that already carry ``status.allocation`` are the caller's business: pass
    :func:`allocated_devices` of them as ``in_use``. ``features`` are Kubernetes
    feature gates by name (``DRAPartitionableDevices``, ``DRAConsumableCapacity``, ...) over
    :data:`~.gates.FEATURE_DEFAULTS`, the 1.37 defaults; ``release`` ("1.34".."1.37") where the
    allocator itself changed between releases (else guessed from the gates: :func:`~.gates.release_of`).
    ``shared``: what calls over the same classes and slices work out once (:mod:`.shared`; one
    per call without it).
    """
    enabled = Features.of(features, release)
    with collector_paused():
        return _allocate(claims, classes, slices, node, in_use, enabled=enabled, shared=shared or OneCall())


def _allocate(
    claims: Sequence[ResourceClaim],
    classes: Iterable[DeviceClass],
    slices: Iterable[ResourceSlice],
    node: Node,
    in_use: Iterable[DeviceID | SharedDevice],
    *,
    enabled: Features,
    shared: Shared,
) -> list[ClaimAllocation]:
    """:func:`allocate` with the collector paused: a function of its own so the search's objects
    are freed when it returns, before the collector is back on. Alive then, they counted as
    young objects, and the first allocation after ``gc.enable()`` walked them all to free
    nothing: 100-240 ms of a 1.2-1.9 s run of benchmarks/allocate_vs_go.py's ``matchAttribute``
    row at load 20 (``gc.callbacks``)."""
    pools = gather_pools(list(slices), node, enabled)
    alloc = Allocator(
        claims,
        {c.metadata.name: c for c in classes},
        pools,
        Ledger(in_use, shares=not enabled.stable, by_pool_name=enabled.before_137),
        node=node,
        features=enabled,
        shared=shared,
    )
    try:
        done = alloc.allocate_one(0, 0, 0, None)
    except TooMany:
        done = False
    if done:
        return allocation_results(alloc)
    invalid = [p for p in pools if p.invalid]
    if invalid:
        raise Unallocatable(
            f"invalid resource pools were encountered: {invalid[0].driver}/{invalid[0].name}: {invalid[0].invalid}"
        )
    raise Unallocatable(reason(alloc, node))
