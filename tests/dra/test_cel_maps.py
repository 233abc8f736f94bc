"""Map keys as cel-go keeps them: ``true``, ``1``, ``1u`` and ``1.0`` are four different keys
(Python's dict would merge them into one); a lookup tries the exact key, then the same number as
another kind (double -> int -> uint, int -> uint, uint -> int); equality looks each key of the
left map up in the right one; lists, maps and quantities are keys by reference; a constant key
that is not a scalar fails when the program is planned. Every expected class was observed with
the Go program of tests/interop/cel (k8s.io/dynamic-resource-allocation v0.37.2)."""

from __future__ import annotations

import json
import subprocess

import pytest

from kubedevice.dra.cel import CELError, DeviceInput, compile_general, compile_selector

DEVICE = DeviceInput("gpu.example.com", {"model": {"string": "a100"}})
COMPILERS = [compile_selector, compile_general]


CASES: list[tuple[str, object]] = [
    ('!(true in {dyn(1): "a"})', True),
    ('"%v".format([{dyn(1): "x"}]) != ""', "compile"),
    ("1 in {dyn(true): 1}", False),
    ('1.5 in {dyn(1): "a"}', False),
    ("[1, 2].transformMapEntry(i, v, {dyn(i == 0 ? 1u : 1): v}).size() == 2", "compile"),
    ("[1, 2].transformMapEntry(i, v, {dyn(i == 0 ? true : 1): v}).size() == 2", "compile"),
    ("[dyn(true), dyn(1), dyn(1u), dyn(1.0)].all(k, k in {dyn(true): 1, dyn(1): 2, dyn(1u): 3, dyn(1.0): 4})", True),
    ("[true, false].transformMapEntry(i, v, {dyn(v): i}).size() == 2", True),
    ("[{dyn(1): 1, dyn(1u): 2}].all(m, m.size() == 2)", True),
    ('has({"a": 1}.a) && !has({"a": 1}.b)', True),
    ("has({dyn(1): 1, dyn(true): 2}.a)", False),
    ("lists.range(3).transformMap(i, v, v).size() == 3", True),
    ("null in {null: 1}", True),
    ('string({"a": 1}) != ""', "compile"),
    ('string({dyn(1): 1, dyn(true): 2}) != ""', "compile"),
    ("true in {dyn(1): 1}", False),
    ('{"a": 1, "a": 2}.a == 2', True),
    ('{"a": 1} == {"a": 1.0}', "compile"),
    ('{"a": 1}.?a.orValue(0) == 1', True),
    ('{"a": 1}.all(k, v, k == "a" && v == 1)', True),
    ('{"a": 1}[dyn(1)] == 1', "runtime"),
    ('{"a": 1}[dyn(null)] == 1', "compile"),
    ('{"a": {"b": 1}}.a.b == 1', True),
    ('{"a": {dyn(1): "x", dyn(1u): "y"}}.a[1u] == "y"', True),
    ("{1.0: 1}.size() == 1", True),
    ('{1: "a"}[dyn(1.0)] == "a"', True),
    ("{1: 1, 1: 2}[1] == 2", True),
    ("{[1]: 1}.size() == 1", True),
    ("{dyn(-0.0): 1, dyn(0.0): 2}.size() == 1", True),
    ('{dyn(-1): "a"}[-1.0] == "a"', True),
    ('{dyn(-1): "a"}[18446744073709551615u] == "a"', "runtime"),
    ("{dyn(0.0/0.0): 1}.size() == 1", True),
    ('{dyn(1): "a"} == {dyn(1.0): "a"}', False),
    ('{dyn(1): "a"}.size() == 1 && 1.0 in {dyn(1): "a"} && 1u in {dyn(1): "a"}', True),
    ('{dyn(1): "a"}[1u] == "a"', True),
    ('{dyn(1): "a"}[true] == "a"', "runtime"),
    ('{dyn(1): "x", dyn(true): "y"}.exists(k, v, k == true && v == "y")', True),
    ('{dyn(1): "x", dyn(true): "y"}.transformList(k, v, v).size() == 2', True),
    ("{dyn(1): 1, dyn(1): 2}.size() == 1", True),
    ("{dyn(1): 1, dyn(1): 2}[1] == 2", True),
    ("{dyn(1): 1, dyn(1.0): 2}.size() == 2", True),
    ("{dyn(1): 1, dyn(1.0): 2}[1.0] == 2", True),
    ("{dyn(1): 1, dyn(1u): 1} == {dyn(1): 1, dyn(2u): 1}", True),
    ("{dyn(1): 1, dyn(1u): 2}.size() == 2", True),
    ("{dyn(1): 1, dyn(1u): 2}[1.0] == 1", True),
    ("{dyn(1): 1, dyn(1u): 2}[1] == 1", True),
    ("{dyn(1): 1, dyn(1u): 2}[1u] == 2", True),
    ("{dyn(1): 1, dyn(1u): 2}[?1].orValue(0) == 1", True),
    ("{dyn(1): 1, dyn(2): 1} == {dyn(1u): 1, dyn(1): 1}", False),
    ("{dyn(1): 1, dyn(2): 2}.transformMapEntry(k, v, {dyn(1u): v}).size() == 1", "runtime"),
    ("{dyn(1): 1, dyn(true): 2} == {dyn(true): 2, dyn(1): 1}", True),
    ("{dyn(1): 1, dyn(true): 2}.exists(k, k == true)", True),
    ("{dyn(1): 1, dyn(true): 2}[?true].orValue(0) == 2", True),
    ("{dyn(1): 1} == {dyn(1): 1, dyn(true): 2}", False),
    ("{dyn(1): 1} == {dyn(1u): 1}", True),
    ("{dyn(1): 1} == {dyn(true): 1}", False),
    ("{dyn(1): 1}.transformMapEntry(k, v, {dyn(1u): v}).size() == 1", True),
    ("{dyn(1): 1}[-1] == 1", "runtime"),
    ("{dyn(1): 1}[null] == 1", "compile"),
    ('{dyn(1.0): "a"} == {dyn(1): "a"}', True),
    ('{dyn(1.0): "a"}[1] == "a"', "runtime"),
    ("{dyn(1.0): 1}.all(k, type(k) == double)", True),
    ("{dyn(1.0): 1}.size() == 1 && {dyn(1.0): 1}[1.0] == 1", True),
    ('{dyn(1.5): "a"}[1.5] == "a"', True),
    ('{dyn(18446744073709551615u): "a"}[18446744073709551615.0] == "a"', "runtime"),
    ('{dyn(1u): "a", dyn(1): "b"}[1] == "b"', True),
    ('{dyn(1u): "a"}[1.0] == "a"', True),
    ('{dyn(1u): "a"}[1] == "a"', True),
    ("{dyn(1u): 1, dyn(1): 1} == {dyn(1): 1, dyn(2): 1}", True),
    ("{dyn(1u): 1}.all(k, type(k) == uint)", True),
    ("{dyn(1u): 2, dyn(1): 1}[1] == 1", True),
    ('{dyn(9223372036854775807): "a"}[9223372036854775807.0] == "a"', "runtime"),
    ("{dyn([1]): 1, dyn([1]): 2}.size() == 2", True),
    ("{dyn([1]): 1}.size() == 1", True),
    ('{dyn(duration("1s")): 1}.size() == 1', True),
    ("{dyn(null): 1}.size() == 1", True),
    ("{dyn(optional.of(1)): 1}.size() == 1", True),
    ('{dyn(quantity("1")): 1}.size() == 1', True),
    ('{dyn(semver("1.0.0")): 1}.size() == 1', "runtime"),
    ("{dyn(true): 1, dyn(1): 2, dyn(1u): 3, dyn(1.0): 4}.size() == 4", True),
    ("{dyn(true): 1, dyn(1): 2}.all(k, type(k) == bool || type(k) == int)", True),
    ("{dyn(true): 1, dyn(1): 2}.filter(k, true).size() == 2", True),
    ("{dyn(true): 1, dyn(1): 2}.map(k, k).size() == 2", True),
    ("{dyn(true): 1, dyn(1): 2}.size() == 2", True),
    ("{dyn(true): 1, dyn(1): 2}.transformMap(k, v, v + 1).size() == 2", True),
    ("{dyn(true): 1, dyn(1): 2}.transformMap(k, v, v + 1)[true] == 2", True),
    ("{dyn(true): 1, dyn(1): 2}[1] == 2", True),
    ("{dyn(true): 1, dyn(1): 2}[true] == 1", True),
    ("{dyn(true): 2, dyn(1): 1} == {dyn(1): 1, dyn(true): 2}", True),
    ('{dyn({"a": 1}): 1}.size() == 1', True),
    ("{null: 1}.size() == 1", True),
    ("{null: 1}[null] == 1", "compile"),
    ('{dyn(quantity("1")): 1}[quantity("1")] == 1', "runtime"),
    ('{"a": 1}[dyn(null)] == 1', "compile"),
    ('{"a": 1}[?dyn(null)].hasValue()', "compile"),
    ("{dyn(1): 1}[dyn([1])] == 1", "compile"),
]


@pytest.mark.parametrize("compile_fn", COMPILERS)
@pytest.mark.parametrize(("expression", "expected"), CASES)
def test_map_keys_like_kubernetes(compile_fn: object, expression: str, expected: object) -> None:
    try:
        outcome: object = compile_fn(expression).matches(DEVICE)  # type: ignore[operator]
    except CELError as exc:
        outcome = exc.kind
    assert outcome == expected


@pytest.mark.interop
def test_expectations_are_kubernetes_answers() -> None:
    """The table above, run through Kubernetes' own CEL code (tests/interop/cel) again."""
    from tests.interop.cel import celgo

    binary = celgo.go_binary()
    if binary is None:
        pytest.skip("Go toolchain not installed: cannot build the Kubernetes CEL reference program")
    device = {"driver": DEVICE.driver, "attributes": dict(DEVICE.attributes), "capacity": {}}
    text = "".join(json.dumps({"expression": e, **device}) + "\n" for e, _ in CASES)
    done = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True, timeout=300)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    got = [answer["result"] if "result" in answer else answer["error"] for answer in answers]
    assert got == [expected for _, expected in CASES]
