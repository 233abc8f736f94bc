"""A port of the parts of Go's net/netip that Kubernetes' IP and CIDR libraries use.

Python's ``ipaddress`` disagrees with Go at the edges (zones, prefix spellings), so the
parsers follow netip.ParseAddr/ParsePrefix step by step; formatting uses RFC 5952 like Go.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache

from ..errors import KubedeviceError
from ..gostrings import quote


class NetIPError(KubedeviceError, ValueError):
    """Not an address or prefix Go would parse; the text is Go's error (``ParseAddr("x"): ...``)."""


class _Bad(Exception):
    """A parse failure inside ParseAddr: Go's message and the unparsed rest it points at."""

    def __init__(self, msg: str, at: str = "") -> None:
        super().__init__(msg)
        self.msg, self.at = msg, at


@dataclass(frozen=True, slots=True)
class Addr:
    value: int
    bits: int  # 32 or 128
    zone: str = ""

    def __str__(self) -> str:
        if self.bits == 32:
            return str(ipaddress.IPv4Address(self.value))
        text = str(ipaddress.IPv6Address(self.value))
        return f"{text}%{self.zone}" if self.zone else text

    def is4in6(self) -> bool:
        return self.bits == 128 and self.value >> 32 == 0xFFFF

    def _top(self, count: int) -> int:
        return self.value >> (self.bits - count)

    def is_unspecified(self) -> bool:
        return self.value == 0

    def is_loopback(self) -> bool:
        return self._top(8) == 127 if self.bits == 32 else self.value == 1

    def is_multicast(self) -> bool:
        return self._top(4) == 0xE if self.bits == 32 else self._top(8) == 0xFF

    def is_link_local_unicast(self) -> bool:
        return self._top(16) == 0xA9FE if self.bits == 32 else self._top(10) == 0x3FA

    def is_link_local_multicast(self) -> bool:
        return self._top(24) == 0xE00000 if self.bits == 32 else self._top(16) & 0xFF0F == 0xFF02

    def is_global_unicast(self) -> bool:
        if self.bits == 32 and self.value in (0, 0xFFFFFFFF):
            return False
        return not (self.is_unspecified() or self.is_loopback() or self.is_multicast() or self.is_link_local_unicast())


@dataclass(frozen=True, slots=True)
class Prefix:
    addr: Addr
    bits: int

    def __str__(self) -> str:
        return f"{self.addr}/{self.bits}"

    def _mask(self, bits: int) -> int:
        width = self.addr.bits
        return ((1 << bits) - 1) << (width - bits)

    def masked(self) -> Prefix:
        return Prefix(Addr(self.addr.value & self._mask(self.bits), self.addr.bits), self.bits)

    def contains(self, ip: Addr) -> bool:
        if ip.zone or ip.bits != self.addr.bits:
            return False
        return (ip.value ^ self.addr.value) & self._mask(self.bits) == 0

    def overlaps(self, other: Prefix) -> bool:
        if self == other:
            return True
        if self.addr.bits != other.addr.bits:
            return False
        shortest = min(self.bits, other.bits)
        mask = self._mask(shortest)
        return self.addr.value & mask == other.addr.value & mask


def _ipv4_fields(text: str) -> list[int]:
    """parseIPv4Fields: four decimal octets, no leading zeros."""
    fields: list[int] = []
    value, digits = 0, 0
    for i, c in enumerate(text):
        if "0" <= c <= "9":
            if digits == 1 and value == 0:
                raise _Bad("IPv4 field has octet with leading zero")
            value = value * 10 + ord(c) - 48
            digits += 1
            if value > 255:
                raise _Bad("IPv4 field has value >255")
        elif c == ".":
            if i == 0 or i == len(text) - 1 or text[i - 1] == ".":
                raise _Bad("IPv4 field must have at least one digit", text[i:])
            if len(fields) == 3:
                raise _Bad("IPv4 address too long")
            fields.append(value)
            value, digits = 0, 0
        else:
            raise _Bad("unexpected character", text[i:])
    if len(fields) < 3:
        raise _Bad("IPv4 address too short")
    return [*fields, value]


