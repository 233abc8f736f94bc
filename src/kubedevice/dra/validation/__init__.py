"""DRA object validation with the API server's rules, messages and field paths.

A port of ``pkg/apis/resource/validation/validation.go`` (kubernetes v1.31.14 to v1.37.2) for the
objects kubedevice handles, so ``kubedevice dra validate`` refuses exactly what ``kubectl apply``
would, with the same ``spec.selectors[0].cel.expression: Invalid value: …`` lines, before anything
reaches a cluster. One module per kind (:mod:`.deviceclass`, :mod:`.resourceclaim`,
:mod:`.resourceclaimtemplate`, :mod:`.resourceslice` with :mod:`.capacity`, :mod:`.devicetaintrule`,
1.31's :mod:`.podschedulingcontext`)
and :mod:`.common` for what they share; field errors, name formats and metadata are
:mod:`kubedevice.apimachinery`'s, which the config uses too.

Feature-gated fields follow the gates passed in (:mod:`..features`; default: the release's
defaults), dropped first as the API server's strategy drops them (:mod:`..strategy`). Rules a
release's code changed without a gate follow the release passed in (``--kubernetes-version``),
never a guess from the gate set: overriding gates on a 1.34 server does not make it run 1.37's code.
"""

from __future__ import annotations

from ...apimachinery.field import ErrorList, ErrorType, FieldError, Path
from ...apimachinery.validation import is_dns1123_label as dns1123_label_messages
from .. import features
from ..models import DeviceClass, DeviceTaintRule, DRAObject, PodSchedulingContext, ResourceClaim, ResourceClaimTemplate
from ..strategy import drop_disabled_fields
from .common import (
    MAX_ATTRIBUTE_VALUE_LENGTH,
    MAX_ATTRIBUTES_AND_CAPACITIES,
    MAX_COUNTER_SETS,
    MAX_SLICE_DEVICES,
    MAX_SLICE_DEVICES_ADVANCED,
    Gates,
    gates_or_defaults,
    raw_json,
    validate_cel_expression,
    validate_dns_label,
    validate_dns_subdomain,
    validate_driver_name,
)
from .deviceclass import validate_device_class
from .devicetaintrule import validate_device_taint_rule
from .podschedulingcontext import validate_pod_scheduling_context
from .resourceclaim import validate_resource_claim
from .resourceclaimtemplate import validate_resource_claim_template
from .resourceslice import uses_advanced_features, validate_resource_slice

__all__ = [
    "MAX_ATTRIBUTES_AND_CAPACITIES",
    "MAX_ATTRIBUTE_VALUE_LENGTH",
    "MAX_COUNTER_SETS",
    "MAX_SLICE_DEVICES",
    "MAX_SLICE_DEVICES_ADVANCED",
    "ErrorList",
    "ErrorType",
    "FieldError",
    "Gates",
    "Path",
    "dns1123_label_messages",
    "raw_json",
    "uses_advanced_features",
    "validate",
    "validate_cel_expression",
    "validate_device_class",
    "validate_device_taint_rule",
    "validate_dns_label",
    "validate_dns_subdomain",
    "validate_driver_name",
    "validate_pod_scheduling_context",
    "validate_resource_claim",
    "validate_resource_claim_template",
    "validate_resource_slice",
]


def validate(obj: DRAObject, gates: Gates | None = None, release: str = features.NEWEST) -> ErrorList:
    """All API-server validation errors of one object (empty when it would be accepted).

    ``release`` is the API server's minor release (``--kubernetes-version``) and decides the
    rules its code changed without a gate; ``gates`` are its feature gates (default: that
    release's defaults, :mod:`kubedevice.dra.features`) and decide gated fields, which are
    dropped first when off, as the API server's strategy does, so neither refused nor checked.
    """
    features.check_release(release)
    gated = gates_or_defaults(gates, release)
    stored = drop_disabled_fields(obj, gated, release)
    if isinstance(stored, DeviceClass):
        return validate_device_class(stored, gated, release)
    if isinstance(stored, ResourceClaim):
        return validate_resource_claim(stored, gated, release)
    if isinstance(stored, ResourceClaimTemplate):
        return validate_resource_claim_template(stored, gated, release)
    if isinstance(stored, DeviceTaintRule):
        return validate_device_taint_rule(stored, gated, release)
    if isinstance(stored, PodSchedulingContext):
        return validate_pod_scheduling_context(stored, release)
    return validate_resource_slice(stored, release)
