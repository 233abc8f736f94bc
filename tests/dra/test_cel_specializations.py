"""Calls with constant arguments are specialised at compile time (constant lists as frozensets,
constant patterns and networks compiled once); these are the inputs where Python's own equality
or set membership would answer differently from CEL (true == 1, 1 == 1.0, large ints against
doubles, NaN, bytes against strings, duplicates, the wrong kind through dyn). Every expected
answer was observed with the Go program of tests/interop/cel (k8s.io/dynamic-resource-allocation
v0.37.2)."""

from __future__ import annotations

import json
import subprocess

import pytest

from kubedevice.dra.cel import DeviceInput, EvalError, compile_general, compile_selector

DEVICE = DeviceInput(
    "d.example.com",
    {
        "n": {"int": 2},
        "s": {"string": "x"},
        "ids": {"ints": [3, 1, 2]},
        "caps": {"strings": ["b", "a"]},
        "ip": {"string": "10.1.2.3"},
    },
)
COMPILERS = [compile_selector, compile_general]
A = 'device.attributes["d.example.com"]'


ANSWERS: list[tuple[str, bool]] = [
    (f"sets.contains([dyn({A}.n), dyn(true)], [1])", False),  # true is not 1
    (f"sets.contains([dyn({A}.n), dyn(1.0)], [1])", True),  # 1.0 is 1
    (f"sets.contains([dyn({A}.n), dyn(9007199254740992.0)], [9007199254740993])", True),  # as doubles
    (f"sets.contains([dyn({A}.n), dyn(1u)], [1, 2])", True),
    (f"sets.contains([1u, 2u], [dyn({A}.n)])", True),
    (f"sets.contains([1, 2], [dyn({A}.n), dyn(true)])", False),
    (f'sets.equivalent({A}.caps, ["a", "a", "b"])', True),  # duplicates
    (f'sets.equivalent(["a", "b", "b"], {A}.caps)', True),
    (f"sets.intersects([dyn({A}.n), dyn(0.0 / 0.0)], [1])", False),  # NaN equals nothing
    (f'sets.intersects([dyn({A}.s), dyn(b"a")], ["a"])', False),  # bytes are not strings
    (f'sets.intersects([dyn({A}.s), dyn(b"x")], ["a", "x"])', True),
    (f'sets.contains({A}.caps, ["a", "c"])', False),
    (f'sets.contains([dyn({A}.s), dyn(semver("1.0.0"))], ["x"])', True),  # an incomparable element
    (f"[dyn({A}.n), dyn(true)].includes(1)", False),
    (f"[dyn({A}.n), dyn(1.0)].includes(1)", True),
    (f"[dyn({A}.n), dyn(1u)].includes(1)", True),
    (f"[dyn({A}.n), dyn(9007199254740992.0)].includes(9007199254740993)", True),
    (f'[dyn({A}.s), dyn(b"a")].includes("a")', False),
    (f"{A}.ids.includes(2) && !{A}.ids.includes(4)", True),
    (f'{A}.s.includes("x") && {A}.caps.includes("a")', True),  # includes() on a scalar too
    (f'{A}.s.matches("^x$") && !{A}.s.matches("y") && matches({A}.s, "x")', True),
    (f'cidr("10.0.0.0/8").containsIP({A}.ip) && cidr("10.0.0.0/8").containsIP(ip({A}.ip))', True),
    (f'cidr("fd00::/8").containsIP({A}.ip)', False),
    ('quantity("1").compareTo(quantity("1000m")) == 0 && quantity("2").isGreaterThan(quantity("1999m"))', True),
    ('quantity("1").add(1).compareTo(quantity("2")) == 0', True),  # a computed quantity
    ('semver("1.0.0").isLessThan(semver("1.0.1")) && semver("1.0.0-rc.1").compareTo(semver("1.0.0")) == -1', True),
    (
        "dyn(9007199254740993) == 9007199254740992.0 && !(9007199254740993 > dyn(9007199254740992.0))"
        " && 9007199254740993 >= dyn(9007199254740992.0)",
        True,
    ),
]
ERRORS = [
    f'sets.contains(dyn({A}.s), ["x"])',  # not a list
    f'dyn({A}.n).matches("2")',
    f'cidr("10.0.0.0/8").containsIP(dyn({A}.n))',
    f'cidr("10.0.0.0/8").containsIP({A}.s)',  # not an address
    f'{A}.n.compareTo(quantity("1")) == 0',  # the wrong kind through dyn
    'dyn(semver("1.0.0")).compareTo(quantity("1")) == 0',
    'dyn(quantity("1")).isGreaterThan(semver("1.0.0"))',
    "sets.contains(lists.range(1000), lists.range(1000).map(x, x))",  # the cost limit still applies
]


@pytest.mark.parametrize("compile_fn", COMPILERS)
@pytest.mark.parametrize(("expression", "expected"), ANSWERS)
def test_specialised_calls_answer_like_kubernetes(compile_fn: object, expression: str, expected: bool) -> None:
    assert compile_fn(expression).matches(DEVICE) is expected  # type: ignore[operator]


@pytest.mark.parametrize("compile_fn", COMPILERS)
@pytest.mark.parametrize("expression", ERRORS)
def test_specialised_calls_fail_like_kubernetes(compile_fn: object, expression: str) -> None:
    with pytest.raises(EvalError):
        compile_fn(expression).matches(DEVICE)  # type: ignore[operator]


@pytest.mark.interop
def test_expectations_are_kubernetes_answers() -> None:
    """Both tables above, run through Kubernetes' own CEL code (tests/interop/cel) again."""
    from tests.interop.cel import celgo

    binary = celgo.go_binary()
    if binary is None:
        pytest.skip("Go toolchain not installed: cannot build the Kubernetes CEL reference program")
    cases: list[tuple[str, object]] = [*ANSWERS, *((e, "runtime") for e in ERRORS)]
    device = {"driver": DEVICE.driver, "attributes": dict(DEVICE.attributes), "capacity": {}}
    text = "".join(json.dumps({"expression": e, **device}) + "\n" for e, _ in cases)
    done = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True, timeout=300)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    got = [answer["result"] if "result" in answer else answer["error"] for answer in answers]
    assert got == [expected for _, expected in cases]


def test_answers_are_the_same_on_a_device_seen_before() -> None:
    """Values and verdicts kept in a DeviceInput (warm evaluations) never change an answer."""
    seen = DeviceInput(DEVICE.driver, DEVICE.attributes)
    fast = [
        (f'{A}.s == "x" && {A}.n >= 2', True),
        (f'{A}.s != "x"', False),
        (f"{A}.n < 2 || {A}.ids == [3, 1, 2]", True),
    ]
    for expression, expected in [*ANSWERS, *fast]:
        for compile_fn in COMPILERS:
            fresh = DeviceInput(DEVICE.driver, DEVICE.attributes)
            assert compile_fn(expression).matches(fresh) is expected, expression
            assert compile_fn(expression).matches(seen) is expected, expression
            assert compile_fn(expression).matches(seen) is expected, expression
