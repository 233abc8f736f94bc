"""The `device` variable: DeviceInput seen as CEL maps, the way DeviceMatches builds them.

Whole maps are only built when an expression needs one; the common shape
``device.attributes["domain"].name`` reads the one attribute it names straight from the input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ...cel.quantity import Quantity, QuantityError, parse_quantity
from ...cel.semver import Semver, SemverError, parse
from ...cel.values import DefaultingMap, Err


def _semver(text: str) -> Semver:
    if type(text) is not str:  # only a hand-built DeviceInput can hold one: refuse it, do not crash
        raise Err("unsupported attribute value")
    try:
        return parse(text)
    except SemverError as exc:
        raise Err(f"parse semantic version: {exc}") from exc


def _identity(value: Any) -> Any:
    return value


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "string": _identity,
    "int": _identity,
    "bool": _identity,
    "version": _semver,
    "strings": list,
    "ints": list,
    "bools": list,
    "versions": lambda xs: [_semver(x) for x in xs],
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


def attribute_domains(device: Any) -> DefaultingMap:
    out = DefaultingMap()
    for name, value in device.attributes.items():
        domain, ident = split_name(name, device.driver)
        out.setdefault(domain, {})[ident] = attribute_value(value)
    return out


def _quantity(name: str, text: str) -> Quantity:
    try:
        return parse_quantity(text)
    except QuantityError as exc:
        raise Err(f"capacity {name}: {exc}") from exc


def capacity_domains(device: Any) -> DefaultingMap:
    out = DefaultingMap()
    for name, value in device.capacity.items():
        domain, ident = split_name(name, device.driver)
        out.setdefault(domain, {})[ident] = _quantity(name, value)
    return out


def memo_of(device: Any) -> dict[str, Any]:
    """What selectors learnt about this (immutable) DeviceInput, made on first use: most
    devices are evaluated once (cold) and never need it."""
    memo: dict[str, Any] | None = device._memo
    if memo is None:
        memo = {}
        object.__setattr__(device, "_memo", memo)
    return memo


def memoised(build: Callable[[Any], dict[str, Any]], key: str = "") -> Callable[[Any], dict[str, Any]]:
    """``build(device)`` once per device: the result is kept in the (immutable) DeviceInput."""
    key = key or build.__name__

    def get(device: Any) -> dict[str, Any]:
        memo = memo_of(device)
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
            ident = name[len(prefix) :] if name.startswith(prefix) else name
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
    key = f"value/{field}/{domain}/{ident}"

    def kept(device: Any) -> Any:
        memo = memo_of(device)
        value = memo.get(key, _UNSEEN)
        if value is _UNSEEN:
            value = memo[key] = get(device)
        return value

    return kept


_KNOWN_VERSIONS: set[str] = set()  # versions seen to parse: a set probe costs an eighth of a call


def _valid_version(text: Any) -> bool:
    if type(text) is not str:
        return False
    try:
        parse(text)
    except SemverError:
        return False
    if len(_KNOWN_VERSIONS) >= 4096:
        _KNOWN_VERSIONS.clear()
    _KNOWN_VERSIONS.add(text)
    return True


UNCHECKED: Any = object()  # DeviceInput._checked before precheck: not None, not an Err


def precheck(device: Any) -> None:
    """DeviceMatches converts every attribute first, so one bad version fails any selector.

    The verdict is kept in the (immutable) DeviceInput's own slot, so a device evaluated
    against many selectors is scanned once (or never: :func:`converted`).
    """
    error = device._checked
    if error is UNCHECKED:
        error = None if _plain(device.attributes) else _first_error(device.attributes)
        object.__setattr__(device, "_checked", error)
    if error is not None:
        raise error


def converted(device: Any) -> None:
    """Record that every attribute of the DeviceInput converts (its maker checked them with
    :func:`all_convert`), so :func:`precheck` does not read them: a view over decoded models
    converts an attribute only when a selector reads it."""
    object.__setattr__(device, "_checked", None)


SAFE_KINDS = frozenset({"string", "int", "bool", "strings", "ints", "bools"})
"""The attribute kinds whose value always converts; a ``version`` converts when it parses."""


def version_converts(value: Any) -> bool:
    """A ``version`` attribute's value converts: it parses as semver (parses seen are kept)."""
    return value in _KNOWN_VERSIONS or _valid_version(value)


def all_convert(attributes: Iterable[tuple[str, Any]]) -> bool:
    """Every attribute, as (kind, value), converts: a kind that cannot fail with a value, or a
    version that parses."""
    for kind, value in attributes:
        if kind in SAFE_KINDS:
            if value is None:
                return False
        elif kind != "version" or not version_converts(value):
            return False
    return True


def _plain(attributes: Any) -> bool:
    """Every attribute sets exactly one kind, and it converts: nothing can fail. Anything
    unusual returns False and _first_error looks closer."""
    try:
        return all_convert([_only(value) for value in attributes.values()])
    except (ValueError, TypeError):  # several kinds or none, not a mapping, an unhashable version
        return False


def _only(value: Any) -> tuple[str, Any]:
    (kind,) = value  # exactly one kind, else ValueError
    return kind, value[kind]


def _first_error(attributes: Any) -> Err | None:
    for name, value in attributes.items():
        try:
            attribute_value(value)
        except Err as exc:
            return Err(f"attribute {name}: {exc}")
    return None
