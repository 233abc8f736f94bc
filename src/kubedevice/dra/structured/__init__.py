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
"""

from .allocatedstate import allocated_devices
from .allocator import allocate
from .pools import Pool, gather_pools, node_selector_matches
from .types import (
    MAX_RESULTS,
    AllocationError,
    ClaimAllocation,
    DeviceID,
    DeviceResult,
    Node,
    SharedDevice,
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
    "SharedDevice",
    "Unallocatable",
    "allocate",
    "allocated_devices",
    "claim_ref",
    "gather_pools",
    "node_selector_matches",
]
