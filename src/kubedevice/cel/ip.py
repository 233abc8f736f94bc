"""Kubernetes' IP library (k8s.io/apiserver/pkg/cel/library/ip.go, base environment since 1.30):
ip(), isIP(), ip.isCanonical(), family() and the address class tests, with their static costs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..gostrings import quote
from .cost import ONE, Coster, Range, scaled
from .library import CALL_COSTS, RUNTIME_COSTS, VALUE_TYPES, first_traversal, register
from .netip import Addr, NetIPError, parse_addr
from .parser import Call
from .values import Err

IP_TYPE = "net.IP"


@dataclass(frozen=True, slots=True)
class IP:
    """A CEL ``net.IP`` value."""

    CEL_TYPE: ClassVar[str] = IP_TYPE
    CEL_STRICT: ClassVar[bool] = True  # == with another kind is an error, as upstream
    addr: Addr


def parse_ip(text: str) -> Addr:
    """parseIPAddr: netip.ParseAddr without zones or IPv4-mapped IPv6 addresses."""
    try:
        addr = parse_addr(text)
    except NetIPError as exc:
        raise Err(f"IP Address {quote(text)} parse error during conversion from string: {exc}") from None
    if addr.zone:
        raise Err(f"IP address {quote(text)} with zone value is not allowed")
    if addr.is4in6():
        raise Err(f"IPv4-mapped IPv6 address {quote(text)} is not allowed")
    return addr


def _is_ip(text: str) -> bool:
    try:
        parse_ip(text)
    except Err:
        return False
    return True


def _string_cost(factor: float) -> Any:
    def estimate(c: Coster, node: Call) -> tuple[Range, None] | None:
        if not node.args:
            return None
        return scaled(c.size_or_unknown(node.args[0]), factor), None

    return estimate


def _ip_cost(c: Coster, node: Call) -> tuple[Range, None] | None:
    """ip(string) scans the string; cidr.ip() (overload cidr_ip) costs 1."""
    if node.target is not None and not node.args:
        return ONE, None
    found: tuple[Range, None] | None = _string_cost(0.1)(c, node)
    return found


def _unit(c: Coster, node: Call) -> tuple[Range, None]:
    return ONE, None


VALUE_TYPES[IP_TYPE] = (IP,)
register("ip", False, ("string",), IP_TYPE, lambda s: IP(parse_ip(s)))
register("isIP", False, ("string",), "bool", _is_ip)
register("ip.isCanonical", False, ("string",), "bool", lambda s: str(parse_ip(s)) == s)
register("family", True, (IP_TYPE,), "int", lambda ip: 4 if ip.addr.bits == 32 else 6)
register("isUnspecified", True, (IP_TYPE,), "bool", lambda ip: ip.addr.is_unspecified())
register("isLoopback", True, (IP_TYPE,), "bool", lambda ip: ip.addr.is_loopback())
register("isLinkLocalMulticast", True, (IP_TYPE,), "bool", lambda ip: ip.addr.is_link_local_multicast())
register("isLinkLocalUnicast", True, (IP_TYPE,), "bool", lambda ip: ip.addr.is_link_local_unicast())
register("isGlobalUnicast", True, (IP_TYPE,), "bool", lambda ip: ip.addr.is_global_unicast())
register("string", False, (IP_TYPE,), "string", lambda ip: str(ip.addr))
_PARSE = first_traversal()
RUNTIME_COSTS.update(
    {
        # ip(string) parses its argument; cidr.ip() reads a field (Kubernetes' CallCost)
        "ip": lambda args, result: _PARSE(args, result) if type(args[0]) is str else 1,
        "isIP": first_traversal(),
        "ip.isCanonical": first_traversal(2),
    }
)
CALL_COSTS.update(
    {
        "ip": _ip_cost,
        "isIP": _string_cost(0.1),
        "ip.isCanonical": _string_cost(0.2),
        **dict.fromkeys(
            ("family", "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast"),
            _unit,
        ),
    }
)
