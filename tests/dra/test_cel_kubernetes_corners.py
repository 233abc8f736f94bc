"""Corners where Kubernetes' CEL (cel-go as k8s.io/dynamic-resource-allocation/cel v0.37.2 compiles
and runs it) differs from a straightforward reading of the spec: issue 21, item 8. Each expected
answer is the Go program's (tests/interop/cel), and the interop test below re-asks it, so the table
cannot drift from Kubernetes. A compile error is compared by its first line (cel-go lists every
error; we stop at the first), without the common "compilation failed: ERROR: <input>:" prefix."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from kubedevice.dra.cel import CELError, DeviceInput, compile_general, compile_selector

DEVICE = {
    "driver": "dra.example.com",
    "attributes": {"dra.example.com/model": {"string": "a100"}, "dra.example.com/v": {"version": "1.2.3"}},
}

CASES: list[tuple[str, Any]] = [
    # lexer: the byte prefix comes first (rb is a name), hex is 0x only, raw strings have no escapes
    ("rb'abc' == b'abc'", ("compile", "1:3: Syntax error: mismatched input ''abc'' expecting <EOF>")),
    ("Rb'a' == b'a'", ("compile", "1:3: Syntax error: mismatched input ''a'' expecting <EOF>")),
    ("0X1F == 31", ("compile", "1:2: Syntax error: mismatched input 'X1F' expecting <EOF>")),
    ("0X1Fu == 31u", ("compile", "1:2: Syntax error: mismatched input 'X1Fu' expecting <EOF>")),
    ("0x1F == 31", True),
    ("r'a\\' == 'a\\\\'", True),
    ("R'a\\' == 'a\\\\'", True),
    ("r\"a\\\" == 'a\\\\'", True),
    ("BR'a\\' == b'a\\\\'", True),
    ("bR'a' == b'a'", True),
    ("r'''a\\''' == 'a\\\\'", True),
    # cel-go lists errors sorted by position: a syntax error before a bad character comes first; the
    # lexer drops what it could not read (an unterminated or badly escaped string) and goes on
    ('r"\\"" == "\\\\"', ("compile", "1:5: Syntax error: extraneous input '\" == \"' expecting <EOF>")),
    ("1 2 #", ("compile", "1:3: Syntax error: extraneous input '2' expecting <EOF>")),
    ('1 2 "\\z"', ("compile", "1:3: Syntax error: extraneous input '2' expecting <EOF>")),
    ('1 2 b"""\\z"""', ("compile", "1:3: Syntax error: mismatched input '2' expecting <EOF>")),
    ('1 == "abc', ("compile", "1:6: Syntax error: token recognition error at: '\"abc'")),
    ('r"a\\z == 1', ("compile", "1:2: Syntax error: token recognition error at: '\"a\\z'")),
    ('r"""abc == 1', ("compile", "1:4: Syntax error: token recognition error at: '\"abc == 1'")),
    ('"\\ud800\\z" == ""', ("compile", "1:1: Syntax error: token recognition error at: '\"\\ud800\\z'")),
    ("1 & 2", ("compile", "1:3: Syntax error: token recognition error at: '& '")),
    ("a.`b c == 1", ("compile", "1:3: Syntax error: token recognition error at: '`b c ='")),
    # ANTLR quotes the parser's input from the dot, blanks included, with \t \n \r escaped
    ("1. == 1.0", ("compile", "1:4: Syntax error: no viable alternative at input '. =='")),
    ("a.  == 1", ("compile", "1:5: Syntax error: no viable alternative at input '.  =='")),
    ("a.\n// c\n1", ("compile", "3:1: Syntax error: no viable alternative at input '.\\n// c\\n1'")),
    (".`a` == 1", ("compile", "1:2: Syntax error: no viable alternative at input '.`a`'")),
    ("a.? 1", ("compile", "1:5: Syntax error: mismatched input '1' expecting {IDENTIFIER, ESC_IDENTIFIER}")),
    ("a.?", ("compile", "1:4: Syntax error: mismatched input '<EOF>' expecting {IDENTIFIER, ESC_IDENTIFIER}")),
    # a literal keyword against the dot is a missing name; with a blank between, no viable input
    ("a.true", ("compile", "1:3: Syntax error: mismatched input 'true' expecting IDENTIFIER")),
    ("(a).null", ("compile", "1:5: Syntax error: mismatched input 'null' expecting IDENTIFIER")),
    (".false", ("compile", "1:2: Syntax error: mismatched input 'false' expecting IDENTIFIER")),
    ("a . true", ("compile", "1:5: Syntax error: no viable alternative at input '. true'")),
    ("a.in", ("compile", "1:3: Syntax error: no viable alternative at input '.in'")),
    (". in", ("compile", "1:3: Syntax error: no viable alternative at input '. in'")),
    # a leading dot names a global, past the macro variables; the error is located at the name
    (".a == 1", ("compile", "1:2: undeclared reference to '.a' (in container '')")),
    (". a == 1", ("compile", "1:3: undeclared reference to '.a' (in container '')")),
    ("[1].all(x, .x == 1)", ("compile", "1:13: undeclared reference to '.x' (in container '')")),
    (".device.driver == 'dra.example.com'", True),
    ('[1].all(x, .device.driver == "dra.example.com")', True),
    ("type(1) == .int", True),
    # one token too many is 'extraneous', more is a 'mismatch' (ANTLR's recovery at EOF)
    ("1 2", ("compile", "1:3: Syntax error: extraneous input '2' expecting <EOF>")),
    ("1 2 3", ("compile", "1:3: Syntax error: mismatched input '2' expecting <EOF>")),
    ("a.b c", ("compile", "1:5: Syntax error: extraneous input 'c' expecting <EOF>")),
    # type values are type(T): a literal mixing type(int) and type(uint) is not homogeneous
    ("type(1) in [int, uint]", ("compile", "1:18: expected type 'type(int)' but found 'type(uint)'")),
    ("[int, uint].size() == 2", ("compile", "1:7: expected type 'type(int)' but found 'type(uint)'")),
    ("[type(1), uint].size() == 2", ("compile", "1:11: expected type 'type(int)' but found 'type(uint)'")),
    ("{'a': int, 'b': uint}.size() == 2", ("compile", "1:17: expected type 'type(int)' but found 'type(uint)'")),
    ("[type(dyn(1)), int].size() == 2", ("compile", "1:16: expected type 'type(dyn)' but found 'type(int)'")),
    ("[list, map].size() == 2", ("compile", "1:8: expected type 'type(list(dyn))' but found 'type(map(dyn, dyn))'")),
    (
        "[type([1]), type(['a'])].size() == 2",
        ("compile", "1:17: expected type 'type(list(int))' but found 'type(list(string))'"),
    ),
    (
        "[type(optional.of(1)), int].size() == 2",
        ("compile", "1:24: expected type 'type(optional_type(int))' but found 'type(int)'"),
    ),
    (
        "[google.protobuf.Timestamp, int].size() == 2",
        ("compile", "1:29: expected type 'type(timestamp)' but found 'type(int)'"),
    ),
    (
        "[type(device), int].size() == 2",
        ("compile", "1:16: expected type 'type(kubernetes.DRADevice)' but found 'type(int)'"),
    ),
    ("type(1) in [int, int]", True),
    ("type(1) == uint", False),
    ("int + 1 == 2", ("compile", "1:5: found no matching overload for '_+_' applied to '(type(int), int)'")),
    (
        "optional.of(1) + 1 == 2",
        ("compile", "1:16: found no matching overload for '_+_' applied to '(optional_type(int), int)'"),
    ),
    (
        "[timestamp('2020-01-01T00:00:00Z'), 1].size() == 2",
        ("compile", "1:37: expected type 'timestamp' but found 'int'"),
    ),
    # __result__ is the accumulator's reserved name; macro variables' own messages
    ("[1].map(__result__, true).size() == 1", ("compile", "1:9: iteration variable overwrites accumulator variable")),
    ("[1].exists(__result__, true)", ("compile", "1:12: iteration variable overwrites accumulator variable")),
    ("[1].all(__result__, v, true)", ("compile", "1:9: iteration variable overwrites accumulator variable")),
    ("[1].all(i, __result__, true)", ("compile", "1:12: iteration variable overwrites accumulator variable")),
    ("[1].all(__result__, __result__, true)", ("compile", "1:21: duplicate variable name: __result__")),
    ("[1].sortBy(__result__, 1) == [1]", ("compile", "1:12: iteration variable overwrites accumulator variable")),
    ("[1].map(a.b, true)", ("compile", "1:10: argument is not an identifier")),
    ("[1].sortBy(a.b, 1) == [1]", ("compile", "1:13: argument is not an identifier")),
    (
        "optional.of(1).optMap(a.b, 1).value() == 1",
        ("compile", "1:24: optMap() variable name must be a simple identifier"),
    ),
    ("cel.bind(__result__, 1, __result__ == 1)", True),
    ("optional.of(1).optMap(__result__, __result__ == 1).value()", True),
    ("[1].existsOne(x, true)", ("compile", "1:14: undeclared reference to 'existsOne' (in container '')")),
    ("[1, 2].exists(x, __result__)", ("compile", "1:18: undeclared reference to '__result__' (in container '')")),
    # double(string) is strconv.ParseFloat: underscores between digits, hex with p exponent, no overflow
    ("double('1_000') == 1000.0", True),
    ("double('1_0.0_1') == 10.01", True),
    ("double('0x1_0p0') == 16.0", True),
    (
        "double('0x10') == 16.0",
        ("compile", "program instantiation failed: type conversion error from 'string' to 'double'"),
    ),
    ("double('1e1_0') == 1.0", False),
    (
        "double('_1') == 1.0",
        ("compile", "program instantiation failed: type conversion error from 'string' to 'double'"),
    ),
    (
        "double('1_') == 1.0",
        ("compile", "program instantiation failed: type conversion error from 'string' to 'double'"),
    ),
    (
        "double('1e400') > 1.0",
        ("compile", "program instantiation failed: type conversion error from 'string' to 'double'"),
    ),
    (
        "double('+nan') != 1.0",
        ("compile", "program instantiation failed: type conversion error from 'string' to 'double'"),
    ),
    (
        "double('١') == 1.0",
        ("compile", "program instantiation failed: type conversion error from 'string' to 'double'"),
    ),
    # cel.OptionalTypes() unversioned: first, last, optional.unwrap, unwrapOpt
    ("[1,2].first() == optional.of(1)", True),
    ("[1,2].last() == optional.of(2)", True),
    ("[].first().hasValue()", False),
    ("lists.range(3).last().value() == 2", True),
    ("optional.unwrap([optional.of(1), optional.none()]) == [1]", True),
    ("[optional.of(1), optional.none()].unwrapOpt() == [1]", True),
    ("optional.unwrap([dyn(1)]) == [1]", ("runtime", "no such overload: optional.unwrap(list)")),
    # or/orValue evaluate their argument only when the optional is empty
    ("optional.of(1).orValue(1/0) == 1", True),
    ("optional.none().orValue(1/0) == 1", ("runtime", "division by zero")),
    ("optional.of(1).or(optional.of(1/0)).value() == 1", True),
    ("optional.none().or(optional.of(1/0)).value() == 1", ("runtime", "division by zero")),
    ("dyn(1).orValue(2) == 1", ("runtime", "no such overload")),
    # selection on a dyn value without fields; on optionals; on Kubernetes' object types
    ("has(device.attributes['dra.example.com'].model.foo)", False),
    ("device.attributes['dra.example.com'].model.?foo.hasValue()", False),
    ("device.attributes['dra.example.com'].model.foo == 'x'", ("runtime", "no such key: foo")),
    ("has(device.attributes['dra.example.com'].v.foo)", False),
    ("has(dyn([1]).foo)", ("runtime", "unsupported index type 'string' in list")),
    ("dyn(optional.of(1)).foo == 1", False),
    ("optional.of({'a': 1}).a == optional.of(1)", True),
    ("has(optional.of({'a': 1}).a)", True),
    ("optional.none().a.hasValue()", False),
    ("optional.of(1).foo.hasValue()", ("compile", "1:15: type 'int' does not support field selection")),
    ("quantity('1').foo == 1", ("compile", "1:14: unexpected failed resolution of 'kubernetes.Quantity'")),
    ("has(semver('1.0.0').foo)", ("compile", "1:4: unexpected failed resolution of 'kubernetes.Semver'")),
    ("url('http://a').foo == 1", ("compile", "1:16: unexpected failed resolution of 'kubernetes.URL'")),
    ("format.dns1123Label().foo == 1", ("compile", "1:22: unexpected failed resolution of 'kubernetes.NamedFormat'")),
    ("ip('1.2.3.4').foo == 1", ("compile", "1:14: type 'net.IP' does not support field selection")),
    # the device is a map at runtime
    ("device == device", True),
    ("device != device", False),
    ("device == dyn(device)", True),
    ("type(device) == map", True),
    # ... with its four keys whatever the gates declare; dyn() keeps its sizes, not its declared path (cost)
    ("dyn(device).driver == 'dra.example.com'", True),
    ("'driver' in dyn(device)", True),
    ("dyn(device).size() == 4", True),
    ("dyn(device).allowMultipleAllocations == false", True),
    ("[device] == [device]", True),
    ("dyn(device).attributes['unknown.com'].size() == 0", True),
    ("cel.bind(d, dyn(device), d.attributes.exists(k, true))", True),
    # no ordering overload takes a semver, even against dyn
    (
        "semver('1.0.0') < semver('1.2.4')",
        ("compile", "1:17: found no matching overload for '_<_' applied to '(kubernetes.Semver, kubernetes.Semver)'"),
    ),
    (
        "dyn(semver('1.0.0')) < semver('2.0.0')",
        ("compile", "1:22: found no matching overload for '_<_' applied to '(dyn, kubernetes.Semver)'"),
    ),
    (
        "device.attributes['dra.example.com'].v < semver('2.0.0')",
        ("compile", "1:40: found no matching overload for '_<_' applied to '(dyn, kubernetes.Semver)'"),
    ),
    ("dyn(semver('1.0.0')) < dyn(semver('2.0.0'))", ("runtime", "no such overload: _<_")),
    ("dyn(1) < null", ("runtime", "no such overload")),
    ("null < null", ("runtime", "no such overload: _<_")),
    # conversions of constants are evaluated when the program is planned
    (
        "'a'.matches(dyn('('))",
        ("compile", "program instantiation failed: error parsing regexp: missing closing ): `(`"),
    ),
    (
        "'a'.find(string('(')) == ''",
        ("compile", "program instantiation failed: error parsing regexp: missing closing ): `(`"),
    ),
    (
        "matches('a', dyn('('))",
        ("compile", "program instantiation failed: error parsing regexp: missing closing ): `(`"),
    ),
    ("int(dyn('x')) == 1", ("compile", "program instantiation failed: type conversion error from 'string' to 'int'")),
    (
        "timestamp(dyn('bad')) == timestamp(1)",
        ("compile", "program instantiation failed: type conversion error from 'string' to 'google.protobuf.Timestamp'"),
    ),
    (
        "string(dyn(b'\\xff')) == ''",
        ("compile", "program instantiation failed: invalid UTF-8 in bytes, cannot convert to string"),
    ),
    ("[b'\\xff'].map(x, string(x)).size() == 1", ("runtime", "invalid UTF-8 in bytes, cannot convert to string")),
    # ext.Lists' cost trackers assert their arguments when the checker resolved one overload,
    # even a failed one: a Go panic ("internal error"); sort's one guarded binding names itself
    (
        "[1, 2].map(x, x / 0).sort().size() > 0",
        ("runtime", "internal error: interface conversion: *types.Err is not traits.Lister: missing method Add"),
    ),
    ("device.attributes['dra.example.com'].missing.sort().size() > 0", ("runtime", "no such key: missing")),
    (
        "[1, 2].sortBy(x, 1 / 0).size() > 0",
        ("runtime", "internal error: interface conversion: *types.Err is not traits.Lister: missing method Add"),
    ),
    (
        "dyn([1, 2]).sortBy(x, x == 1 ? 1 : 1 / 0).size() > 0",
        ("runtime", "internal error: interface conversion: *types.Err is not traits.Lister: missing method Add"),
    ),
    ("dyn(1 / 0).sortBy(x, x).size() > 0", ("runtime", "division by zero")),
    (
        "[1].flatten(1 / 0).size() > 0",
        ("runtime", "internal error: interface conversion: ref.Val is *types.Err, not types.Int"),
    ),
    (
        "dyn(1).flatten(dyn('a')).size() > 0",
        ("runtime", "internal error: interface conversion: ref.Val is types.String, not types.Int"),
    ),
    ("dyn(1 / 0).flatten(1).size() > 0", ("runtime", "division by zero")),
    ("dyn('ab').sort().size() > 0", ("runtime", "no such overload")),
    ("dyn(1).sort().size() > 0", ("runtime", "no such overload: sort")),
    ("device.attributes['dra.example.com'].v.sort().size() > 0", ("runtime", "no such overload: sort")),
    ("dyn({'a': 1}).sortBy(x, x).size() > 0", ("runtime", "no such overload: @sortByAssociatedKeys")),
    # a dyn list sorted by dyn keys matches every key type's overload, whose results disagree: dyn
    ('dyn([1]).sortBy(x, x) == "abc"', False),
    (
        'dyn([1]).sortBy(x, 1) == "abc"',
        ("compile", "1:23: found no matching overload for '_==_' applied to '(list(dyn), string)'"),
    ),
    ("dyn([1]).sortBy(x, 1).size() == 1", True),
]


