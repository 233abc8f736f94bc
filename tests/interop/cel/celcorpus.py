"""Seeded corpus of DRA selector cases for the differential test against Kubernetes' CEL.

Atoms cover every library function the engine implements, wrong argument types, missing keys
and unknown domains; they are combined with &&, || and ! and paired with random devices,
environments and feature gates.
"""

from __future__ import annotations

import random
from typing import Any

DRIVER = "gpu.example.com"
DOMAINS = [DRIVER, "other.example.com", "unknown.example.com"]
NAMES = ["model", "cores", "ecc", "fw", "tags", "ids", "flags", "fws", "addr", "missing"]
CAPS = ["memory", "slices", "missing"]
STRINGS = ['"a100"', '"h100"', '""', '"A100"', '"a"']
INTS = ["0", "1", "-1", "80", "9223372036854775807", "-9223372036854775808", "3u", "2.5"]
QUANTITIES = ['"1Gi"', '"40Gi"', '"1.5"', '"100m"', '"1000m"', '"1e3"', '"2Ki"', '"0.1n"', '"bad"', '"1.G"',
              '"9223372036854775807"', '"99999999999999999999"', '"-1"', '"1E"', '"12e-3"', '"+5"', '"Ki"']
VERSIONS = ['"1.2.3"', '"1.2.3-rc.1"', '"v1.2"', '"01.2.3"', '"1.2"', '"1.2.3+build.5"', '"2.0.0-alpha"',
            '"1.2.3-01"', '"x"']

