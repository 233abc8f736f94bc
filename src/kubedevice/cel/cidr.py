"""Kubernetes' CIDR library (k8s.io/apiserver/pkg/cel/library/cidr.go, base environment since
1.30): cidr(), isCIDR(), containsIP(), containsCIDR(), ip(), masked(), prefixLength()."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..gostrings import quote
from .cost import ONE, Coster, Range, plus, scaled
from .ip import IP, IP_TYPE, parse_ip
from .library import CALL_COSTS, NOT_CONSTANT, RUNTIME_COSTS, SPECIALIZERS, VALUE_TYPES, first_traversal, register
from .netip import NetIPError, Prefix, parse_prefix
from .parser import Call
from .values import Err, charge_call, refused, traversal

CIDR_TYPE = "net.CIDR"


@dataclass(frozen=True, slots=True)
class CIDR:
    """A CEL ``net.CIDR`` value."""

    CEL_TYPE: ClassVar[str] = CIDR_TYPE
    CEL_STRICT: ClassVar[bool] = True  # == with another kind is an error, as upstream
    prefix: Prefix


def parse_cidr(text: str) -> Prefix:
    try:
        prefix = parse_prefix(text)
    except NetIPError as exc:
        raise Err(
            "network address parse error during conversion from string: network address parse error "
            f"during conversion from string: {exc}"
        ) from None
    if prefix.addr.is4in6():
        raise Err(
            f"network address parse error during conversion from string: IPv4-mapped IPv6 address "
            f"{quote(text)} is not allowed"
        )
    return prefix


def _is_cidr(text: str) -> bool:
    try:
        parse_cidr(text)
    except Err:
        return False
    return True


def _contains_cidr(cidr: CIDR, other: CIDR) -> bool:
    return cidr.prefix.overlaps(other.prefix) and cidr.prefix.bits <= other.prefix.bits


# Static costs: an address is 4 to 16 bytes; the string overloads also parse their argument.
_COMPARE: Range = scaled((8, 32), 0.1)


def _contains_ip_cost(c: Coster, node: Call) -> tuple[Range, None] | None:
    if not node.args:
        return None
    return _union_string(c, node, _COMPARE), None


def _contains_cidr_cost(c: Coster, node: Call) -> tuple[Range, None] | None:
    if not node.args:
        return None
    return _union_string(c, node, plus(_COMPARE, scaled((4, 16), 0.1), ONE)), None


def _union_string(c: Coster, node: Call, base: Range) -> Range:
    """A dyn argument may take either overload: the estimate spans both."""
    arg = c.type_of(node.args[0])
    with_string = plus(base, scaled(c.size_or_unknown(node.args[0]), 0.1))
    if arg == "string":
        return with_string
    if arg in ("dyn", "any"):
        return min(base[0], with_string[0]), max(base[1], with_string[1])
    return base


def _string_cost(c: Coster, node: Call) -> tuple[Range, None] | None:
    if not node.args:
        return None
    return scaled(c.size_or_unknown(node.args[0]), 0.1), None


def _unit(c: Coster, node: Call) -> tuple[Range, None]:
    return ONE, None


def _contains_tracked(base: int) -> Any:
    """Kubernetes' CallCost of containsIP/containsCIDR: ``base`` for comparing the addresses (a
    CIDR has no size, so counts 1), plus the parse of a string argument."""
    return lambda args, _result: base + (traversal(len(args[1])) if type(args[1]) is str else 0)


_CONTAINS_IP = traversal(1 + 1)  # ceil((cidrSize + cidrSize) * 0.1)
_CONTAINS_CIDR = _CONTAINS_IP + traversal(1) + 1  # and the masking: the address once more, plus 1


def _string_ip(text: str) -> Any:
    """containsIP's string argument. Upstream (cidrContainsIPString) passes the parse error on as
    a value that is not an IP, and then refuses its *network* argument: "no such overload"."""
    try:
        return parse_ip(text)
    except Err:
        raise refused() from None


def _specialize_contains_ip(_nodes: list[Any], consts: list[Any], fns: list[Any], impl: Any) -> Any:
    """``cidr("…").containsIP(x)`` with a constant network: no per-call overload dispatch."""
    if len(fns) != 2 or type(consts[0]) is not CIDR or consts[1] is not NOT_CONSTANT:
        return None
    network, argument = consts[0], fns[1]
    contains = network.prefix.contains

    def contains_ip(a: dict[str, Any]) -> bool:
        value = argument(a)
        if type(value) is str:
            charge_call(a, _CONTAINS_IP + traversal(len(value)))
            return contains(_string_ip(value))
        charge_call(a, _CONTAINS_IP)
        return bool(impl(network, value))

    return contains_ip


def _register() -> Any:
    VALUE_TYPES[CIDR_TYPE] = (CIDR,)
    register("cidr", False, ("string",), CIDR_TYPE, lambda s: CIDR(parse_cidr(s)))
    register("isCIDR", False, ("string",), "bool", _is_cidr)
    register("containsIP", True, (CIDR_TYPE, "string"), "bool", lambda c, s: c.prefix.contains(_string_ip(s)))
    register("containsIP", True, (CIDR_TYPE, IP_TYPE), "bool", lambda c, ip: c.prefix.contains(ip.addr))
    SPECIALIZERS["containsIP"] = _specialize_contains_ip
    register("containsCIDR", True, (CIDR_TYPE, "string"), "bool", lambda c, s: _contains_cidr(c, CIDR(parse_cidr(s))))
    register("containsCIDR", True, (CIDR_TYPE, CIDR_TYPE), "bool", _contains_cidr)
    register("ip", True, (CIDR_TYPE,), IP_TYPE, lambda c: IP(c.prefix.addr))
    register("prefixLength", True, (CIDR_TYPE,), "int", lambda c: c.prefix.bits)
    register("masked", True, (CIDR_TYPE,), CIDR_TYPE, lambda c: CIDR(c.prefix.masked()))
    register("string", False, (CIDR_TYPE,), "string", lambda c: str(c.prefix))
    RUNTIME_COSTS.update(
        {
            "cidr": first_traversal(),
            "isCIDR": first_traversal(),
            "containsIP": _contains_tracked(_CONTAINS_IP),
            "containsCIDR": _contains_tracked(_CONTAINS_CIDR),
        }
    )
    CALL_COSTS.update(
        {
            "cidr": _string_cost,
            "isCIDR": _string_cost,
            "containsIP": _contains_ip_cost,
            "containsCIDR": _contains_cidr_cost,
            "prefixLength": _unit,
            "masked": _unit,
        }
    )


_register()
