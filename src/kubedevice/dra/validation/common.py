"""What several DRA kinds share in ``pkg/apis/resource/validation/validation.go``: the limits of
``pkg/apis/resource/types.go``, lists with their size limits and duplicates, DRA's own name rules
(drivers, pools, attribute and capacity names), CEL selectors, opaque configuration, and device
taints and tolerations (a slice's devices, a claim's requests and a DeviceTaintRule have them).

The general Kubernetes rules (field errors, DNS names, label keys and values, metadata, node
selectors) are :mod:`kubedevice.apimachinery`'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ...apimachinery import content, validation
from ...apimachinery.core import validate_csi_driver_name
from ...apimachinery.field import (
    ErrorList,
    FieldError,
    Path,
    duplicate,
    each_invalid,
    forbidden,
    invalid,
    not_supported,
    required,
    too_long,
    too_long_characters,
    too_long_max_length,
    too_many,
)
from ...apimachinery.strfmt import validate_c_identifier
from ...gostrings import go_bytes, go_len
from .. import cel, features
from ..models import DeviceConfiguration, DeviceSelector, ObjectMeta, OpaqueDeviceConfiguration

# Limits from pkg/apis/resource/types.go.
MAX_SELECTORS = 32
MAX_CONFIG = 32
MAX_REQUESTS = 32
MAX_CONSTRAINTS = 32
MAX_FIRST_AVAILABLE = 8
MAX_SLICE_DEVICES = 128
MAX_SLICE_DEVICES_ADVANCED = 64
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_ATTRIBUTE_VALUE_LENGTH = 64
MAX_ID_LENGTH = 32
MAX_DRIVER_LENGTH = 63
MAX_POOL_NAME_LENGTH = 253
MAX_PARAMETERS_BYTES = 10 * 1024
MAX_ATTRIBUTE_VALUES = 48
MAX_TAINTS = 16
MAX_TOLERATIONS = 16
MAX_BINDING_CONDITIONS = 4
MAX_COUNTER_SETS = 8
MAX_COUNTERS_PER_SET = 32
MAX_COUNTER_CONSUMPTIONS = 2
MAX_COUNTERS_PER_CONSUMPTION = 32
MAX_VALID_VALUES = 10
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")  # sets.List: sorted
TAINT_EFFECTS_134 = ("NoExecute", "NoSchedule")  # "None" comes with 1.35
TOLERATION_OPERATORS = ("Equal", "Exists")
Gates = Mapping[str, bool]


def gates_or_defaults(gates: Gates | None, release: str = features.NEWEST) -> Gates:
    """No gates given: the release's defaults."""
    return features.defaults(release) if gates is None else gates


def metadata(meta: ObjectMeta) -> dict[str, Any]:
    """An object's metadata as the API's JSON fields, which :mod:`kubedevice.apimachinery.meta` takes
    (labels and annotations are among the fields the model keeps as they came)."""
    fields = {"name": meta.name, "generateName": meta.generate_name, "namespace": meta.namespace}
    return fields | (meta.model_extra or {})


# --- names --------------------------------------------------------------------------------


def validate_dns_label(value: str, path: Path) -> ErrorList:
    return each_invalid(path, value, validation.is_dns1123_label(value))


def validate_dns_subdomain(value: str, path: Path) -> ErrorList:
    return each_invalid(path, value, validation.is_dns1123_subdomain(value))


def validate_driver_name(driver: str, path: Path, release: str = features.NEWEST) -> ErrorList:
    """``validateDriverName``: a driver's name is a CSI driver's (``ValidateCSIDriverName``)."""
    return validate_csi_driver_name(driver, path, release)


def validate_label_key(key: str, path: Path, release: str) -> ErrorList:
    """A label key (taints, tolerations, binding conditions): ``IsQualifiedName`` of the release."""
    return each_invalid(path, key, validation.is_qualified_name(key, release))


def validate_label_value(value: str, path: Path, release: str) -> ErrorList:
    return each_invalid(path, value, validation.is_valid_label_value(value, release))


def validate_qualified_name(name: str, path: Path, release: str) -> ErrorList:
    """An attribute or capacity name: ``identifier`` or ``domain/identifier``.

    A name with two slashes or more is accepted: ``validateQualifiedName`` has no case for it
    (a TODO upstream, kept for compatibility with stored objects). Up to 1.34 an empty name and
    an empty part are required (1.31 calls the domain "the prefix"); from 1.35 invalid
    (kubernetes v1.31.14 to v1.35.4 validation.go).
    """
    since_135 = features.at_least(release, "1.35")
    if not name and not since_135:
        return [required(path, "name required")]
    parts = name.split("/")
    if len(parts) == 1:
        return validate_c_identifier(name, MAX_ID_LENGTH, path, release)
    if len(parts) > 2:
        return []

    def empty(detail: str) -> FieldError:
        return invalid(path, "", detail) if since_135 else required(path, detail)

    domain, ident = parts
    domain_word = "domain" if features.at_least(release, "1.32") else "prefix"
    errors = validate_driver_name(domain, path, release) if domain else [empty(f"the {domain_word} must not be empty")]
    if ident:
        return errors + validate_c_identifier(ident, MAX_ID_LENGTH, path, release)
    return [*errors, empty("the name must not be empty")]


