"""string.format() and strings.quote() (cel-go strings extension v2, en-US), each expected
outcome as Kubernetes v0.37.2 gives it (observed with the Go program of tests/interop/cel):
grouped %f, ×10 superscript %e with its width quirk, CEL-literal lists and maps, and the
compile-time check of constant format strings with list literals."""

from __future__ import annotations

import pytest

from kubedevice.dra.cel import CELError, DeviceInput, compile_general, compile_selector

DEVICE = DeviceInput("gpu.example.com")
CASES = [
    ('"%.2f".format([1234.5]) == "1,234.50"', "true"),
    ('"%e".format([1234.5]) == "1.234500×10⁰³"', "true"),
    ('"%.3e".format([0.0]) == "0.000000×10⁰⁰"', "true"),
    ('"%e".format([1e100]) == "1.000000×10¹⁰⁰"', "true"),
    ('"%e".format([-0.000123]) == "-1.230000×10⁻⁰⁴"', "true"),
    ('"%d".format([1234567]) == "1234567"', "true"),
    ('"%f".format([0.1]) == "0.100000"', "true"),
    ('"%s".format([1.5]) == "1.5"', "true"),
    ('"%s".format([[1, "a", 2.5, b"x", null, true]]) == "[1, \\"a\\", 2.500000, b\\"x\\", null, true]"', "true"),
    ('"%s".format([{"b": 1, "a": 2}]) == "{\\"a\\":2, \\"b\\":1}"', "true"),
    ('"%x".format(["hi"]) == "6869"', "true"),
    ('"%X".format([255]) == "FF"', "true"),
    ('"%b".format([true]) == "1"', "true"),
    ('"%o".format([8]) == "10"', "true"),
    ('"%d".format(["a"]) == ""', "compile"),
    ('"%d %d".format([1]) == ""', "compile"),
    ('"%d".format([1, 2]) == ""', "compile"),
    ('"%".format([1]) == ""', "compile"),
    ('"%q".format([1]) == ""', "compile"),
    ('"%.f".format([1.5]) == "2"', "compile"),
    ('"%s".format([dyn(1.0/0.0)]) == "+Inf"', "true"),
    ('"%f".format(["NaN"]) == "NaN"', "true"),
    ('"%s".format([duration("1s")]) == "1s"', "true"),
    ('"%s".format([[duration("1s")]]) == "[duration(\\"1s\\")]"', "true"),
    ('"%s".format([[1.0]]) == "[1.000000]"', "true"),
    ('"%s".format([type(1)]) == "int"', "true"),
    ('"%d".format([dyn("a")]) == ""', "runtime"),
    ('strings.quote("a\\"b\\n") == "\\"a\\\\\\"b\\\\n\\""', "true"),
    ('"%s".format(dyn([1])) == "1"', "true"),
    ('"%%".format([]) == "%"', "true"),
    ('"%s".format([-0.0]) == "-0"', "true"),
    ('"%f".format([-1234567.891]) == "-1,234,567.891000"', "true"),
    ('"%.1f".format([2.25]) == "2.2"', "true"),
    ('"%s".format([[1u]]) == "[1]"', "true"),
    ('"%e".format([0.0/0.0]) == "   NaN"', "true"),
    ('"%f".format([1.0/0.0]) == "∞"', "true"),
    ('"%f".format(["-Infinity"]) == "-∞"', "true"),
    ('"%s".format([b"\\xff"]) == ""', "runtime"),
    ('"%s".format([[["x"]]]) == "[[\\"x\\"]]"', "true"),
    ('"%s".format([{"a": [1]}]) == "{\\"a\\":[1]}"', "true"),
    ('"%f".format([-0.0]) == "0.000000"', "true"),
    ('"%s".format([[timestamp(0)]]) == "[timestamp(\\"1970-01-01T00:00:00Z\\")]"', "true"),
    ('"%s".format([timestamp(0)]) == "1970-01-01T00:00:00Z"', "true"),
    ('"%x".format([b"\\x01\\xff"]) == "01ff"', "true"),
    ('"%.2f".format([999.999]) == "1,000.00"', "true"),
    ('"%s".format([[-0.0]]) == "[-0.000000]"', "true"),
    ('"%x".format([-255]) == "-ff"', "true"),
    ('"%s".format([[1.0/0.0]]) == "[\\"+Inf\\"]"', "true"),
    ('"%s %d".format([device.driver, size(device.driver)]) == "gpu.example.com 15"', "true"),
    ('device.driver.format([]) == "gpu.example.com"', "true"),
    ('"%s".format([[1, [2]]]) == "[1, [2]]"', "true"),
    ('"%d".format([[1]]) == ""', "compile"),
    ('"%s".format([[1].map(x, quantity("1"))]) == ""', "runtime"),
    ('"%.200f".format([1.0]) == ""', "false"),
    ('"%s".format(["é\\t"]) == "é\\t"', "true"),
    ('"%s".format([["é\\t"]]) == "[\\"é\\\\t\\"]"', "true"),
]


def outcome(compile_fn: object, expression: str) -> str:
    try:
        return "true" if compile_fn(expression).matches(DEVICE) else "false"  # type: ignore[operator]
    except CELError as error:
        return error.kind


@pytest.mark.parametrize("compile_fn", [compile_selector, compile_general])
@pytest.mark.parametrize(("expression", "expected"), CASES)
def test_like_kubernetes(compile_fn: object, expression: str, expected: str) -> None:
    assert outcome(compile_fn, expression) == expected
