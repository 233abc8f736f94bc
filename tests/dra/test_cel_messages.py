"""Compile errors read exactly as the API server's (cel-go's Issues.String() behind
``compilation failed: ``): position, message, source line and caret. Expected texts were
produced by k8s.io/dynamic-resource-allocation/cel v0.37.2 (tests/interop/cel)."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest

from kubedevice.dra.cel import CELError, CompileError, DeviceInput, compile_general, compile_selector

CASES = [
    (
        "device.driver == 1",
        "compilation failed: ERROR: <input>:1:15: found no matching overload for '_==_' applied to '(string, int)'\n"
        " | device.driver == 1\n | ..............^",
    ),
    (
        '(1) && device.driver == "x"',
        "compilation failed: ERROR: <input>:1:2: expected type 'bool' but found 'int'\n"
        ' | (1) && device.driver == "x"\n | .^',
    ),
    (
        '"é" == 1',  # full-width dots under multi-byte code points
        "compilation failed: ERROR: <input>:1:5: found no matching overload for '_==_' applied to '(string, int)'\n"
        ' | "é" == 1\n | .．..^',
    ),
    (
        "-3u < 0",
        "compilation failed: ERROR: <input>:1:1: found no matching overload for '-_' applied to '(uint)'\n"
        " | -3u < 0\n | ^",
    ),
    (
        '[1, "a"] == []',
        "compilation failed: ERROR: <input>:1:5: expected type 'int' but found 'string'\n | [1, \"a\"] == []\n | ....^",
    ),
    (
        '"abc".matches("[")',
        'compilation failed: ERROR: <input>:1:15: invalid matches argument\n | "abc".matches("[")\n | ..............^',
    ),
    ('"abc".find("(") == ""', "program instantiation failed: error parsing regexp: missing closing ): `(`"),
    (
        'timestamp("x") < timestamp(0)',
        "compilation failed: ERROR: <input>:1:11: invalid timestamp argument\n"
        ' | timestamp("x") < timestamp(0)\n | ..........^',
    ),
    (
        "1 +",
        "compilation failed: ERROR: <input>:1:4: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', "
        "'.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n"
        " | 1 +\n | ...^",
    ),
    (
        '"abc".reverse() == "cba"',
        "compilation failed: ERROR: <input>:1:14: found no matching overload for 'reverse' applied to 'string.()'\n"
        ' | "abc".reverse() == "cba"\n | .............^',
    ),
    (
        '"%d".format([1.5]) == ""',
        "compilation failed: ERROR: <input>:1:14: error during formatting: decimal clause can only be used on "
        'integers, was given double\n | "%d".format([1.5]) == ""\n | .............^',
    ),
    ("uint(-1) == 1u", "program instantiation failed: unsigned integer overflow"),
    (
        "\tdevice.nope == 1",  # tabs print as spaces
        "compilation failed: ERROR: <input>:1:8: undefined field 'nope'\n |  device.nope == 1\n | .......^",
    ),
    (
        'true ? 1 : "a"',
        "compilation failed: ERROR: <input>:1:6: found no matching overload for '_?_:_' applied to "
        "'(bool, int, string)'\n | true ? 1 : \"a\"\n | .....^",
    ),
    (
        "[1, 2].all(x, x)",
        "compilation failed: ERROR: <input>:1:15: expected type 'bool' but found 'int'\n"
        " | [1, 2].all(x, x)\n | ..............^",
    ),
    (
        "(" * 260 + "true" + ")" * 260,  # no location: -1:0 and no snippet
        "compilation failed: ERROR: <input>:-1:0: expression recursion limit exceeded: 250",
    ),
    (
        "cel.bind(1, 2, true)",
        "compilation failed: ERROR: <input>:1:10: cel.bind() variable names must be simple identifiers\n"
        " | cel.bind(1, 2, true)\n | .........^",
    ),
    (
        "device.attributes['x'].a.exists(1, true)",
        "compilation failed: ERROR: <input>:1:33: argument must be a simple name\n"
        " | device.attributes['x'].a.exists(1, true)\n | ................................^",
    ),
    (
        '"a\\x1" == "a"',  # ANTLR's lexer error: the token up to the offending character
        "compilation failed: ERROR: <input>:1:1: Syntax error: token recognition error at: '\"a\\x1\"'\n"
        ' | "a\\x1" == "a"\n | ^',
    ),
    (
        '"""x\\qy""" == "a"',  # after an empty "" token, at the third quote
        "compilation failed: ERROR: <input>:1:3: Syntax error: token recognition error at: '\"x\\q'\n"
        ' | """x\\qy""" == "a"\n | ..^',
    ),
    (
        'b"\\u0041" == b"A"',
        'compilation failed: ERROR: <input>:1:1: unable to unescape string\n | b"\\u0041" == b"A"\n | ^',
    ),
    (
        "[[dyn(1)], [2]].size() == 2",  # an explicit dyn is not a free type: no unification
        "compilation failed: ERROR: <input>:1:12: expected type 'list(dyn)' but found 'list(int)'\n"
        " | [[dyn(1)], [2]].size() == 2\n | ...........^",
    ),
    (
        'device.driver == "a" &&\n  device.nope == 1',  # the line of the error, not the first
        "compilation failed: ERROR: <input>:2:9: undefined field 'nope'\n |   device.nope == 1\n | ........^",
    ),
    # several type-check errors: all of them, ordered by location, each with its snippet
    (
        "x  == 1 && y == 2",
        "compilation failed: ERROR: <input>:1:1: undeclared reference to 'x' (in container '')\n | x  == 1 && y == 2\n"
        " | ^\nERROR: <input>:1:12: undeclared reference to 'y' (in container '')\n | x  == 1 && y == 2\n"
        " | ...........^",
    ),
    (
        "1 && 2",
        "compilation failed: ERROR: <input>:1:1: expected type 'bool' but found 'int'\n | 1 && 2\n | ^\n"
        "ERROR: <input>:1:6: expected type 'bool' but found 'int'\n | 1 && 2\n | .....^",
    ),
    (
        "1.all(e, y)",  # the body of a comprehension over a non-range is still checked
        "compilation failed: ERROR: <input>:1:1: expression of type 'int' cannot be range of a comprehension"
        " (must be list, map, or dynamic)\n | 1.all(e, y)\n | ^\n"
        "ERROR: <input>:1:10: undeclared reference to 'y' (in container '')\n | 1.all(e, y)\n | .........^",
    ),
    (
        "x.exists(k, v, k == z)",
        "compilation failed: ERROR: <input>:1:1: undeclared reference to 'x' (in container '')\n"
        " | x.exists(k, v, k == z)\n | ^\nERROR: <input>:1:21: undeclared reference to 'z' (in container '')\n"
        " | x.exists(k, v, k == z)\n | ....................^",
    ),
    (
        "int(a) == uint(b)",  # a failed operand has the error type, which fits any overload
        "compilation failed: ERROR: <input>:1:5: undeclared reference to 'a' (in container '')\n | int(a) == uint(b)\n"
        " | ....^\nERROR: <input>:1:8: found no matching overload for '_==_' applied to '(int, uint)'\n"
        " | int(a) == uint(b)\n | .......^\nERROR: <input>:1:16: undeclared reference to 'b' (in container '')\n"
        " | int(a) == uint(b)\n | ...............^",
    ),
]


@pytest.mark.parametrize("compile_fn", [compile_selector, compile_general])
@pytest.mark.parametrize(("expression", "message"), CASES)
def test_compile_error_reads_as_the_api_server(compile_fn: object, expression: str, message: str) -> None:
    with pytest.raises(CompileError) as raised:
        compile_fn(expression)  # type: ignore[operator]
    assert raised.value.message == message


@pytest.mark.parametrize(
    "expression",
    ["[[], [1]].size() == 2", '[{}, {"a": 1}].size() == 2', "[optional.none(), optional.of(1)].size() == 2"],
)
def test_free_element_types_unify_in_homogeneous_literals(expression: str) -> None:
    assert compile_selector(expression).matches(DeviceInput("x"))


@pytest.mark.interop
@pytest.mark.parametrize("seed", [20260521, 7, 1312])
def test_corpus_compile_errors_read_exactly_as_kubernetes(seed: int) -> None:
    """Every compile error of the differential corpus, whole (all errors, not just the first), bar
    the syntax errors after the first."""
    from tests.interop.cel import celcorpus, celgo

    binary = celgo.go_binary()
    if binary is None:
        pytest.skip("Go toolchain not installed: cannot build the Kubernetes CEL reference program")
    cases = celcorpus.corpus(seed, 600, 1)
    text = "".join(json.dumps(case) + "\n" for case in cases)
    done = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True, timeout=600)
    compared = several = 0
    for case, line in zip(cases, done.stdout.splitlines(), strict=True):
        answer = json.loads(line)
        if answer.get("error") != "compile":
            continue
        options = {"env": case["env"]} if "env" in case else {}
        with pytest.raises(CompileError) as raised:
            compile_selector(case["expression"], features=case["features"], **options)
        want = answer["message"]
        if "\nERROR: " in want and "Syntax error: " in want:  # of several syntax errors we show the first
            want = "\n".join(want.split("\n")[:3])  # (docs/cel.md, "Not covered")
        # cel-go numbers its free type variables (_var9), we do not (docs/cel.md, "Not covered")
        assert _unnumbered(raised.value.message) == _unnumbered(want), case["expression"]
        compared += 1
        several += "\nERROR: " in answer["message"]
    assert compared >= 100 and several >= 5, (compared, several)


def _unnumbered(message: str) -> str:
    return re.sub(r"_var\d+", "_var", message)


VERSIONS = [
    "",
    "1",
    "1.x",
    "1..3",
    "01.2.3",
    "1.02.3",
    "1.2.03",
    "1.2.x",
    "1.2.3-",
    "1.2.3-01",
    "1.2.3-a..b",
    "1.2.3-a_b",
    "1.2.3+",
    "1.2.3+a..b",
    "1.2.3+a_b",
    "1.2.3-01+a..b",
    "1.2.x-01",
    "99999999999999999999.0.0",
    "1.2.3-99999999999999999999",
    "é.1.2",
    "1.2.3-é",
    "1.2.3\n",
    "1.2.3-\t",
    'a".b.c',
    "v1.2",
    "v01.2.3-rc",
    "1.2.3-rc.1+build.5",
    "1.2.3",
]


# Runtime errors whose words depend on how cel-go dispatches: an operator names itself only for an
# operand without the trait it needs, a guarded library function lists the argument types, an
# implementation or receiver refusing says just "no such overload"; and the non-bool results.
RUNTIME = [
    'dyn(semver("1.0.0")).size() == 1',
    'dyn(semver("1.0.0")) + 1 == 1',
    'dyn("a") + 1 == 1',
    "dyn(1) + 1u == 1",
    '-dyn("a") == 1',
    "-dyn([1]) == 1",
    "dyn([1]) < 1",
    'dyn("a") < 1',
    'dyn(url("http://a/")) == "x"',
    'dyn([1])["a"] == 1',
    "dyn(1)[0] == 1",
    "1 in dyn(1)",
    "!dyn([1])",
    "dyn(1) ? true : false",
    'dyn([1]).contains("a")',
    'dyn([1]).startsWith("a")',
    'dyn(1).matches("a")',
    'dyn([1]).find("a") == ""',
    'dyn([1]).findAll("a").size() == 0',
    'dyn([1]).findAll("a", 1).size() == 0',
    '"a".find(dyn([1])) == ""',
    'dyn([1]).lowerAscii() == ""',
    'dyn([1]).join(",") == ""',
    'dyn([1]).join() == ""',
    'dyn("a").join(",") == ""',
    'dyn("a").max() == 1',
    'ip(dyn([1])) == ip("1.2.3.4")',
    'cidr("0.0.0.0/0").containsIP("01.2.3.4")',
    'cidr("0.0.0.0/0").containsCIDR("1.2.3.4")',
    'ip("01.2.3.4") == ip("1.2.3.4")',
    'ip("fe80::1%eth0") == ip("::1")',
    'ip("1:2::3:4::5") == ip("::1")',
    'ip("1.2.3.x") == ip("::1")',
    'ip("::ffff:1.2.3.4") == ip("::1")',
    'cidr("1.2.3.4/x") == cidr("::/0")',
    'cidr("1.2.3.4/33") == cidr("::/0")',
    'url("http://%41.io/") == url("http://a/")',
    'url("http://a b/") == url("http://a/")',
    'url("http://a:x/") == url("http://a/")',
    'url("http://[::1]:x/") == url("http://a/")',
    '"%.2f".format(["abc"]) == ""',
    "dyn(optional.of(true))",
    "dyn(optional.none())",
    "dyn(optional.of(1))",
    "dyn(type(1))",
    "dyn(null)",
    'dyn("a")',
    'dyn(b"a")',
    "dyn(1u)",
    "dyn(1.5)",
    "dyn({})",
    'dyn(duration("1s"))',
    "dyn(timestamp(0))",
    'dyn(ip("1.2.3.4"))',
    'dyn(quantity("1"))',
    'dyn(semver("1.0.0"))',
    'dyn(url("http://a/"))',
    'dyn(cidr("1.0.0.0/8"))',
    "dyn(format.dns1123Label())",
    "dyn(optional.of(optional.of(false)))",
    "dyn([true])",
    # a NaN map key is never found, and each insertion of one adds an entry, as in a Go map
    "cel.bind(x, 0.0/0.0, {x: 1, x: 2}.size() == 2)",
    "cel.bind(x, 0.0/0.0, x in {x: 1})",
    "cel.bind(x, 0.0/0.0, {x: 1}[x] == 1)",
    "{1.0/0.0: 1}[-1.0/0.0] == 1",
    # distinct's cost tracker asserts a list even of a failed argument: Go's panic text
    'dyn("a").distinct() == []',
    "dyn({}).distinct() == []",
    "dyn(null).distinct() == []",
    'dyn(semver("1.0.0")).distinct() == []',
    "dyn(optional.none()).distinct() == []",
    'device.attributes["x"].y.distinct() == []',
    'dyn([semver("1.0.0")]).min() == 1',
    "dyn([null, null]).isSorted()",
    "dyn([{}]).max() == 1",
    '"%s".format([dyn({1.5: 1})]) == ""',
    '"%s".format([dyn([semver("1.0.0")])]) == ""',
    '"%s".format([dyn({"a": optional.none()})]) == ""',
    '"%s".format([dyn(semver("1.0.0"))]) == ""',
    'dyn("abc").all(x, true)',
    "dyn(null).filter(x, true).size() == 0",
    'dyn("abc").all(k, v, true)',
    "dyn(1).transformMap(k, v, v).size() == 0",
    'dyn(quantity("1")).exists(x, true)',
]


@pytest.mark.interop
def test_runtime_errors_read_exactly_as_kubernetes() -> None:
    """Each bad version fails with blang/semver's message, in its order of checks, whether it is an
    attribute (DeviceMatches converts it first) or the argument of semver()/isSemver(); and every
    expression of RUNTIME answers with Kubernetes' words, through both of our paths."""
    from tests.interop.cel import celgo

    binary = celgo.go_binary()
    if binary is None:
        pytest.skip("Go toolchain not installed: cannot build the Kubernetes CEL reference program")
    cases: list[dict[str, Any]] = [{"expression": expression, "driver": "d"} for expression in RUNTIME]
    for version in VERSIONS:
        literal = json.dumps(version)
        cases += [
            {"expression": 'device.driver == "d"', "driver": "d", "attributes": {"v": {"version": version}}},
            {"expression": f"semver({literal}) == semver('1.0.0')", "driver": "d"},
            {"expression": f"semver({literal}, true).major() == 1", "driver": "d"},
            {"expression": f"isSemver({literal}) || isSemver({literal}, true)", "driver": "d"},
        ]
    text = "".join(json.dumps(case) + "\n" for case in cases)
    done = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True, timeout=600)
    for case, line in zip(cases, done.stdout.splitlines(), strict=True):
        want = json.loads(line)
        device = DeviceInput("d", case.get("attributes", {}))
        for compile_fn in (compile_selector, compile_general):
            try:
                got: dict[str, Any] = {"result": compile_fn(case["expression"]).matches(device)}
            except CELError as exc:
                got = {"error": exc.kind, "message": exc.message}
            assert got == {k: want[k] for k in ("result", "error", "message") if k in want}, case
