"""Pydantic models of the DRA objects (``resource.k8s.io``) kubedevice reads and writes.

Every apiVersion is parsed into one canonical shape, the one of ``resource.k8s.io/v1`` (the
shape of the API server's internal type), so validation, ``explain`` and the allocator are
written once and report the same field paths as the API server. ``to_document`` converts
back to the apiVersion the object came in. Unknown fields are refused, as ``kubectl`` does
with strict field validation.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from pydantic import with_config as _with_config
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

# pydantic takes only typing_extensions' TypedDict before Python 3.12; it depends on that package itself.
from typing_extensions import TypedDict

from ..apimachinery.meta import OBJECT_META_FIELDS
from ..boundedyaml import BoundedLoader, read_input
from ..errors import KubedeviceError, at, cannot_read
from . import apifields, features, godecode

GROUP = features.API_GROUP
VERSIONS = ("v1alpha3", "v1beta1", "v1beta2", "v1")
KINDS = (
    "DeviceClass",
    "ResourceSlice",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "DeviceTaintRule",
    "PodSchedulingContext",
)
# resource.Quantity's parser regex (apimachinery/pkg/api/resource/quantity.go).
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)\Z")
_QUANTITY_MESSAGE = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


Loc = tuple[int | str, ...]
"""Where in a document: keys and indexes of the ``v1`` shape; ``"[key]"`` after a key means the key itself."""


class DecodeError(KubedeviceError, ValueError):
    """A document the API server would refuse before validation (syntax, kind, unknown field).

    ``locs`` holds, per message, where in the document it is (empty: the document as a whole).
    """

    def __init__(self, messages: list[str], source: str = "", locs: list[Loc] | None = None) -> None:
        self.messages = messages
        self.source = source
        self.locs = locs if locs is not None else [() for _ in messages]
        prefix = f"{source}: " if source else ""
        super().__init__("; ".join(prefix + m for m in messages))

    def first(self) -> str:
        """The first problem with its place: what a command prints on its one error line."""
        return f"{self.source}: {self.messages[0]}" if self.source and self.messages else str(self)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


def _int64(value: Any) -> Any:
    """Go's decoder refuses a number past int64 (``strconv.ParseInt`` fails, ``v.OverflowInt``):
    the same wrong-type error as for ``2.0``, the number quoted (godecode renders it)."""
    if isinstance(value, int) and not isinstance(value, bool) and not godecode.is_int64(value):
        raise PydanticCustomError("int_type", "number out of the range of int64")
    return value


Int64 = Annotated[int, BeforeValidator(_int64)]
"""Every ``int64`` of the Go types (the DRA kinds have no other integer type)."""


# --- shared -------------------------------------------------------------------------------


def _strict_meta(value: Any) -> Any:
    """Refuse, as the API server's strict decoder does, an unknown metadata field and labels or
    annotations that are not string maps; the fields we do not model are otherwise kept as is."""
    if not isinstance(value, dict):
        return value
    unknown = [key for key in value if key not in OBJECT_META_FIELDS]
    if unknown:
        raise ValueError(f'unknown field "{unknown[0]}"')
    for key in ("labels", "annotations"):
        mapping = value.get(key)
        if mapping is not None and not (
            isinstance(mapping, dict) and all(isinstance(v, str) for v in mapping.values())
        ):
            raise ValueError(f"json: cannot unmarshal into Go struct field ObjectMeta.{key} of type map[string]string")
    return value


class ObjectMeta(BaseModel):
    """The metadata fields validation looks at, and its integers (decoded as Go's); the rest
    (labels, uid, ...) is kept as is."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)

    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    generation: Int64 | None = None
    deletion_grace_period_seconds: Int64 | None = None

    _strict = model_validator(mode="before")(_strict_meta)


class CELDeviceSelector(_Model):
    expression: str = ""


class DeviceSelector(_Model):
    cel: CELDeviceSelector | None = None


class OpaqueDeviceConfiguration(_Model):
    driver: str = ""
    parameters: Any = None


class DeviceConfiguration(_Model):
    opaque: OpaqueDeviceConfiguration | None = None


class NodeSelectorRequirement(_Model):
    key: str = ""
    operator: str = ""
    values: list[str] = Field(default_factory=list)


class NodeSelectorTerm(_Model):
    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list)


class NodeSelector(_Model):
    node_selector_terms: list[NodeSelectorTerm] = Field(default_factory=list)


# --- DeviceClass --------------------------------------------------------------------------