ATOMS = [
    'device.driver == "{driver}"',
    'device.driver != {s}',
    'device.driver.startsWith("gpu")',
    'device.driver.endsWith(".com") && device.driver.contains("example")',
    'device.driver.matches("^gpu\\\\.[a-z]+\\\\.com$")',
    'device.driver == 1',
    'device.attributes["{d}"].{n} == {s}',
    'device.attributes["{d}"].{n} == {i}',
    'device.attributes["{d}"]["{n}"] > {i}',
    'device.attributes["{d}"].{n} < {s}',
    'device.attributes["{d}"].{n}',
    '!device.attributes["{d}"].{n}',
    'has(device.attributes["{d}"].{n})',
    '"{n}" in device.attributes["{d}"]',
    '"{d}" in device.attributes',
    'has(device.attributes.{dn})',
    'device.attributes["{d}"].size() {cmp} 2',
    'size(device.attributes) > 0',
    'device.attributes["{d}"].{n}.size() > 1',
    'device.attributes["{d}"].{n}.startsWith("a")',
    'device.attributes["{d}"].{n}.lowerAscii() == "a100"',
    'device.attributes["{d}"].{n}.isGreaterThan(semver({v}))',
    'device.attributes["{d}"].{n}.compareTo(semver({v})) {cmp} 0',
    'device.attributes["{d}"].{n}.major() == 1',
    'device.attributes["{d}"].{n} == semver({v})',
    'device.attributes["{d}"].{n}.includes({i})',
    'device.attributes["{d}"].{n}.includes({s})',
    '{s} in device.attributes["{d}"].{n}',
    'device.attributes["{d}"].{n}.exists(x, x == {s})',
    'device.attributes["{d}"].{n}.all(x, x > 1)',
    'device.attributes["{d}"].{n}.exists_one(x, x == {i})',
    'device.attributes["{d}"].{n}.map(x, x * 2).size() == 2',
    'device.attributes["{d}"].{n}.filter(x, x > 1).size() > 0',
    'device.attributes["{d}"].{n}.sum() > 2',
    'device.attributes["{d}"].{n}.min() == 1',
    'device.attributes["{d}"].{n}.isSorted()',
    'device.attributes["{d}"].{n}.indexOf({i}) >= 0',
    'device.capacity["{d}"].{c}.compareTo(quantity({q})) {cmp} 0',
    'device.capacity["{d}"].{c}.isGreaterThan(quantity({q}))',
    'device.capacity["{d}"].{c}.isLessThan(quantity("80Gi"))',
    'device.capacity["{d}"].{c}.asInteger() > 0',
    'device.capacity["{d}"].{c}.isInteger()',
    'device.capacity["{d}"].{c}.asApproximateFloat() > 1.0',
    'device.capacity["{d}"].{c}.add(quantity({q})).sign() == 1',
    'device.capacity["{d}"].{c}.sub({i}).isLessThan(quantity("1"))',
    'device.capacity["{d}"].{c} == quantity({q})',
    'device.capacity["{d}"].{c} > quantity("1")',
    'has(device.capacity["{d}"].{c})',
    'quantity({q}).isInteger()',
    'quantity({q}).asInteger() {cmp} 1000',
    'quantity({q}).add({i}).asInteger() > 0',
    'quantity({q}).sub(quantity({q2})).sign() {cmp} 0',
    'quantity({q}).compareTo(quantity({q2})) == 0',
    'quantity({q}).asApproximateFloat() > 0.5',
    'isQuantity({q})',
    'isSemver({v})',
    'isSemver({v}, true)',
    'semver({v}, true).minor() == 2',
    'semver({v}).patch() {cmp} 3',
    'semver({v}).isLessThan(semver({v2}))',
    'semver({v}) == semver({v2})',
    'semver({v}).compareTo(semver({v2})) {cmp} 0',
    'cel.bind(m, device.attributes["{d}"], m.{n} == {s})',
    'cel.bind(x, {i}, x + 1 > 0)',
    '{i} + {i2} > 0',
    '{i} * {i2} {cmp} 0',
    '{i} / {i2} == 0',
    '{i} % {i2} == 0',
    '-{i} < 0',
    '{i} {cmp} {i2}',
    '{s} + "x" == "a100x"',
    '"a,b,c".split(",").size() == 3',
    '"abc".substring({small}) == "bc"',
    '"abc".charAt({small}) == "c"',
    '"  x ".trim() == "x"',
    '"a.b".replace(".", "-") == "a-b"',
    '["a", "b"].join("-") == "a-b"',
    '"hello".indexOf("l") == 2',
    '"hello".lastIndexOf("l") {cmp} 3',
    '"AbC".upperAscii() == "ABC"',
    '"abc".reverse() == "cba"',
    '"x1y22".find("[0-9]+") == "1"',
    '"x1y22".findAll("[0-9]+").size() == 2',
    '"abc".matches("[")',
    '{s}.matches("^a[0-9]+$")',
    'optional.of({i}).hasValue()',
    'optional.none().orValue({i}) == {i}',
    'optional.of({s}).value() == {s}',
    'optional.none().value() == 1',
    'device.attributes["{d}"].?{n}.hasValue()',
    'device.attributes["{d}"][?"{n}"].orValue({s}) == {s}',
    'device.attributes[?"{d}"].hasValue()',
    'optional.ofNonZeroValue({s}).hasValue()',
    'optional.of(1).optMap(x, x + 1).value() == 2',
    '[1, 2, 3].all(x, x > 0)',
    '[1, 2, 3].exists(x, x / 0 == 1 || x == 2)',
    '[1, 2, 3].exists(x, x / 0 == 1)',
    '{{"a": 1, "b": 2}}.exists(k, k == "b")',
    '{{"a": 1}}.a == 1',
    '{{"a": 1}}.b == 1',
    '[1, 2][5] == 1',
    '[1, 2, 3][1] == 2',
    '[1, "a"].size() == 2',
    '[1, 2].sum() == 3',
    '[3, 1].max() == 3',
    '[].min() == 0',
    '[1, 2] + [3] == [1, 2, 3]',
    'size("héllo") == 5',
    'int("12") + 1 == 13',
    'int({s}) == 0',
    'string(12) == "12"',
    'double(1) == 1.0',
    'dyn(1) == 1.0',
    'dyn({s}) == 1',
    'uint(1) == 1u',
    '1 == 1u',
    'true ? {i} > 0 : false',
    'device.allowMultipleAllocations',
    'device.allowMultipleAllocations == false',
    'device.nosuchfield == 1',
    'undefinedVariable == 1',
    'nosuchfunction(1)',
    '1 +',
    '"abc"',
    '1',
    'device.attributes["{d}"]',
    'device.capacity["{d}"].{c}',
    '[1, 2, 3].includes(2)',
    '(false ? 1 : dyn({s})) < 5',
    '(false ? "x" : dyn(semver({v}))) == "x"',
    '(true ? {s} : dyn({i})) == {s}',
    'device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, a == b)))',
    'device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, device.attributes.all(e, a == b))))',
    'device.attributes["{d}"].all(n, device.attributes["{d}"][n] == {s})',
    'device.capacity.exists(d, device.capacity[d].exists(n, device.capacity[d][n].sign() == 1))',
    '"%s".size() > 0 && "{n}".split("").join("") == "{n}" && "{n}".matches("^[a-z]*$")',
    'device.attributes["{d}"].{n}.split(",", 2).size() < 3',
    'device.attributes["{d}"].{n}.replace("a", "bb").size() > 0',
    'device.attributes["{d}"].{n}.findAll("[0-9]").size() >= 0',
    'device.attributes["{d}"].{n}.join(",").size() >= 0',
    '{{"a": 1, "b": 2}}["b"] == {i}',
    '{{1: "x", 2u: "y"}}[{i}] == "x"',
    '{{"a": 1, "a": 2}}.size() == 1',
    '"b" in {{"a": 1, "b": 2}}',
    'has({{"a": 1}}.a)',
    '{{"a": {i}}} == {{"a": {i2}}}',
    '[{i}, {i2}] == [{i}, {i2}]',
    '[1, "a"] == [1, "a"]',
    '[[1], [2]].size() == 2',
    # homogeneous literals after the checker's unification: free element types bind, dyn does not
    '[[dyn(1)], [2]].size() == 2', '[[1], [dyn({i})]].size() == 2', '[[], [{i}]].size() == 2',
    '[{{}}, {{"a": {i}}}].size() == 2', '[optional.none(), optional.of({i})].size() == 2',
    '{{"a": [dyn(1)], "b": [{i}]}}.size() == 2', '[[device.driver], ["a"]].size() == 2',
    'true ? 1 : "a"',
    '(true ? 1 : 2) == 1',
    '1.5 + 2.5 == 4.0',
    '10.0 / 0.0 > 1.0',
    '2u * 3u == 6u',
    '1u - 2u == 0u',
    '18446744073709551615u + 1u > 0u',
    '1 + 1u == 2',
    'dyn(1) + dyn(1u) == 2',
    '"abc" < "abd"',
    'b"abc" == b"abc"',
    'size(b"\\x00\\xff") == 2',
    '"\\u00e9" == "é"',
    'r"a\\d" == "a\\\\d"',
    'null == null',
    'device.driver != null',
    'quantity("1") == null',
    'int(2.9) == 2',
    'int(-2.9) == -2',
    'uint(-1) == 1u',
    'double("1.5") == 1.5',
    'string(1.5) == "1.5"',
    'string(b"abc") == "abc"',
    'bool("true")',
    '{i} in [1, 2, 3]',
    '{s} in ["a100", "h100"]',
    '"x" in ["a"] + ["x"]',
    '[1, 2, 3].map(x, x > 1, x * 10) == [20, 30]',
    '[1, 2, 3].exists_one(x, x / (x - 2) > 0)',
    '[1, 2].all(x, x)',
    'device.attributes["{d}"].all(k, k.size() > 0)',
    'device.capacity["{d}"].exists(k, device.capacity["{d}"][k].isGreaterThan(quantity("1")))',
    'device.attributes.exists(d, d == "{d}")',
    'device.attributes["{d}"].{n}.isSorted() == device.attributes["{d}"].{n}.isSorted()',
    'device.attributes["{d}"].{n}.max() {cmp} {i}',
    'device.attributes["{d}"].{n}.lastIndexOf({s}) == -1',
    'device.attributes["{d}"].{n}[0] == {s}',
    'device.attributes["{d}"].{n}[?0].hasValue()',
    'device.attributes["{d}"].{n}.contains("10")',
    'device.attributes["{d}"].{n}.matches("^[a-z]+$")',
    'device.attributes["{d}"].{n} + 1 > 1',
    'device.attributes["{d}"].{n}.split("0").size() > 1',
    'semver({v}).isGreaterThan(device.attributes["{d}"].{n})',
    'quantity({q}).isLessThan(device.capacity["{d}"].{c})',
    'optional.of(device.attributes["{d}"]).?{n}.hasValue()',
    'optional.none().or(optional.of({i})).value() == {i}',
    'optional.of(1).optFlatMap(x, optional.none()).hasValue()',
    'optional.ofNonZeroValue(0).orValue(7) == 7',
    '[?optional.of(1), ?optional.none()].size() == 1',
    '{{?"a": optional.none(), "b": 2}}.size() == 1',
    '"a".substring(2) == ""',
    '"hello".indexOf("l", 3) == 3',
    '"hello".lastIndexOf("l", 2) == 2',
    '"hello".charAt(5) == ""',
    '"a-b-c".split("-", 2).size() == 2',
    '"aaa".replace("a", "b", 2) == "bba"',
    '["a", 1].join(",") == ""',
    '[1, 2].indexOf(2) == 1',
    '[1.5, 2.5].sum() == 4.0',
    '["b", "a"].min() == "a"',
    '[1, 2] == [1, 2.0]',
    'cel.bind(x, [1, 2], cel.bind(y, x.size(), y == 2))',
    'cel.bind(x, 1, cel.bind(x, "a", x == "a"))',
    '[1, 2, 3].filter(x, x > 1).map(x, x * 2) == [4, 6]',
    'device.attributes["{d}"].{n}.map(x, x).size() >= 0',
    'device.attributes["{d}"]["{n}"] in [1, "a100", true]',
    '"{n}".includes("x")',
    'device.attributes["{d}"].{n}.exists(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, '
    '[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z, y + z + x > 0)))',
]