PREFIX = "compilation failed: ERROR: <input>:"


def first_line(message: str) -> str:
    return message.split("\n", maxsplit=1)[0].removeprefix(PREFIX)


def answer(compile_fn: Any, expression: str) -> Any:
    """True/False, or (kind, first line of the message)."""
    try:
        selector = compile_fn(expression)
        return selector.matches(DeviceInput(DEVICE["driver"], DEVICE["attributes"]))
    except CELError as exc:
        return exc.kind, first_line(exc.message)


@pytest.mark.parametrize("compile_fn", [compile_selector, compile_general])
@pytest.mark.parametrize(("expression", "want"), CASES)
def test_answers_as_kubernetes(compile_fn: Any, expression: str, want: Any) -> None:
    assert answer(compile_fn, expression) == want


# Static cost estimates (Kubernetes' MaxCost): dyn() copies sizes but not the declared path, so a
# field of dyn(device) has no declared size; a cel.bind over a long string is sized by its literal.
UNBOUNDED = 2**64 - 1
COSTS = [
    ("cel.bind(d, dyn(device), d.attributes.exists(k, true))", UNBOUNDED),
    ("dyn(device).attributes.exists(k, true)", UNBOUNDED),
    ("cel.bind(d, device, d.attributes.exists(k, true))", 142),
    ("dyn(device.attributes).exists(k, true)", 132),
    ("cel.bind(x, '" + "a" * 300 + "', cel.bind(y, x + x, y.contains('b')))", 143),
    ("dyn(dyn(1)) == 1", 3),
]


@pytest.mark.parametrize("compile_fn", [compile_selector, compile_general])
@pytest.mark.parametrize(("expression", "cost"), COSTS)
def test_cost_estimate_as_kubernetes(compile_fn: Any, expression: str, cost: int) -> None:
    assert compile_fn(expression).cost_estimate == cost


@pytest.mark.interop
def test_table_is_what_kubernetes_answers() -> None:
    from tests.interop.cel import celgo

    binary = celgo.go_binary()
    if binary is None:
        pytest.skip("Go toolchain not installed: cannot build the Kubernetes CEL reference program")
    text = "".join(json.dumps(dict(DEVICE, expression=e, features={})) + "\n" for e, _ in CASES)
    done = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True, timeout=600)
    for (expression, want), line in zip(CASES, done.stdout.splitlines(), strict=True):
        go = json.loads(line)
        got = go["result"] if "result" in go else (go["error"], first_line(go["message"]))
        assert got == want, expression
    text = "".join(json.dumps(dict(DEVICE, expression=e, features={})) + "\n" for e, _ in COSTS)
    done = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True, timeout=600)
    for (expression, cost), line in zip(COSTS, done.stdout.splitlines(), strict=True):
        assert json.loads(line)["cost"] == cost, expression
