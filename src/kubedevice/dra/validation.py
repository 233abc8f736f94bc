"""DRA object validation with the API server's rules, messages and field paths.

A port of ``pkg/apis/resource/validation/validation.go`` (kubernetes/kubernetes, newest
release) for the objects kubedevice handles, so ``kubedevice dra validate`` refuses exactly
what ``kubectl apply`` would, with the same ``spec.selectors[0].cel.expression: Invalid
value: …`` lines, before anything reaches a cluster. Feature-gated fields follow the
default gates of that release.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..gostrings import quote as go_quote
from ..names import C_IDENTIFIER, DNS1123_SUBDOMAIN, QUALIFIED_NAME_PART
from . import cel
from .models import (
    Device as SliceDevice,
)
from .models import (
    DeviceAttribute,
    DeviceClaim,
    DeviceClass,
    DeviceConfiguration,
    DeviceConstraint,
    DeviceSelector,
    DRAObject,
    ExactDeviceRequest,
    NodeSelector,
    ObjectMeta,
    OpaqueDeviceConfiguration,
    ResourceClaim,
    ResourceSlice,
    ResourceSliceSpec,
)

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
ALLOCATION_MODES = ("All", "ExactCount")

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$"
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
    return FieldError(ErrorType.TOO_LONG, str(path), "", f"must have at most {limit} bytes")


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
    messages = []
    if _bytes(value) > 63:
        messages.append("must be no more than 63 characters")
    if not _DNS1123_LABEL.match(value):
        messages.append(_DNS1123_LABEL_MSG)
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


def validate_driver_name(driver: str, path: Path) -> Errors:
    """``ValidateCSIDriverName``: at most 63 characters, a DNS subdomain once lower-cased."""
    errors: Errors = []
    if not driver:
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


def validate_qualified_name(name: str, path: Path) -> Errors:
    """An attribute or capacity name: ``identifier`` or ``domain/identifier``.

    A name with two slashes or more is accepted: ``validateQualifiedName`` has no case for it
    (a TODO upstream, kept for compatibility with stored objects).
    """
    parts = name.split("/")
    if len(parts) == 1:
        return _validate_c_identifier(name, path)
    if len(parts) > 2:
        return []
    domain, ident = parts
    errors = validate_driver_name(domain, path) if domain else [invalid(path, "", "the domain must not be empty")]
    errors += _validate_c_identifier(ident, path) if ident else [invalid(path, "", "the name must not be empty")]
    return errors


def validate_fully_qualified_name(name: str, path: Path) -> Errors:
    errors = validate_qualified_name(name, path)
    if "/" not in name:
        errors.append(invalid(path, name, "a fully qualified name must be a domain and a name separated by a slash"))
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
    key: Callable[[_T], Any] | None = None,
) -> Errors:
    """Size limit first (it short-circuits, as upstream does against DoS), then items, then duplicates."""
    if 0 <= limit < len(items):
        return [too_many(path, len(items), limit)]
    errors: Errors = []
    for i, item in enumerate(items):
        errors += check(item, path.index(i))
    if key is not None:
        seen: set[Any] = set()
        for i, item in enumerate(items):
            k = key(item)
            if k in seen:
                errors.append(duplicate(path.index(i), k))
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


def validate_object_meta(meta: ObjectMeta, path: Path, namespaced: bool, check_generate_name: bool = True) -> Errors:
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
    return errors


# --- selectors and config -----------------------------------------------------------------


def validate_cel_expression(expression: str, path: Path) -> Errors:
    """Length, then compilation, then the static cost estimate, as for a new expression."""
    if len(expression.encode()) > cel.MAX_EXPRESSION_BYTES:
        return [too_long(path, cel.MAX_EXPRESSION_BYTES)]
    try:
        selector = cel.compile_selector(expression, env="NewExpressions")
    except cel.CompileError as error:
        return [invalid(path, expression, error.message)]
    if selector.cost_estimate > cel.MAX_COST:
        return [forbidden(path, "too complex, exceeds cost limit")]
    return []


def _validate_selector(selector: DeviceSelector, path: Path) -> Errors:
    if selector.cel is None:
        return [required(path.child("cel"))]
    return validate_cel_expression(selector.cel.expression, path.child("cel", "expression"))


def validate_selectors(selectors: Sequence[DeviceSelector], path: Path) -> Errors:
    return _validate_list(selectors, MAX_SELECTORS, _validate_selector, path)


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


def _validate_opaque(opaque: OpaqueDeviceConfiguration, path: Path) -> Errors:
    return validate_driver_name(opaque.driver, path.child("driver")) + _validate_parameters(
        opaque.parameters, path.child("parameters")
    )


def _validate_configuration(config: DeviceConfiguration | Any, path: Path) -> Errors:
    if config.opaque is None:
        return [required(path.child("opaque"))]
    return _validate_opaque(config.opaque, path.child("opaque"))


# --- node selectors (ValidateNodeSelector, for v1alpha3 suitableNodes and slices) -----------


def _validate_label_key(key: str, path: Path) -> Errors:
    parts = key.split("/")
    name = parts[-1]
    messages = []
    if len(parts) > 2:
        messages.append(
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix "
            "and '/' (e.g. 'example.com/MyName')"
        )
    else:
        if len(parts) == 2:
            if not parts[0]:
                messages.append("prefix part must be non-empty")
            else:
                messages += ["prefix part " + m for m in dns1123_subdomain_messages(parts[0])]
        if not name:
            messages.append("name part must be non-empty")
        elif _bytes(name) > 63:
            messages.append("name part must be no more than 63 characters")
        if name and not QUALIFIED_NAME_PART.match(name):
            messages.append(_QUALIFIED_NAME_MSG)
    return _each_message(path, key, messages)


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_BAD_OPERATOR = "not a valid selector operator"


def _label_value_messages(value: str) -> list[str]:
    """``validation.IsValidLabelValue``."""
    messages = ["must be no more than 63 characters"] if _bytes(value) > 63 else []
    return messages + ([] if _LABEL_VALUE.match(value) else [_LABEL_VALUE_MSG])


def _validate_requirement(requirement: Any, path: Path) -> Errors:
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
    errors += _validate_label_key(requirement.key, path.child("key"))
    for i, value in enumerate(values):
        errors += _each_message(path.child("values").index(i), value, _label_value_messages(value))
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


def validate_node_selector(selector: NodeSelector, path: Path) -> Errors:
    terms = selector.node_selector_terms
    if not terms:
        return [required(path.child("nodeSelectorTerms"), "must have at least one node selector term")]
    errors: Errors = []
    for i, term in enumerate(terms):
        term_path = path.child("nodeSelectorTerms").index(i)
        for j, requirement in enumerate(term.match_expressions):
            errors += _validate_requirement(requirement, term_path.child("matchExpressions").index(j))
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


def validate_device_class(obj: DeviceClass) -> Errors:
    spec, path = obj.spec, Path("spec")
    errors = validate_object_meta(obj.metadata, Path("metadata"), namespaced=False, check_generate_name=False)
    errors += validate_selectors(spec.selectors, path.child("selectors"))
    errors += _validate_list(spec.config, MAX_CONFIG, _validate_configuration, path.child("config"))
    if spec.suitable_nodes is not None:
        errors += validate_node_selector(spec.suitable_nodes, path.child("suitableNodes"))
    name = spec.extended_resource_name
    if name is not None and not _extended_resource_name_ok(name):
        errors.append(invalid(path.child("extendedResourceName"), name, "must be a valid extended resource name"))
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


def _validate_exact(request: ExactDeviceRequest, path: Path) -> Errors:
    name = request.device_class_name
    errors = (
        validate_dns_subdomain(name, path.child("deviceClassName"))
        if name
        else [required(path.child("deviceClassName"))]
    )
    errors += validate_selectors(request.selectors, path.child("selectors"))
    return errors + _validate_allocation_mode(request, path)


def _validate_request(request: Any, path: Path) -> Errors:
    errors = validate_dns_label(request.name, path.child("name"))
    has_first, has_exact = bool(request.first_available), request.exactly is not None
    if not has_first and not has_exact:
        errors.append(required(path, "exactly one of `exactly` or `firstAvailable` is required"))
    elif has_first and has_exact:
        errors.append(
            invalid(path, None, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set")
        )
    elif has_exact:
        errors += _validate_exact(request.exactly, path.child("exactly"))
    else:
        errors += _validate_list(
            request.first_available,
            MAX_FIRST_AVAILABLE,
            lambda sub, p: validate_dns_label(sub.name, p.child("name")) + _validate_exact(sub, p),
            path.child("firstAvailable"),
            key=lambda sub: sub.name,
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


def _validate_refs(refs: Sequence[str], path: Path, names: Mapping[str, set[str]]) -> Errors:
    return _validate_list(
        refs, MAX_REQUESTS, lambda ref, p: _validate_request_ref(ref, p, names), path, key=lambda r: r
    )


def _validate_constraint(constraint: DeviceConstraint, path: Path, names: Mapping[str, set[str]]) -> Errors:
    errors = _validate_refs(constraint.requests, path.child("requests"), names)
    if constraint.match_attribute is not None:
        errors += validate_fully_qualified_name(constraint.match_attribute, path.child("matchAttribute"))
    elif constraint.distinct_attribute is not None:
        errors += validate_fully_qualified_name(constraint.distinct_attribute, path.child("distinctAttribute"))
    else:  # DRAConsumableCapacity is on by default since 1.36: the path is the constraint's
        errors.append(required(path, _CONSTRAINT_MSG))
    return errors


def validate_resource_claim(obj: ResourceClaim) -> Errors:
    devices, path = obj.spec.devices, Path("spec").child("devices")
    names = _request_names(devices)
    errors = validate_object_meta(obj.metadata, Path("metadata"), namespaced=True)
    errors += _validate_list(
        devices.requests, MAX_REQUESTS, _validate_request, path.child("requests"), key=lambda r: r.name
    )
    errors += _validate_list(
        devices.constraints, MAX_CONSTRAINTS, lambda c, p: _validate_constraint(c, p, names), path.child("constraints")
    )
    errors += _validate_list(
        devices.config,
        MAX_CONFIG,
        lambda c, p: _validate_refs(c.requests, p.child("requests"), names) + _validate_configuration(c, p),
        path.child("config"),
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


def _validate_device(device: SliceDevice, path: Path, per_device: bool) -> Errors:
    errors = validate_dns_label(device.name, path.child("name"))
    total = len(device.attributes) + len(device.capacity)
    if total > MAX_ATTRIBUTES_AND_CAPACITIES:
        errors.append(
            invalid(
                path,
                total,
                f"the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}",
            )
        )
    for key, attribute in device.attributes.items():
        errors += validate_qualified_name(key, path.child("attributes"))
        errors += _validate_attribute(attribute, path.child("attributes").key(key))
    for key, capacity in device.capacity.items():
        errors += validate_qualified_name(key, path.child("capacity"))
        if capacity.request_policy is not None and not device.allow_multiple_allocations:
            errors.append(
                forbidden(
                    path.child("capacity").key(key).child("requestPolicy"), "allowMultipleAllocations must be true"
                )
            )
    node_fields = (device.node_name, device.node_selector, device.all_nodes)
    if not per_device and any(f is not None for f in node_fields):
        errors.append(
            invalid(
                path,
                None,
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true "
                "in the ResourceSlice spec",
            )
        )
    return errors


def _node_selection_errors(spec: ResourceSliceSpec, path: Path) -> Errors:
    errors: Errors = []
    set_fields = []
    if spec.node_name is not None:
        if spec.node_name:
            set_fields.append("`nodeName`")
            errors += validate_dns_subdomain(spec.node_name, path.child("nodeName"))
        else:
            errors.append(invalid(path.child("nodeName"), "", "must be either unset or set to a non-empty string"))
    if spec.node_selector is not None:
        set_fields.append("`nodeSelector`")
        errors += validate_node_selector(spec.node_selector, path.child("nodeSelector"))
        if len(spec.node_selector.node_selector_terms) != 1:
            terms = [t.model_dump(by_alias=True) for t in spec.node_selector.node_selector_terms]
            errors.append(
                invalid(
                    path.child("nodeSelector", "nodeSelectorTerms"), terms, "must have exactly one node selector term"
                )
            )
    for name, value in (("allNodes", spec.all_nodes), ("perDeviceNodeSelection", spec.per_device_node_selection)):
        if value is None:
            continue
        if value:
            set_fields.append(f"`{name}`")
        else:
            errors.append(invalid(path.child(name), False, "must be either unset or set to true"))
    choices = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    if not set_fields:
        errors.append(required(path, choices))
    elif len(set_fields) > 1:
        errors.append(invalid(path, "{" + ", ".join(set_fields) + "}", choices + ", but multiple fields are set"))
    return errors


def validate_resource_slice(obj: ResourceSlice) -> Errors:
    spec, path = obj.spec, Path("spec")
    errors = validate_object_meta(obj.metadata, Path("metadata"), namespaced=False)
    errors += validate_driver_name(spec.driver, path.child("driver"))
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
    errors += _node_selection_errors(spec, path)
    if spec.shared_counters is not None and "devices" in spec.model_fields_set:  # `devices: []` is set too
        errors.append(invalid(path, "", "only one of `sharedCounters` or `devices` is allowed"))
    advanced = any(map(uses_advanced_features, spec.devices))
    per_device = bool(spec.per_device_node_selection)
    errors += _validate_list(
        spec.devices,
        MAX_SLICE_DEVICES_ADVANCED if advanced else MAX_SLICE_DEVICES,
        lambda d, p: _validate_device(d, p, per_device),
        path.child("devices"),
        key=lambda d: d.name,
    )
    return errors


def uses_advanced_features(device: SliceDevice) -> bool:
    """Taints, counters or a list attribute: a slice holding such a device takes at most 64."""
    return bool(device.taints or device.consumes_counters) or any(
        a.ints is not None or a.bools is not None or a.strings is not None or a.versions is not None
        for a in device.attributes.values()
    )


def validate(obj: DRAObject) -> Errors:
    """All API-server validation errors of one object (empty when it would be accepted)."""
    if isinstance(obj, DeviceClass):
        return validate_device_class(obj)
    if isinstance(obj, ResourceClaim):
        return validate_resource_claim(obj)
    return validate_resource_slice(obj)
