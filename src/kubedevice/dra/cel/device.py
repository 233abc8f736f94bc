"""The `device` variable: DeviceInput seen as CEL maps, the way DeviceMatches builds them.

Whole maps are only built when an expression needs one; the common shape
``device.attributes["domain"].name`` reads the one attribute it names straight from the input.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, ClassVar

from .quantity import Quantity, QuantityError, parse_quantity
from .semver import Semver, SemverError, parse
from .values import Err


class DomainMap(dict[str, Any]):
    """Outer attributes/capacity map: an unknown domain reads as an empty map, like Kubernetes."""

    default: ClassVar[dict[str, Any]] = {}


def _semver(text: str) -> Semver:
    try:
        return parse(text)
    except SemverError as exc:
        raise Err(f"parse semantic version: {exc}") from exc


def _identity(value: Any) -> Any:
    return value


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "string": _identity, "int": _identity, "bool": _identity, "version": _semver,
    "strings": list, "ints": list, "bools": list, "versions": lambda xs: [_semver(x) for x in xs],
}
# DeviceMatches' precedence when a malformed attribute sets several fields.
_ORDER = ("ints", "bools", "strings", "versions", "int", "bool", "string", "version")


def attribute_value(raw: Any) -> Any:
    """One ResourceSlice attribute ({"int": 5}, {"versions": [...]}, ...) as a CEL value."""
    value = raw.get("string")
    if value is not None and len(raw) == 1:
        return value
    if len(raw) == 1:
        for kind, value in raw.items():
            convert = _CONVERTERS.get(kind)
            if convert is not None and value is not None:
                return convert(value)
    for kind in _ORDER:
        if raw.get(kind) is not None:
            return _CONVERTERS[kind](raw[kind])
    raise Err("unsupported attribute value")


def split_name(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def attribute_domains(device: Any) -> DomainMap:
    out = DomainMap()
    for name, value in device.attributes.items():
        domain, ident = split_name(name, device.driver)
        out.setdefault(domain, {})[ident] = attribute_value(value)
    return out


def _quantity(name: str, text: str) -> Quantity:
    try:
        return parse_quantity(text)
    except QuantityError as exc:
        raise Err(f"capacity {name}: {exc}") from exc


def capacity_domains(device: Any) -> DomainMap:
    out = DomainMap()
    for name, value in device.capacity.items():
        domain, ident = split_name(name, device.driver)
        out.setdefault(domain, {})[ident] = _quantity(name, value)
    return out


def memoised(build: Callable[[Any], dict[str, Any]], key: str = "") -> Callable[[Any], dict[str, Any]]:
    """``build(device)`` once per device: the result is kept in the (immutable) DeviceInput."""
    key = f"_kubedevice_cel_{key or build.__name__}"

    def get(device: Any) -> dict[str, Any]:
        memo = device.__dict__
        found: dict[str, Any] | None = memo.get(key)
        if found is None:
            found = memo[key] = build(device)
        return found

    return get


def domain_getter(field: str, domain: str) -> Callable[[Any], dict[str, Any]]:
    """``device.<field>[domain]`` without building the other domains."""
    return memoised(lambda device: _domain_map(device, field, domain), f"{field}/{domain}")


def _domain_map(device: Any, field: str, domain: str) -> dict[str, Any]:
    source = device.attributes if field == "attributes" else device.capacity
    prefix = domain + "/"
    own = device.driver == domain
    out: dict[str, Any] = {}
    for name, value in source.items():
        if name.startswith(prefix) or (own and "/" not in name):
            ident = name[len(prefix):] if name.startswith(prefix) else name
            out[ident] = attribute_value(value) if field == "attributes" else _quantity(name, value)
    return out


def value_getter(field: str, domain: str, ident: str) -> Callable[[Any], Any]:
    """``device.<field>[domain][ident]`` read straight from the input ("no such key" if absent)."""
    qualified = f"{domain}/{ident}"
    missing = f"no such key: {ident}"
    if field == "capacity":

        def capacity(device: Any) -> Any:
            raw = device.capacity.get(qualified)
            if raw is None and device.driver == domain:
                raw = device.capacity.get(ident)
            if raw is None:
                raise Err(missing)
            return _quantity(qualified, raw)

        return capacity

    def attribute(device: Any) -> Any:
        attributes = device.attributes
        raw = attributes.get(qualified)
        if raw is None and device.driver == domain:
            raw = attributes.get(ident)
        if raw is None:
            raise Err(missing)
        if len(raw) == 1:
            value = raw.get("string")  # the commonest kind, without a view and an iterator
            if value is not None:
                return value
            for kind, value in raw.items():
                if value is not None:
                    if kind in _PLAIN:
                        return value
                    convert = _CONVERTERS.get(kind)  # a version or a list: convert it here
                    if convert is not None:
                        return convert(value)
        return attribute_value(raw)

    return attribute


_PLAIN = frozenset({"string", "int", "bool"})
_UNSEEN = object()


def kept_value_getter(field: str, domain: str, ident: str) -> Callable[[Any], Any]:
    """value_getter whose values are kept in the (immutable) DeviceInput, for selectors an
    allocator evaluates again and again on the same devices; a failed read is not kept."""
    get = value_getter(field, domain, ident)
    key = f"_kubedevice_cel_value/{field}/{domain}/{ident}"

    def kept(device: Any) -> Any:
        memo = device.__dict__
        value = memo.get(key, _UNSEEN)
        if value is _UNSEEN:
            value = memo[key] = get(device)
        return value

    return kept


@lru_cache(maxsize=1024)
def _valid_version(text: str) -> bool:
    try:
        parse(text)
    except SemverError:
        return False
    return True

CHECKED = "_kubedevice_cel_checked"


def precheck(device: Any) -> None:
    """DeviceMatches converts every attribute first, so one bad version fails any selector.

    The verdict is memoised in the (immutable) DeviceInput, so a device evaluated against many
    selectors is scanned once.
    """
    memo = device.__dict__
    if CHECKED in memo:
        if memo[CHECKED] is not None:
            raise memo[CHECKED]
        return
    error = None if _plain(device.attributes) else _first_error(device.attributes)
    memo[CHECKED] = error
    if error is not None:
        raise error


_SAFE = frozenset({"string", "int", "bool", "strings", "ints", "bools"})


def _plain(attributes: Any) -> bool:
    """Every attribute sets exactly one kind, and a version parses: nothing can fail. The
    common case, so one key per attribute is looked at (no views, no per-kind probes)."""
    for value in attributes.values():
        if len(value) != 1:
            return False
        for kind in value:
            if kind in _SAFE:
                if value[kind] is None:
                    return False
            elif kind != "version" or type(value[kind]) is not str or not _valid_version(value[kind]):
                return False
    return True


def _first_error(attributes: Any) -> Err | None:
    for name, value in attributes.items():
        try:
            attribute_value(value)
        except Err as exc:
            return Err(f"attribute {name}: {exc}")
    return None
