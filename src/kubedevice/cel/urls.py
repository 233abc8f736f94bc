"""Kubernetes' URL library (k8s.io/apiserver/pkg/cel/library/urls.go, base environment since 1.0):
url(), isURL(), getScheme(), getHost(), getHostname(), getPort(), getEscapedPath(), getQuery().

Parsing is a port of Go's net/url (Parse and ParseRequestURI) on UTF-8 bytes, since Python's
urllib accepts and splits differently; a URL must pass ParseRequestURI, as upstream demands.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from ..errors import KubedeviceError
from ..gostrings import quote_bytes
from .cost import ONE, Coster, Range, scaled
from .library import CALL_COSTS, RUNTIME_COSTS, VALUE_TYPES, first_traversal, register
from .netip import NetIPError, parse_addr
from .parser import Call
from .values import Err

URL_TYPE = "kubernetes.URL"
PATH, PATH_SEGMENT, HOST, ZONE, USER_PASSWORD, QUERY_COMPONENT, FRAGMENT = range(7)
_ALNUM = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_HEX = frozenset(b"0123456789abcdefABCDEF")


class URLError(KubedeviceError, ValueError):
    """Go's url.Parse would fail."""


def _should_escape(c: int, mode: int) -> bool:
    """net/url shouldEscape (the generator of its encoding table)."""
    if c in _ALNUM:
        return False
    if mode in (HOST, ZONE) and c in b"!$&'()*+,;=:[]<>\"":
        return False
    if c in b"-_.~":
        return False
    if c in b"$&+,/:;=?@":
        return {
            PATH: c == ord("?"),
            PATH_SEGMENT: c in b"/;,?",
            USER_PASSWORD: c in b"@/?:",
            QUERY_COMPONENT: True,
            FRAGMENT: False,
        }.get(mode, True)
    return not (mode == FRAGMENT and c in b"!()*")


def _escape_error(escape: bytes) -> URLError:
    return URLError(f"invalid URL escape {quote_bytes(escape)}")


def _unescape(s: bytes, mode: int) -> bytes:
    i, out = 0, bytearray()
    while i < len(s):
        c = s[i]
        if c == ord("%"):
            if i + 2 >= len(s) or s[i + 1] not in _HEX or s[i + 2] not in _HEX:
                raise _escape_error(s[i : i + 3])
            value = int(s[i + 1 : i + 3], 16)
            if mode == HOST and value >> 4 < 8 and s[i : i + 3] != b"%25":
                raise _escape_error(s[i : i + 3])
            if mode == ZONE and s[i : i + 3] != b"%25" and value != 0x20 and _should_escape(value, HOST):
                raise _escape_error(s[i : i + 3])
            out.append(value)
            i += 3
            continue
        if mode in (HOST, ZONE) and c < 0x80 and _should_escape(c, mode):
            raise URLError(f"invalid character {quote_bytes(s[i : i + 1])} in host name")
        out.append(0x20 if c == ord("+") and mode == QUERY_COMPONENT else c)
        i += 1
    return bytes(out)


def _escape(s: bytes, mode: int) -> bytes:
    out = bytearray()
    for c in s:
        if not _should_escape(c, mode):
            out.append(c)
        elif c == 0x20 and mode == QUERY_COMPONENT:
            out.append(ord("+"))
        else:
            out += b"%" + b"%02X" % c
    return bytes(out)


def _valid_port(port: bytes) -> bool:
    return port == b"" or (port[:1] == b":" and all(0x30 <= c <= 0x39 for c in port[1:]))


