"""The upstream test table of k8s.io/dynamic-resource-allocation/cel (compile_test.go, v0.37.2),
run like its TestCEL: every case in every combination of the two feature gates and both
environments unless the case pins them, through both of our evaluation paths.

tests/dra/data/cel_upstream_cases.jsonl is printed by tests/interop/cel/cmd/upstreamcases,
which holds the upstream table verbatim.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from kubedevice.dra.cel import CELError, DeviceInput, compile_general, compile_selector

CASES = [
    json.loads(line) for line in (Path(__file__).parent / "data" / "cel_upstream_cases.jsonl").read_text().splitlines()
]


def _runs() -> list[Any]:
    runs = []
    for case in CASES:
        gates = (
            [case["features"]]
            if case["features"] is not None
            else [
                {"DRAListTypeAttributes": lists, "DRAConsumableCapacity": consumable}
                for lists, consumable in itertools.product((True, False), repeat=2)
            ]
        )
        envs = [case["env"]] if case["env"] is not None else ["NewExpressions", "StoredExpressions"]
        for features, env, path in itertools.product(gates, envs, ("fast", "general")):
            flags = ",".join(k for k, on in sorted(features.items()) if on) or "no-gates"
            runs.append(pytest.param(case, features, env, path, id=f"{case['name']}-{flags}-{env}-{path}"))
    return runs


def test_table_is_complete() -> None:
    assert len(CASES) == 71  # every entry of the upstream map


@pytest.mark.parametrize(("case", "features", "env", "path"), _runs())
def test_upstream_case(case: dict[str, Any], features: dict[str, bool], env: str, path: str) -> None:
    compile_fn = compile_selector if path == "fast" else compile_general
    try:
        selector = compile_fn(case["expression"], env=env, features=features)
    except CELError as error:
        assert case["expectCompileError"], f"unexpected compile error: {error.message}"
        assert case["expectCompileError"] in error.message
        return
    assert not case["expectCompileError"], f"expected compile error {case['expectCompileError']!r}"
    assert selector.cost_estimate == case["expectCost"]
    device = DeviceInput(case["driver"], case["attributes"], case["capacity"], case["allowMultipleAllocations"])
    try:
        matched = selector.matches(device)
    except CELError as error:
        assert case["expectMatchError"], f"unexpected evaluation error: {error.message}"
        assert case["expectMatchError"] in error.message
        return
    assert not case["expectMatchError"], f"expected evaluation error {case['expectMatchError']!r}"
    assert matched is case["expectMatch"]
