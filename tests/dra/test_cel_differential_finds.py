"""What the CEL differential (tests/interop/test_cel_differential.py) found disagreeing with
Kubernetes after its generator learnt issue 27's constructs, one row each with Kubernetes' answer
(the Go program's, tests/interop/cel; the interop test below re-asks it):

- optional literal entries and elements (``{?k: v}``, ``[?v]``) of a non-optional type are
  compile errors; of type dyn they make cel-go's homogeneous-literal validator panic, which we
  refuse as a compile error naming the panic;
- macros whose predicate is not a bool (the filter of ``map(x, p, f)``, ``filter``,
  ``exists_one``, the transforms) fail cel-go's check of the ternary they expand to;
- null is assignable to timestamps, durations, optionals and Kubernetes' types (cel-go's legacy
  nullness), so ``[null].sort()`` type-checks and fails at run time;
- ``!=`` is ``Equal(a, b) != true``: where the left operand's type refuses ``==`` (a version
  attribute against a string), ``!=`` is true;
- ``x in [constants]`` is a Go map lookup, which panics for a Semver, bytes or a format;
- the runtime cost of string work (a long string bound by ``cel.bind`` and walked in a loop)
  reaches Kubernetes' limit of 1,000,000 where Kubernetes' does.

A compile error is compared by its first line without the "compilation failed: ERROR: <input>:"
prefix."""

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
LONG = '"' + "ab" * 700 + '"'
VALIDATOR_PANIC = ("panic", "runtime error: index out of range [0] with length 0")
EXCEEDED = ("runtime", "operation cancelled: actual cost limit exceeded")