class DeviceClassSpec(_Model):
    selectors: list[DeviceSelector] = Field(default_factory=list)
    config: list[DeviceConfiguration] = Field(default_factory=list)
    suitable_nodes: NodeSelector | None = None  # v1alpha3 only
    extended_resource_name: str | None = None  # v1beta1 and later


class DeviceClass(_Model):
    api_version: str = f"{GROUP}/v1"
    kind: Literal["DeviceClass"] = "DeviceClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DeviceClassSpec = Field(default_factory=DeviceClassSpec)


# --- ResourceSlice ------------------------------------------------------------------------


class DeviceAttribute(_Model):
    """Exactly one of the value fields is set; the keys are the ones of the API."""

    int_: Int64 | None = Field(default=None, alias="int")
    bool_: bool | None = Field(default=None, alias="bool")
    string: str | None = None
    version: str | None = None
    ints: list[Int64] | None = None
    bools: list[bool] | None = None
    strings: list[str] | None = None
    versions: list[str] | None = None

    def as_value(self) -> dict[str, Any]:
        """The one-key form the CEL engine takes (``{"int": 5}``), lists shared with the model.

        Read from the fields that were set (one, unless the attribute is invalid): pydantic's dump
        cost ten times as much, and the allocator reads every attribute of every device it meets
        (benchmarks/allocate_vs_go.py). Several set fields come in field order, as the dump has them."""
        values, given = self.__dict__, self.__pydantic_fields_set__
        if len(given) == 1:
            (name,) = given
            value = values[name]
            return {} if value is None else {VALUE_KEYS[name]: value}
        return {key: values[name] for name, key in VALUE_KEYS.items() if values[name] is not None}


VALUE_KEYS = {name: field.alias or name for name, field in DeviceAttribute.model_fields.items()}
"""Each field of :class:`DeviceAttribute` by its key in the API (``int_`` is ``int``)."""


def _quantity_text(value: Any) -> Any:
    """``resource.Quantity.UnmarshalJSON``: a JSON string or number that parses as a quantity."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return value  # the wrong JSON type: a type error after
    text = str(value)
    if not _QUANTITY.match(text):
        raise ValueError(_QUANTITY_MESSAGE)
    return text


Quantity = Annotated[str, BeforeValidator(_quantity_text)]

# The API's small structs, typed for strict decoding (unknown fields and wrong JSON types refused as
# the API server's decoder refuses them) but kept plain dicts, the shape validation, the allocator
# and the taint rules read; named after their Go types, which godecode's messages name
# (k8s.io/api/resource/v1/types.go).


@_with_config(ConfigDict(extra="forbid"))
class Counter(TypedDict, total=False):
    value: Quantity


@_with_config(ConfigDict(extra="forbid"))
class CounterSet(TypedDict, total=False):
    name: str
    counters: dict[str, Counter]


@_with_config(ConfigDict(extra="forbid"))
class DeviceCounterConsumption(TypedDict, total=False):
    counterSet: str
    counters: dict[str, Counter]
    compatibilityGroups: list[str] | None  # 1.37 (DRADeviceCompatibilityGroups)


@_with_config(ConfigDict(extra="forbid"))
class NodeAllocatableResourceMapping(TypedDict, total=False):
    """1.36's ``nodeAllocatableResourceMappings`` item (DRANodeAllocatableResources; replaced in 1.37)."""

    capacityKey: str | None
    allocationMultiplier: Quantity | None


@_with_config(ConfigDict(extra="forbid"))
class NodeAllocatableMapping(TypedDict, total=False):
    capacityKey: str | None
    capacityMultiplier: Quantity | None
    deviceMultiplier: Quantity | None


@_with_config(ConfigDict(extra="forbid"))
class NodeAllocatableOverhead(TypedDict, total=False):
    perPod: Quantity | None
    perContainer: Quantity | None


@_with_config(ConfigDict(extra="forbid"))
class NodeAllocatableResource(TypedDict, total=False):
    """1.37's ``nodeAllocatableResources`` item (DRANodeAllocatableResources)."""

    mapping: NodeAllocatableMapping | None
    overhead: NodeAllocatableOverhead | None


@_with_config(ConfigDict(extra="forbid"))
class DeviceDerivedAttribute(TypedDict, total=False):
    """1.37's ``derivedAttributes`` item of a request (DRADerivedAttributes)."""

    name: str
    expression: str


@_with_config(ConfigDict(extra="forbid"))
class CapacityRequestPolicyRange(TypedDict, total=False):
    min: Quantity
    max: Quantity | None
    step: Quantity | None


