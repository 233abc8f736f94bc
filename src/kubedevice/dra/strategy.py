"""What the API server drops from a new object before validating it, per feature gate.

A field whose gate is off is not refused: ``dropDisabledFields`` of the REST strategy clears it
and the object is stored without it (pkg/registry/resource/resourceslice/strategy.go,
deviceclass/strategy.go, and pkg/api/resourceclaimspec/util.go for claims, kubernetes
v1.36.3). Only creation is modelled, so no old object keeps a field "in use". Where a release's
strategy code differs (1.34 below), the release passed in decides, not the gate set.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import features
from .models import DeviceClass, DRAObject, ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate, ResourceSlice


def _on(gates: Mapping[str, bool], name: str) -> bool:
    return bool(gates.get(name, False))


def _drop_slice(obj: ResourceSlice, gates: Mapping[str, bool]) -> None:
    spec = obj.spec
    if not _on(gates, "DRAPartitionableDevices"):
        spec.shared_counters = None
        spec.per_device_node_selection = None
    for device in spec.devices:
        if not _on(gates, "DRADeviceTaints"):
            device.taints = None
        if not _on(gates, "DRAPartitionableDevices"):
            device.consumes_counters = device.node_name = device.node_selector = device.all_nodes = None
        if not (_on(gates, "DRADeviceBindingConditions") and _on(gates, "DRAResourceClaimDeviceStatus")):
            device.binding_conditions = device.binding_failure_conditions = device.binds_to_node = None
        if not _on(gates, "DRAConsumableCapacity"):
            device.allow_multiple_allocations = None
            for capacity in device.capacity.values():
                capacity.request_policy = None
        if not _on(gates, _LIST_TYPE_ATTRIBUTES):  # dropDisableDRAListTypeAttributesFields (1.36, 1.37)
            for attribute in device.attributes.values():
                attribute.bools = attribute.ints = attribute.strings = attribute.versions = None


_LIST_TYPE_ATTRIBUTES = "DRAListTypeAttributes"
_LISTS = ("bools", "ints", "strings", "versions")


def _has_lists(obj: DRAObject) -> bool:
    """Whether a slice has a list attribute: only then does ``DRAListTypeAttributes`` off change it."""
    return isinstance(obj, ResourceSlice) and any(
        getattr(attribute, name) is not None
        for device in obj.spec.devices
        for attribute in device.attributes.values()
        for name in _LISTS
    )


def _drop_claim(spec: ResourceClaimSpec, gates: Mapping[str, bool], release: str) -> None:
    devices = spec.devices
    for request in devices.requests:
        exact = [request.exactly] if request.exactly is not None else []
        if not _on(gates, "DRAPrioritizedList"):
            request.first_available = []
        for one in [*exact, *request.first_available]:
            # 1.34's claim strategies have no DRADeviceTaints case: tolerations are kept and validated
            # (resourceclaim/strategy.go, kubernetes v1.34.4); 1.35 drops them (resourceclaimspec/util.go).
            if not _on(gates, "DRADeviceTaints") and features.at_least(release, "1.35"):
                one.tolerations = None
            if not _on(gates, "DRAConsumableCapacity"):
                one.capacity = None
        for one in exact:
            if not _on(gates, "DRAAdminAccess"):
                one.admin_access = None
    if not _on(gates, "DRAConsumableCapacity") and features.at_least(release, "1.35"):
        # 1.34's strategies clear ``distinctAttribute`` on a copy (``for _, constaint := range ...
        # { constaint.DistinctAttribute = nil }`` in resourceclaim/strategy.go and
        # resourceclaimtemplate/strategy.go, kubernetes v1.34.4), so there the field is kept and
        # validated; 1.35 clears it by index. Found by the differential against a 1.34.4 API server.
        for constraint in devices.constraints:
            constraint.distinct_attribute = None


_GATES = (
    "DRAAdminAccess",
    "DRAConsumableCapacity",
    "DRADeviceBindingConditions",
    "DRADeviceTaints",
    "DRAExtendedResource",
    "DRAPartitionableDevices",
    "DRAPrioritizedList",
    "DRAResourceClaimDeviceStatus",
)


def drop_disabled_fields(obj: DRAObject, gates: Mapping[str, bool], release: str = features.NEWEST) -> DRAObject:
    """``obj`` as the API server of ``release`` would store it under ``gates``: a copy when a gate
    it reads is off, else ``obj`` itself (the driver validates every slice it publishes; no copy then)."""
    if all(_on(gates, name) for name in _GATES) and (_on(gates, _LIST_TYPE_ATTRIBUTES) or not _has_lists(obj)):
        return obj
    copy = obj.model_copy(deep=True)
    if isinstance(copy, ResourceSlice):
        _drop_slice(copy, gates)
    elif isinstance(copy, ResourceClaim):
        _drop_claim(copy.spec, gates, release)
    elif isinstance(copy, ResourceClaimTemplate):
        _drop_claim(copy.spec.spec, gates, release)
    elif isinstance(copy, DeviceClass) and not _on(gates, "DRAExtendedResource"):
        copy.spec.extended_resource_name = None
    return copy