CASES: list[tuple[str, Any]] = [
    # optional entries and elements
    ("{?'a': 1}.size() == 1", ("compile", "1:8: expected type 'optional_type(int)' but found 'int'")),
    ("{'x': {?'a': 1}}.size() == 1", ("compile", "1:14: expected type 'optional_type(int)' but found 'int'")),
    ("{'b': 2, ?'a': 1}.size() == 1", ("compile", "1:16: expected type 'optional_type(int)' but found 'int'")),
    ("{'a': 2, ?'a': optional.none()}.size() == 0", True),
    ("[?1].size() == 1", ("compile", "1:3: expected type 'optional_type(int)' but found 'int'")),
    ("{?'a': dyn(1)}.size() == 1", VALIDATOR_PANIC),
    ("[1, ?dyn(1)].size() == 1", VALIDATOR_PANIC),
    ('[?device.attributes["dra.example.com"].v].size() == 1', VALIDATOR_PANIC),
    ('[1, "a", ?dyn(1)].size() == 1', ("compile", "1:5: expected type 'int' but found 'string'")),
    (
        '"%s".format([[?dyn(1)]]) == ""',
        ("runtime", "cannot initialize optional list element from non-optional value 1"),
    ),
    (
        '"%s".format([{?"k": dyn(1)}]) == ""',
        ("runtime", "cannot initialize optional entry 'k' from non-optional value 1"),
    ),
    # predicates that are not bools
    (
        "[1, 2].map(x, 1, x) == [1]",
        ("compile", "1:11: found no matching overload for '_?_:_' applied to '(int, list(int), list(int))'"),
    ),
    (
        'dyn([1, 2]).map(x, "a", x) == [1]',
        ("compile", "1:16: found no matching overload for '_?_:_' applied to '(string, list(dyn), list(dyn))'"),
    ),
    (
        "[1, 2].filter(x, 1).size() == 0",
        ("compile", "1:14: found no matching overload for '_?_:_' applied to '(int, list(int), list(int))'"),
    ),
    (
        '[1, 2].exists_one(x, "s")',
        ("compile", "1:18: found no matching overload for '_?_:_' applied to '(string, int, int)'"),
    ),
    (
        "[1, 2].transformList(i, v, 1, v).size() == 0",
        ("compile", "1:21: found no matching overload for '_?_:_' applied to '(int, list(int), list(int))'"),
    ),
    (
        "[1, 2].transformMap(i, v, null, v).size() == 0",
        ("compile", "1:20: found no matching overload for '_?_:_' applied to '(null, map(int, int), map(int, int))'"),
    ),
    (
        "[1, 2].transformMapEntry(i, v, 1, {v: v}).size() == 0",
        ("compile", "1:25: found no matching overload for '_?_:_' applied to '(int, map(int, int), map(int, int))'"),
    ),
    (
        "[1, 2].existsOne(i, v, 1)",
        ("compile", "1:17: found no matching overload for '_?_:_' applied to '(int, int, int)'"),
    ),
    ("[].all(i, x, {'a': x})", ("compile", "1:14: expected type 'bool' but found 'map(string, _var0)'")),
    # a free element type (dyn(l).reverse()) as sortBy's key binds int's overload, which asserts the keys
    (
        '!(device.attributes["unknown.example.com"].ids.reverse().sortBy(x, x).first().hasValue())',
        ("runtime", "internal error: interface conversion: *types.Err is not traits.Lister: missing method Add"),
    ),
    ("dyn([3, 1]).reverse().sortBy(x, x) == [1, 3]", True),
    # null where a timestamp, duration, optional or Kubernetes object is expected
    ("[null, null].sort() == []", ("runtime", "list elements must be comparable")),
    ("[null].sortBy(x, x).size() == 1", ("runtime", "list elements must be comparable")),
    ("[null].min() == null", ("runtime", "no such overload: min(list)")),
    ("[null].isSorted()", ("runtime", "no such overload: isSorted(list)")),
    ('timestamp("2024-01-02T03:04:05Z") != null', True),
    ('null == duration("1s")', False),
    ('ip("1.2.3.4") == null', False),
    ("optional.none() != null", True),
    ('duration("1s") + null == duration("1s")', ("runtime", "no such overload")),
    ('null < duration("1s")', ("runtime", "no such overload: _<_")),
    # heterogeneous equality of a version attribute and of Kubernetes' types
    ('device.attributes["dra.example.com"].v != "1.2.3"', True),
    ('device.attributes["dra.example.com"].v == "1.2.3"', ("runtime", "no such overload")),
    ('device.attributes["dra.example.com"].v != 1', True),
    ('dyn(quantity("1")) != "x"', True),
    ('dyn(format.uri()) != "x"', True),
    # a constant list makes `in` a Go map lookup
    (
        'device.attributes["dra.example.com"].v in ["1.2.3"]',
        ("runtime", "internal error: runtime error: hash of unhashable type cel.Semver"),
    ),
    (
        'device.attributes["dra.example.com"].v in ["1.2.3"] || true',
        ("runtime", "internal error: runtime error: hash of unhashable type cel.Semver"),
    ),
    ('dyn(b"a") in ["x"]', ("runtime", "internal error: runtime error: hash of unhashable type types.Bytes")),
    (
        'dyn(format.uri()) in [dyn("x")]',
        ("runtime", "internal error: runtime error: hash of unhashable type cel.Format"),
    ),
    # a folded conversion is a constant pattern: find's regex optimisation refuses a non-string text
    ('dyn(80).find(string("0")) == ""', ("runtime", "no such overload")),
    # a long string walked in a loop: the runtime cost limit where Kubernetes has it
    (f"cel.bind(x, {LONG}, lists.range(60).all(i, x.contains(x)))", EXCEEDED),
    # the limit cancels the whole evaluation: || does not absorb it
    ('dyn([dyn(1), dyn("a")]).flatten(dyn(9223372036854775807)).size() > 0 || true', EXCEEDED),
    (f"cel.bind(x, {LONG}, lists.range(50).all(i, x.contains(x)))", True),
    (f"cel.bind(x, {LONG}, lists.range(900).all(i, format.dns1123Label().validate(x).hasValue()))", EXCEEDED),
    (f"cel.bind(x, {LONG}, lists.range(3500).all(i, x != x + 'a'))", EXCEEDED),
    (f"cel.bind(x, {LONG}, lists.range(3400).all(i, x != x + 'a'))", True),
    (f"cel.bind(x, {LONG}, lists.range(100).all(i, [x, x].sortBy(y, y).size() > 0))", True),
    (
        f"cel.bind(x, {LONG}, cel.bind(y, x + x + x + x, cel.bind(z, y + y + y + y, cel.bind(w, z + z + z + z, "
        "cel.bind(u, w + w + w + w, [u, u, u, u, u, u, u, u].join('') != x)))))",
        True,
    ),
]
# Whole messages (every error cel-go reports): over a range that fails to check, the variables
# have the error type, and the predicates and optional elements are still checked.
_NOT_A_RANGE = (
    "ERROR: <input>:1:1: expression of type 'string' cannot be range of a comprehension (must be list, map, or dynamic)"
)
MESSAGES = [
    (
        "\"abc\".transformList(i, x, {'a': x}, x).size() >= 0",
        f"compilation failed: {_NOT_A_RANGE}\n | \"abc\".transformList(i, x, {{'a': x}}, x).size() >= 0\n | ^\n"
        "ERROR: <input>:1:20: found no matching overload for '_?_:_' applied to "
        "'(map(string, !error!), list(!error!), list(!error!))'\n"
        " | \"abc\".transformList(i, x, {'a': x}, x).size() >= 0\n | ...................^",
    ),
    (
        '"abc".map(x, [?x]).size() > 0',
        f'compilation failed: {_NOT_A_RANGE}\n | "abc".map(x, [?x]).size() > 0\n | ^\n'
        "ERROR: <input>:1:16: expected type 'optional_type(!error!)' but found '!error!'\n"
        ' | "abc".map(x, [?x]).size() > 0\n | ...............^',
    ),
    (
        '"abc".map(x, [x], x).size() > 0',
        f'compilation failed: {_NOT_A_RANGE}\n | "abc".map(x, [x], x).size() > 0\n | ^\n'
        "ERROR: <input>:1:10: found no matching overload for '_?_:_' applied to "
        "'(list(!error!), list(!error!), list(!error!))'\n"
        ' | "abc".map(x, [x], x).size() > 0\n | .........^',
    ),
    (
        "[].map(x, [?x]).size() > 0",  # cel-go numbers its free type variables, we do not
        "compilation failed: ERROR: <input>:1:13: expected type 'optional_type(_var0)' but found '_var0'\n"
        " | [].map(x, [?x]).size() > 0\n | ............^",
    ),
]
_PANIC = "compilation failed: cel-go panics: "


