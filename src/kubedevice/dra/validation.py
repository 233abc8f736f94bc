"""DRA object validation with the API server's rules, messages and field paths.

A port of ``pkg/apis/resource/validation/validation.go`` (kubernetes v1.36.3) for the objects
kubedevice handles, so ``kubedevice dra validate`` refuses exactly what ``kubectl apply`` would,
with the same ``spec.selectors[0].cel.expression: Invalid value: …`` lines, before anything
reaches a cluster. Feature-gated fields follow the gates passed in (:mod:`.features`; default:
the release's defaults), dropped first as the API server's strategy drops them
(:mod:`.strategy`). Rules a release's code changed without a gate follow the release passed in
(``--kubernetes-version``), never a guess from the gate set: overriding gates on a 1.34 server
does not make it run 1.37's code.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..gostrings import quote as go_quote
from ..names import C_IDENTIFIER, DNS1123_SUBDOMAIN, QUALIFIED_NAME_PART
from . import cel, features
from .models import (
    OBJECT_META_FIELDS,
    ClaimTemplateMeta,
    DeviceAttribute,
    DeviceCapacity,
    DeviceClaim,
    DeviceClass,
    DeviceConfiguration,
    DeviceConstraint,
    DeviceSelector,
    DeviceTaintRule,
    DRAObject,
    ExactDeviceRequest,
    NodeSelector,
    ObjectMeta,
    OpaqueDeviceConfiguration,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimTemplate,
    ResourceSlice,
    ResourceSliceSpec,
)
from .models import (
    Device as SliceDevice,
)
from .strategy import drop_disabled_fields

if TYPE_CHECKING:
    from .structured.consumable_capacity import Amount

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
MAX_DOMAIN_LENGTH = 63
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
ALLOCATION_MODES = ("All", "ExactCount")

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?\Z",
    re.ASCII,
)
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_C_IDENTIFIER_MSG = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of "
    "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
    "validation is '[A-Za-z_][A-Za-z0-9_]*')"
)
_QUALIFIED_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_CONSTRAINT_MSG = 'exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set'
_REQUEST_REF_MSG = (
    "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
)


class ErrorType(enum.StrEnum):
    """``field.ErrorType`` with the text its ``String()`` prints."""

    NOT_FOUND = "Not found"
    REQUIRED = "Required value"
    DUPLICATE = "Duplicate value"
    INVALID = "Invalid value"
    NOT_SUPPORTED = "Unsupported value"
    FORBIDDEN = "Forbidden"
    TOO_LONG = "Too long"
    TOO_MANY = "Too many"
    INTERNAL = "Internal error"


_NO_VALUE = frozenset({ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_LONG, ErrorType.INTERNAL})


def _format_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    return json.dumps(value, default=str, separators=(",", ":"))


@dataclass(frozen=True)
class FieldError:
    """One ``field.Error``; ``str()`` is the API server's text for it."""

    type: ErrorType
    field: str
    value: Any = ""
    detail: str = ""

    def body(self) -> str:
        text = str(self.type)
        if self.type not in _NO_VALUE:
            text += f": {_format_value(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


class Path:
    """``field.Path``: builds ``spec.devices[0].attributes[dra.example.com/model]``."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    def child(self, *names: str) -> Path:
        text = self._text
        for name in names:
            text = f"{text}.{name}" if text else name
        return Path(text)

    def index(self, i: int) -> Path:
        return Path(f"{self._text}[{i}]")

    def key(self, key: str) -> Path:
        return Path(f"{self._text}[{key}]")

    def __str__(self) -> str:
        return self._text


Errors = list[FieldError]


def required(path: Path, detail: str = "") -> FieldError:
    return FieldError(ErrorType.REQUIRED, str(path), "", detail)


def invalid(path: Path, value: Any, detail: str) -> FieldError:
    return FieldError(ErrorType.INVALID, str(path), value, detail)


def forbidden(path: Path, detail: str) -> FieldError:
    return FieldError(ErrorType.FORBIDDEN, str(path), "", detail)


def too_long(path: Path, limit: int) -> FieldError:
    """``field.TooLong``: its wording in every release 1.34 to 1.37 (apimachinery
    pkg/util/validation/field/errors.go); "must have at most" is ``TooMany``'s."""
    unit = "byte" if limit == 1 else "bytes"
    return FieldError(ErrorType.TOO_LONG, str(path), "", f"may not be more than {limit} {unit}")


def too_many(path: Path, actual: int, limit: int) -> FieldError:
    return FieldError(ErrorType.TOO_MANY, str(path), actual, f"must have at most {limit} items")


def duplicate(path: Path, value: Any) -> FieldError:
    return FieldError(ErrorType.DUPLICATE, str(path), value)


def not_supported(path: Path, value: Any, supported: Sequence[str]) -> FieldError:
    detail = "supported values: " + ", ".join(go_quote(v) for v in supported)
    return FieldError(ErrorType.NOT_SUPPORTED, str(path), value, detail)


# --- name formats (apimachinery/pkg/util/validation) ---------------------------------------


def _bytes(value: str) -> int:
    """Go's ``len``: a string's length in UTF-8 bytes, which every Kubernetes limit counts."""
    return len(value.encode("utf-8", "surrogateescape"))


def dns1123_label_messages(value: str) -> list[str]:
    """``validation.IsDNS1123Label``: a valid subdomain that is no label must hold dots, and says so."""
    messages = []
    if _bytes(value) > 63:
        messages.append("must be no more than 63 characters")
    if not _DNS1123_LABEL.match(value):
        messages.append("must not contain dots" if DNS1123_SUBDOMAIN.match(value) else _DNS1123_LABEL_MSG)
    return messages


def dns1123_subdomain_messages(value: str, unit: str = "characters") -> list[str]:
    """``validation.IsDNS1123Subdomain``; ``content.IsDNS1123Subdomain`` says ``bytes`` instead."""
    messages = []
    if _bytes(value) > 253:
        messages.append(f"must be no more than 253 {unit}")
    if not DNS1123_SUBDOMAIN.match(value):
        messages.append(_DNS1123_SUBDOMAIN_MSG)
    return messages


def _each_message(path: Path, value: str, messages: Iterable[str]) -> Errors:
    return [invalid(path, value, msg) for msg in messages]


def validate_dns_label(value: str, path: Path) -> Errors:
    return _each_message(path, value, dns1123_label_messages(value))


def validate_dns_subdomain(value: str, path: Path) -> Errors:
    return _each_message(path, value, dns1123_subdomain_messages(value))