def validate_fully_qualified_name(name: str, path: Path, release: str) -> ErrorList:
    """``validateFullyQualifiedName``: a qualified name with a domain, worded per release: 1.31
    requires ``<path>.domain`` even for an empty name, 1.32 to 1.34 say "must include a domain"
    for a non-empty one, 1.35 on the longer sentence."""
    errors = validate_qualified_name(name, path, release)
    if features.at_least(release, "1.35"):
        if "/" not in name:
            detail = "a fully qualified name must be a domain and a name separated by a slash"
            errors.append(invalid(path, name, detail))
    elif not features.at_least(release, "1.32"):
        if "/" not in name:
            errors.append(required(path.child("domain"), "must include a prefix"))
    elif name and "/" not in name:
        errors.append(invalid(path, name, "must include a domain"))
    return errors


def truncated(key: str, limit: int) -> str:
    """``truncateIfTooLong``: a map key over ``limit`` bytes (16 at least) shown as its two ends
    around ``...``, in a field path."""
    limit = max(limit, 16)
    data = go_bytes(key)
    if len(data) <= limit:
        return key
    remaining = limit - 3
    head, tail = data[: (remaining + 1) // 2], data[len(data) - remaining // 2 :]
    return (head + b"..." + tail).decode("utf-8", "surrogateescape")


def map_paths(path: Path, key: str, limit: int, release: str) -> tuple[Path, Path]:
    """``validateMap``'s paths for an entry: (where its key's errors go, where its value's go).

    1.31: the map itself and ``map[key]``; 1.32 to 1.35: both at ``map[key]``, the key truncated
    to ``limit``; 1.36 on: the map itself and the truncated ``map[key]`` (kubernetes v1.31.14 to
    v1.36.3 validation.go)."""
    if not features.at_least(release, "1.32"):
        return path, path.key(key)
    item = path.key(truncated(key, limit))
    return (item if not features.at_least(release, "1.36") else path), item


def validate_pool_name(name: str, path: Path, release: str = features.NEWEST) -> ErrorList:
    """``validatePoolName``: required, at most 253 bytes, each ``/``-separated part a DNS subdomain."""
    if not name:
        return [required(path)]
    too_many_bytes = go_len(name) > MAX_POOL_NAME_LENGTH
    errors = [too_long_max_length(path, MAX_POOL_NAME_LENGTH, release)] if too_many_bytes else []
    for part in name.split("/"):
        errors += validate_dns_subdomain(part, path)
    return errors


# --- lists (validateSlice / validateSet) ----------------------------------------------------

_T = TypeVar("_T")


def validate_list(
    items: Sequence[_T],
    limit: int,
    check: Callable[[_T, Path], ErrorList],
    path: Path,
    *,
    release: str,
    key: Callable[[_T], Any] | None = None,
    key_field: str = "",
) -> ErrorList:
    """``validateSlice`` / ``validateSet``: items, the size limit, duplicates.

    From 1.35 the size limit comes first and short-circuits (against DoS) and a duplicate is
    reported at its item. Before, every item is checked, then the size, and a duplicate is
    reported at the item's key field (``spec.devices[1].name``: ``itemKey`` returns the field's
    name too; kubernetes v1.34.4 pkg/apis/resource/validation/validation.go); 1.31 says the size
    is "Too long" (``TooLongMaxLength``), not "Too many".
    """
    since_135 = features.at_least(release, "1.35")
    too_many_items = 0 <= limit < len(items)
    if too_many_items and since_135:
        return [too_many(path, len(items), limit)]
    errors: ErrorList = []
    for i, item in enumerate(items):
        errors += check(item, path.index(i))
    if too_many_items:
        errors.append(
            too_many(path, len(items), limit)
            if features.at_least(release, "1.32")
            else too_long_max_length(path, limit, release)
        )
    if key is not None:
        seen: set[Any] = set()
        for i, item in enumerate(items):
            k = key(item)
            if k in seen:
                at = path.index(i).child(key_field) if key_field and not since_135 else path.index(i)
                errors.append(duplicate(at, k))
            seen.add(k)
    return errors


# --- selectors and config -----------------------------------------------------------------


def validate_cel_expression(
    expression: str, path: Path, gates: Gates | None = None, release: str = features.NEWEST
) -> ErrorList:
    """Length, then compilation (declarations per the release's gates), then the static cost; 1.31
    has neither limit (both come with 1.32)."""
    limits = features.at_least(release, "1.32")
    if limits and len(expression.encode()) > cel.MAX_EXPRESSION_BYTES:
        return [too_long(path, cel.MAX_EXPRESSION_BYTES, release)]
    try:
        selector = cel.compile_selector(expression, env="NewExpressions", features=gates_or_defaults(gates))
    except cel.CompileError as error:
        return [invalid(path, expression, error.message)]
    if limits and selector.cost_estimate > cel.MAX_COST:
        return [forbidden(path, "too complex, exceeds cost limit")]
    return []


def _validate_selector(selector: DeviceSelector, path: Path, gates: Gates, release: str) -> ErrorList:
    if selector.cel is None:
        return [required(path.child("cel"))]
    return validate_cel_expression(selector.cel.expression, path.child("cel", "expression"), gates, release)


def validate_selectors(selectors: Sequence[DeviceSelector], path: Path, gates: Gates, release: str) -> ErrorList:
    return validate_list(
        selectors, MAX_SELECTORS, lambda s, p: _validate_selector(s, p, gates, release), path, release=release
    )


def raw_json(value: Any) -> bytes:
    """The bytes the API server receives for a RawExtension: Go's compact, HTML-escaped JSON."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return text.encode()


def _validate_parameters(parameters: Any, path: Path, release: str) -> ErrorList:
    """``validateRawExtension``: required, at most 10 KiB on create (from 1.32), a JSON object (1.33
    and before: "parameters must be ...")."""
    if parameters is None:
        return [required(path)]
    if features.at_least(release, "1.32") and len(raw_json(parameters)) > MAX_PARAMETERS_BYTES:
        return [too_long(path, MAX_PARAMETERS_BYTES, release)]
    if not isinstance(parameters, dict):
        what = "must be a valid JSON object"
        return [invalid(path, "<value omitted>", what if features.at_least(release, "1.34") else f"parameters {what}")]
    return []


def _opaque_driver_errors(driver: str, path: Path, release: str) -> ErrorList:
    """An opaque config's driver. 1.37 checks it declaratively (Beta, replacing the handwritten
    errors; kubernetes v1.37.2 pkg/apis/resource/v1/zz_generated.validations.go): required, then
    ``LongNameCaseless`` (its own wording, length in bytes), then ``MaxLength`` 63 in characters."""
    if not features.at_least(release, "1.37") or not driver:
        return validate_driver_name(driver, path, release)
    errors = each_invalid(path, driver, content.is_dns1123_subdomain_caseless(driver))
    if len(driver) > MAX_DRIVER_LENGTH:  # runes: Python's len of a str
        errors.append(too_long_characters(path, MAX_DRIVER_LENGTH))
    return errors


def _validate_opaque(opaque: OpaqueDeviceConfiguration, path: Path, release: str) -> ErrorList:
    return _opaque_driver_errors(opaque.driver, path.child("driver"), release) + _validate_parameters(
        opaque.parameters, path.child("parameters"), release
    )


def validate_configuration(config: DeviceConfiguration | Any, path: Path, release: str) -> ErrorList:
    """A class's or a claim's ``config`` item: its opaque part (claims add ``requests``)."""
    if config.opaque is None:
        return [required(path.child("opaque"))]
    return _validate_opaque(config.opaque, path.child("opaque"), release)


# --- taints and tolerations ----------------------------------------------------------------


def _taint_effects(release: str) -> tuple[str, ...]:
    """``validDeviceTaintEffects`` of the release (kubernetes v1.33.13 to v1.35.4 validation.go)."""
    return TAINT_EFFECTS if features.at_least(release, "1.35") else TAINT_EFFECTS_134


def validate_taint(taint: Mapping[str, Any], path: Path, release: str) -> ErrorList:
    """``validateDeviceTaint``: key a label name (so required), value a label value, effect known."""
    errors = validate_label_key(str(taint.get("key", "")), path.child("key"), release)
    if value := taint.get("value", ""):
        errors += validate_label_value(str(value), path.child("value"), release)
    effect, effects = taint.get("effect", ""), _taint_effects(release)
    if not effect:
        errors.append(required(path.child("effect")))
    elif effect not in effects:
        errors.append(not_supported(path.child("effect"), effect, effects))
    return errors


def validate_toleration(toleration: Mapping[str, Any], path: Path, release: str) -> ErrorList:
    """``validateDeviceToleration``: an empty key tolerates every taint; the operator is required."""
    errors: ErrorList = []
    if key := toleration.get("key", ""):
        errors += validate_label_key(str(key), path.child("key"), release)
    operator, value = toleration.get("operator", ""), str(toleration.get("value", ""))
    if operator == "Exists":
        if value:
            errors.append(invalid(path.child("value"), value, "must be empty for operator `Exists`"))
    elif operator == "Equal":
        errors += validate_label_value(value, path.child("value"), release)
    elif not operator:
        errors.append(required(path.child("operator")))
    else:
        errors.append(not_supported(path.child("operator"), operator, TOLERATION_OPERATORS))
    effect, effects = toleration.get("effect", ""), _taint_effects(release)
    if effect and effect not in effects:
        errors.append(not_supported(path.child("effect"), effect, effects))
    return errors
