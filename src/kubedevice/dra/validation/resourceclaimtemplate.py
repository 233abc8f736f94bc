"""``ValidateResourceClaimTemplate`` (pkg/apis/resource/validation/validation.go)."""

from __future__ import annotations

from ...apimachinery import meta
from ...apimachinery.field import ErrorList, Path
from .. import features
from ..models import ResourceClaimTemplate
from .common import Gates, gates_or_defaults, metadata
from .resourceclaim import validate_claim_spec


def validate_resource_claim_template(
    obj: ResourceClaimTemplate, gates: Gates | None = None, release: str = features.NEWEST
) -> ErrorList:
    """Its own metadata, the claim's (labels and annotations only, ``ValidateTemplateObjectMeta``)
    and the claim spec under ``spec.spec``."""
    errors = meta.validate_object_meta(metadata(obj.metadata), Path("metadata"), True, release)
    template = obj.spec.metadata
    fields = {"labels": template.labels, "annotations": template.annotations, **(template.model_extra or {})}
    errors += meta.validate_template_object_meta(fields, Path("spec").child("metadata"), release)
    gated = gates_or_defaults(gates, release)
    return errors + validate_claim_spec(obj.spec.spec, Path("spec").child("spec"), gated, release)