@dataclass(frozen=True)
class ParsedURL:
    scheme: bytes = b""
    opaque: bytes = b""
    user: bytes | None = None
    host: bytes = b""
    path: bytes = b""
    raw_path: bytes = b""
    omit_host: bool = False
    force_query: bool = False
    raw_query: bytes = b""
    fragment: bytes = b""

    def escaped_path(self) -> bytes:
        if self.raw_path and _valid_encoded(self.raw_path):
            try:
                if _unescape(self.raw_path, PATH) == self.path:
                    return self.raw_path
            except URLError:
                pass
        return b"*" if self.path == b"*" else _escape(self.path, PATH)

    def split_host(self) -> tuple[bytes, bytes]:
        host, port = self.host, b""
        colon = host.rfind(b":")
        if colon != -1 and _valid_port(host[colon:]):
            host, port = host[:colon], host[colon + 1 :]
        if host.startswith(b"[") and host.endswith(b"]"):
            host = host[1:-1]
        return host, port

    def query(self) -> dict[str, list[str]]:
        """url.ParseQuery, ignoring the pairs it reports errors for."""
        values: dict[str, list[str]] = {}
        for pair in self.raw_query.split(b"&"):
            if b";" in pair or not pair:
                continue
            key, _, value = pair.partition(b"=")
            try:
                k, val = _unescape(key, QUERY_COMPONENT), _unescape(value, QUERY_COMPONENT)
            except URLError:
                continue
            values.setdefault(_text(k), []).append(_text(val))
        return values


def _valid_encoded(s: bytes) -> bool:
    return all(c in b"!$&'()*+,;=:@[]%" or not _should_escape(c, PATH) for c in s)


def _scheme(raw: bytes) -> tuple[bytes, bytes]:
    for i, c in enumerate(raw):
        if 0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A:
            continue
        if 0x30 <= c <= 0x39 or c in b"+-.":
            if i == 0:
                return b"", raw
            continue
        if c == ord(":"):
            if i == 0:
                raise URLError("missing protocol scheme")
            return raw[:i], raw[i + 1 :]
        return b"", raw
    return b"", raw


def _host(scheme: bytes, host: bytes) -> bytes:
    bracket = host.rfind(b"[")
    if bracket > 0:
        raise URLError("invalid IP-literal")
    if bracket == 0:
        close = host.rfind(b"]")
        if close < 0:
            raise URLError("missing ']' in host")
        colon_port = host[close + 1 :]
        if not _valid_port(colon_port):
            raise URLError(f"invalid port {quote_bytes(colon_port)} after host")
        port = _unescape(colon_port, HOST)
        name = host[1:close]
        zone = name.find(b"%25")
        literal = (_unescape(name[:zone], HOST) + _unescape(name[zone:], ZONE)) if zone >= 0 else _unescape(name, HOST)
        try:
            addr = parse_addr(_text(literal))
        except NetIPError as exc:
            raise URLError(f"invalid host: {exc}") from None
        if addr.bits == 32:
            raise URLError("invalid IP-literal")
        return b"[" + literal + b"]" + port
    first = host.find(b":")
    if first != -1:
        last = host.rfind(b":")
        i = first if scheme in (b"http", b"https") else last  # GODEBUG urlstrictcolons=1 (Go 1.26)
        if not _valid_port(host[i:]):
            raise URLError(f"invalid port {quote_bytes(host[i:])} after host")
    return _unescape(host, HOST)


def _authority(scheme: bytes, authority: bytes) -> tuple[bytes | None, bytes]:
    at = authority.rfind(b"@")
    host = _host(scheme, authority[at + 1 :] if at >= 0 else authority)
    if at < 0:
        return None, host
    userinfo = authority[:at]
    if not all(c in _ALNUM or c in b"-._:~!$&'()*+,;=%@" for c in userinfo):
        raise URLError("net/url: invalid userinfo")
    name, _, password = userinfo.partition(b":")
    _unescape(name, USER_PASSWORD)
    _unescape(password, USER_PASSWORD)
    return userinfo, host


