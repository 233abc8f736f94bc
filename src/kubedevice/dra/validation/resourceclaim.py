"""``ValidateResourceClaim`` and the claim spec a template shares with it
(pkg/apis/resource/validation/validation.go: ``validateResourceClaimSpec``, ``validateDeviceClaim``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...apimachinery import meta
from ...apimachinery.field import ErrorList, Path, invalid, not_supported, required
from ...apimachinery.strfmt import resource_fully_qualified_name
from .. import features
from ..models import DeviceClaim, DeviceConstraint, ExactDeviceRequest, ResourceClaim, ResourceClaimSpec
from .common import (
    MAX_CONFIG,
    MAX_CONSTRAINTS,
    MAX_FIRST_AVAILABLE,
    MAX_REQUESTS,
    Gates,
    gates_or_defaults,
    metadata,
    validate_configuration,
    validate_dns_label,
    validate_dns_subdomain,
    validate_driver_name,
    validate_fully_qualified_name,
    validate_list,
    validate_selectors,
    validate_toleration,
)

ALLOCATION_MODES = ("All", "ExactCount")
_CONSTRAINT_MSG = 'exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set'
_REQUEST_REF_MSG = (
    "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
)


def validate_resource_claim(
    obj: ResourceClaim, gates: Gates | None = None, release: str = features.NEWEST
) -> ErrorList:
    errors = meta.validate_object_meta(metadata(obj.metadata), Path("metadata"), True, release)
    return errors + validate_claim_spec(obj.spec, Path("spec"), gates_or_defaults(gates, release), release)


def validate_claim_spec(spec: ResourceClaimSpec, path: Path, gated: Gates, release: str) -> ErrorList:
    """``validateResourceClaimSpec``: ``validateDeviceClaim`` (requests, constraints, config, each
    list in its limits), and 1.31's ``controller``."""
    spec_path, devices, path = path, spec.devices, path.child("devices")
    names = _request_names(devices)
    errors: ErrorList = []
    errors += validate_list(
        devices.requests,
        MAX_REQUESTS,
        lambda r, p: _validate_request(r, p, gated, release),
        path.child("requests"),
        release=release,
        key=lambda r: r.name,
        key_field="name",
    )
    errors += validate_list(
        devices.constraints,
        MAX_CONSTRAINTS,
        lambda c, p: _validate_constraint(c, p, names, gated, release),
        path.child("constraints"),
        release=release,
    )
    errors += validate_list(
        devices.config,
        MAX_CONFIG,
        lambda c, p: (
            _validate_refs(c.requests, p.child("requests"), names, release) + validate_configuration(c, p, release)
        ),
        path.child("config"),
        release=release,
    )
    if spec.controller:  # 1.31 (classic DRA): the driver that allocates the claim
        errors += validate_driver_name(spec.controller, spec_path.child("controller"), release)
    return errors


def _validate_allocation_mode(request: ExactDeviceRequest, path: Path) -> ErrorList:
    mode, count = request.allocation_mode, request.count
    if mode == "All":
        return (
            [invalid(path.child("count"), count, "must not be specified when allocationMode is 'All'")] if count else []
        )
    if mode == "ExactCount":
        return [invalid(path.child("count"), count, "must be greater than zero")] if count <= 0 else []
    return [not_supported(path.child("allocationMode"), mode, ALLOCATION_MODES)]


def _validate_exact(request: ExactDeviceRequest, path: Path, gates: Gates, release: str) -> ErrorList:
    """``validateExactDeviceRequest``; tolerations are checked without a size limit, as upstream."""
    name = request.device_class_name
    errors = (
        validate_dns_subdomain(name, path.child("deviceClassName"))
        if name
        else [required(path.child("deviceClassName"))]
    )
    errors += validate_selectors(request.selectors, path.child("selectors"), gates, release)
    errors += _validate_allocation_mode(request, path)
    for i, toleration in enumerate(request.tolerations or ()):
        errors += validate_toleration(toleration, path.child("tolerations").index(i), release)
    return errors