# Right and wrong operands for the libraries of the base environment beyond the core.
REGEXES = ['"^a"', '"a$"', '"[[:alpha:]]+"', '"\\\\pL+"', '"(?=a)"', '"(a)\\\\1"', '"\\\\Qa.\\\\E"', '"0\\\\z"',
           '"x*"', '"["', '"(?i)A"', '"[0-9]+"', '"^$"', '"\\\\d{2}"', '"a{1001}"', '"(?P<n>a)"', '"\\\\C"']
TEXTS = ['"abc\\n"', '"a100"', '"x1y22"', '""', '"é0"', '"a.b"', 'device.driver', 'device.attributes["{d}"].{n}']
LISTS = ["[3, 1, 2]", "[1, 1]", "[]", '["b", "a"]', "[1.5, -0.0, 0.0]", '[dyn(1), dyn("a")]', "[[1], [2, 3]]",
         'device.attributes["{d}"].{n}', "[true, false]", '"abc"', "dyn([1, 2u, 3.0])", "[0.0 / 0.0, 1.0]"]
IPS = ['"10.1.2.3"', '"::1"', '"fe80::1%eth0"', '"01.2.3.4"', '"::ffff:1.2.3.4"', '"2001:DB8::1"', '"1.2.3"',
       '"224.0.0.251"', '"ff02::1"', '"255.255.255.255"', '"0.0.0.0"', '"169.254.1.1"', '"1:2:3:4:5:6:7::"',
       'device.attributes["{d}"].{n}']