@_with_config(ConfigDict(extra="forbid"))
class CapacityRequestPolicy(TypedDict, total=False):
    default: Quantity | None
    validValues: list[Quantity] | None
    validRange: CapacityRequestPolicyRange | None


@_with_config(ConfigDict(extra="forbid"))
class DeviceTaint(TypedDict, total=False):
    key: str
    value: str
    effect: str
    timeAdded: str | None


@_with_config(ConfigDict(extra="forbid"))
class DeviceToleration(TypedDict, total=False):
    key: str
    operator: str
    value: str
    effect: str
    tolerationSeconds: Int64 | None


class DeviceCapacity(_Model):
    value: Quantity = "0"
    request_policy: CapacityRequestPolicy | None = None


class Device(_Model):
    name: str = ""
    basic_missing: bool = Field(default=False, exclude=True, repr=False)
    """An old-style device (v1alpha3, v1beta1) that came without ``basic``: 1.31 and 1.32 require it."""
    attributes: dict[str, DeviceAttribute] = Field(default_factory=dict)
    capacity: dict[str, DeviceCapacity] = Field(default_factory=dict)
    consumes_counters: list[DeviceCounterConsumption] | None = None
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    taints: list[DeviceTaint] | None = None
    binding_conditions: list[str] | None = None
    binding_failure_conditions: list[str] | None = None
    binds_to_node: bool | None = None
    allow_multiple_allocations: bool | None = None
    node_allocatable_resource_mappings: dict[str, NodeAllocatableResourceMapping] | None = None  # 1.36 only
    node_allocatable_resources: dict[str, NodeAllocatableResource] | None = None  # 1.37


class ResourcePool(_Model):
    name: str = ""
    generation: Int64 = 0
    resource_slice_count: Int64 = 0


class ResourceSliceSpec(_Model):
    driver: str = ""
    pool: ResourcePool = Field(default_factory=ResourcePool)
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: list[Device] = Field(default_factory=list)
    shared_counters: list[CounterSet] | None = None
    partition_type_attribute: str | None = None  # 1.37 (DRAPartitionableDevicesType)
    skip_node_operations: list[str] | None = None  # 1.37 (DRAOptionalNodeOperations)


class ResourceSlice(_Model):
    api_version: str = f"{GROUP}/v1"
    kind: Literal["ResourceSlice"] = "ResourceSlice"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceSliceSpec = Field(default_factory=ResourceSliceSpec)


# --- ResourceClaim ------------------------------------------------------------------------


class CapacityRequirements(_Model):
    """``capacity`` of a request: how much of each capacity of a shareable device it consumes."""

    requests: dict[str, Quantity] = Field(default_factory=dict)


class ExactDeviceRequest(_Model):
    device_class_name: str = ""
    selectors: list[DeviceSelector] = Field(default_factory=list)
    allocation_mode: str = ""
    count: Int64 = 0
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] | None = None
    capacity: CapacityRequirements | None = None  # v1beta2 and v1 since 1.34 (DRAConsumableCapacity)
    derived_attributes: list[DeviceDerivedAttribute] | None = None  # 1.37 (DRADerivedAttributes)


class DeviceSubRequest(ExactDeviceRequest):
    name: str = ""


class DeviceRequest(_Model):
    name: str = ""
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] = Field(default_factory=list)


class DeviceConstraint(_Model):
    requests: list[str] = Field(default_factory=list)
    match_attribute: str | None = None
    distinct_attribute: str | None = None


class DeviceClaimConfiguration(_Model):
    requests: list[str] = Field(default_factory=list)
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClaim(_Model):
    requests: list[DeviceRequest] = Field(default_factory=list)
    constraints: list[DeviceConstraint] = Field(default_factory=list)
    config: list[DeviceClaimConfiguration] = Field(default_factory=list)


class ResourceClaimSpec(_Model):
    devices: DeviceClaim = Field(default_factory=DeviceClaim)
    controller: str | None = None  # 1.31's v1alpha3 only (classic DRA, DRAControlPlaneController)


@_with_config(ConfigDict(extra="forbid"))
class Condition(TypedDict, total=False):
    """``metav1.Condition``: decoded strictly, then cleared with the status on create."""

    type: str
    status: str
    observedGeneration: Int64
    lastTransitionTime: str | None
    reason: str
    message: str


# A claim's status, as far as decoding goes: the API server decodes it on create (a number past int64
# or a quantity that does not parse fails the request) and then clears it; ``allocate`` and
# ``available`` read its allocation. Its integers and quantities are typed, the rest is kept as
# given (extra="allow": a newer release's fields pass, unlike the spec's).


