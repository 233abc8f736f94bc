"""The rules of ``k8s.io/kubernetes/pkg/apis/core`` that other APIs reuse: node selectors
(``ValidateNodeSelector``), CSI driver names (``ValidateCSIDriverName``, which DRA drivers go
through too) and ``v1helper.IsExtendedResourceName``, the kubelet's and the scheduler's test of an
extended resource's name.

A node selector is taken as any object with the API's fields in snake case (``node_selector_terms``,
``match_expressions``, ...): the DRA models are such objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..gostrings import go_len
from ..releases import at_least
from . import content, validation
from .field import ErrorList, Path, each_invalid, forbidden, invalid, required, too_long
from .strfmt import EXTENDED_RESOURCE_DOMAIN, QUOTA_PREFIX

CSI_DRIVER_NAME_MAX = 63
_BAD_OPERATOR = "not a valid selector operator"


class NodeSelectorRequirement(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def operator(self) -> str: ...
    @property
    def values(self) -> Sequence[str]: ...


class NodeSelectorTerm(Protocol):
    @property
    def match_expressions(self) -> Sequence[NodeSelectorRequirement]: ...
    @property
    def match_fields(self) -> Sequence[NodeSelectorRequirement]: ...


class NodeSelector(Protocol):
    @property
    def node_selector_terms(self) -> Sequence[NodeSelectorTerm]: ...


def validate_csi_driver_name(driver: str, path: Path, release: str) -> ErrorList:
    """``ValidateCSIDriverName``: at most 63 bytes, a DNS subdomain once lower-cased. From 1.35 an
    empty name is only required; 1.34 also reports it as no subdomain (kubernetes v1.34.4 and v1.35.4)."""
    errors: ErrorList = []
    if not driver:
        if at_least(release, "1.35"):
            return [required(path)]
        errors.append(required(path))
    if go_len(driver) > CSI_DRIVER_NAME_MAX:
        errors.append(too_long(path, CSI_DRIVER_NAME_MAX, release))
    return errors + each_invalid(path, driver, validation.is_dns1123_subdomain(driver.lower()))


def is_native_resource(name: str) -> bool:
    """``v1helper.IsNativeResource``: no domain, or the ``kubernetes.io/`` one."""
    return "/" not in name or EXTENDED_RESOURCE_DOMAIN in name


def is_node_allocatable_resource_name(name: str) -> bool:
    """``IsNodeAllocatableResourceName`` (1.37): cpu, memory or a huge page size."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def is_extended_resource_name(name: str) -> bool:
    """``v1helper.IsExtendedResourceName``: domain-qualified, not in ``kubernetes.io/``, not a quota
    name, and ``requests.<name>`` a qualified name (so the domain counts the 9 bytes of
    ``requests.`` against its 253)."""
    if is_native_resource(name) or name.startswith(QUOTA_PREFIX):
        return False
    return not content.is_label_key(QUOTA_PREFIX + name)


def validate_node_selector(selector: NodeSelector, path: Path, release: str) -> ErrorList:
    """``ValidateNodeSelector``: at least one term; each requirement's operator, key and values."""
    terms = selector.node_selector_terms
    if not terms:
        return [required(path.child("nodeSelectorTerms"), "must have at least one node selector term")]
    errors: ErrorList = []
    for i, term in enumerate(terms):
        term_path = path.child("nodeSelectorTerms").index(i)
        for j, requirement in enumerate(term.match_expressions):
            errors += _validate_requirement(requirement, term_path.child("matchExpressions").index(j), release)
        for j, requirement in enumerate(term.match_fields):
            errors += _validate_field_requirement(requirement, term_path.child("matchFields").index(j))
    return errors


def _validate_requirement(requirement: NodeSelectorRequirement, path: Path, release: str) -> ErrorList:
    """``ValidateNodeSelectorRequirement``, label values checked from 1.32."""
    errors: ErrorList = []
    values, operator = requirement.values, requirement.operator
    if operator in ("In", "NotIn"):
        if not values:
            errors.append(required(path.child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            errors.append(
                forbidden(path.child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
            )
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            errors.append(
                required(path.child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'")
            )
    else:
        errors.append(invalid(path.child("operator"), operator, _BAD_OPERATOR))
    errors += each_invalid(path.child("key"), requirement.key, validation.is_qualified_name(requirement.key, release))
    if not at_least(release, "1.32"):  # 1.31 did not check the values (pkg/apis/core/validation, v1.31.14)
        return errors
    for i, value in enumerate(values):
        errors += each_invalid(path.child("values").index(i), value, validation.is_valid_label_value(value, release))
    return errors


def _validate_field_requirement(requirement: NodeSelectorRequirement, path: Path) -> ErrorList:
    """``ValidateNodeFieldSelectorRequirement``: operator, then key, then each value; all reported."""
    errors: ErrorList = []
    if requirement.operator not in ("In", "NotIn"):
        errors.append(invalid(path.child("operator"), requirement.operator, _BAD_OPERATOR))
    elif len(requirement.values) != 1:
        detail = "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"
        errors.append(required(path.child("values"), detail))
    if requirement.key != "metadata.name":
        return [*errors, invalid(path.child("key"), requirement.key, "not a valid field selector key")]
    for i, value in enumerate(requirement.values):
        errors += each_invalid(path.child("values").index(i), value, validation.is_dns1123_subdomain(value))
    return errors
