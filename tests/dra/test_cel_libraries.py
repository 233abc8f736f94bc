"""The Kubernetes base-environment libraries beyond the core: ext.Lists v3, ext.Sets, the
two-variable comprehensions, IP, CIDR, URLs and type(). Expected answers are Kubernetes' (v0.37.2 with
cel-go v0.29.2), checked with the Go reference program of tests/interop/cel."""

from __future__ import annotations

import pytest

from kubedevice.dra.cel import CompileError, DeviceInput, EvalError, compile_general, compile_selector

DEVICE = DeviceInput("gpu.example.com", {"ids": {"ints": [3, 1, 2]}, "ip": {"string": "10.1.2.3"}})
COMPILERS = [compile_selector, compile_general]


@pytest.mark.parametrize("compile_fn", COMPILERS)
@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # ext.Lists v3
        ('[3, 1, 2].sort() == [1, 2, 3] && ["b", "a"].sort() == ["a", "b"]', True),
        ("[1, 2, 3].slice(1, 2) == [2] && [1, 2].slice(0, 0) == []", True),
        ("[[1], [2, 3]].flatten() == [1, 2, 3] && [dyn([1]), dyn([[2]])].flatten(2) == [1, 2]", True),
        ("lists.range(3) == [0, 1, 2] && lists.range(0) == []", True),
        ("[1, 2, 2, 1].distinct() == [1, 2] && [1, 2].reverse() == [2, 1]", True),
        ('["bb", "a", "ccc"].sortBy(s, s.size()) == ["a", "bb", "ccc"]', True),
        ('device.attributes["gpu.example.com"].ids.sort() == [1, 2, 3]', True),
        # ext.Sets
        ("sets.contains([1, 2, 3], [1, 2]) && !sets.contains([1], [1, 2])", True),
        ("sets.intersects([1, 2], [2, 3]) && !sets.intersects([1], [2])", True),
        ("sets.equivalent([1, 2], [2, 1, 1]) && sets.contains([1.0], [dyn(1)])", True),
        # ext.TwoVarComprehensions
        ('[10, 20].all(i, v, v == (i + 1) * 10) && {"a": 1}.exists(k, v, k == "a" && v == 1)', True),
        ("[1, 2, 2].existsOne(i, v, v == 1) && ![1, 2, 2].exists_one(i, v, v == 2)", True),
        ("[1, 2].transformList(i, v, v * 2) == [2, 4] && [1, 2].transformList(i, v, i > 0, v) == [2]", True),
        ("[1, 2].transformMap(i, v, v > 1, v * 10) == {1: 20}", True),
        ('{"a": 1}.transformMapEntry(k, v, {v: k}) == {1: "a"}', True),
        # cel.bind is lazy in cel-go: an unused failing initialiser does not matter
        ("cel.bind(x, 1 / 0, true)", True),
        # IP
        ('ip("10.1.2.3").family() == 4 && ip("2001:db8::1").family() == 6', True),
        ('isIP("1.2.3.4") && !isIP("01.2.3.4") && !isIP("fe80::1%eth0") && !isIP("::ffff:1.2.3.4")', True),
        ('ip.isCanonical("2001:db8::1") && !ip.isCanonical("2001:DB8::1")', True),
        ('!ip.isCanonical("2001:db8:0:0:0:0:0:1")', True),
        ('ip("127.0.0.1").isLoopback() && ip("::").isUnspecified() && ip("fe80::1").isLinkLocalUnicast()', True),
        ('ip("224.0.0.1").isLinkLocalMulticast() && ip("ff02::1").isLinkLocalMulticast()', True),
        ('ip("10.0.0.1").isGlobalUnicast() && !ip("255.255.255.255").isGlobalUnicast()', True),
        ('string(ip("2001:0db8::0001")) == "2001:db8::1" && ip("1.2.3.4") == ip("1.2.3.4")', True),
        # CIDR
        ('cidr("10.0.0.0/8").containsIP(device.attributes["gpu.example.com"].ip)', True),
        ('cidr("10.0.0.0/8").containsIP(ip("11.0.0.1")) || cidr("10.0.0.0/8").containsIP("::1")', False),
        (
            'cidr("10.0.0.0/8").containsCIDR("10.1.0.0/16") && !cidr("10.0.0.0/16").containsCIDR(cidr("10.0.0.0/8"))',
            True,
        ),
        ('string(cidr("10.1.2.3/8").masked()) == "10.0.0.0/8" && cidr("10.1.2.3/8").prefixLength() == 8', True),
        ('cidr("10.1.2.3/8").ip() == ip("10.1.2.3") && isCIDR("::/0") && !isCIDR("1.2.3.4/033")', True),
        # URLs (Go's net/url: Parse after ParseRequestURI)
        ('url("https://user:pw@x.io:8080/a%20b?b=c&b=d&e#f").getPort() == "8080"', True),
        ('url("https://x.io/p?b=c&b=d&e=1+2").getQuery() == {"b": ["c", "d"], "e": ["1 2"]}', True),
        ('url("https://[::1]:80/").getHostname() == "::1" && url("https://[::1]:80/").getHost() == "[::1]:80"', True),
        (
            'url("https://x.io/a b").getEscapedPath() == "/a%20b" && url("http://x.io/%41").getEscapedPath() == "/%41"',
            True,
        ),
        ('isURL("/relative") && !isURL("x.io") && !isURL("") && !isURL("https://x.io/a%zz")', True),
        ('!isURL("http://a:b:80/") && isURL("ftp://a:b:80/") && !isURL("http://[1.2.3.4]/")', True),
        ('url("HTTP://X.io/").getScheme() == "http" && url("mailto:a@b").getEscapedPath() == ""', True),
        ('url("http://x.io/a#b") == url("http://x.io/a#b") && url("http://x.io/a#b") != url("http://x.io/a#c")', True),
        # type() and type denotations
        (
            'type(1) == int && type(1) != uint && type("a") == string && type([1]) == list && type({"a": 1}) == map',
            True,
        ),
        ("type(null) == null_type && type(type(1)) == type && type(optional.of(1)) == optional_type", True),
        ('type(device.attributes["gpu.example.com"].ids) == list && type(ip("1.2.3.4")) == net.IP', True),
        ("cel.bind(int, 1, int == 1) && dyn(type(1)) != 1", True),
    ],
)
def test_library_answers(compile_fn: object, expression: str, expected: bool) -> None:
    assert compile_fn(expression).matches(DEVICE) is expected  # type: ignore[operator]


