"""What the API server drops from a new object before validating it, per feature gate.

A field whose gate is off is not refused: ``dropDisabledFields`` of the REST strategy clears it
and the object is stored without it (pkg/registry/resource/resourceslice/strategy.go,
deviceclass/strategy.go, and pkg/api/resourceclaimspec/util.go for claims, kubernetes v1.31.14
to v1.37.2). Only creation is modelled, so no old object keeps a field "in use". A gate drops its
fields only in a release that has the gate: 1.31's ``adminAccess`` has none and is kept. Where a
release's strategy code differs without a gate, the release passed in decides, not the gate set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import features
from .models import (
    Device,
    DeviceClass,
    DRAObject,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimTemplate,
    ResourceSlice,
)


class _Gates:
    """The gates of one release, and what dropping does: a gate is off when the release has it and
    it is not on. A probe (``apply=False``) only finds whether anything would be dropped, so an
    object with nothing to drop is not copied (a 128-device slice's deep copy is 40% of its
    validation)."""

    def __init__(self, gates: Mapping[str, bool], release: str, apply: bool) -> None:
        self.gates, self.release, self.apply = gates, release, apply
        self.changed = False

    def off(self, name: str) -> bool:
        return features.spec_at(name, self.release) is not None and not self.gates.get(name, False)

    def clear(self, holder: Any, *names: str, empty: Any = None) -> None:
        """Unset fields of a model: ``empty`` is their unset form (``[]`` for a list never None)."""
        unset: list[Any] | None = [] if isinstance(empty, list) else None
        for name in names:
            if getattr(holder, name) == unset:  # Go tells ``[]`` from nil: an empty list is dropped too
                continue
            self.changed = True
            if self.apply:
                setattr(holder, name, [] if isinstance(empty, list) else empty)

    def pop(self, mapping: dict[str, Any], key: str) -> None:
        if key in mapping:
            self.changed = True
            if self.apply:
                del mapping[key]


def _drop_slice(obj: ResourceSlice, gates: _Gates) -> None:
    spec = obj.spec
    if gates.off("DRAPartitionableDevices"):
        gates.clear(spec, "shared_counters", "per_device_node_selection")
    if gates.off("DRAPartitionableDevicesType"):
        gates.clear(spec, "partition_type_attribute")
    if gates.off("DRAOptionalNodeOperations"):
        gates.clear(spec, "skip_node_operations")
    for device in spec.devices:
        _drop_device(device, gates)


def _drop_device(device: Device, gates: _Gates) -> None:
    if gates.off("DRADeviceTaints"):
        gates.clear(device, "taints")
    if gates.off("DRADeviceCompatibilityGroups"):
        for consumption in device.consumes_counters or []:
            gates.pop(consumption, "compatibilityGroups")  # type: ignore[arg-type]
    if gates.off("DRAPartitionableDevices"):
        gates.clear(device, "consumes_counters", "node_name", "node_selector", "all_nodes")
    if gates.off("DRADeviceBindingConditions") or gates.off("DRAResourceClaimDeviceStatus"):
        gates.clear(device, "binding_conditions", "binding_failure_conditions", "binds_to_node")
    if gates.off("DRAConsumableCapacity"):
        gates.clear(device, "allow_multiple_allocations")
        for capacity in device.capacity.values():
            gates.clear(capacity, "request_policy")
    if gates.off("DRANodeAllocatableResources"):
        gates.clear(device, "node_allocatable_resource_mappings", "node_allocatable_resources")
    if gates.off("DRAListTypeAttributes"):
        for attribute in device.attributes.values():
            gates.clear(attribute, "bools", "ints", "strings", "versions")


def _drop_request(one: ExactDeviceRequest, gates: _Gates) -> None:
    # 1.34's claim strategies have no DRADeviceTaints case: tolerations are kept and validated
    # (resourceclaim/strategy.go, kubernetes v1.34.4); 1.35 drops them (resourceclaimspec/util.go).
    if gates.off("DRADeviceTaints") and features.at_least(gates.release, "1.35"):
        gates.clear(one, "tolerations")
    if gates.off("DRAConsumableCapacity"):
        gates.clear(one, "capacity")
    if gates.off("DRADerivedAttributes"):
        gates.clear(one, "derived_attributes")


def _drop_claim(spec: ResourceClaimSpec, gates: _Gates, template: bool) -> None:
    devices = spec.devices
    if gates.off("DRAControlPlaneController") and not template:  # 1.31: the template strategy keeps it
        gates.clear(spec, "controller")
    for request in devices.requests:
        exact = [request.exactly] if request.exactly is not None else []
        if gates.off("DRAPrioritizedList"):
            gates.clear(request, "first_available", empty=[])
        for one in [*exact, *request.first_available]:
            _drop_request(one, gates)
        for one in exact:
            if gates.off("DRAAdminAccess"):
                gates.clear(one, "admin_access")
    if gates.off("DRAConsumableCapacity") and features.at_least(gates.release, "1.35"):
        # 1.34's strategies clear ``distinctAttribute`` on a copy (``for _, constaint := range ...
        # { constaint.DistinctAttribute = nil }`` in resourceclaim/strategy.go and
        # resourceclaimtemplate/strategy.go, kubernetes v1.34.4), so there the field is kept and
        # validated; 1.35 clears it by index. Found by the differential against a 1.34.4 API server.
        for constraint in devices.constraints:
            gates.clear(constraint, "distinct_attribute")


def _drop_class(obj: DeviceClass, gates: _Gates) -> None:
    if gates.off("DRAExtendedResource"):
        gates.clear(obj.spec, "extended_resource_name")
    if gates.off("DRAControlPlaneController"):  # 1.31's v1alpha3 (deviceclass/strategy.go, v1.31.14)
        gates.clear(obj.spec, "suitable_nodes")


def _drop(obj: DRAObject, gates: _Gates) -> None:
    if isinstance(obj, ResourceSlice):
        _drop_slice(obj, gates)
    elif isinstance(obj, ResourceClaim):
        _drop_claim(obj.spec, gates, template=False)
    elif isinstance(obj, ResourceClaimTemplate):
        _drop_claim(obj.spec.spec, gates, template=True)
    elif isinstance(obj, DeviceClass):
        _drop_class(obj, gates)


def drop_disabled_fields(obj: DRAObject, gates: Mapping[str, bool], release: str = features.NEWEST) -> DRAObject:
    """``obj`` as the API server of ``release`` would store it under ``gates``: a copy when a gate
    of the release that is off drops a field it has, else ``obj`` itself (the driver validates
    every slice it publishes)."""
    probe = _Gates(gates, release, apply=False)
    _drop(obj, probe)
    if not probe.changed:
        return obj
    copy = obj.model_copy(deep=True)
    _drop(copy, _Gates(gates, release, apply=True))
    return copy
