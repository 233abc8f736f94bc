"""A Pod's ResourceClaims, as the resourceclaim controller and the scheduler make them.

The scheduler allocates for a pod, not for loose claims: a pod names claims
(``spec.resourceClaims[].resourceClaimName``), asks for one made from a ResourceClaimTemplate
(``resourceClaimTemplateName``), or asks for an extended resource in its containers that a
DeviceClass serves (DRA-backed extended resources). This module turns a Pod into that list of
claims, offline, exactly as Kubernetes v1.36.3 does:

- templates become claims as ``handleClaim`` in ``pkg/controller/resourceclaim/controller.go``
  makes them (``generateName`` ``<pod>-<pod claim>-`` truncated proportionally to 57 bytes,
  the pod as controlling owner, the template's labels and annotations plus
  ``resource.kubernetes.io/pod-claim-name``); a claim already recorded in
  ``status.resourceClaimStatuses`` is used instead (``resourceclaim.Name`` in
  k8s.io/dynamic-resource-allocation/resourceclaim);
- extended resources go through ``pkg/scheduler/framework/plugins/dynamicresources/
  extendeddynamicresources.go``: a resource maps to a class by its ``extendedResourceName`` or
  the implicit ``deviceclass.resource.kubernetes.io/<class>`` (the ``ExtendedResourceCache`` of
  k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache: of two classes with one
  name the newer wins, on a tie the smaller name); one request per container and resource
  (``container-<i>-request-<j>``), init containers reusing later long-lived containers'
  requests; a resource the node's device plugin serves (``status.allocatable`` above zero) is
  left to the device plugin.

Not modelled: PodGroups (``DRAWorkloadResourceClaims``, off by default), pod-level resources
(only cpu, memory and hugepages may be set there, none of them extended), and the resources
other pods on the node already use (``NodeResourcesFit`` compares with allocatable only here).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..cel.quantity import QuantityError, parse_quantity
from ..errors import KubedeviceError
from .models import (
    Container,
    DeviceClass,
    DeviceRequest,
    ExactDeviceRequest,
    NodeObject,
    ObjectMeta,
    Pod,
    PodResourceClaim,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimTemplate,
    ResourceSlice,
)
from .nodeclaims import POD_CLAIM_ANNOTATION
from .structured import DeviceID, Node, SharedDevice, Unallocatable, allocate

EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"  # ExtendedResourceClaimAnnotation
DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"  # resourceapi.ResourceDeviceClassPrefix
EXTENDED_CLAIM_NAME = "<extended-resources>"  # specialClaimInMemName: not a valid name on purpose
_MAX_BASE_LEN = 57  # room for "-" and five random characters in 63


class PodInputError(KubedeviceError, ValueError):
    """A pod refers to something the input does not hold, or to a feature that is off; or a Pod or
    Node whose fields scheduling reads do not decode (``loc``: where in the document)."""

    def __init__(self, message: str, loc: tuple[int | str, ...] = ()) -> None:
        super().__init__(message)
        self.loc = loc


@dataclass(frozen=True)
class PodClaim:
    """One claim of a pod; ``generated`` claims exist only here, so they carry ``generateName``."""

    claim: ResourceClaim
    pod_claim: str  # the entry of spec.resourceClaims; "" for the extended-resource claim
    generated: bool


@dataclass(frozen=True)
class PodClaims:
    """What the scheduler allocates for a pod, or why it does not even try (``unfit``)."""

    pod: Pod
    claims: tuple[PodClaim, ...]
    unfit: str | None = None


def pod_ref(pod: Pod) -> str:
    """``klog.KObj`` of the pod: ``namespace/name``."""
    meta = pod.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


def _uid(pod: Pod) -> str:
    return str((pod.metadata.model_extra or {}).get("uid", ""))


def _owner(pod: Pod) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "name": pod.metadata.name, "uid": _uid(pod), "controller": True}


def _owned_by(claim: ResourceClaim, pod: Pod) -> bool:
    """``metav1.IsControlledBy``: the controlling owner reference carries the pod's UID (and name)."""
    owners = (claim.metadata.model_extra or {}).get("ownerReferences") or []
    return any(
        isinstance(o, dict)
        and o.get("controller") is True
        and o.get("uid", "") == _uid(pod)
        and o.get("name") == pod.metadata.name
        for o in owners
    )