@_with_config(ConfigDict(extra="allow"))
class DeviceRequestAllocationResult(TypedDict, total=False):
    tolerations: list[DeviceToleration] | None
    consumedCapacity: dict[str, Quantity] | None


@_with_config(ConfigDict(extra="allow"))
class DeviceAllocationResult(TypedDict, total=False):
    results: list[DeviceRequestAllocationResult] | None


@_with_config(ConfigDict(extra="allow"))
class AllocationResult(TypedDict, total=False):
    devices: DeviceAllocationResult


@_with_config(ConfigDict(extra="allow"))
class AllocatedDeviceStatus(TypedDict, total=False):
    conditions: list[Condition] | None


@_with_config(ConfigDict(extra="allow"))
class ResourceClaimStatus(TypedDict, total=False):
    allocation: AllocationResult | None
    devices: list[AllocatedDeviceStatus] | None


class ResourceClaim(_Model):
    api_version: str = f"{GROUP}/v1"
    kind: Literal["ResourceClaim"] = "ResourceClaim"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)
    if TYPE_CHECKING:  # readers (allocator, available, pods) treat it as the plain dict it is
        status: dict[str, Any] | None = None
    else:  # decoded through the typed structs above
        status: ResourceClaimStatus | None = None


class ClaimTemplateMeta(_Model):
    """``ResourceClaimTemplateSpec.metadata``: only labels and annotations reach the claim (controller.go)."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)

    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    _strict = model_validator(mode="before")(_strict_meta)


class ResourceClaimTemplateSpec(_Model):
    metadata: ClaimTemplateMeta = Field(default_factory=ClaimTemplateMeta)
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(_Model):
    api_version: str = f"{GROUP}/v1"
    kind: Literal["ResourceClaimTemplate"] = "ResourceClaimTemplate"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceClaimTemplateSpec = Field(default_factory=ResourceClaimTemplateSpec)


# --- DeviceTaintRule (v1alpha3, v1beta2 from 1.36, v1 from 1.37) --------------------------


class DeviceTaintSelector(_Model):
    device_class_name: str | None = None  # 1.34's v1alpha3 only (tombstoned in 1.35)
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    selectors: list[DeviceSelector] | None = None  # 1.34's v1alpha3 only (tombstoned in 1.35)


class DeviceTaintRuleSpec(_Model):
    device_selector: DeviceTaintSelector | None = None
    taint: DeviceTaint = Field(default_factory=DeviceTaint)


class DeviceTaintRuleStatus(_Model):
    """From 1.35 (not in 1.34's v1alpha3); the API server resets it on create (``PrepareForCreate``)."""

    conditions: list[Condition] | None = None


class DeviceTaintRule(_Model):
    api_version: str = f"{GROUP}/v1"
    kind: Literal["DeviceTaintRule"] = "DeviceTaintRule"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DeviceTaintRuleSpec = Field(default_factory=DeviceTaintRuleSpec)
    status: DeviceTaintRuleStatus | None = None


# --- PodSchedulingContext (1.31's v1alpha3 only: classic DRA) ------------------------------


@_with_config(ConfigDict(extra="forbid"))
class ResourceClaimSchedulingStatus(TypedDict, total=False):
    name: str
    unsuitableNodes: list[str] | None


class PodSchedulingContextSpec(_Model):
    selected_node: str = ""
    potential_nodes: list[str] = Field(default_factory=list)


class PodSchedulingContextStatus(_Model):
    resource_claims: list[ResourceClaimSchedulingStatus] | None = None


class PodSchedulingContext(_Model):
    """Classic DRA's negotiation between the scheduler and a driver's controller: served in 1.31,
    whatever ``DRAControlPlaneController`` says, and gone with classic DRA in 1.32."""

    api_version: str = f"{GROUP}/v1alpha3"
    kind: Literal["PodSchedulingContext"] = "PodSchedulingContext"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSchedulingContextSpec = Field(default_factory=PodSchedulingContextSpec)
    status: PodSchedulingContextStatus | None = None


# --- core/v1: the Pod and Node fields scheduling with DRA reads -----------------------------


class _CoreModel(BaseModel):
    """A core/v1 object is read, never validated: fields we do not model are ignored, not refused."""

    model_config = ConfigDict(extra="ignore", alias_generator=to_camel, populate_by_name=True)


class ResourceRequirements(_CoreModel):
    requests: dict[str, str | int] = Field(default_factory=dict)
    limits: dict[str, str | int] = Field(default_factory=dict)


class Container(_CoreModel):
    name: str = ""
    restart_policy: str | None = None
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)


