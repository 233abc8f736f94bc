"""Fuzzing the CEL parser, checker and evaluator: whatever the text, compiling gives a Selector or
a CompileError and evaluating gives True, False or an EvalError; no other Python exception
escapes and nothing hangs (hypothesis' deadline guards against the latter)."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kubedevice.dra.cel import CELError, DeviceInput, compile_general, compile_selector

DEVICE = DeviceInput(
    "gpu.example.com",
    {
        "model": {"string": "a100"},
        "cores": {"int": 80},
        "ecc": {"bool": True},
        "fw": {"version": "1.2.3"},
        "ids": {"ints": [3, 1, 2]},
        "tags": {"strings": ["a", "b"]},
        "ip": {"string": "10.1.2.3"},
    },
    {"memory": "40Gi"},
)
FUZZ = settings(max_examples=400, deadline=5000, suppress_health_check=[HealthCheck.too_slow])

ATOMS = st.sampled_from(
    [
        "1",
        "-1",
        "2u",
        "1.5",
        "0.0 / 0.0",
        '"a100"',
        '""',
        'b"x"',
        "true",
        "null",
        "[]",
        "[1, 2]",
        '{"a": 1}',
        "device.driver",
        'device.attributes["gpu.example.com"].model',
        'device.attributes["gpu.example.com"].ids',
        'device.attributes["gpu.example.com"].fw',
        'device.capacity["gpu.example.com"].memory',
        "device.attributes",
        'quantity("1Gi")',
        'semver("1.0.0")',
        'ip("10.0.0.1")',
        'cidr("10.0.0.0/8")',
        'url("https://x.io/a")',
        "optional.none()",
        "optional.of(1)",
        "dyn(1)",
        "x",
        "lists.range(3)",
        'device.attributes["x"]',
    ]
)
UNARY = st.sampled_from(
    [
        "!@",
        "-@",
        "(@)",
        "size(@)",
        "dyn(@)",
        "@.size()",
        "has(@.a)",
        "@.?a",
        "@[0]",
        '@["a"]',
        "@.all(x, x)",
        "@.exists(x, x > 1)",
        "@.map(x, x + 1)",
        "@.filter(x, x)",
        "cel.bind(x, @, x)",
        "@.sort()",
        "@.distinct()",
        "@.flatten()",
        "@.includes(1)",
        "@.min()",
        "@.sum()",
        "@.isSorted()",
        '@.matches("a+")',
        "@.all(i, v, i < 2)",
        "@.transformList(i, v, v)",
        '@.containsIP("10.1.1.1")',
        "@.family()",
        "@.getHost()",
        "string(@)",
        "int(@)",
        "@.orValue(0)",
        '@.compareTo(quantity("1"))',
        "@.isGreaterThan(@)",
        '@.split(",")',
    ]
)
BINARY = st.sampled_from(
    [
        "@ && @",
        "@ || @",
        "@ == @",
        "@ != @",
        "@ < @",
        "@ + @",
        "@ * @",
        "@ / @",
        "@ % @",
        "@ in @",
        "@ ? @ : @",
        "[@, @]",
        "{@: @}",
        "sets.contains(@, @)",
        "@.indexOf(@)",
        "@.add(@)",
    ]
)


@st.composite
def expressions(draw: st.DrawFn, depth: int = 0) -> str:
    if depth > 4 or draw(st.booleans()):
        return draw(ATOMS)
    template = draw(UNARY) if draw(st.booleans()) else draw(BINARY)
    while "@" in template:  # each @ is an operand
        template = template.replace("@", draw(expressions(depth + 1)), 1)
    return template


def _outcome(compile_fn: object, text: str) -> str:
    try:
        selector = compile_fn(text)  # type: ignore[operator]
    except CELError as error:
        assert error.kind == "compile" and error.message
        return "compile"
    try:
        return str(selector.matches(DEVICE))
    except CELError as error:
        assert error.kind == "runtime" and error.message
        return "runtime"


PIECES = [*"()[]{}.,?:!<>=&|+-*/%\"'`\\ab1_0eExu \n", " in ", "device", ".?", "[?", '"""', "0x", "cel.bind(", "has("]


@FUZZ
@given(st.lists(st.sampled_from(PIECES), max_size=40))
@example(["[?", "]"])  # found by this test: "[?]" used to raise IndexError
def test_any_text_compiles_or_is_a_compile_error(pieces: list[str]) -> None:
    _outcome(compile_selector, "".join(pieces))


@FUZZ
@given(expressions())
def test_generated_expressions_agree_on_both_paths(text: str) -> None:
    assert _outcome(compile_selector, text) == _outcome(compile_general, text)


@FUZZ
@given(
    st.from_regex(r'"([^"\\]|\\[abfnrtv\\"\'?]|\\x[0-9a-f]{2}|\\u[0-9a-f]{4})*"', fullmatch=True), st.text(max_size=20)
)
def test_string_literals_and_regex_arguments(literal: str, pattern: str) -> None:
    escaped = pattern.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    _outcome(compile_selector, f'{literal}.matches("{escaped}")')
    _outcome(compile_selector, f'{literal}.findAll("{escaped}").size() >= 0')