@pytest.mark.parametrize(
    "expression",
    [
        "[1, 2].slice(2, 1) == []",  # start after end
        "[1, 2].slice(0, 3) == []",  # past the end
        "lists.range(-1) == []",
        "[dyn([1])].flatten(-1) == []",
        '[dyn(1), dyn("a")].sort() == []',  # keys of different types
        '{"a": 1, "b": 1}.transformMapEntry(k, v, {v: k}) == {}',  # duplicate key
        'ip("1.2.3") == ip("1.2.3.4")',
        'ip("::ffff:1.2.3.4").family() == 6',  # IPv4-mapped IPv6 is refused
        'cidr("10.0.0.0/33").prefixLength() == 33',
        'dyn(ip("1.2.3.4")) == cidr("1.2.3.4/32")',  # different opaque types
        "cel.bind(x, 1 / 0, x == 1)",  # a used failing initialiser does fail
        'url("http://%41.io/").getHost() == "A.io"',  # hosts cannot %-encode ASCII
        'url(device.driver).getHost() == ""',  # not a request URI
    ],
)
def test_library_runtime_errors(expression: str) -> None:
    with pytest.raises(EvalError):
        compile_selector(expression).matches(DEVICE)


@pytest.mark.parametrize(
    "expression",
    [
        "[1, 2].all(i, i, true)",  # duplicate variable name
        "[1].sortBy(x, [x]) == [1]",  # list keys are not comparable
        'ip("1.2.3.4") == cidr("1.2.3.4/32")',
        "[1].transformMapEntry(i, v, v) == {}",  # the entry must be a map
        'sets.contains([1], ["a"])',
        "type(1) == 1",
        'type(url("/x")) == kubernetes.URL',  # only net.IP and net.CIDR resolve by name
    ],
)
def test_library_compile_errors(expression: str) -> None:
    with pytest.raises(CompileError):
        compile_selector(expression)


@pytest.mark.parametrize(
    ("expression", "cost"),
    [
        ("sets.contains([1, 2, 3], [1, 2])", 27),  # 3 × 2 + 1 + two list literals (10 each)
        ("sets.equivalent([1, 2], [2, 1, 1])", 33),  # 2 × 3 × 2 + 1 + 20
        ("[3, 1, 2].sort() == [1, 2, 3]", 50),  # 9 × 2 + 11, literals 20, == 1
        ("lists.range(3).size() == 3", 16),
        ('ip("1.2.3.4").family() == 4', 3),
        ('cidr("10.0.0.0/8").containsCIDR("10.1.0.0/16")', 10),
    ],
)
def test_static_costs(expression: str, cost: int) -> None:
    assert compile_selector(expression).cost_estimate == cost