class PodResourceClaim(_CoreModel):
    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodResourceClaimStatus(_CoreModel):
    name: str = ""
    resource_claim_name: str | None = None


class PodSpec(_CoreModel):
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    resource_claims: list[PodResourceClaim] = Field(default_factory=list)
    node_name: str = ""


class PodStatus(_CoreModel):
    resource_claim_statuses: list[PodResourceClaimStatus] = Field(default_factory=list)


class Pod(_CoreModel):
    api_version: str = "v1"
    kind: Literal["Pod"] = "Pod"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)


class NodeMeta(_CoreModel):
    name: str = ""
    labels: dict[str, str] = Field(default_factory=dict)


class NodeStatus(_CoreModel):
    allocatable: dict[str, str | int] = Field(default_factory=dict)


class NodeObject(_CoreModel):
    """A Node: its labels (for node selectors) and ``status.allocatable`` (device-plugin resources)."""

    api_version: str = "v1"
    kind: Literal["Node"] = "Node"
    metadata: NodeMeta = Field(default_factory=NodeMeta)
    status: NodeStatus = Field(default_factory=NodeStatus)


DRAObject = DeviceClass | ResourceSlice | ResourceClaim | ResourceClaimTemplate | DeviceTaintRule | PodSchedulingContext
_MODELS: dict[
    str,
    type[DeviceClass]
    | type[ResourceSlice]
    | type[ResourceClaim]
    | type[ResourceClaimTemplate]
    | type[DeviceTaintRule]
    | type[PodSchedulingContext],
] = {
    "DeviceClass": DeviceClass,
    "ResourceSlice": ResourceSlice,
    "ResourceClaim": ResourceClaim,
    "ResourceClaimTemplate": ResourceClaimTemplate,
    "DeviceTaintRule": DeviceTaintRule,
    "PodSchedulingContext": PodSchedulingContext,
}


def version_of(obj: DRAObject) -> str:
    return obj.api_version.rpartition("/")[2]


# --- version conversion (on plain dicts) --------------------------------------------------

_FLAT_REQUEST_FIELDS = (
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
    "capacity",
    "derivedAttributes",
)
_OLD_STYLE = ("v1alpha3", "v1beta1")  # flat requests and devices under "basic"


def _each(items: Any) -> Iterator[dict[str, Any]]:
    if isinstance(items, list):
        yield from (item for item in items if isinstance(item, dict))