CIDRS = ['"10.0.0.0/8"', '"10.1.2.3/8"', '"::/0"', '"1.2.3.4/33"', '"1.2.3.4/08"', '"fe80::/10"', '"1.2.3.4"',
         '"::ffff:1.2.3.0/120"', '"10.1.0.0/16"', '"0.0.0.0/0"']
URLS = ['"https://user:pw@x.io:8080/a%20b?b=c&b=d&e#f"', '"/relative"', '"x.io"', '""', '"https://x.io/a%zz"',
        '"mailto:a@b"', '"http://a:b:80/"', '"ftp://a:b:80/"', '"http://[::1]:80/p"', '"http://[1.2.3.4]/"',
        '"HTTP://X.io/a b?x=1;y=2"', '"http://%41.io/"', '"*"', 'device.driver', 'device.attributes["{d}"].{n}']
TIMES = ['"2024-01-02T03:04:05Z"', '"2024-01-02T03:04:05.5+01:00"', '"2024-02-30T00:00:00Z"', '"2024-01-02T3:04:05Z"',
         '"9999-12-31T23:59:59Z"', '"0001-01-01T00:00:00Z"', '"2024-01-02t03:04:05z"', '0', '-62135596801',
         'device.attributes["{d}"].{n}']
ZONES = ['"America/New_York"', '"+05:30"', '"-01:00"', '"UTC"', '"Mars/Olympus"', '"+05:99"']
DURATIONS = ['"1h30m"', '"-1.5h"', '"100ns"', '"1d"', '"0"', '".5s"', '"2562048h"', '"1µs"', 'device.driver']
FORMAT_NAMES = ['"dns1123Label"', '"dns1123Subdomain"', '"dns1035Label"', '"qualifiedName"', '"dns1123LabelPrefix"',
                '"dns1123SubdomainPrefix"', '"dns1035LabelPrefix"', '"labelValue"', '"uri"', '"uuid"', '"byte"',
                '"date"', '"datetime"', '"nope"', 'device.driver', 'device.attributes["{d}"].{n}']