def validate_driver_name(driver: str, path: Path, release: str = features.NEWEST) -> Errors:
    """``ValidateCSIDriverName``: at most 63 characters, a DNS subdomain once lower-cased. From 1.35
    an empty name is only required; 1.34 also reports it as no subdomain (pkg/apis/core/validation,
    kubernetes v1.34.4 and v1.35.4)."""
    errors: Errors = []
    if not driver:
        if features.at_least(release, "1.35"):
            return [required(path)]
        errors.append(required(path))
    if _bytes(driver) > MAX_DRIVER_LENGTH:
        errors.append(too_long(path, MAX_DRIVER_LENGTH))
    errors += _each_message(path, driver, dns1123_subdomain_messages(driver.lower()))
    return errors


def _validate_c_identifier(value: str, path: Path) -> Errors:
    errors: Errors = []
    if _bytes(value) > MAX_ID_LENGTH:
        errors.append(too_long(path, MAX_ID_LENGTH))
    if not C_IDENTIFIER.match(value):
        errors.append(invalid(path, value, _C_IDENTIFIER_MSG))
    return errors


def validate_qualified_name(name: str, path: Path, release: str) -> Errors:
    """An attribute or capacity name: ``identifier`` or ``domain/identifier``.

    A name with two slashes or more is accepted: ``validateQualifiedName`` has no case for it
    (a TODO upstream, kept for compatibility with stored objects). 1.34 reports an empty name
    and an empty part as required (kubernetes v1.34.4 validation.go); 1.35 as invalid.
    """
    since_135 = features.at_least(release, "1.35")
    if not name and not since_135:
        return [required(path, "name required")]
    parts = name.split("/")
    if len(parts) == 1:
        return _validate_c_identifier(name, path)
    if len(parts) > 2:
        return []

    def empty(detail: str) -> FieldError:
        return invalid(path, "", detail) if since_135 else required(path, detail)

    domain, ident = parts
    errors = validate_driver_name(domain, path, release) if domain else [empty("the domain must not be empty")]
    errors += _validate_c_identifier(ident, path) if ident else [empty("the name must not be empty")]
    return errors


def validate_fully_qualified_name(name: str, path: Path, release: str) -> Errors:
    """``validateFullyQualifiedName``: a qualified name with a domain, worded per release."""
    errors = validate_qualified_name(name, path, release)
    if features.at_least(release, "1.35"):
        if "/" not in name:
            detail = "a fully qualified name must be a domain and a name separated by a slash"
            errors.append(invalid(path, name, detail))
    elif name and "/" not in name:
        errors.append(invalid(path, name, "must include a domain"))
    return errors


def _validate_pool_name(name: str, path: Path) -> Errors:
    if not name:
        return [required(path)]
    errors = [too_long(path, MAX_POOL_NAME_LENGTH)] if _bytes(name) > MAX_POOL_NAME_LENGTH else []
    for part in name.split("/"):
        errors += validate_dns_subdomain(part, path)
    return errors


# --- generic list helpers (validateSlice / validateSet) -------------------------------------

_T = TypeVar("_T")


def _validate_list(
    items: Sequence[_T],
    limit: int,
    check: Callable[[_T, Path], Errors],
    path: Path,
    *,
    release: str,
    key: Callable[[_T], Any] | None = None,
    key_field: str = "",
) -> Errors:
    """``validateSlice`` / ``validateSet``: items, the size limit, duplicates.

    From 1.35 the size limit comes first and short-circuits (against DoS) and a duplicate is
    reported at its item. 1.34 checks every item, then the size, and reports a duplicate at the
    item's key field (``spec.devices[1].name``: ``itemKey`` returns the field's name too;
    kubernetes v1.34.4 pkg/apis/resource/validation/validation.go).
    """
    since_135 = features.at_least(release, "1.35")
    too_many_items = 0 <= limit < len(items)
    if too_many_items and since_135:
        return [too_many(path, len(items), limit)]
    errors: Errors = []
    for i, item in enumerate(items):
        errors += check(item, path.index(i))
    if too_many_items:
        errors.append(too_many(path, len(items), limit))
    if key is not None:
        seen: set[Any] = set()
        for i, item in enumerate(items):
            k = key(item)
            if k in seen:
                at = path.index(i).child(key_field) if key_field and not since_135 else path.index(i)
                errors.append(duplicate(at, k))
            seen.add(k)
    return errors


# --- metadata -----------------------------------------------------------------------------


_GENERATED_SUFFIX = "xxxxx"  # 5 random characters upstream, all valid in a DNS subdomain
_MAX_GENERATED_BASE = 63 - len(_GENERATED_SUFFIX)


def generated_name(meta: ObjectMeta) -> str:
    """The name validation sees: generated from ``generateName`` when no name is given.

    The API server fills the name before validating (``names.SimpleNameGenerator``: at most
    58 bytes of the prefix and 5 random characters), so ``generateName`` alone is valid.
    """
    if meta.name or not meta.generate_name:
        return meta.name
    base = meta.generate_name.encode("utf-8", "surrogateescape")[:_MAX_GENERATED_BASE]
    return base.decode("utf-8", "surrogateescape") + _GENERATED_SUFFIX


def validate_object_meta(
    meta: ObjectMeta, path: Path, namespaced: bool, release: str, check_generate_name: bool = True
) -> Errors:
    """``ValidateObjectMeta`` with the DNS-subdomain name rule, as the API server runs it on create.

    A ``namespace`` on a cluster-scoped object is not an error: the API server clears it
    (``EnsureObjectNamespaceMatchesRequestNamespace``, apiserver/pkg/registry/rest/meta.go).
    DeviceClass uses ``ValidateObjectMetaWithOpts``, which does not look at ``generateName`` and
    whose name check (``validate.LongName``) counts in "bytes".
    """
    errors: Errors = []
    if meta.generate_name and check_generate_name:
        masked = meta.generate_name[:-1] + "a" if meta.generate_name.endswith("-") else meta.generate_name
        errors += _each_message(path.child("generateName"), meta.generate_name, dns1123_subdomain_messages(masked))
    name = generated_name(meta)
    if not name:
        errors.append(required(path.child("name"), "name or generateName is required"))
    else:
        unit = "characters" if check_generate_name else "bytes"
        errors += _each_message(path.child("name"), name, dns1123_subdomain_messages(name, unit))
    if namespaced and meta.namespace:
        errors += validate_dns_label(meta.namespace, path.child("namespace"))
    extra = meta.model_extra or {}  # decoded as string maps (models._strict_meta)
    errors += _validate_labels(extra.get("labels") or {}, path.child("labels"), release)
    return errors + _validate_annotations(extra.get("annotations") or {}, path.child("annotations"), release)