def parse(raw: bytes, via_request: bool) -> ParsedURL:
    """net/url parse(); fragments are not split off here (ParseRequestURI keeps them)."""
    if any(c < 0x20 or c == 0x7F for c in raw):
        raise URLError("net/url: invalid control character in URL")
    if not raw and via_request:
        raise URLError("empty url")
    if raw == b"*":
        return ParsedURL(path=b"*")
    scheme, rest = _scheme(raw)
    scheme = scheme.lower()
    force_query, raw_query = False, b""
    if rest.endswith(b"?") and rest.count(b"?") == 1:
        force_query, rest = True, rest[:-1]
    else:
        rest, _, raw_query = rest.partition(b"?")
    if not rest.startswith(b"/"):
        if scheme:
            return ParsedURL(scheme=scheme, opaque=rest, force_query=force_query, raw_query=raw_query)
        if via_request:
            raise URLError("invalid URI for request")
        if b":" in rest.partition(b"/")[0]:
            raise URLError("first path segment in URL cannot contain colon")
    user, host, omit_host = None, b"", False
    if (scheme or (not via_request and not rest.startswith(b"///"))) and rest.startswith(b"//"):
        authority, slash, tail = rest[2:].partition(b"/")
        rest = slash + tail
        user, host = _authority(scheme, authority)
    elif scheme and rest.startswith(b"/"):
        omit_host = True
    path = _unescape(rest, PATH)
    raw_path = b"" if _escape(path, PATH) == rest else rest
    return ParsedURL(scheme, b"", user, host, path, raw_path, omit_host, force_query, raw_query)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


@dataclass(frozen=True, slots=True)
class URL:
    """A CEL ``kubernetes.URL`` value; equal when url.URL.String() is (the parsed parts are)."""

    CEL_TYPE: ClassVar[str] = URL_TYPE
    CEL_STRICT: ClassVar[bool] = True  # == with another kind is an error, as upstream
    parsed: ParsedURL


def to_url(text: str) -> URL:
    raw = text.encode("utf-8", "surrogateescape")
    try:
        parse(raw, True)  # ParseRequestURI must accept it ...
        base, _, fragment = raw.partition(b"#")  # ... and url.Parse gives the value
        parsed = parse(base, False)
        if fragment:
            parsed = replace(parsed, fragment=_unescape(fragment, FRAGMENT))
    except URLError as exc:
        raise Err(f"URL parse error during conversion from string: parse {quote_bytes(raw)}: {exc}") from None
    return URL(parsed)


def _is_url(text: str) -> bool:
    try:
        parse(text.encode("utf-8", "surrogateescape"), True)
    except URLError:
        return False
    return True


def _url_cost(c: Coster, node: Call) -> tuple[Range, Range] | None:
    if len(node.args) != 1:
        return None
    size = c.size_or_unknown(node.args[0])
    return scaled(size, 0.1), size


def _unit(c: Coster, node: Call) -> tuple[Range, None]:
    return ONE, None


def _register() -> Any:
    VALUE_TYPES[URL_TYPE] = (URL,)
    register("url", False, ("string",), URL_TYPE, to_url)
    register("isURL", False, ("string",), "bool", _is_url)
    register("getScheme", True, (URL_TYPE,), "string", lambda u: _text(u.parsed.scheme))
    register("getHost", True, (URL_TYPE,), "string", lambda u: _text(u.parsed.host))
    register("getHostname", True, (URL_TYPE,), "string", lambda u: _text(u.parsed.split_host()[0]))
    register("getPort", True, (URL_TYPE,), "string", lambda u: _text(u.parsed.split_host()[1]))
    register("getEscapedPath", True, (URL_TYPE,), "string", lambda u: _text(u.parsed.escaped_path()))
    register("getQuery", True, (URL_TYPE,), ("map", "string", ("list", "string")), lambda u: u.parsed.query())
    RUNTIME_COSTS["url"] = first_traversal()
    CALL_COSTS.update(
        {
            "url": _url_cost,
            **dict.fromkeys(("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery"), _unit),
        }
    )


_register()
