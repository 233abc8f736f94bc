"""The allocator's feature switches, from Kubernetes' feature gate names.

``structured.Features`` as the scheduler's DRA plugin derives them from its gates
(``AllocatorFeatures`` in ``pkg/scheduler/framework/plugins/dynamicresources``, kubernetes
v1.36.3), shared by the allocator and ``explain``. Callers pass gates by name; the rest keep
:data:`FEATURE_DEFAULTS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .. import features

ALLOCATOR_GATES = (
    "DRAAdminAccess",
    "DRAPrioritizedList",
    "DRAPartitionableDevices",
    "DRADeviceTaints",
    "DRADeviceBindingConditions",
    "DRAResourceClaimDeviceStatus",
    "DRAConsumableCapacity",
    "DRAListTypeAttributes",
)
"""The gates the allocator reads. DRADeviceBindingConditions works only with
DRAResourceClaimDeviceStatus (the scheduler's AllocatorFeatures ANDs them)."""

FEATURE_DEFAULTS: Mapping[str, bool] = {name: features.defaults(features.NEWEST)[name] for name in ALLOCATOR_GATES}
"""The newest release's defaults for them (:mod:`kubedevice.dra.features`; 1.36 has the same)."""

GATES_SINCE_137 = tuple(sorted(set(features.defaults("1.37")) - set(features.defaults("1.36"))))
"""Gates that exist from 1.37 on: a gate table naming one is 1.37's."""


def release_of(gates: Mapping[str, bool] | None) -> str:
    """The release a gate table is from, when the caller does not say: 1.37 unless the table
    names DRA gates but none that 1.37 added (the tables of ``kubedevice.dra.features`` name
    every gate the release knows)."""
    if not gates or any(name in gates for name in GATES_SINCE_137):
        return "1.37"
    return "1.36"


@dataclass(frozen=True)
class Features:
    """``structured.Features`` as ``AllocatorFeatures`` in the scheduler's DRA plugin derives them."""

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = True
    device_taints: bool = True
    binding_conditions: bool = True
    consumable_capacity: bool = True
    list_type_attributes: bool = False
    before_137: bool = False  # v0.36: every counter-set slice counts, counters keyed by pool name

    @property
    def stable(self) -> bool:
        """Whether the scheduler runs ``internal/stable``: these features are all it lacks.

        ``structured.NewAllocator`` picks the first variant that supports every enabled feature;
        the stable one has admin access, prioritized lists, partitionable devices and taints only
        (as with 1.34's and 1.35's defaults).
        """
        return not (self.binding_conditions or self.consumable_capacity or self.list_type_attributes)

    @classmethod
    def of(cls, gates: Mapping[str, bool] | None, release: str | None = None) -> Features:
        """Kubernetes' gate names on top of :data:`FEATURE_DEFAULTS`, for ``release`` ("1.34".."1.37").

        The release matters where the allocator itself changed: 1.36's (v0.36) adds every
        counter-set slice of a pool, 1.37's only those that target the node (``GatherPools``),
        and 1.36's keys shared counters by pool name alone, 1.37's by driver and pool.
        Without ``release``, :func:`release_of` the gates.
        """
        on = {**FEATURE_DEFAULTS, **(gates or {})}
        minor = int((release or release_of(gates)).partition(".")[2] or 0)
        return cls(
            admin_access=on["DRAAdminAccess"],
            prioritized_list=on["DRAPrioritizedList"],
            partitionable_devices=on["DRAPartitionableDevices"],
            device_taints=on["DRADeviceTaints"],
            binding_conditions=on["DRADeviceBindingConditions"] and on["DRAResourceClaimDeviceStatus"],
            consumable_capacity=on["DRAConsumableCapacity"],
            list_type_attributes=on["DRAListTypeAttributes"],
            before_137=minor < 37,
        )