def _validate_template_meta(meta: ClaimTemplateMeta, path: Path, release: str) -> Errors:
    """``ValidateTemplateObjectMeta`` (pkg/apis/core/validation): labels and annotations, and every
    other ObjectMeta field that is set is forbidden, named after its Go field with the first letter
    lowered (``validateFieldAllowList``: ``uid`` is ``uID``), in the Go struct's field order."""
    errors = _validate_annotations(meta.annotations, path.child("annotations"), release)
    errors += _validate_labels(meta.labels, path.child("labels"), release)
    extra = meta.model_extra or {}
    for field in OBJECT_META_FIELDS:
        if field not in ("labels", "annotations") and extra.get(field) not in (None, "", 0, [], {}):
            errors.append(forbidden(path.child("uID" if field == "uid" else field), "cannot be set"))
    return errors


# --- selectors and config -----------------------------------------------------------------


def validate_cel_expression(expression: str, path: Path, gates: Gates | None = None) -> Errors:
    """Length, then compilation (declarations per the release's gates), then the static cost."""
    if len(expression.encode()) > cel.MAX_EXPRESSION_BYTES:
        return [too_long(path, cel.MAX_EXPRESSION_BYTES)]
    try:
        selector = cel.compile_selector(expression, env="NewExpressions", features=_gates(gates))
    except cel.CompileError as error:
        return [invalid(path, expression, error.message)]
    if selector.cost_estimate > cel.MAX_COST:
        return [forbidden(path, "too complex, exceeds cost limit")]
    return []


def _gates(gates: Gates | None, release: str = features.NEWEST) -> Gates:
    """No gates given: the release's defaults."""
    return features.defaults(release) if gates is None else gates


def _validate_selector(selector: DeviceSelector, path: Path, gates: Gates) -> Errors:
    if selector.cel is None:
        return [required(path.child("cel"))]
    return validate_cel_expression(selector.cel.expression, path.child("cel", "expression"), gates)


def validate_selectors(selectors: Sequence[DeviceSelector], path: Path, gates: Gates, release: str) -> Errors:
    return _validate_list(selectors, MAX_SELECTORS, lambda s, p: _validate_selector(s, p, gates), path, release=release)


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


def _validate_parameters(parameters: Any, path: Path) -> Errors:
    if parameters is None:
        return [required(path)]
    if len(raw_json(parameters)) > MAX_PARAMETERS_BYTES:
        return [too_long(path, MAX_PARAMETERS_BYTES)]
    if not isinstance(parameters, dict):
        return [invalid(path, "<value omitted>", "must be a valid JSON object")]
    return []