def _hex_group(s: str) -> tuple[int, int]:
    """Leading hex digits of ``s`` (at most 4): (value, count)."""
    value, count = 0, 0
    while count < len(s) and s[count] in "0123456789abcdefABCDEF":
        if count > 3:
            raise _Bad("each group must have 4 or less digits", s)
        value = value * 16 + int(s[count], 16)
        count += 1
    return value, count


def _ipv6(text: str) -> Addr:
    s, zone = text, ""
    if "%" in s:
        s, zone = s.split("%", 1)
        if not zone:
            raise _Bad("zone must be a non-empty string")
    groups: list[int] = []  # bytes
    ellipsis = -1
    if s.startswith("::"):
        ellipsis, s = 0, s[2:]
        if not s:
            return Addr(0, 128, zone)
    while len(groups) < 16:
        value, count = _hex_group(s)
        if count == 0:
            raise _Bad("each colon-separated field must have at least one digit", s)
        if count < len(s) and s[count] == ".":
            if ellipsis < 0 and len(groups) != 12:
                raise _Bad("embedded IPv4 address must replace the final 2 fields of the address", s)
            if len(groups) + 4 > 16:
                raise _Bad("too many hex fields to fit an embedded IPv4 at the end of the address", s)
            groups += _ipv4_fields(s)
            s = ""
            break
        groups += [value >> 8, value & 0xFF]
        s = s[count:]
        if not s:
            break
        if s[0] != ":":
            raise _Bad("unexpected character, want colon", s)
        if len(s) == 1:
            raise _Bad("colon must be followed by more characters", s)
        s = s[1:]
        if s[0] == ":":
            if ellipsis >= 0:
                raise _Bad("multiple :: in address", s)
            ellipsis, s = len(groups), s[1:]
            if not s:
                break
    if s:
        raise _Bad("trailing garbage after address", s)
    if len(groups) < 16:
        if ellipsis < 0:
            raise _Bad("address string too short")
        groups = groups[:ellipsis] + [0] * (16 - len(groups)) + groups[ellipsis:]
    elif ellipsis >= 0:
        raise _Bad("the :: must expand to at least one field of zeros")
    return Addr(int.from_bytes(bytes(groups), "big"), 128, zone)


@lru_cache(maxsize=4096)
def parse_addr(text: str) -> Addr:
    """netip.ParseAddr (cached: addresses repeat across devices and selectors)."""
    try:
        return _parse_addr(text)
    except _Bad as bad:
        at = f" (at {quote(bad.at)})" if bad.at else ""
        raise NetIPError(f"ParseAddr({quote(text)}): {bad.msg}{at}") from None


def _parse_addr(text: str) -> Addr:
    for c in text:
        if c == ".":
            return Addr(int.from_bytes(bytes(_ipv4_fields(text)), "big"), 32)
        if c == ":":
            return _ipv6(text)
        if c == "%":
            raise _Bad("missing IPv6 address")
    raise _Bad("unable to parse IP")


@lru_cache(maxsize=1024)
def parse_prefix(text: str) -> Prefix:
    """netip.ParsePrefix (the address keeps its host bits)."""

    def fail(msg: str) -> NetIPError:
        return NetIPError(f"netip.ParsePrefix({quote(text)}): {msg}")

    slash = text.rfind("/")
    if slash < 0:
        raise fail("no '/'")
    try:
        addr = parse_addr(text[:slash])
    except NetIPError as exc:
        raise fail(str(exc)) from None
    if addr.zone:
        raise fail("IPv6 zones cannot be present in a prefix")
    bits = text[slash + 1 :]
    if (len(bits) > 1 and not "1" <= bits[0] <= "9") or not bits.isascii() or not bits.isdigit():
        raise fail(f"bad bits after slash: {quote(bits)}")
    if int(bits) > addr.bits:
        raise fail("prefix length out of range")
    return Prefix(addr, int(bits))