def _indexed(items: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    """The objects of a list with their indexes (anything else holds none)."""
    if isinstance(items, list):
        yield from ((i, item) for i, item in enumerate(items) if isinstance(item, dict))


def _requests(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    devices = spec.get("devices")
    return _each(devices.get("requests") if isinstance(devices, dict) else None)


def _claim_up(spec: dict[str, Any], always: bool) -> None:
    """A flat request's fields under ``exactly``: where one is set (1.33 on, conversion.go), or
    always (``always``: 1.31 and 1.32, whose requests are all exact ones)."""
    for request in _requests(spec):
        flat = {k: request.pop(k) for k in _FLAT_REQUEST_FIELDS if k in request}
        if flat or always:
            request["exactly"] = flat


def _claim_down(spec: dict[str, Any]) -> None:
    for request in _requests(spec):
        request.update(request.pop("exactly", None) or {})


def _slice_up(spec: dict[str, Any], version: str) -> None:
    for device in _each(spec.get("devices")):
        if "basic" not in device:
            device["basicMissing"] = True
        basic = device.pop("basic", None)
        if isinstance(basic, dict):
            device.update(basic)
        if version == "v1alpha3" and isinstance(device.get("capacity"), dict):
            device["capacity"] = {k: {"value": v} for k, v in device["capacity"].items()}


def _slice_down(spec: dict[str, Any], version: str) -> None:
    for device in _each(spec.get("devices")):
        if version == "v1alpha3" and "capacity" in device:
            device["capacity"] = {k: v["value"] for k, v in device["capacity"].items()}
        rest = {k: device.pop(k) for k in list(device) if k != "name"}
        device["basic"] = rest


Problems = list[tuple[str, Loc]]
"""Decoding problems, each with where it is."""


def _to_canonical(kind: str, version: str, document: dict[str, Any], release: str) -> dict[str, Any]:
    doc = copy.deepcopy(document)
    spec = doc.get("spec")
    if isinstance(spec, dict) and version in _OLD_STYLE:
        flat_requests = not features.at_least(release, "1.33")  # the internal type's, before 1.33
        if kind == "ResourceClaim":
            _claim_up(spec, flat_requests)
        elif kind == "ResourceClaimTemplate" and isinstance(spec.get("spec"), dict):
            _claim_up(spec["spec"], flat_requests)
        elif kind == "ResourceSlice":
            _slice_up(spec, version)
    return doc


def to_document(obj: DRAObject) -> dict[str, Any]:
    """The object as a plain dict in its own apiVersion, ready for YAML or JSON."""
    doc = obj.model_dump(by_alias=True, exclude_none=True, exclude_defaults=False)
    doc["metadata"] = {k: v for k, v in doc["metadata"].items() if v not in ("", None)}
    doc["spec"] = _without_empty(doc["spec"])
    version = version_of(obj)
    if version in _OLD_STYLE:
        if isinstance(obj, ResourceClaim):
            _claim_down(doc["spec"])
        elif isinstance(obj, ResourceClaimTemplate):
            _claim_down(doc["spec"].get("spec", {}))
        elif isinstance(obj, ResourceSlice):
            _slice_down(doc["spec"], version)
    return doc


def _without_empty(value: Any) -> Any:
    """Drop empty lists and maps, as the API's ``omitempty`` does in what ``kubectl`` prints.

    Opaque ``parameters`` belong to the driver and are kept exactly as given.
    """
    if isinstance(value, dict):
        kept = {k: v if k == "parameters" else _without_empty(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if k == "parameters" or v not in ([], {})}
    if isinstance(value, list):
        return [_without_empty(item) for item in value]
    return value


# --- decoding -----------------------------------------------------------------------------


def _render_loc(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int) or "/" in part or "." in part or not part.isidentifier():
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


_TYPE_ERRORS = frozenset({"int_type", "bool_type", "string_type", "model_type", "list_type", "dict_type"})


def _pydantic_messages(error: ValidationError) -> Problems:
    messages: Problems = []
    for item in error.errors():
        loc = _loc(item)
        path = _render_loc(loc)
        if item["type"] == "extra_forbidden":
            messages.append((f'unknown field "{path}"', (*loc, "[key]")))
        else:
            detail = item["msg"].removeprefix("Value error, ")
            messages.append((f"{path}: Invalid value: {json.dumps(item.get('input'), default=str)}: {detail}", loc))
    return messages


def _loc(item: Any) -> tuple[int | str, ...]:
    return tuple(p for p in item["loc"] if not (isinstance(p, str) and p.startswith("function-")))


def _document_order(document: Any, loc: tuple[int | str, ...]) -> tuple[int, ...]:
    """Where ``loc`` is in the document, as key and item positions: Go reports the first problem it meets."""
    order: list[int] = []
    for part in loc:
        if isinstance(document, dict) and part in document:
            order.append(list(document).index(part))
            document = document[part]
        elif isinstance(document, list) and isinstance(part, int) and part < len(document):
            order.append(part)
            document = document[part]
        else:
            order.append(1 << 30)
            break
    return tuple(order)


def _times(kind: str, doc: dict[str, Any]) -> list[tuple[Any, Loc]]:
    """``metav1.Time`` values the decoder parses, with where they are: a device taint's
    ``timeAdded`` (k8s.io/api/resource/v1) and a DeviceTaintRule condition's ``lastTransitionTime``."""
    spec, status = doc.get("spec"), doc.get("status")
    times: list[tuple[Any, Loc]] = []
    if kind == "DeviceTaintRule" and isinstance(spec, dict) and isinstance(spec.get("taint"), dict):
        times.append((spec["taint"].get("timeAdded"), ("spec", "taint", "timeAdded")))
    if kind == "ResourceSlice" and isinstance(spec, dict):
        for i, device in _indexed(spec.get("devices")):
            for j, taint in _indexed(device.get("taints")):
                times.append((taint.get("timeAdded"), ("spec", "devices", i, "taints", j, "timeAdded")))
    if kind == "DeviceTaintRule" and isinstance(status, dict):
        for i, condition in _indexed(status.get("conditions")):
            times.append((condition.get("lastTransitionTime"), ("status", "conditions", i, "lastTransitionTime")))
    return [(value, loc) for value, loc in times if value is not None]


def _time_errors(kind: str, doc: dict[str, Any]) -> Problems:
    """What Go's ``time.Parse(time.RFC3339, …)`` says about each ``metav1.Time`` that does not parse."""
    errors: Problems = []
    for value, loc in _times(kind, doc):
        if not isinstance(value, str):
            kind_of = godecode.json_kind(value, "string")
            errors.append((f"json: cannot unmarshal {kind_of} into Go value of type string", loc))
            continue
        try:
            godecode.parse_rfc3339(value)
        except godecode.TimeParseError as error:
            errors.append((str(error), loc))
    return errors


def _decode_error(
    kind: str, version: str, doc: dict[str, Any], error: ValidationError | None
) -> tuple[str, Loc] | None:
    """The API server's one decoding error and where it is, or None when Go would decode the document.

    A ``metav1.Time`` that does not parse aborts decoding at once; wrong JSON types are saved and
    the first one in document order is reported (sigs.k8s.io/json, decode.go).
    """
    problems = _time_errors(kind, doc)
    if not problems and error is not None:
        typed = sorted(
            (_document_order(doc, _loc(item)), _loc(item), item.get("input"))
            for item in error.errors()
            if item["type"] in _TYPE_ERRORS
        )
        for _, loc, value in typed:
            message = godecode.type_error(_MODELS[kind], loc, value, version)
            if message:
                problems.append((message, loc))
                break
    if not problems:
        return None
    message, loc = problems[0]
    return f'{kind} in version "{version}" cannot be handled as a {kind}: {message}', loc


def from_document(document: Any, source: str = "", release: str = features.NEWEST) -> DRAObject:
    """Decode one parsed YAML/JSON document into its canonical model.

    Decoding is strict, as the API server's: no string for an int or a bool, no ``2.0`` for an
    int (pydantic's strict mode refuses what Go's decoder refuses), and a field the release's Go
    type lacks is unknown (:mod:`.apifields`, the table of every release's fields).
    """
    if not isinstance(document, dict):
        raise DecodeError([f"expected an object with apiVersion and kind, got {type(document).__name__}"], source)
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if not api_version or not kind:
        missing = [name for name, value in (("apiVersion", api_version), ("kind", kind)) if not value]
        raise DecodeError([f"Object 'Kind' is missing: {', '.join(missing)} not set"], source)
    for name, value in (("apiVersion", api_version), ("kind", kind)):
        if not isinstance(value, str):  # json.Unmarshal into apimachinery's anonymous apiVersion/kind struct
            what = godecode.json_kind(value, "string")
            raise DecodeError(
                [f"json: cannot unmarshal {what} into Go struct field .{name} of type string"], source, [(name,)]
            )
    group, _, version = str(api_version).rpartition("/")
    if group != GROUP or version not in VERSIONS:
        want = f"{GROUP}/{{{','.join(VERSIONS)}}}"
        raise DecodeError([f'no matches for apiVersion "{api_version}" (want {want})'], source, [("apiVersion",)])
    if kind not in _MODELS:
        want = ", ".join(KINDS)
        message = f'no matches for kind "{kind}" in version "{api_version}" (want {want})'
        raise DecodeError([message], source, [("kind",)])
    versioned = copy.deepcopy(document)
    problems: Problems = []
    if apifields.tree(kind, version, release):  # else not served there: the caller's to say
        unknown = apifields.strip_unknown(versioned, kind, version, release)  # ``x: null`` is unknown too
        problems = [(f'unknown field "{name}"', place) for name, place in unknown]
        apifields.drop_zero_scalars(versioned, kind, version, release)
    canonical = _to_canonical(kind, version, versioned, release)
    godecode.drop_nulls(_MODELS[kind], canonical)
    try:
        obj = _MODELS[kind].model_validate(canonical, strict=True)
    except ValidationError as error:
        decode = _decode_error(kind, version, canonical, error)
        raise _problems([decode] if decode else problems + _pydantic_messages(error), source) from None
    decode = _decode_error(kind, version, canonical, None)
    if decode or problems:
        raise _problems([decode] if decode else problems, source)
    _apply_defaults(obj)
    return obj


def _problems(problems: Problems, source: str) -> DecodeError:
    return DecodeError([message for message, _ in problems], source, [loc for _, loc in problems])


def _default_request(request: ExactDeviceRequest) -> None:
    """API-server defaulting: ExactCount of one device unless told otherwise."""
    if not request.allocation_mode:
        request.allocation_mode = "ExactCount"
    if request.allocation_mode == "ExactCount" and request.count == 0:
        request.count = 1
    for toleration in request.tolerations or []:
        if not toleration.get("operator"):  # ``+default="Equal"`` on DeviceToleration.Operator
            toleration["operator"] = "Equal"


def _counters(spec: ResourceSliceSpec) -> Iterator[dict[str, Counter]]:
    yield from (counter_set.get("counters") or {} for counter_set in spec.shared_counters or [])
    for device in spec.devices:
        yield from (used.get("counters") or {} for used in device.consumes_counters or [])


def _apply_defaults(obj: DRAObject) -> None:
    """What the API server stores that the document may leave out: a request's mode and count, a
    toleration's operator; a counter's ``value`` (a ``resource.Quantity``, zero when absent or null);
    1.36's ``SetDefaults_Device`` (``SetDefaults_BasicDevice`` in v1beta1), a node-allocatable
    mapping's ``allocationMultiplier``."""
    if isinstance(obj, ResourceSlice):
        for counters in _counters(obj.spec):
            for counter in counters.values():
                counter.setdefault("value", "0")
        for device in obj.spec.devices:
            for mapping in (device.node_allocatable_resource_mappings or {}).values():
                if mapping.get("allocationMultiplier") is None:
                    mapping["allocationMultiplier"] = "1"
    if isinstance(obj, ResourceClaim | ResourceClaimTemplate):
        devices = obj.spec.devices if isinstance(obj, ResourceClaim) else obj.spec.spec.devices
        for request in devices.requests:
            for sub in ([request.exactly] if request.exactly else []) + list(request.first_available):
                _default_request(sub)


class _LineLoader(BoundedLoader):
    """SafeLoader that remembers where each document starts, for error messages."""


def load_documents(text: str, source: str = "<input>") -> list[tuple[int, Any]]:
    """Parse YAML (or JSON) text into (first line, document) pairs, skipping empty documents.

    A ``List`` document (``kind: List`` or ``...List``) contributes its ``items``.
    """
    return [(node.start_mark.line + 1, document) for node, document in load_nodes(text, source)]


def load_nodes(text: str, source: str = "<input>") -> list[tuple[yaml.Node, Any]]:
    """Parse YAML (or JSON) text into (node, document) pairs, skipping empty documents: the node
    tree places each document's fields (line and column) for error messages.

    A ``List`` document (``kind: List`` or ``...List``) contributes its ``items``, each with its node.
    """
    documents: list[tuple[yaml.Node, Any]] = []
    try:
        loader = _LineLoader(text)  # refuses control characters already
    except yaml.reader.ReaderError as error:
        message = f"position {error.position}: unacceptable character #x{error.character:04x}"
        raise DecodeError([message], source) from None
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            documents.extend(_expand_list(node, loader.construct_document(node)))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = at(source, mark.line + 1, mark.column + 1) if mark else source
        raise DecodeError([f"{error.problem or error.context}"], where) from None
    except yaml.YAMLError as error:
        raise DecodeError([str(error)], source) from None
    finally:
        loader.dispose()
    return documents


def _expand_list(node: yaml.Node, document: Any) -> list[tuple[yaml.Node, Any]]:
    if document is None:
        return []
    if isinstance(document, dict) and str(document.get("kind", "")).endswith("List") and "items" in document:
        items = document["items"]
        items_node = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == "items"), node)
        if isinstance(items, list) and isinstance(items_node, yaml.SequenceNode):
            return list(zip(items_node.value, items, strict=True))
        return [(items_node, items)]
    return [(node, document)]


def load_text(text: str, source: str = "<input>") -> list[DRAObject]:
    """Every DRA object in a YAML/JSON text; kinds may be mixed in one multi-document file."""
    objects: list[DRAObject] = []
    errors: list[str] = []
    for line, document in load_documents(text, source):
        try:
            objects.append(from_document(document, f"{source}:{line}"))
        except DecodeError as error:
            errors.extend(f"{error.source}: {m}" for m in error.messages)
    if errors:
        raise DecodeError(errors)
    return objects


def load_file(path: str) -> list[DRAObject]:
    try:
        text = read_input(path)
    except (OSError, UnicodeDecodeError) as error:
        raise DecodeError([cannot_read(path, error)]) from None
    return load_text(text, path)


def dump(objects: list[DRAObject], fmt: Literal["yaml", "json"] = "yaml") -> str:
    """Serialise objects in their own apiVersions: a YAML stream or a JSON object/List."""
    return dump_documents([to_document(obj) for obj in objects], fmt)


def dump_documents(documents: list[dict[str, Any]], fmt: Literal["yaml", "json"] = "yaml") -> str:
    """Documents as a YAML stream, or one JSON object (a ``List`` of several)."""
    if fmt == "json":
        payload: Any = documents[0] if len(documents) == 1 else {"apiVersion": "v1", "kind": "List", "items": documents}
        return json.dumps(payload, indent=2) + "\n"
    return yaml.safe_dump_all(documents, sort_keys=False)


_T = TypeVar("_T", DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate)


def of_kind(objects: list[DRAObject], kind: type[_T]) -> list[_T]:
    return [obj for obj in objects if isinstance(obj, kind)]