FORMAT_INPUTS = ['"my-name"', '"a.b"', '"A_b"', '"-x"', '"ab-"', '"a/b/c"', '"/x"', '"ex.com/My_Name"', '""',
                 '"http://x.io/a"', '"x y"', '"123e4567-e89b-12d3-a456-426614174000"', '"aGVsbG8="',
                 '"2024-02-29"', '"2023-02-29"', '"2024-01-02T03:04:05Z"', '"2024-01-02T24:00:00Z"', '"a\\n"',
                 'device.driver', 'device.attributes["{d}"].{n}']
LIBRARY_ATOMS = [
    'format.named({fname}).hasValue()', 'format.named({fname}).value().validate({finput}).hasValue()',
    'format.named({fname}).orValue(format.uri()).validate({finput}).orValue([]).size() {cmp} 1',
    'format.named({fname}).orValue(format.uri()).validate({finput}).orValue([""])[0].startsWith("a")',
    'format.dns1123Label().validate({finput}) == optional.none()',
    'format.qualifiedName().validate({finput}).hasValue()',
    'format.dns1035LabelPrefix().validate({finput}).hasValue()', 'format.labelValue().validate({finput}).hasValue()',
    'format.datetime().validate({finput}).hasValue() || format.date().validate({finput}).hasValue()',
    'format.uuid().validate({finput}).hasValue() && format.byte().validate({finput}).hasValue()',
    'format.named({fname}) == optional.of(format.dns1123Subdomain())', 'format.uri() == {finput}',
    'format.dns1123SubdomainPrefix().validate({i}).hasValue()',
    'format.dns1123LabelPrefix() == format.named({fname}).value()',
    '"%s/%d".format([{text}, {i}]) == "a100/1"', '"%.2f %e".format([{list}, 1.5]).size() > 0',
    '"%x %o %b".format([{i}, {i}, {i}]) != ""', '"%s".format({list}) != ""', 'strings.quote({text}).size() > 2',
    'timestamp({time}) < timestamp({time2})', 'string(timestamp({time})) == {time2}', 'int(timestamp({time})) {cmp} 0',
    'timestamp({time}).getFullYear() == 2024', 'timestamp({time}).getHours({tz}) {cmp} 3',
    'timestamp({time}).getDayOfWeek() == 2 && timestamp({time}).getMilliseconds() == 500',
    'timestamp({time}) + duration({dur}) > timestamp({time2})',
    'timestamp({time}) - timestamp({time2}) < duration({dur})',
    'duration({dur}).getMinutes() {cmp} 90', 'string(duration({dur})) == "5400s"', 'int(duration({dur})) > 0',
    'duration({dur}) - duration({dur2}) == duration("0s")',
    '[duration({dur}), duration({dur2})].min() < duration("1s")',
    'type(timestamp({time})) == google.protobuf.Timestamp', '-dyn(duration({dur})) < duration("0s")',
    'isURL({url})', 'url({url}).getScheme() == "https"', 'url({url}).getHost() == url({url2}).getHost()',
    'url({url}).getHostname().size() {cmp} 4', 'url({url}).getPort() == ""', 'url({url}).getEscapedPath() == "/a%20b"',
    'url({url}).getQuery().size() {cmp} 1', 'url({url}) == url({url2})', 'dyn(url({url})) == {url}',
    'type({list}) == list', 'type(device.attributes["{d}"].{n}) == string', 'type({ip}) == type({list2})',
    'type(ip({ip})) == net.IP', 'dyn(type({list})) == {list2}',
    '{text}.matches({re})', 'matches({text}, {re})', '{text}.find({re}) == ""', '{text}.findAll({re}).size() {cmp} 1',
    '{text}.findAll({re}, {small}) == {text}.findAll({re})',
    '{list}.sort() == {list2}', '{list}.slice({small}, {small2}).size() == 1', '{list}.flatten().size() > 0',
    'dyn({list}).flatten({small}).size() > 0', '{list}.distinct() == {list}', '{list}.reverse().size() >= 0',
    'lists.range({small}).size() == {small}', '{list}.sortBy(x, x) == {list2}', '{list}.sortBy(x, -x).size() > 0',
    'sets.contains({list}, {list2})', 'sets.intersects({list}, {list2})', 'sets.equivalent({list}, {list2})',
    '{list}.all(i, v, i >= 0)', '{list}.exists(i, v, v == {i})', '{list}.existsOne(i, v, i == 1)',
    '{list}.transformList(i, v, i).size() {cmp} 2', '{list}.transformList(i, v, i > 0, v) == {list2}',
    '{list}.transformMap(i, v, v).size() >= 0', '{list}.transformMapEntry(i, v, {{{{string(i): v}}}}).size() >= 0',
    'device.attributes.exists(d, m, m.size() > 1 && d.endsWith(".com"))',
    'device.attributes["{d}"].all(k, v, k != "" && v != null)',
    'device.attributes["{d}"].transformMap(k, v, k.size()).size() >= 0',
    'ip({ip}).family() == 4', 'isIP({ip})', 'ip.isCanonical({ip})', 'ip({ip}).isLoopback()',
    'ip({ip}).isUnspecified() || ip({ip}).isGlobalUnicast()', 'ip({ip}).isLinkLocalMulticast()',
    'ip({ip}).isLinkLocalUnicast()', 'string(ip({ip})) == {ip}', 'ip({ip}) == ip({ip2})',
    'cidr({cidr}).containsIP({ip})', 'cidr({cidr}).containsIP(ip({ip}))', 'cidr({cidr}).containsCIDR({cidr2})',
    'cidr({cidr}).containsCIDR(cidr({cidr2}))', 'isCIDR({cidr})', 'cidr({cidr}).prefixLength() {cmp} 8',
    'string(cidr({cidr}).masked()) == {cidr}', 'cidr({cidr}).ip() == ip({ip})', 'cidr({cidr}) == cidr({cidr2})',
    'dyn(ip({ip})) == cidr({cidr})', 'ip({list}) == ip({ip})', 'cidr({cidr}).containsIP({i})',
    'cel.bind(x, {i} / 0, {i} > 0)', 'cel.bind(x, device.attributes["{d}"].{n}, true)',
    'cel.bind(x, device.attributes["{d}"].{n}, x == {s})',
]

