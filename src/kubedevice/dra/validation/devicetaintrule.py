"""``ValidateDeviceTaintRule`` (pkg/apis/resource/validation/validation.go)."""

from __future__ import annotations

from ...apimachinery import meta
from ...apimachinery.field import ErrorList, Path
from .. import features
from ..models import DeviceTaintRule
from .common import (
    Gates,
    gates_or_defaults,
    metadata,
    validate_dns_label,
    validate_dns_subdomain,
    validate_driver_name,
    validate_pool_name,
    validate_selectors,
    validate_taint,
)


def validate_device_taint_rule(
    obj: DeviceTaintRule, gates: Gates | None = None, release: str = features.NEWEST
) -> ErrorList:
    """A cluster-scoped name, the selector's fields when given, and the taint as on a device.
    1.34's v1alpha3 selector also has ``deviceClassName`` (a DNS subdomain, even when empty) and
    CEL ``selectors`` checked as a claim's, in the environment of the gates (kubernetes v1.34.4
    validation.go); the decoder refuses both in every later release, and the status, which 1.35
    added, is reset on create, so neither reaches validation there.

    Whether the API server serves the kind at all is the caller's question
    (:func:`kubedevice.dra.features.not_served`): no gate decides it, the API versions enabled do.
    """
    errors = meta.validate_object_meta(metadata(obj.metadata), Path("metadata"), False, release)
    selector, path = obj.spec.device_selector, Path("spec").child("deviceSelector")
    if selector is not None:
        if selector.device_class_name is not None:
            errors += validate_dns_subdomain(selector.device_class_name, path.child("deviceClassName"))
        if selector.driver is not None:
            errors += validate_driver_name(selector.driver, path.child("driver"), release)
        if selector.pool is not None:
            errors += validate_pool_name(selector.pool, path.child("pool"))
        if selector.device is not None:
            errors += validate_dns_label(selector.device, path.child("device"))
        gated = gates_or_defaults(gates, release)
        errors += validate_selectors(selector.selectors or [], path.child("selectors"), gated, release)
    return errors + validate_taint(obj.spec.taint, Path("spec").child("taint"), release)
