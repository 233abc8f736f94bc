"""``ValidatePodSchedulingContexts`` (pkg/apis/resource/validation/validation.go, kubernetes
v1.31.14): classic DRA's scheduling negotiation, served by 1.31 alone. Its name is a pod's (a DNS
subdomain) and ``spec.potentialNodes`` a set of at most 128 node names; ``selectedNode`` is not
checked, and the status is reset on create."""

from __future__ import annotations

from ...apimachinery import meta
from ...apimachinery.field import ErrorList, Path, each_invalid
from .. import features
from ..models import PodSchedulingContext
from .common import metadata, validate_list

MAX_NODES = 128  # PodSchedulingNodeListMaxSize


def validate_pod_scheduling_context(obj: PodSchedulingContext, release: str = features.NEWEST) -> ErrorList:
    errors = meta.validate_object_meta(metadata(obj.metadata), Path("metadata"), True, release)
    return errors + validate_list(
        obj.spec.potential_nodes,
        MAX_NODES,
        lambda name, p: each_invalid(p, name, meta.name_is_dns_subdomain(name, False)),
        Path("spec").child("potentialNodes"),
        release=release,
        key=lambda name: name,
    )