def _validate_request(request: Any, path: Path, gates: Gates, release: str) -> ErrorList:
    errors = validate_dns_label(request.name, path.child("name"))
    if not features.at_least(release, "1.33"):  # one kind of request, its fields on the request itself
        return errors + _validate_exact(request.exactly or ExactDeviceRequest(), path, gates, release)
    has_first, has_exact = bool(request.first_available), request.exactly is not None
    if not has_first and not has_exact:
        errors.append(required(path, "exactly one of `exactly` or `firstAvailable` is required"))
    elif has_first and has_exact:
        errors.append(
            invalid(path, None, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set")
        )
    elif has_exact:
        errors += _validate_exact(request.exactly, path.child("exactly"), gates, release)
    else:
        errors += validate_list(
            request.first_available,
            MAX_FIRST_AVAILABLE,
            lambda sub, p: validate_dns_label(sub.name, p.child("name")) + _validate_exact(sub, p, gates, release),
            path.child("firstAvailable"),
            release=release,
            key=lambda sub: sub.name,
            key_field="name",
        )
    return errors


def _request_names(claim: DeviceClaim) -> dict[str, set[str]]:
    return {r.name: {s.name for s in r.first_available} for r in claim.requests}


def _validate_request_ref(name: str, path: Path, names: Mapping[str, set[str]], release: str) -> ErrorList:
    """A request (or from 1.33 a subrequest, ``request/sub``) of this claim."""
    if not features.at_least(release, "1.33"):
        unknown = [] if name in names else [invalid(path, name, "must be the name of a request in the claim")]
        return validate_dns_label(name, path) + unknown
    segments = name.split("/")
    if len(segments) > 2:
        return [invalid(path, name, _REQUEST_REF_MSG)]
    errors: ErrorList = []
    for segment in segments:
        errors += validate_dns_label(segment, path)
    known = segments[0] in names and (len(segments) == 1 or segments[1] in names[segments[0]])
    if not known:
        errors.append(invalid(path, name, _REQUEST_REF_MSG))
    return errors


def _validate_refs(refs: Sequence[str], path: Path, names: Mapping[str, set[str]], release: str) -> ErrorList:
    return validate_list(
        refs,
        MAX_REQUESTS,
        lambda ref, p: _validate_request_ref(ref, p, names, release),
        path,
        release=release,
        key=lambda r: r,
    )


def _validate_constraint(
    constraint: DeviceConstraint, path: Path, names: Mapping[str, set[str]], gates: Gates, release: str
) -> ErrorList:
    """``validateDeviceConstraint``: with neither attribute the path depends on DRAConsumableCapacity."""
    errors = _validate_refs(constraint.requests, path.child("requests"), names, release)
    # From 1.37 declarative ``ResourceFullyQualifiedName`` is Beta (authoritative) on both attributes
    # (kubernetes v1.37.2 pkg/apis/resource/v1/zz_generated.validations.go); the handwritten check
    # it covers, which looked at only one of them, is dropped.
    either = (constraint.match_attribute, constraint.distinct_attribute) != (None, None)
    if features.at_least(release, "1.37") and either:
        for name, field in (
            (constraint.match_attribute, "matchAttribute"),
            (constraint.distinct_attribute, "distinctAttribute"),
        ):
            if name is not None:
                errors += resource_fully_qualified_name(name, path.child(field))
        return errors
    if constraint.match_attribute is not None:
        errors += validate_fully_qualified_name(constraint.match_attribute, path.child("matchAttribute"), release)
    elif constraint.distinct_attribute is not None:
        errors += validate_fully_qualified_name(constraint.distinct_attribute, path.child("distinctAttribute"), release)
    elif gates.get("DRAConsumableCapacity"):
        errors.append(required(path, _CONSTRAINT_MSG))
    else:
        errors.append(required(path.child("matchAttribute")))
    return errors