def _annotations(claim: ResourceClaim) -> Mapping[str, Any]:
    value = (claim.metadata.model_extra or {}).get("annotations")
    return value if isinstance(value, dict) else {}


def generate_name(pod_name: str, pod_claim: str) -> str:
    """``<pod>-<claim>-``, both parts cut in proportion when longer than 57 bytes (controller.go).

    The truncated form has no trailing hyphen, as upstream's.
    """
    name = f"{pod_name}-{pod_claim}-"
    if len(name.encode()) <= _MAX_BASE_LEN:
        return name
    total = len(name.encode())
    pod_bytes, claim_bytes = pod_name.encode(), pod_claim.encode()
    pod_cut = pod_bytes[: len(pod_bytes) * _MAX_BASE_LEN // total]
    claim_cut = claim_bytes[: len(claim_bytes) * _MAX_BASE_LEN // total]
    return (pod_cut + b"-" + claim_cut).decode(errors="ignore")


# --- claims named by the pod and made from templates --------------------------------------


def _find_claim(claims: Sequence[ResourceClaim], namespace: str, name: str) -> ResourceClaim | None:
    return next((c for c in claims if c.metadata.name == name and c.metadata.namespace == namespace), None)


def _from_template(pod: Pod, entry: PodResourceClaim, template: ResourceClaimTemplate) -> ResourceClaim:
    """The claim ``handleClaim`` creates: owned by the pod, the template's labels and annotations."""
    annotations = {**template.spec.metadata.annotations, POD_CLAIM_ANNOTATION: entry.name}
    base = generate_name(pod.metadata.name, entry.name)
    meta = ObjectMeta.model_validate(
        {
            # in memory under its generateName, so messages name it; dropped from the output
            "name": base,
            "generateName": base,
            "namespace": pod.metadata.namespace,
            "ownerReferences": [_owner(pod)],
            "annotations": annotations,
            **({"labels": dict(template.spec.metadata.labels)} if template.spec.metadata.labels else {}),
        }
    )
    spec = ResourceClaimSpec.model_validate(template.spec.spec.model_dump(by_alias=True))
    return ResourceClaim(metadata=meta, spec=spec)


def _check_template_features(template: ResourceClaimTemplate, features: Mapping[str, bool]) -> None:
    """``needsAdminAccess`` and ``hasPrioritizedList``: the controller refuses these when off."""
    requests = template.spec.spec.devices.requests
    if not features.get("DRAAdminAccess", True) and any(r.exactly and r.exactly.admin_access for r in requests):
        raise PodInputError("admin access is requested, but the feature is disabled")
    if not features.get("DRAPrioritizedList", True) and any(r.first_available for r in requests):
        raise PodInputError("template includes a prioritized list of subrequests, but the feature is disabled")


def _one_pod_claim(
    pod: Pod,
    index: int,
    entry: PodResourceClaim,
    *,
    claims: Sequence[ResourceClaim],
    templates: Sequence[ResourceClaimTemplate],
    features: Mapping[str, bool],
) -> PodClaim | None:
    namespace = pod.metadata.namespace
    where = f"pod {pod_ref(pod)}: spec.resourceClaims[{index}] ({entry.name})"
    if entry.resource_claim_name is not None:
        found = _find_claim(claims, namespace, entry.resource_claim_name)
        if found is None:
            raise PodInputError(f'{where}: ResourceClaim "{entry.resource_claim_name}" is not in the input')
        return PodClaim(found, entry.name, generated=False)
    if entry.resource_claim_template_name is None:
        raise PodInputError(f"{where}: none of the supported fields are set")
    recorded = next((s for s in pod.status.resource_claim_statuses if s.name == entry.name), None)
    if recorded is not None:
        if recorded.resource_claim_name is None:
            return None  # resourceclaim.Name: the controller decided no claim is needed
        found = _find_claim(claims, namespace, recorded.resource_claim_name)
        if found is not None and _owned_by(found, pod):
            return PodClaim(found, entry.name, generated=False)
    orphan = next(  # findPodResourceClaim: created before, pod status not yet updated
        (
            c
            for c in claims
            if c.metadata.namespace == namespace
            and _owned_by(c, pod)
            and _annotations(c).get(POD_CLAIM_ANNOTATION) == entry.name
        ),
        None,
    )
    if orphan is not None:
        return PodClaim(orphan, entry.name, generated=False)
    name = entry.resource_claim_template_name
    template = next((t for t in templates if t.metadata.name == name and t.metadata.namespace == namespace), None)
    if template is None:
        raise PodInputError(f'{where}: resource claim template "{name}" is not in the input')
    _check_template_features(template, features)
    return PodClaim(_from_template(pod, entry, template), entry.name, generated=True)


# --- extended resources -------------------------------------------------------------------


def resource_classes(classes: Sequence[DeviceClass]) -> dict[str, DeviceClass]:
    """``ExtendedResourceCache``: resource name -> class, explicit names and the implicit ones.

    Of two classes with one ``extendedResourceName`` the newer (``creationTimestamp``) wins and,
    on a tie, the smaller name; RFC 3339 timestamps in UTC order as strings.
    """
    mapping: dict[str, DeviceClass] = {}
    for device_class in classes:
        explicit = device_class.spec.extended_resource_name
        if explicit is not None:
            held = mapping.get(explicit)
            if held is None or _newer(device_class, held):
                mapping[explicit] = device_class
        mapping[DEVICE_CLASS_PREFIX + device_class.metadata.name] = device_class
    return mapping


def _newer(candidate: DeviceClass, held: DeviceClass) -> bool:
    def created(c: DeviceClass) -> str:
        return str((c.metadata.model_extra or {}).get("creationTimestamp") or "")

    if created(candidate) != created(held):
        return created(candidate) > created(held)
    return candidate.metadata.name < held.metadata.name


def _is_extended(name: str) -> bool:
    """``IsDRAExtendedResourceName``: an extended resource (a domain other than kubernetes.io), or a class's."""
    native = "/" not in name or "kubernetes.io/" in name
    return (not native and not name.startswith("requests.")) or name.startswith(DEVICE_CLASS_PREFIX)


def container_requests(container: Container) -> dict[str, str | int]:
    """Requests after ``SetDefaults_Pod`` (pkg/apis/core/v1/defaults.go): a limit without a request is both."""
    return {**container.resources.limits, **container.resources.requests}


def _value(quantity: str | int) -> int:
    """``Quantity.Value()``: rounded up to an integer."""
    return math.ceil(parse_quantity(str(quantity)).value)


def _as_int64(quantity: str | int) -> int:
    """``Quantity.AsInt64()``, 0 when it is not a whole int64 (createResourceRequestAndMappings skips those)."""
    return parse_quantity(str(quantity)).as_int64() or 0


def _sidecar(container: Container) -> bool:
    return container.restart_policy == "Always"


def pod_requests(pod: Pod) -> dict[str, int]:
    """``resourcehelper.PodRequests`` for the scalar resources: containers summed, init containers' peak.

    A sidecar (``restartPolicy: Always`` init container) adds to the sum and to what later
    init containers run beside (component-helpers/resource/helpers.go).
    """
    total: dict[str, int] = {}
    for container in pod.spec.containers:
        _add(total, container_requests(container))
    sidecars: dict[str, int] = {}
    peak: dict[str, int] = {}
    for container in pod.spec.init_containers:
        requests = container_requests(container)
        if _sidecar(container):
            _add(total, requests)
            _add(sidecars, requests)
            running = dict(sidecars)
        else:
            running = dict(sidecars)
            _add(running, requests)
        for name, value in running.items():
            peak[name] = max(peak.get(name, 0), value)
    return {name: max(total.get(name, 0), peak.get(name, 0)) for name in total.keys() | peak.keys()}


def _add(into: dict[str, int], requests: Mapping[str, str | int]) -> None:
    for name, quantity in requests.items():
        if "/" in name:  # the scalar resources; cpu, memory and the like are not this module's
            into[name] = into.get(name, 0) + _value(quantity)


def _container_request(
    index: int, container: Container, resource: str, class_name: str, reusable: Sequence[DeviceRequest | None]
) -> DeviceRequest | None:
    """``createResourceRequestAndMappings``: the devices this container needs beyond ``reusable``."""
    requests = container_requests(container)
    if resource not in requests:
        return None
    wanted = _as_int64(requests[resource])
    if wanted == 0:
        return None
    covered = 0
    for request in reusable:
        if request is not None and request.exactly is not None:
            covered += request.exactly.count
            if covered >= wanted:
                return None
    position = sorted(requests).index(resource)
    exact = ExactDeviceRequest(device_class_name=class_name, allocation_mode="ExactCount", count=wanted - covered)
    return DeviceRequest(name=f"container-{index}-request-{position}", exactly=exact)


def _count(request: DeviceRequest) -> int:
    return request.exactly.count if request.exactly is not None else 0


def extended_requests(pod: Pod, resources: Sequence[str], mapping: Mapping[str, DeviceClass]) -> list[DeviceRequest]:
    """``createRequestsAndMappings``: the special claim's requests, sorted by name as upstream sorts them."""
    containers = list(pod.spec.init_containers) + list(pod.spec.containers)
    inits = len(pod.spec.init_containers)
    short_lived = [i for i, c in enumerate(containers) if i < inits and not _sidecar(c)]
    long_lived = [i for i in range(len(containers)) if i not in short_lived]
    requests: list[DeviceRequest] = []
    for resource in sorted(resources):
        class_name = mapping[resource].metadata.name
        lasting: list[DeviceRequest | None] = [None] * len(containers)
        for i in long_lived:
            lasting[i] = _container_request(i, containers[i], resource, class_name, ())
        largest: DeviceRequest | None = None
        for i in short_lived:
            request = _container_request(i, containers[i], resource, class_name, lasting[i:])
            if request is not None and (largest is None or _count(largest) < _count(request)):
                largest = request
        requests += [largest] if largest is not None else []
        requests += [r for r in lasting if r is not None]
    return sorted(requests, key=lambda r: r.name)


def _extended_claim(pod: Pod) -> ResourceClaim:
    """``preFilterExtendedResources``' in-memory claim; ``filterExtendedResources`` adds the node's requests."""
    meta = ObjectMeta.model_validate(
        {
            "name": EXTENDED_CLAIM_NAME,
            "generateName": f"{pod.metadata.name}-extended-resources-",
            "namespace": pod.metadata.namespace,
            "ownerReferences": [_owner(pod)],
            "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
        }
    )
    return ResourceClaim(metadata=meta)


def _insufficient(requests: Mapping[str, int], allocatable: Mapping[str, int], to_dra: set[str]) -> str | None:
    """``NodeResourcesFit``, which runs before DynamicResources: a scalar resource neither served nor delegated."""
    for name in sorted(requests):
        if requests[name] and name not in to_dra and requests[name] > allocatable.get(name, 0):
            return f"Insufficient {name}"
    return None


def _extended(
    pod: Pod,
    claims: Sequence[ResourceClaim],
    classes: Sequence[DeviceClass],
    allocatable: Mapping[str, int],
    enabled: bool,
) -> tuple[PodClaim | None, str | None]:
    requests = {name: value for name, value in pod_requests(pod).items() if value}
    mapping = resource_classes(classes) if enabled else {}
    to_dra = {n for n in requests if _is_extended(n) and n in mapping and allocatable.get(n, 0) == 0}
    unfit = _insufficient(requests, allocatable, to_dra)
    if unfit is not None or not any(_is_extended(n) and n in mapping for n in requests):
        return None, unfit
    existing = next(  # findExtendedResourceClaim: one from an earlier scheduling attempt
        (c for c in claims if _annotations(c).get(EXTENDED_CLAIM_ANNOTATION) == "true" and _owned_by(c, pod)), None
    )
    if existing is not None and existing.spec.devices.requests:
        return None, "cannot schedule extended resource claim"  # stale: the scheduler deletes it first
    if existing is not None and (existing.status or {}).get("allocation"):
        return PodClaim(existing, "", generated=False), None
    if not to_dra:
        return None, None
    claim = existing.model_copy(deep=True) if existing is not None else _extended_claim(pod)
    claim.spec.devices.requests = extended_requests(pod, sorted(to_dra), mapping)
    return PodClaim(claim, "", generated=existing is None), None


def node_allocatable(node: NodeObject | None) -> dict[str, int]:
    """``status.allocatable`` of the scalar resources, as whole numbers."""
    if node is None:
        return {}
    try:
        return {name: _value(q) for name, q in node.status.allocatable.items() if "/" in name}
    except QuantityError as error:
        raise PodInputError(f"node {node.metadata.name}: status.allocatable: {error}") from None


def claims_for_pod(
    pod: Pod,
    *,
    claims: Sequence[ResourceClaim],
    templates: Sequence[ResourceClaimTemplate],
    classes: Sequence[DeviceClass],
    node: NodeObject | None = None,
    features: Mapping[str, bool] | None = None,
) -> PodClaims:
    """The pod's claims in ``spec.resourceClaims`` order, then the extended-resource claim.

    ``features`` are Kubernetes feature gates by name (``DRAExtendedResource``,
    ``DRAAdminAccess``, ``DRAPrioritizedList``); a gate not named is on, as in 1.36 and 1.37.
    Raises :class:`PodInputError` naming the pod and its claim when the input lacks something.
    """
    gates = features or {}
    found = []
    for index, entry in enumerate(pod.spec.resource_claims):
        pod_claim = _one_pod_claim(pod, index, entry, claims=claims, templates=templates, features=gates)
        if pod_claim is not None:
            found.append(pod_claim)
    try:
        extended, unfit = _extended(
            pod, claims, classes, node_allocatable(node), gates.get("DRAExtendedResource", True)
        )
    except QuantityError as error:
        raise PodInputError(f"pod {pod_ref(pod)}: container resources: {error}") from None
    if extended is not None:
        found.append(extended)
    return PodClaims(pod, tuple(found), unfit)


def reserved_for(claim: ResourceClaim, pod: Pod) -> ResourceClaim:
    """A copy of ``claim`` with the pod in ``status.reservedFor``, as the scheduler's ``bindClaim`` adds it."""
    copied = claim.model_copy(deep=True)
    status = copy.deepcopy(copied.status or {})
    entry = {"resource": "pods", "name": pod.metadata.name, "uid": _uid(pod)}
    status["reservedFor"] = [*status.get("reservedFor", []), entry]
    copied.status = status
    return copied


# --- scheduling one pod -------------------------------------------------------------------


def schedule(
    pod_claims: PodClaims,
    classes: Sequence[DeviceClass],
    slices: Sequence[ResourceSlice],
    node: Node,
    in_use: Iterable[DeviceID | SharedDevice] = (),
    *,
    features: Mapping[str, bool] | None = None,
) -> list[ResourceClaim]:
    """The pod's claims allocated together on ``node`` and reserved for the pod, or :class:`Unallocatable`.

    Claims already allocated keep their allocation (the scheduler only reserves them); the
    pending ones are allocated in one ``allocate`` call, as the scheduler's Filter does for a pod,
    with the same feature gates as the rest of the command.
    """
    if pod_claims.unfit is not None:
        raise Unallocatable(pod_claims.unfit)
    claims = [c.claim for c in pod_claims.claims]
    pending = [c for c in claims if not (c.status or {}).get("allocation")]
    allocated = allocate(pending, classes, slices, node, in_use, features=features) if pending else []
    results = {id(r.claim): r for r in allocated}
    scheduled = []
    for claim in claims:
        result = results.get(id(claim))
        done = claim
        if result is not None:
            done = result.claim.model_copy(deep=True)
            done.status = {**(done.status or {}), "allocation": result.as_status(node.name)}
        scheduled.append(reserved_for(done, pod_claims.pod))
    return scheduled


def decode_core(document: Any) -> Pod | NodeObject | None:
    """A core/v1 Pod or Node document as its model, None for any other document.

    Only the fields scheduling reads are modelled; a wrong type in one of them is a
    :class:`PodInputError` naming the field.
    """
    if not isinstance(document, dict) or document.get("apiVersion") != "v1":
        return None
    kind = document.get("kind")
    if kind not in ("Pod", "Node"):
        return None
    try:
        return Pod.model_validate(document) if kind == "Pod" else NodeObject.model_validate(document)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise PodInputError(f"{document['kind']} {where}: {first['msg']}", tuple(first["loc"])) from None
