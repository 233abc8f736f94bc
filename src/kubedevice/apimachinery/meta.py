"""Object metadata as the API server validates it on create: ``ValidateObjectMeta`` and its
helpers (``k8s.io/apimachinery/pkg/api/validation``: objectmeta.go, generic.go; labels from
``pkg/apis/meta/v1/validation``), the name the API server generates from ``generateName``
(``k8s.io/apiserver/pkg/storage/names``), and ``ValidateTemplateObjectMeta``
(``pkg/apis/core/validation``), which a template's embedded metadata goes through.

Metadata is taken as the API's JSON object (``name``, ``generateName``, ``labels``, ...), so any
API's objects can use these. Only the fields validation on create looks at are checked: owner
references, finalizers and managed fields are not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..gostrings import go_bytes, go_len
from . import content, validation
from .field import ErrorList, Path, each_invalid, forbidden, required, too_long

OBJECT_META_FIELDS = (
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
)
"""``metav1.ObjectMeta``'s JSON fields (apimachinery/pkg/apis/meta/v1/types.go): any other is unknown."""

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
_GENERATED_SUFFIX = "xxxxx"  # 5 random characters upstream, all valid in a DNS subdomain
_MAX_GENERATED_BASE = 63 - len(_GENERATED_SUFFIX)


def generated_name(name: str, generate_name: str) -> str:
    """The name validation sees: generated from ``generateName`` when no name is given.

    The API server fills the name before validating (``names.SimpleNameGenerator``: at most
    58 bytes of the prefix and 5 random characters), so ``generateName`` alone is valid.
    """
    if name or not generate_name:
        return name
    return go_bytes(generate_name)[:_MAX_GENERATED_BASE].decode("utf-8", "surrogateescape") + _GENERATED_SUFFIX


def mask_trailing_dash(name: str) -> str:
    """``maskTrailingDash``: how a name prefix (``generateName``) is checked, a trailing dash made a
    letter. Go drops two bytes for the one letter (an upstream quirk, kept: ``a..-`` passes), and
    leaves a lone ``-`` as it is."""
    data = go_bytes(name)
    if len(data) > 1 and data.endswith(b"-"):
        return (data[:-2] + b"a").decode("utf-8", "surrogateescape")
    return name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    """``NameIsDNSSubdomain``: the name rule of most kinds; a prefix is masked first."""
    return validation.is_dns1123_subdomain(mask_trailing_dash(name) if prefix else name)


def validate_object_meta(meta: Mapping[str, Any], path: Path, namespaced: bool, release: str) -> ErrorList:
    """``ValidateObjectMeta`` with ``NameIsDNSSubdomain``, as the API server runs it on create.

    A ``namespace`` on a cluster-scoped object is not an error: the API server clears it
    (``EnsureObjectNamespaceMatchesRequestNamespace``, apiserver/pkg/registry/rest/meta.go).
    """
    errors: ErrorList = []
    generate_name = str(meta.get("generateName") or "")
    if generate_name:
        errors += each_invalid(path.child("generateName"), generate_name, name_is_dns_subdomain(generate_name, True))
    name = generated_name(str(meta.get("name") or ""), generate_name)
    if name:
        errors += each_invalid(path.child("name"), name, name_is_dns_subdomain(name, False))
    return errors + _common(meta, name, path, namespaced, release)


def validate_object_meta_with_opts(meta: Mapping[str, Any], path: Path, namespaced: bool, release: str) -> ErrorList:
    """``ValidateObjectMetaWithOpts`` with ``validate.LongName``: ``generateName`` is not looked at
    and the name's length message counts "bytes" (``content.IsDNS1123Subdomain``)."""
    name = generated_name(str(meta.get("name") or ""), str(meta.get("generateName") or ""))
    errors = each_invalid(path.child("name"), name, content.is_dns1123_subdomain(name)) if name else []
    return errors + _common(meta, name, path, namespaced, release)


def _common(meta: Mapping[str, Any], name: str, path: Path, namespaced: bool, release: str) -> ErrorList:
    """What both variants check after the name's format: it is required, the namespace a DNS label,
    labels, annotations."""
    errors = [required(path.child("name"), "name or generateName is required")] if not name else []
    namespace = str(meta.get("namespace") or "")
    if namespaced and namespace:
        errors += each_invalid(path.child("namespace"), namespace, validation.is_dns1123_label(namespace))
    errors += validate_labels(meta.get("labels") or {}, path.child("labels"), release)
    return errors + validate_annotations(meta.get("annotations") or {}, path.child("annotations"), release)


def validate_labels(labels: Mapping[str, str], path: Path, release: str) -> ErrorList:
    """``ValidateLabels``: each key a qualified name, each value a label value (both at ``path``)."""
    errors: ErrorList = []
    for key, value in labels.items():
        errors += each_invalid(path, key, validation.is_qualified_name(key, release))
        errors += each_invalid(path, value, validation.is_valid_label_value(value, release))
    return errors


def validate_annotations(annotations: Mapping[str, str], path: Path, release: str) -> ErrorList:
    """``ValidateAnnotations``: keys are qualified names once lower-cased; all of it at most 256 KiB."""
    errors: ErrorList = []
    for key in annotations:
        errors += each_invalid(path, key, validation.is_qualified_name(key.lower(), release))
    if sum(go_len(k) + go_len(v) for k, v in annotations.items()) > TOTAL_ANNOTATION_SIZE_LIMIT:
        errors.append(too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT, release))
    return errors


def validate_template_object_meta(meta: Mapping[str, Any], path: Path, release: str) -> ErrorList:
    """``ValidateTemplateObjectMeta`` (pkg/apis/core/validation): labels and annotations, and every
    other ObjectMeta field that is set is forbidden, named after its Go field with the first letter
    lowered (``validateFieldAllowList``: ``uid`` is ``uID``), in the Go struct's field order."""
    errors = validate_annotations(meta.get("annotations") or {}, path.child("annotations"), release)
    errors += validate_labels(meta.get("labels") or {}, path.child("labels"), release)
    for field in OBJECT_META_FIELDS:
        if field not in ("labels", "annotations") and meta.get(field) not in (None, "", 0, [], {}):
            errors.append(forbidden(path.child("uID" if field == "uid" else field), "cannot be set"))
    return errors