# Issue 21 item 8: corners where Kubernetes' cel-go differs from a plain reading of the spec.
DOUBLE_TEXTS = ['"1_000"', '"1_0.5"', '"_1"', '"1_"', '"0x1p4"', '"0x1_0p0"', '"0x10"', '"1e400"', '"+nan"', '"inf"',
                '"1e1_0"', '"1__0"']
LONG_STRINGS = ['"' + "a" * 300 + '"', '"' + "ab" * 700 + '"']
# Parse errors: drawn as whole expressions, since cel-go's parser would report every one of a
# longer expression and we stop at the first (docs/cel.md, "Not covered").
PARSE_ERROR_CORNERS = ['rb"a" == b"a"', "0X1F == {i}", "{list}.map(__result__, true).size() == 1",
                       "{list}.exists(__result__, true)", "{list}.all(i, __result__, true)",
                       # cel-go sorts its errors by position; its lexer skips what it cannot read
                       'r"{n}\\"" == "\\\\"', "{i} {i2} #", '{i} {i2} "\\z"', '{i} {i2} b"""\\z"""',
                       '{s} == "{n}', 'r"{n}\\z == {s}', 'r"""{n} == {s}', "{i} & {i2}", "{i} | {i2}",
                       "device.`{n} {n} == {s}", "{i}. == 1.0", "device.  == {i}", "device.\n// c\n{i}",
                       ".`{n}` == {i}", "device.? {i}", "device.?", "device.\t{i}",
                       # a keyword after a dot; a leading dot: a global past the macro variables
                       "device.true", "device . null", "device.in", "(device).false == {s}",
                       ".{n} == {i}", "{list}.all(x, .x == 1)", ".device.driver == {s}", "type({i}) == .int"]
