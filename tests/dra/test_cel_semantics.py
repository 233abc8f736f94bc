"""Points where a first differential run found us apart from Kubernetes (k8s.io/dynamic-resource-
allocation/cel v0.37.2, cel-go v0.29.2); every expected answer was observed with the Go program
of tests/interop/cel."""

from __future__ import annotations

import pytest

from kubedevice.dra.cel import CompileError, DeviceInput, EvalError, compile_general, compile_selector

DEVICE = DeviceInput("gpu.example.com", {"model": {"string": "a100"}, "ids": {"ints": [3, 1, 2]}})
COMPILERS = [compile_selector, compile_general]


@pytest.mark.parametrize("compile_fn", COMPILERS)
@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("cel.bind(x, 1 / 0, true)", True),  # cel.bind is lazy
        ('"hello".indexOf("l", 5) == -1 && "hello".indexOf("", 9) == 5', True),  # cel-go v0.29 offsets
        ('"hello".lastIndexOf("", 9) == 5 && "hello".lastIndexOf("lo", 4) == 3', True),
        ("[dyn(1), dyn(2.0)].min() == 1 && [dyn(2.0), dyn(1)].max() == 2.0", True),  # mixed numeric dyn lists
        ('[dyn(1), dyn("a")].min() == 1 && [dyn("a"), dyn(1)].isSorted()', True),  # incomparable pairs ignored
        ("[dyn(2), dyn(1.5)].isSorted()", False),
        ("dyn([1.0, 0.0 / 0.0, 0.5]).isSorted()", True),  # NaN pairs are incomparable
        ('[quantity("1").add(1)] == [quantity("1").add(1)]', True),  # list equality: a failed element is equal
        ('quantity("1").add(quantity("2")) == quantity("3")', True),
        ('device.?driver.orValue("") == "gpu.example.com"', True),  # optional field selection on the device
        ('device.`driver` == "gpu.example.com" && {"a-b": 1}.`a-b` == 1', True),  # backtick-quoted fields
        ('{"if": 1}.if == 1 && {"package": 1}.package == 1', True),  # reserved words are fine as fields
        ('int("+42") == 42 && uint("42") == 42u && uint(2.5) == 2u', True),
        ('[1u, 2u, 3u].sum() == 6u && [duration("1s"), duration("2s")].sum() == duration("3s")', True),
        ('(dyn("abc").reverse() == []) || true', True),  # an ordinary error: absorbed
        ('true || device.attributes["gpu.example.com"].cores.distinct() == []', True),  # || stops at true
    ],
)
def test_kubernetes_answers(compile_fn: object, expression: str, expected: bool) -> None:
    assert compile_fn(expression).matches(DEVICE) is expected  # type: ignore[operator]


@pytest.mark.parametrize("compile_fn", COMPILERS)
@pytest.mark.parametrize(
    "expression",
    [
        "0.0 / 0.0 < 1.0",  # NaN values cannot be ordered
        "1 < 0.0 / 0.0",
        'quantity("1").add(quantity("2")) == quantity("1").add(quantity("2"))',  # the upstream *Quantity quirk
        'quantity("3") == quantity("1").add(2)',
        "cel.bind(x, 1 / 0, x == 1)",
        "lists.range(500000).includes(1)",  # includes() pays for its traversal
        "lists.range(500000).sum() > 0",
        "sets.contains(lists.range(1000), lists.range(1000))",
        '"hello".indexOf("l", -1) == 1',
        "dyn([true]).sum() == 1",  # bools are not summable
        # distinct() panics in cel-go on a non-list or failed argument: || cannot absorb that
        '(dyn("abc").distinct() == []) || true',
        '(device.attributes["gpu.example.com"].cores.distinct() == []) || true',
    ],
)
def test_kubernetes_runtime_errors(compile_fn: object, expression: str) -> None:
    with pytest.raises(EvalError):
        compile_fn(expression).matches(DEVICE)  # type: ignore[operator]


@pytest.mark.parametrize(
    "expression",
    [
        '[1, "a"].size() == 2',  # homogeneous aggregate literals
        '["a", dyn(1)].join(",") == ""',  # exactly: dyn is not string
        '{"a": 1, "b": dyn(2)}.size() == 2',
        'int(" 42") == 42',  # constant conversions that cannot succeed
        'int("1_0") == 10',
        "uint(-0.5) == 0u",
        "int(1e19) == 1",
        '{"in": 1}.in == 1',  # keywords are not field names
        '{"null": 1}.null == 1',
        "has(device.?driver)",
        "device.?nosuch.hasValue()",
    ],
)
def test_kubernetes_compile_errors(expression: str) -> None:
    with pytest.raises(CompileError):
        compile_selector(expression)


@pytest.mark.parametrize("compile_fn", COMPILERS)
@pytest.mark.parametrize(
    ("attributes", "error"),
    [
        ({"a": {}}, "attribute a: unsupported attribute value"),
        ({"a": {"int": None}}, "attribute a: unsupported attribute value"),
        ({"a": {"strings": None}}, "attribute a: unsupported attribute value"),
        ({"a": {"int": 1, "string": "x"}}, None),  # several kinds: the first in Go's order wins
        ({"a": {"version": "1.0.0", "int": 2}}, None),
        ({"a": {"version": "1.x"}}, "attribute a: parse semantic version: No Major.Minor.Patch elements found"),
        (
            {"a": {"version": "1.0.0"}, "b": {"version": "1.x"}},
            "attribute b: parse semantic version: No Major.Minor.Patch elements found",
        ),
        (
            {"a": {"versions": ["1.0.0", "1.x"]}},
            "attribute a: parse semantic version: No Major.Minor.Patch elements found",
        ),
    ],
)
def test_every_attribute_is_converted_first(
    compile_fn: object, attributes: dict[str, object], error: str | None
) -> None:
    """DeviceMatches converts all attributes before it evaluates, so a selector that reads none of
    them still fails on a bad one (answers observed with the Go program); asked twice, because the
    verdict and the versions seen to parse are kept."""
    selector = compile_fn('device.driver == "d"')  # type: ignore[operator]
    for _ in range(2):
        device = DeviceInput("d", attributes)  # type: ignore[arg-type]
        if error is None:
            assert selector.matches(device) is True
        else:
            with pytest.raises(EvalError) as raised:
                selector.matches(device)
            assert raised.value.message == error


@pytest.mark.parametrize("version", [["1.0.0"], 1, None])
def test_a_version_of_the_wrong_type_is_an_error_not_a_crash(version: object) -> None:
    with pytest.raises(EvalError, match="attribute a: "):
        compile_selector("true").matches(DeviceInput("d", {"a": {"version": version}}))  # type: ignore[dict-item]