_CASELESS_SUBDOMAIN_MSG = (
    "an RFC 1123 subdomain must consist of alphanumeric characters, '-' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'Example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def _opaque_driver_errors(driver: str, path: Path, release: str) -> Errors:
    """An opaque config's driver. 1.37 checks it declaratively (Beta, replacing the handwritten
    errors; kubernetes v1.37.2 pkg/apis/resource/v1/zz_generated.validations.go): required, then
    ``LongNameCaseless`` (its own wording, length in bytes), then ``MaxLength`` 63 in characters."""
    if not features.at_least(release, "1.37") or not driver:
        return validate_driver_name(driver, path, release)
    errors = [invalid(path, driver, "must be no more than 253 bytes")] if _bytes(driver) > 253 else []
    if not DNS1123_SUBDOMAIN.match(driver.lower()):
        errors.append(invalid(path, driver, _CASELESS_SUBDOMAIN_MSG))
    if len(driver) > MAX_DRIVER_LENGTH:  # runes: Python's len of a str
        detail = f"may not be more than {MAX_DRIVER_LENGTH} characters"  # field.TooLongCharacters
        errors.append(FieldError(ErrorType.TOO_LONG, str(path), "", detail))
    return errors


def _validate_opaque(opaque: OpaqueDeviceConfiguration, path: Path, release: str) -> Errors:
    return _opaque_driver_errors(opaque.driver, path.child("driver"), release) + _validate_parameters(
        opaque.parameters, path.child("parameters")
    )


def _validate_configuration(config: DeviceConfiguration | Any, path: Path, release: str) -> Errors:
    if config.opaque is None:
        return [required(path.child("opaque"))]
    return _validate_opaque(config.opaque, path.child("opaque"), release)


# --- node selectors (ValidateNodeSelector, for v1alpha3 suitableNodes and slices) -----------


_LABEL_KEY_REGEX_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


def label_key_messages(key: str, release: str) -> list[str]:
    """``content.IsLabelKey`` (apimachinery v0.35 on, the ``IsQualifiedName`` of labels and taints);
    1.34's ``validation.IsQualifiedName`` (apimachinery v0.34.4) says "a qualified name" and counts
    lengths in "characters".

    The name part is matched even when empty, so an empty key gets two messages.
    """
    since_135 = features.at_least(release, "1.35")
    unit = "bytes" if since_135 else "characters"
    parts = key.split("/")
    if len(parts) > 2:
        what = "a valid label key" if since_135 else "a qualified name"
        suffix = "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        return [f"{what} {_LABEL_KEY_REGEX_MSG} {suffix}"]
    messages = []
    if len(parts) == 2:
        if not parts[0]:
            messages.append("prefix part must be non-empty")
        else:
            messages += ["prefix part " + m for m in dns1123_subdomain_messages(parts[0], unit)]
    name = parts[-1]
    if not name:
        messages.append("name part must be non-empty")
    elif _bytes(name) > 63:
        messages.append(f"name part must be no more than 63 {unit}")
    if not QUALIFIED_NAME_PART.match(name):
        messages.append("name part " + _LABEL_KEY_REGEX_MSG)
    return messages


def _validate_label_key(key: str, path: Path, release: str) -> Errors:
    return _each_message(path, key, label_key_messages(key, release))


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_BAD_OPERATOR = "not a valid selector operator"


def _label_value_messages(value: str, release: str) -> list[str]:
    """``content.IsLabelValue`` (apimachinery v0.35 on: its length message counts bytes; 1.34's
    ``IsValidLabelValue`` says characters)."""
    unit = "bytes" if features.at_least(release, "1.35") else "characters"
    messages = [f"must be no more than 63 {unit}"] if _bytes(value) > 63 else []
    return messages + ([] if _LABEL_VALUE.match(value) else [_LABEL_VALUE_MSG])


def _validate_requirement(requirement: Any, path: Path, release: str) -> Errors:
    """``ValidateNodeSelectorRequirement`` (pkg/apis/core/validation), label values checked."""
    errors: Errors = []
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
    errors += _validate_label_key(requirement.key, path.child("key"), release)
    for i, value in enumerate(values):
        errors += _each_message(path.child("values").index(i), value, _label_value_messages(value, release))
    return errors


def _validate_field_requirement(requirement: Any, path: Path) -> Errors:
    """``ValidateNodeFieldSelectorRequirement``: operator, then key, then each value; all reported."""
    errors: Errors = []
    if requirement.operator not in ("In", "NotIn"):
        errors.append(invalid(path.child("operator"), requirement.operator, _BAD_OPERATOR))
    elif len(requirement.values) != 1:
        detail = "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"
        errors.append(required(path.child("values"), detail))
    if requirement.key != "metadata.name":
        return [*errors, invalid(path.child("key"), requirement.key, "not a valid field selector key")]
    for i, value in enumerate(requirement.values):
        errors += validate_dns_subdomain(value, path.child("values").index(i))
    return errors


def validate_node_selector(selector: NodeSelector, path: Path, release: str) -> Errors:
    terms = selector.node_selector_terms
    if not terms:
        return [required(path.child("nodeSelectorTerms"), "must have at least one node selector term")]
    errors: Errors = []
    for i, term in enumerate(terms):
        term_path = path.child("nodeSelectorTerms").index(i)
        for j, requirement in enumerate(term.match_expressions):
            errors += _validate_requirement(requirement, term_path.child("matchExpressions").index(j), release)
        for j, requirement in enumerate(term.match_fields):
            errors += _validate_field_requirement(requirement, term_path.child("matchFields").index(j))
    return errors


# --- DeviceClass --------------------------------------------------------------------------


def _extended_resource_name_ok(name: str) -> bool:
    """``v1helper.IsExtendedResourceName``: the quota name ``requests.<name>`` must be a qualified name.

    So the domain counts the 9 bytes of ``requests.`` against its 253 (pkg/apis/core/v1/helper).
    """
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, ident = ("requests." + name).partition("/")
    return (
        not dns1123_subdomain_messages(prefix)
        and "/" not in ident
        and 0 < _bytes(ident) <= 63
        and bool(QUALIFIED_NAME_PART.match(ident))
    )


def _extended_resource_name_errors(name: str, path: Path, release: str) -> Errors:
    """Why an extended resource name is refused. Up to 1.36 the handwritten check says only that it
    is not one; 1.37's declarative ``validate.ExtendedResourceName`` (Beta, so its errors replace the
    handwritten one; apimachinery v0.37.2 pkg/api/validate/strfmt.go) says why."""
    if not features.at_least(release, "1.37"):
        return [invalid(path, name, "must be a valid extended resource name")]
    errors: Errors = []
    if "/" not in name:
        errors.append(invalid(path, name, "a name must be a domain-prefixed path, such as 'example.com/my-prop'"))
    elif "kubernetes.io/" in name:
        errors.append(invalid(path, name, 'must not have "kubernetes.io/" domain'))
    if name.startswith("requests."):
        errors.append(invalid(path, name, 'must not have "requests." prefix'))
    return errors + _each_message(path, name, label_key_messages("requests." + name, release))


def validate_device_class(obj: DeviceClass, gates: Gates | None = None, release: str = features.NEWEST) -> Errors:
    """``ValidateDeviceClass``. Its metadata goes through ``ValidateObjectMetaWithOpts`` from 1.35
    on (no ``generateName`` check); 1.34 still calls ``ValidateObjectMeta`` with
    ``ValidateClassName``, which checks the prefix (kubernetes v1.34.4
    pkg/apis/resource/validation/validation.go), so a 1.34 server refuses ``generateName: Gen-``."""
    spec, path = obj.spec, Path("spec")
    old_meta = not features.at_least(release, "1.35")
    errors = validate_object_meta(obj.metadata, Path("metadata"), False, release, check_generate_name=old_meta)
    gates = _gates(gates, release)
    errors += validate_selectors(spec.selectors, path.child("selectors"), gates, release)
    errors += _validate_list(
        spec.config,
        MAX_CONFIG,
        lambda c, p: _validate_configuration(c, p, release),
        path.child("config"),
        release=release,
    )
    if spec.suitable_nodes is not None:
        errors += validate_node_selector(spec.suitable_nodes, path.child("suitableNodes"), release)
    name = spec.extended_resource_name
    if name is not None and not _extended_resource_name_ok(name):
        field = path.child("extendedResourceName")
        errors += _extended_resource_name_errors(name, field, release)
    return errors


# --- ResourceClaim ------------------------------------------------------------------------


def _validate_allocation_mode(request: ExactDeviceRequest, path: Path) -> Errors:
    mode, count = request.allocation_mode, request.count
    if mode == "All":
        return (
            [invalid(path.child("count"), count, "must not be specified when allocationMode is 'All'")] if count else []
        )
    if mode == "ExactCount":
        return [invalid(path.child("count"), count, "must be greater than zero")] if count <= 0 else []
    return [not_supported(path.child("allocationMode"), mode, ALLOCATION_MODES)]


def _validate_exact(request: ExactDeviceRequest, path: Path, gates: Gates, release: str) -> Errors:
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
        errors += _validate_toleration(toleration, path.child("tolerations").index(i), release)
    return errors


def _validate_request(request: Any, path: Path, gates: Gates, release: str) -> Errors:
    errors = validate_dns_label(request.name, path.child("name"))
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
        errors += _validate_list(
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


def _validate_request_ref(name: str, path: Path, names: Mapping[str, set[str]]) -> Errors:
    segments = name.split("/")
    if len(segments) > 2:
        return [invalid(path, name, _REQUEST_REF_MSG)]
    errors: Errors = []
    for segment in segments:
        errors += validate_dns_label(segment, path)
    known = segments[0] in names and (len(segments) == 1 or segments[1] in names[segments[0]])
    if not known:
        errors.append(invalid(path, name, _REQUEST_REF_MSG))
    return errors


def _validate_refs(refs: Sequence[str], path: Path, names: Mapping[str, set[str]], release: str) -> Errors:
    return _validate_list(
        refs, MAX_REQUESTS, lambda ref, p: _validate_request_ref(ref, p, names), path, release=release, key=lambda r: r
    )


def _validate_constraint(
    constraint: DeviceConstraint, path: Path, names: Mapping[str, set[str]], gates: Gates, release: str
) -> Errors:
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
                errors += _resource_fully_qualified_name(name, path.child(field))
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


def _resource_fully_qualified_name(name: str, path: Path) -> Errors:
    """``validate.ResourceFullyQualifiedName`` (apimachinery v0.37.2 pkg/api/validate/strfmt.go):
    the prefix a case-sensitive DNS subdomain (``LongName``, detail prefixed ``prefix: ``), its
    own wording for empty parts, and a name with two slashes or more left unchecked."""
    parts = name.split("/")
    errors: Errors = []
    if len(parts) == 1:
        errors += _validate_c_identifier(name, path)
    elif len(parts) == 2:
        prefix, ident = parts
        if not prefix:
            errors.append(invalid(path, "", "prefix must not be empty"))
        else:
            if _bytes(prefix) > MAX_DOMAIN_LENGTH:
                errors.append(too_long(path, MAX_DOMAIN_LENGTH))
            messages = dns1123_subdomain_messages(prefix, "bytes")
            errors += [invalid(path, prefix, f"prefix: {message}") for message in messages]
        errors += _validate_c_identifier(ident, path) if ident else [invalid(path, "", "name must not be empty")]
    if "/" not in name:
        errors.append(invalid(path, name, "a fully qualified name must be a domain and a name separated by a slash"))
    return errors


def validate_resource_claim(obj: ResourceClaim, gates: Gates | None = None, release: str = features.NEWEST) -> Errors:
    errors = validate_object_meta(obj.metadata, Path("metadata"), True, release)
    return errors + _validate_claim_spec(obj.spec, Path("spec"), _gates(gates, release), release)


def validate_resource_claim_template(
    obj: ResourceClaimTemplate, gates: Gates | None = None, release: str = features.NEWEST
) -> Errors:
    """``ValidateResourceClaimTemplate``: its own metadata, the claim's (labels and annotations
    only, ``ValidateTemplateObjectMeta``) and the claim spec under ``spec.spec``."""
    errors = validate_object_meta(obj.metadata, Path("metadata"), True, release)
    errors += _validate_template_meta(obj.spec.metadata, Path("spec").child("metadata"), release)
    return errors + _validate_claim_spec(obj.spec.spec, Path("spec").child("spec"), _gates(gates, release), release)


_MAX_ANNOTATIONS_BYTES = 256 * 1024


def _validate_annotations(annotations: Mapping[str, str], path: Path, release: str) -> Errors:
    """``ValidateAnnotations``: keys are label keys once lower-cased; all of it at most 256 KiB."""
    errors: Errors = []
    for key in annotations:
        errors += _each_message(path, key, label_key_messages(key.lower(), release))
    if sum(_bytes(k) + _bytes(v) for k, v in annotations.items()) > _MAX_ANNOTATIONS_BYTES:
        errors.append(too_long(path, _MAX_ANNOTATIONS_BYTES))
    return errors


def _validate_labels(labels: Mapping[str, str], path: Path, release: str) -> Errors:
    """``ValidateLabels``: each key a label key, each value a label value (both at ``path``)."""
    errors: Errors = []
    for key, value in labels.items():
        errors += _validate_label_key(key, path, release)
        errors += _validate_label_value(value, path, release)
    return errors


def _validate_claim_spec(spec: ResourceClaimSpec, path: Path, gated: Gates, release: str) -> Errors:
    """``validateDeviceClaim``: requests, constraints, config, each list in its limits."""
    devices, path = spec.devices, path.child("devices")
    names = _request_names(devices)
    errors: Errors = []
    errors += _validate_list(
        devices.requests,
        MAX_REQUESTS,
        lambda r, p: _validate_request(r, p, gated, release),
        path.child("requests"),
        release=release,
        key=lambda r: r.name,
        key_field="name",
    )
    errors += _validate_list(
        devices.constraints,
        MAX_CONSTRAINTS,
        lambda c, p: _validate_constraint(c, p, names, gated, release),
        path.child("constraints"),
        release=release,
    )
    errors += _validate_list(
        devices.config,
        MAX_CONFIG,
        lambda c, p: (
            _validate_refs(c.requests, p.child("requests"), names, release) + _validate_configuration(c, p, release)
        ),
        path.child("config"),
        release=release,
    )
    return errors


# --- ResourceSlice ------------------------------------------------------------------------


def _validate_attribute(attribute: DeviceAttribute, path: Path) -> Errors:
    errors: Errors = []
    set_fields = [name for name, value in attribute.as_value().items() if value is not None]
    if attribute.string is not None and _bytes(attribute.string) > MAX_ATTRIBUTE_VALUE_LENGTH:
        errors.append(too_long(path.child("string"), MAX_ATTRIBUTE_VALUE_LENGTH))
    if attribute.version is not None:
        errors += _validate_version(attribute.version, path.child("version"))
    for name in ("bools", "ints", "strings", "versions"):
        values = getattr(attribute, name)
        if values is not None and not values:
            errors.append(invalid(path.child(name), values, "must not be empty if specified"))
    for i, item in enumerate(attribute.strings or ()):
        if _bytes(item) > MAX_ATTRIBUTE_VALUE_LENGTH:
            errors.append(too_long(path.child("strings").index(i), MAX_ATTRIBUTE_VALUE_LENGTH))
    for i, item in enumerate(attribute.versions or ()):
        errors += _validate_version(item, path.child("versions").index(i))
    if len(set_fields) != 1:
        value = "" if not set_fields else attribute.as_value()
        errors.append(invalid(path, value, "exactly one value must be specified"))
    return errors


def _validate_version(version: str, path: Path) -> Errors:
    errors: Errors = []
    if not _SEMVER.match(version):
        errors.append(invalid(path, version, "must be a string compatible with semver.org spec 2.0.0"))
    if _bytes(version) > MAX_ATTRIBUTE_VALUE_LENGTH:
        errors.append(too_long(path, MAX_ATTRIBUTE_VALUE_LENGTH))
    return errors


def _attribute_values(device: SliceDevice) -> int:
    """``numEntriesDeviceAttribute``: a list value counts each item, a scalar one."""
    total = 0
    for attribute in device.attributes.values():
        items = sum(len(getattr(attribute, name) or ()) for name in ("bools", "ints", "strings", "versions"))
        total += items or 1
    return total


def _validate_device(device: SliceDevice, path: Path, per_device: bool, release: str) -> Errors:
    """``validateDevice`` (validation.go) in its order: limits, attributes, capacity, taints,
    counters, node fields, binding conditions."""
    errors = validate_dns_label(device.name, path.child("name"))
    total = len(device.attributes) + len(device.capacity)
    if total > MAX_ATTRIBUTES_AND_CAPACITIES:
        detail = f"the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}"
        errors.append(invalid(path, total, detail))
    values = _attribute_values(device)
    if values > MAX_ATTRIBUTE_VALUES:
        detail = f"the total number of attribute values must not exceed {MAX_ATTRIBUTE_VALUES}"
        errors.append(invalid(path, values, detail))
    for key, attribute in device.attributes.items():
        errors += validate_qualified_name(key, path.child("attributes"), release)
        errors += _validate_attribute(attribute, path.child("attributes").key(key))
    for key, capacity in device.capacity.items():
        errors += validate_qualified_name(key, path.child("capacity"), release)
        errors += _validate_capacity(
            capacity, bool(device.allow_multiple_allocations), path.child("capacity").key(key), release
        )
    errors += _validate_list(
        device.taints or [],
        MAX_TAINTS,
        lambda t, p: _validate_taint(t, p, release),
        path.child("taints"),
        release=release,
    )
    errors += _validate_list(
        device.consumes_counters or [],
        MAX_COUNTER_CONSUMPTIONS,
        _validate_counter_consumption,
        path.child("consumesCounters"),
        release=release,
        key=lambda c: c.get("counterSet", ""),
        key_field="counterSet",
    )
    errors += _device_node_errors(device, path, per_device, release)
    return errors + _validate_binding_parameters(
        device.binding_conditions, device.binding_failure_conditions, path, release
    )


_DEVICE_NODE_CHOICES = (
    "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set "
    "to true in the ResourceSlice spec"
)


def _device_node_errors(device: SliceDevice, path: Path, per_device: bool, release: str) -> Errors:
    if not per_device:
        if any(f is not None for f in (device.node_name, device.node_selector, device.all_nodes)):
            detail = (
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to "
                "true in the ResourceSlice spec"
            )
            return [invalid(path, None, detail)]
        return []
    set_fields: list[str] = []
    errors = _node_name_field(device.node_name, path, set_fields, "must not be empty")
    if device.node_selector is not None:
        set_fields.append("`nodeSelector`")
        errors += validate_node_selector(device.node_selector, path.child("nodeSelector"), release)
    errors += _true_or_unset("allNodes", device.all_nodes, path, set_fields)
    return errors + _exactly_one(path, set_fields, _DEVICE_NODE_CHOICES, _DEVICE_NODE_CHOICES)


def _node_name_field(name: str | None, path: Path, set_fields: list[str], empty: str) -> Errors:
    """A ``nodeName`` of a slice or device: set when non-empty, then a DNS subdomain."""
    if name is None:
        return []
    if not name:
        return [invalid(path.child("nodeName"), "", empty)]
    set_fields.append("`nodeName`")
    return validate_dns_subdomain(name, path.child("nodeName"))


def _true_or_unset(name: str, value: bool | None, path: Path, set_fields: list[str]) -> Errors:
    if value is None:
        return []
    if not value:
        return [invalid(path.child(name), False, "must be either unset or set to true")]
    set_fields.append(f"`{name}`")
    return []


def _exactly_one(path: Path, set_fields: list[str], none: str, several: str) -> Errors:
    if not set_fields:
        return [required(path, none)]
    if len(set_fields) > 1:
        return [invalid(path, "{" + ", ".join(set_fields) + "}", several)]
    return []


# --- taints, tolerations, binding conditions -----------------------------------------------


def _validate_label_value(value: str, path: Path, release: str) -> Errors:
    return _each_message(path, value, _label_value_messages(value, release))


def _taint_effects(release: str) -> tuple[str, ...]:
    """``validDeviceTaintEffects`` of the release (kubernetes v1.34.4 and v1.35.4 validation.go)."""
    return TAINT_EFFECTS if features.at_least(release, "1.35") else TAINT_EFFECTS_134


def _validate_taint(taint: Mapping[str, Any], path: Path, release: str) -> Errors:
    """``validateDeviceTaint``: key a label name (so required), value a label value, effect known."""
    errors = _validate_label_key(str(taint.get("key", "")), path.child("key"), release)
    if value := taint.get("value", ""):
        errors += _validate_label_value(str(value), path.child("value"), release)
    effect, effects = taint.get("effect", ""), _taint_effects(release)
    if not effect:
        errors.append(required(path.child("effect")))
    elif effect not in effects:
        errors.append(not_supported(path.child("effect"), effect, effects))
    return errors


def _validate_toleration(toleration: Mapping[str, Any], path: Path, release: str) -> Errors:
    """``validateDeviceToleration``: an empty key tolerates every taint; the operator is required."""
    errors: Errors = []
    if key := toleration.get("key", ""):
        errors += _validate_label_key(str(key), path.child("key"), release)
    operator, value = toleration.get("operator", ""), str(toleration.get("value", ""))
    if operator == "Exists":
        if value:
            errors.append(invalid(path.child("value"), value, "must be empty for operator `Exists`"))
    elif operator == "Equal":
        errors += _validate_label_value(value, path.child("value"), release)
    elif not operator:
        errors.append(required(path.child("operator")))
    else:
        errors.append(not_supported(path.child("operator"), operator, TOLERATION_OPERATORS))
    effect, effects = toleration.get("effect", ""), _taint_effects(release)
    if effect and effect not in effects:
        errors.append(not_supported(path.child("effect"), effect, effects))
    return errors


def _validate_binding_parameters(
    given: list[str] | None, given_failures: list[str] | None, path: Path, release: str
) -> Errors:
    """``validateDeviceBindingParameters``: at most 4 each, label names, no duplicates or overlap,
    and one kind only together with the other. A missing list is Go's nil slice, shown as
    ``null``; ``[]`` stays ``[]`` (json.Marshal of the bad value)."""
    conditions, failures = given or [], given_failures or []
    errors = _validate_list(
        conditions,
        MAX_BINDING_CONDITIONS,
        lambda c, p: _validate_label_key(c, p, release),
        path.child("bindingConditions"),
        release=release,
    )
    errors += _validate_list(
        failures,
        MAX_BINDING_CONDITIONS,
        lambda c, p: _validate_label_key(c, p, release),
        path.child("bindingFailureConditions"),
        release=release,
    )
    seen: set[str] = set()
    for i, condition in enumerate(conditions):
        if condition in seen:
            errors.append(duplicate(path.child("bindingConditions").index(i), condition))
        seen.add(condition)
    seen_failures: set[str] = set()
    for i, condition in enumerate(failures):
        if condition in seen_failures:
            errors.append(duplicate(path.child("bindingFailureConditions").index(i), condition))
        seen_failures.add(condition)
        if condition in seen:
            detail = "bindingFailureConditions must not overlap with bindingConditions"
            errors.append(invalid(path.child("bindingFailureConditions").index(i), condition, detail))
    if not conditions and failures:
        detail = "bindingConditions are required to use bindingFailureConditions"
        errors.append(invalid(path.child("bindingConditions"), given, detail))
    if not failures and conditions:
        detail = "bindingFailureConditions are required to use bindingConditions"
        errors.append(invalid(path.child("bindingFailureConditions"), given_failures, detail))
    return errors


# --- counters -----------------------------------------------------------------------------


def _validate_counters(counters: Any, limit: int, path: Path) -> Errors:
    """A counter map: required, at most ``limit`` entries (short-circuits), names DNS labels."""
    if not counters:
        return [required(path)]
    if len(counters) > limit:
        return [too_many(path, len(counters), limit)]
    errors: Errors = []
    for name in counters:
        errors += validate_dns_label(str(name), path)
    return errors


def _validate_named_counters(name: Any, counters: Any, limit: int, path: Path, name_field: str) -> Errors:
    errors = validate_dns_label(str(name), path.child(name_field)) if name else [required(path.child(name_field))]
    return errors + _validate_counters(counters, limit, path.child("counters"))


def _validate_counter_set(counter_set: Mapping[str, Any], path: Path) -> Errors:
    """``validateCounterSet``."""
    return _validate_named_counters(
        counter_set.get("name"), counter_set.get("counters"), MAX_COUNTERS_PER_SET, path, "name"
    )


def _validate_counter_consumption(consumption: Mapping[str, Any], path: Path) -> Errors:
    """``validateDeviceCounterConsumption``."""
    return _validate_named_counters(
        consumption.get("counterSet"), consumption.get("counters"), MAX_COUNTERS_PER_CONSUMPTION, path, "counterSet"
    )


# --- capacity request policy ----------------------------------------------------------------


def _amount(value: Any) -> Amount | None:
    """A quantity with the format its canonical string keeps (``Quantity.String()`` in messages).

    Imported here: the package brings the allocator, which the driver's publisher, validating
    its own slices, has no use for.
    """
    from .structured.consumable_capacity import CapacityError, parse  # noqa: PLC0415 - lazy on purpose

    try:
        return parse(value, "")
    except CapacityError:
        return None


def _validate_capacity(capacity: DeviceCapacity, multiple: bool, path: Path, release: str) -> Errors:
    """``validate{Multi,Single}AllocatableDeviceCapacity``: a request policy needs
    allowMultipleAllocations; with it, the policy must be consistent with the capacity."""
    policy = capacity.request_policy
    if policy is None:
        return []
    policy_path = path.child("requestPolicy")
    if not multiple:
        return [forbidden(policy_path, "allowMultipleAllocations must be true")]
    maximum = _amount(capacity.value)
    if maximum is None:  # the decoder refuses a bad quantity before validation
        return []
    valid_values, valid_range = policy.get("validValues") or [], policy.get("validRange")
    if valid_range is not None and not isinstance(valid_range, Mapping):
        return []
    if valid_values and valid_range is not None:
        detail = 'exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time'
        return [forbidden(policy_path, detail)]
    if not valid_values and valid_range is None:
        return []
    default = _amount(policy["default"]) if policy.get("default") is not None else None
    if default is None:
        which = "validValues" if valid_values else "validRange"
        return [required(policy_path.child("default"), f"required when {which} is defined")]
    if valid_values:
        return _validate_valid_values(default, maximum, valid_values, policy_path.child("validValues"))
    bound_field = "default" if features.at_least(release, "1.37") else None
    return _validate_range(default, maximum, valid_range or {}, policy_path.child("validRange"), bound_field)


def _ceil(amount: Amount) -> int:
    """``Quantity.Value()``: rounded up to an integer."""
    value = amount.quantity.value
    return -((-value.numerator) // value.denominator)


def _validate_valid_values(default: Amount, maximum: Amount, raw: list[Any], path: Path) -> Errors:
    """``validateRequestPolicyValidValues``: ascending, within the capacity, unique, default among them."""
    options = [a for a in map(_amount, raw) if a is not None]
    errors: Errors = []
    for i in range(len(options) - 1):
        if options[i].quantity.cmp(options[i + 1].quantity) > 0:
            errors.append(invalid(path.index(i + 1), str(options[i + 1]), "values must be sorted in ascending order"))
    if len(options) > MAX_VALID_VALUES:
        return [*errors, too_many(path, len(options), MAX_VALID_VALUES)]
    found = False
    for i, option in enumerate(options):
        if option.quantity.cmp(maximum.quantity) > 0:
            errors.append(invalid(path.index(i), str(option), f"option is larger than capacity value: {maximum}"))
        found = found or option.quantity.cmp(default.quantity) == 0
    seen: set[int] = set()
    for i, option in enumerate(options):
        if _ceil(option) in seen:
            errors.append(duplicate(path.index(i), str(_ceil(option))))
        seen.add(_ceil(option))
    if not found:
        errors.append(invalid(path, str(default), "default value is not valid according to the requestPolicy"))
    return errors


def _validate_range(
    default: Amount, maximum: Amount, raw: Mapping[str, Any], path: Path, bound_field: str | None
) -> Errors:
    """``validateRequestPolicyRange``: min required; min, max and default within each other and the
    capacity; default and max on a step from min. A default outside the range is reported at the
    bound it crosses up to 1.36 and at ``default`` from 1.37 (``bound_field``; kubernetes v1.37.2)."""
    low = _amount(raw["min"]) if raw.get("min") is not None else None
    if low is None:
        return [required(path.child("min"), "required when validRange is defined")]
    errors: Errors = []
    if low.quantity.cmp(maximum.quantity) > 0:
        errors.append(invalid(path.child("min"), str(low), f"min is larger than capacity value: {maximum}"))
    if default.quantity.cmp(low.quantity) < 0:
        errors.append(invalid(path.child(bound_field or "min"), str(default), f"default is less than min: {low}"))
    high = _amount(raw["max"]) if raw.get("max") is not None else None
    if high is not None:
        if low.quantity.cmp(high.quantity) > 0:
            errors.append(invalid(path.child("max"), str(low), f"min is larger than max: {high}"))
        if high.quantity.cmp(maximum.quantity) > 0:
            errors.append(invalid(path.child("max"), str(high), f"max is larger than capacity value: {maximum}"))
        if default.quantity.cmp(high.quantity) > 0:
            errors.append(invalid(path.child(bound_field or "max"), str(default), f"default is more than max: {high}"))
    step = _amount(raw["step"]) if raw.get("step") is not None else None
    if step is not None:
        added = low.plus(step)  # Quantity.Add: the sum keeps the receiver's format
        if added.quantity.cmp(maximum.quantity) > 0:
            detail = f"one step {added} is larger than capacity value: {maximum}"
            errors.append(invalid(path.child("step"), str(step), detail))
        for value in (default, high) if high is not None else (default,):
            if _ceil(step) and (_ceil(value) - _ceil(low)) % _ceil(step):
                detail = f"value is not a multiple of a given step ({step}) from ({low})"
                errors.append(invalid(path.child("step"), str(value), detail))
    return errors


def _node_selection_errors(spec: ResourceSliceSpec, path: Path, release: str) -> Errors:
    set_fields: list[str] = []
    errors = _node_name_field(spec.node_name, path, set_fields, "must be either unset or set to a non-empty string")
    if spec.node_selector is not None:
        set_fields.append("`nodeSelector`")
        errors += validate_node_selector(spec.node_selector, path.child("nodeSelector"), release)
        if len(spec.node_selector.node_selector_terms) != 1:
            terms = [t.model_dump(by_alias=True) for t in spec.node_selector.node_selector_terms]
            errors.append(
                invalid(
                    path.child("nodeSelector", "nodeSelectorTerms"), terms, "must have exactly one node selector term"
                )
            )
    errors += _true_or_unset("allNodes", spec.all_nodes, path, set_fields)
    errors += _true_or_unset("perDeviceNodeSelection", spec.per_device_node_selection, path, set_fields)
    choices = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    return errors + _exactly_one(path, set_fields, choices, choices + ", but multiple fields are set")


def validate_resource_slice(obj: ResourceSlice, release: str = features.NEWEST) -> Errors:
    """``ValidateResourceSlice``; gated fields are the strategy's concern (:func:`validate`)."""
    spec, path = obj.spec, Path("spec")
    errors = validate_object_meta(obj.metadata, Path("metadata"), False, release)
    errors += validate_driver_name(spec.driver, path.child("driver"), release)
    pool_path = path.child("pool")
    errors += _validate_pool_name(spec.pool.name, pool_path.child("name"))
    if spec.pool.resource_slice_count <= 0:
        errors.append(
            invalid(pool_path.child("resourceSliceCount"), spec.pool.resource_slice_count, "must be greater than zero")
        )
    if spec.pool.generation < 0:
        errors.append(
            invalid(pool_path.child("generation"), spec.pool.generation, "must be greater than or equal to zero")
        )
    errors += _node_selection_errors(spec, path, release)
    if spec.shared_counters is not None and "devices" in spec.model_fields_set:  # `devices: []` is set too
        errors.append(invalid(path, "", "only one of `sharedCounters` or `devices` is allowed"))
    # 1.34 has one limit; the lower one for devices with taints or counters comes with 1.35.
    advanced = features.at_least(release, "1.35") and any(map(uses_advanced_features, spec.devices))
    per_device = bool(spec.per_device_node_selection)
    errors += _validate_list(
        spec.devices,
        MAX_SLICE_DEVICES_ADVANCED if advanced else MAX_SLICE_DEVICES,
        lambda d, p: _validate_device(d, p, per_device, release),
        path.child("devices"),
        release=release,
        key=lambda d: d.name,
        key_field="name",
    )
    errors += _validate_list(
        spec.shared_counters or [],
        MAX_COUNTER_SETS,
        _validate_counter_set,
        path.child("sharedCounters"),
        release=release,
        key=lambda c: c.get("name", ""),
        key_field="name",
    )
    return errors


def uses_advanced_features(device: SliceDevice) -> bool:
    """Taints, counters or a list attribute: a slice holding such a device takes at most 64."""
    return bool(device.taints or device.consumes_counters) or any(
        a.ints is not None or a.bools is not None or a.strings is not None or a.versions is not None
        for a in device.attributes.values()
    )


def validate(obj: DRAObject, gates: Gates | None = None, release: str = features.NEWEST) -> Errors:
    """All API-server validation errors of one object (empty when it would be accepted).

    ``release`` is the API server's minor release (``--kubernetes-version``) and decides the
    rules its code changed without a gate; ``gates`` are its feature gates (default: that
    release's defaults, :mod:`kubedevice.dra.features`) and decide gated fields, which are
    dropped first when off, as the API server's strategy does, so neither refused nor checked.
    """
    features.check_release(release)
    gated = _gates(gates, release)
    stored = drop_disabled_fields(obj, gated, release)
    if isinstance(stored, DeviceClass):
        return validate_device_class(stored, gated, release)
    if isinstance(stored, ResourceClaim):
        return validate_resource_claim(stored, gated, release)
    if isinstance(stored, ResourceClaimTemplate):
        return validate_resource_claim_template(stored, gated, release)
    if isinstance(stored, DeviceTaintRule):
        return validate_device_taint_rule(stored, gated, release)
    return validate_resource_slice(stored, release)


def validate_device_taint_rule(
    obj: DeviceTaintRule, gates: Gates | None = None, release: str = features.NEWEST
) -> Errors:
    """``ValidateDeviceTaintRule``: a cluster-scoped name, the selector's fields when given, and the
    taint as on a device. 1.34's v1alpha3 selector also has ``deviceClassName`` (a DNS subdomain,
    even when empty) and CEL ``selectors`` checked as a claim's, in the environment of the gates
    (kubernetes v1.34.4 validation.go); the decoder refuses both in every later release, and the
    status, which 1.35 added, is reset on create, so neither reaches validation there.

    Whether the API server serves the kind at all is the caller's question
    (:func:`kubedevice.dra.features.not_served`): no gate decides it, the API versions enabled do.
    """
    errors = validate_object_meta(obj.metadata, Path("metadata"), False, release)
    selector, path = obj.spec.device_selector, Path("spec").child("deviceSelector")
    if selector is not None:
        if selector.device_class_name is not None:
            errors += validate_dns_subdomain(selector.device_class_name, path.child("deviceClassName"))
        if selector.driver is not None:
            errors += validate_driver_name(selector.driver, path.child("driver"), release)
        if selector.pool is not None:
            errors += _validate_pool_name(selector.pool, path.child("pool"))
        if selector.device is not None:
            errors += validate_dns_label(selector.device, path.child("device"))
        errors += validate_selectors(selector.selectors or [], path.child("selectors"), _gates(gates, release), release)
    return errors + _validate_taint(obj.spec.taint, Path("spec").child("taint"), release)