CORNER_ATOMS = [
    'br"a\\" == b"a\\\\"', 'r"{n}\\" == "{n}\\\\"', "0x1F == {i}",
    "type({i}) in [int, uint]", 'type(device.attributes["{d}"].{n}) in [int, string]', "[int, type({i})].size() == 2",
    "cel.bind(__result__, {i}, __result__ == {i})",
    "double({dtext}) {cmp} 1000.0", "{list}.first() == optional.of({i})", "{list}.last().orValue({i}) {cmp} {i}",
    "optional.unwrap([optional.of({i}), optional.none()]) == [{i}]", "dyn({list}).first().hasValue()",
    'device.attributes["{d}"].?{n}.orValue({i} / 0) == {s}', "optional.of({i}).orValue({i} / 0) == {i}",
    'device.attributes["{d}"].?{n}.or(optional.of({i} / 0)).hasValue()',
    'has(device.attributes["{d}"].{n}.foo)', 'device.attributes["{d}"].{n}.?foo.hasValue()',
    'device.attributes["{d}"].{n}.foo == {s}', 'optional.of(device.attributes["{d}"]).{n}.hasValue()',
    "device == device", "device != dyn(device)", "type(device) == map",
    'device.attributes["{d}"].{n} < semver({v})', "semver({v}) <= semver({v2})",
    'dyn(semver({v})) > device.attributes["{d}"].{n}',
    "{text}.matches(dyn({re}))", '{text}.find(string({re})) == ""', "int(dyn({s})) == {i}",
    "timestamp(dyn({time})) < timestamp({time2})", "cel.bind(x, {long}, x.contains({s}))",
    "cel.bind(x, {long}, cel.bind(y, x + x, y.size() {cmp} 600))",
    # literals of every form: prefixes, raw strings ending in a backslash, triple quotes, escapes, hex
    "0x1FU == {i}", "0XFFu == 255u", "0x1f == {i}", "Rb'{n}' == b'{n}'", "BR'{n}\\' == b'{n}\\\\'",
    "r'''{n}\\''' == '{n}\\\\'", '"""{n}""" == {s}', "'\\101\\x41\\u0041\\U00000041' == 'AAAA'",
    "b'\\377' == b'\\xff'", '"\\U00110000" == ""', "'\\`\\?' == {s}", ".5e1 == 5.0", "1e-1 < 0.2",
    # the rest of ext.Lists v3 and the optional list functions
    "lists.range({small}).last() == optional.of({i})", "{list}.sort().first().hasValue()",
    "{list}.distinct().last().orValue({i}) {cmp} {i}", "{list}.slice(0, {small2}).first() == {list2}.first()",
    "dyn({list}).flatten().last().hasValue()", "{list}.reverse().sortBy(x, x).first().hasValue()",
    # semver ordering (a compile error unless both sides are dyn), map equality, orValue's argument
    "semver({v}) > semver({v2})", "dyn(semver({v})) >= dyn(semver({v2}))",
    'device.attributes["{d}"].{n} >= semver({v})', "device.attributes == device.attributes",
    'device.attributes["{d}"] == {{"{n}": {s}}}', "{{1: {s}}} == {{1.0: {s}}}", "{{{s}: {i}}} == {{{s}: dyn({i2})}}",
    "device.capacity != dyn(device.capacity)",
    'device.attributes["{d}"].?{n}.orValue(device.attributes["{d}"].{n}) == {s}',
    'has(device.attributes["{d}"].{n}.{n})', 'device.attributes["{d}"].{n}.?{n}.orValue({s}) == {s}',
    "type({i}) in [int, int]", "type({s}) == string || type({i}) == uint",
    # ext.Lists' cost trackers assert their (possibly failed) arguments; sort's guarded binding
    "{list}.map(x, x / {small2}).sort().size() > 0", "{list}.sortBy(x, x / {small2}).size() > 0",
    'device.attributes["{d}"].{n}.sort().size() > 0', 'device.attributes["{d}"].{n}.sortBy(x, x).size() > 0',
    "dyn({list}).flatten(dyn({i})).size() > 0", "[[1]].flatten({i} / {small2}).size() > 0",
    "dyn({list}).sort().size() > 0",
]