def first_line(message: str) -> str:
    return message.split("\n", maxsplit=1)[0].removeprefix("compilation failed: ERROR: <input>:")


def answer(compile_fn: Any, expression: str) -> Any:
    """True/False, or (kind, first line of the message); our refusal of what makes cel-go's
    compiler panic reads as ("panic", Go's panic value)."""
    try:
        selector = compile_fn(expression)
        return selector.matches(DeviceInput(DEVICE["driver"], DEVICE["attributes"]))
    except CELError as exc:
        if exc.message.startswith(_PANIC):
            return "panic", exc.message.removeprefix(_PANIC).split(" (")[0]
        return exc.kind, first_line(exc.message)


@pytest.mark.parametrize("compile_fn", [compile_selector, compile_general])
@pytest.mark.parametrize(("expression", "want"), CASES, ids=[e[:80] for e, _ in CASES])
def test_answers_as_kubernetes(compile_fn: Any, expression: str, want: Any) -> None:
    assert answer(compile_fn, expression) == want


@pytest.mark.parametrize("compile_fn", [compile_selector, compile_general])
@pytest.mark.parametrize(("expression", "message"), MESSAGES)
def test_every_error_reads_as_kubernetes(compile_fn: Any, expression: str, message: str) -> None:
    with pytest.raises(CELError) as raised:
        compile_fn(expression)
    assert raised.value.message == message


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
    text = "".join(json.dumps(dict(DEVICE, expression=e, features={})) + "\n" for e, _ in MESSAGES)
    done = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True, timeout=600)
    for (expression, message), line in zip(MESSAGES, done.stdout.splitlines(), strict=True):
        assert json.loads(line)["message"] == message, expression
