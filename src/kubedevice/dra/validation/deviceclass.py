"""``ValidateDeviceClass`` (pkg/apis/resource/validation/validation.go)."""

from __future__ import annotations

from ...apimachinery import core, meta, strfmt
from ...apimachinery.field import ErrorList, Path, invalid
from .. import features
from ..models import DeviceClass
from .common import (
    MAX_CONFIG,
    Gates,
    gates_or_defaults,
    metadata,
    validate_configuration,
    validate_list,
    validate_selectors,
)


def _extended_resource_name_errors(name: str, path: Path, release: str) -> ErrorList:
    """Why an extended resource name is refused. Up to 1.36 the handwritten check says only that it
    is not one; 1.37's declarative ``validate.ExtendedResourceName`` (Beta, so its errors replace the
    handwritten one; apimachinery v0.37.2 pkg/api/validate/strfmt.go) says why."""
    if not features.at_least(release, "1.37"):
        return [invalid(path, name, "must be a valid extended resource name")]
    return strfmt.extended_resource_name(name, path)


def validate_device_class(obj: DeviceClass, gates: Gates | None = None, release: str = features.NEWEST) -> ErrorList:
    """``ValidateDeviceClass``. Its metadata goes through ``ValidateObjectMetaWithOpts`` from 1.35
    on (no ``generateName`` check); 1.34 still calls ``ValidateObjectMeta`` with
    ``ValidateClassName``, which checks the prefix (kubernetes v1.34.4
    pkg/apis/resource/validation/validation.go), so a 1.34 server refuses ``generateName: Gen-``."""
    spec, path = obj.spec, Path("spec")
    with_opts = features.at_least(release, "1.35")
    check_meta = meta.validate_object_meta_with_opts if with_opts else meta.validate_object_meta
    errors = check_meta(metadata(obj.metadata), Path("metadata"), False, release)
    gates = gates_or_defaults(gates, release)
    errors += validate_selectors(spec.selectors, path.child("selectors"), gates, release)
    errors += validate_list(
        spec.config,
        MAX_CONFIG,
        lambda c, p: validate_configuration(c, p, release),
        path.child("config"),
        release=release,
    )
    if spec.suitable_nodes is not None:  # 1.31's only, checked at the top: ``field.NewPath("suitableNodes")``
        errors += core.validate_node_selector(spec.suitable_nodes, Path("suitableNodes"), release)
    name = spec.extended_resource_name
    if name is not None and not core.is_extended_resource_name(name):
        errors += _extended_resource_name_errors(name, path.child("extendedResourceName"), release)
    return errors