def _fill(rng: random.Random, atom: str) -> str:
    pick = rng.choice
    if any(f"{{{key}}}" in atom for key in ("text", "list", "ip", "cidr", "url", "time", "dur", "fname", "finput",
                                            "dtext", "long")):
        regex = pick(REGEXES).replace("{", "{{").replace("}", "}}")
        atom = atom.format(text=pick(TEXTS), re=regex, list=pick(LISTS), list2=pick(LISTS), ip=pick(IPS),
                           ip2=pick(IPS), cidr=pick(CIDRS), cidr2=pick(CIDRS),
                           url=pick(URLS), url2=pick(URLS), time=pick(TIMES), time2=pick(TIMES),
                           dur=pick(DURATIONS), dur2=pick(DURATIONS),
                           tz=pick(ZONES), small="{small}", small2="{small2}",
                           fname=pick(FORMAT_NAMES), finput=pick(FORMAT_INPUTS),
                           dtext=pick(DOUBLE_TEXTS), long=pick(LONG_STRINGS),
                           cmp="{cmp}", i="{i}", d="{d}", n="{n}", s="{s}")
    return atom.format(
        driver=pick([DRIVER, "other.example.com"]), d=pick(DOMAINS), n=pick(NAMES), dn=pick(["gpu", "x"]),
        s=pick(STRINGS), i=pick(INTS), i2=pick(INTS), c=pick(CAPS), q=pick(QUANTITIES), q2=pick(QUANTITIES),
        v=pick(VERSIONS), v2=pick(VERSIONS), cmp=pick(["==", "!=", "<", ">", "<=", ">="]),
        small=pick(["1", "2", "-1", "5"]), small2=pick(["0", "1", "2", "3"]),
    )


def expression(rng: random.Random) -> str:
    draw = rng.random()
    if draw > 0.97:
        return _fill(rng, rng.choice(PARSE_ERROR_CORNERS))
    atoms = ATOMS if draw < 0.45 else LIBRARY_ATOMS if draw < 0.9 else CORNER_ATOMS
    parts = [_fill(rng, rng.choice(atoms)) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
    out = parts[0]
    for part in parts[1:]:
        out = f"({out}) {rng.choice(['&&', '||'])} ({part})"
    return f"!({out})" if rng.random() < 0.1 else out


def _attribute(rng: random.Random, name: str) -> dict[str, Any]:
    kinds: dict[str, list[dict[str, Any]]] = {
        "model": [{"string": "a100"}, {"string": "h100"}, {"int": 3}],
        "cores": [{"int": 80}, {"int": -1}, {"string": "80"}],
        "ecc": [{"bool": True}, {"bool": False}],
        "fw": [{"version": "1.2.3"}, {"version": "2.0.0-rc.1"}, {"version": "1.2.3+meta"}, {"version": "1.2.3"},
               {"version": "1.2.3"}, {"version": "1.2.3"}, {"version": "v1.2"}, {"int": 1, "string": "two"}],
        "tags": [{"strings": ["a100", "fast"]}, {"strings": []}],
        "ids": [{"ints": [1, 2, 3]}, {"ints": [3, 1]}, {"ints": []}],
        "flags": [{"bools": [True, False]}],
        "fws": [{"versions": ["1.0.0", "1.2.3"]}, {"versions": ["1.0.0", "1.2.3"]}, {"versions": ["1.0.0", "01.2.3"]}],
        "addr": [{"string": "10.1.2.3"}, {"string": "fe80::1"}, {"string": "a100"}, {"int": 4}],
    }
    return rng.choice(kinds[name])


def device(rng: random.Random) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    for name in rng.sample(NAMES[:-1], rng.randint(0, 6)):
        prefix = rng.choice(["", "", "other.example.com/", f"{DRIVER}/"])
        attributes[prefix + name] = _attribute(rng, name)
    capacity = {}
    for name in rng.sample(["memory", "slices"], rng.randint(0, 2)):
        prefix = rng.choice(["", "other.example.com/"])
        capacity[prefix + name] = {"value": rng.choice(["40Gi", "80Gi", "1", "0", "1500m", "7", "1e3", "0.5"])}
    case: dict[str, Any] = {"driver": rng.choice([DRIVER, DRIVER, "other.example.com"]),
                            "attributes": attributes, "capacity": capacity}
    if rng.random() < 0.3:
        case["allowMultipleAllocations"] = rng.choice([True, False, None])
    return case


def corpus(seed: int, expressions: int, devices_per_expression: int) -> list[dict[str, Any]]:
    """Expression × device cases, each with an environment and feature gates."""
    rng = random.Random(seed)
    cases = []
    for _ in range(expressions):
        expr = expression(rng)
        env = rng.choice(["NewExpressions", "NewExpressions", "StoredExpressions", None])
        features = {"DRAConsumableCapacity": rng.random() < 0.5, "DRAListTypeAttributes": rng.random() < 0.5}
        for _ in range(devices_per_expression):
            case = {"expression": expr, "features": features, **device(rng)}
            if env is not None:  # without "env" both sides use the library's default, StoredExpressions
                case["env"] = env
            cases.append(case)
    return cases
