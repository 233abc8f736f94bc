"""`kubedevice dra cel` as a real process: JSON lines in, one flushed answer line per input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

COMMAND = [sys.executable, "-c", "from kubedevice.dra.cel.cli import cel_command; cel_command()"]


@pytest.fixture
def cel_process() -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    yield process
    if process.stdin is not None:
        process.stdin.close()
    process.wait(timeout=30)


def ask(process: subprocess.Popen[str], line: str) -> dict[str, Any]:
    """Send one line and read its answer without closing stdin: proves the answer was flushed."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(line + "\n")
    process.stdin.flush()
    answer: dict[str, Any] = json.loads(process.stdout.readline())
    return answer


def test_answers_line_by_line(cel_process: subprocess.Popen[str]) -> None:
    device = {
        "driver": "gpu.example.com",
        "attributes": {"model": {"string": "a100"}, "fw": {"version": "1.2.3"}},
        "capacity": {"memory": {"value": "40Gi"}},
    }
    selector = (
        'device.attributes["gpu.example.com"].model == "a100" && '
        'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("1Gi"))'
    )
    assert ask(cel_process, json.dumps({"expression": selector, **device})) == {"result": True}
    assert ask(cel_process, json.dumps({"expression": 'device.driver == "x"', **device})) == {"result": False}
    compile_error = ask(cel_process, json.dumps({"expression": "device.driver ==", **device}))
    assert compile_error["error"] == "compile" and compile_error["message"]
    runtime_error = ask(cel_process, json.dumps({"expression": 'device.attributes["x"].y', **device}))
    assert runtime_error["error"] == "runtime" and "no such key" in runtime_error["message"]


def test_environment_and_features(cel_process: subprocess.Popen[str]) -> None:
    case = {"expression": "device.allowMultipleAllocations", "driver": "d", "allowMultipleAllocations": True}
    assert ask(cel_process, json.dumps(case)) == {"result": True}  # StoredExpressions by default, like Options{}
    new = {**case, "env": "NewExpressions"}
    assert ask(cel_process, json.dumps(new)) == {"result": True}  # the 1.37 defaults: consumable capacity on
    assert ask(cel_process, json.dumps({**new, "features": {}}))["error"] == "compile"  # the line's own gates
    assert ask(cel_process, json.dumps({**new, "features": {"DRAConsumableCapacity": True}})) == {"result": True}


def test_release_gates_for_lines_without_features() -> None:
    """--kubernetes-version 1.35: DRAConsumableCapacity is alpha and off, so the field is undeclared."""
    command = [sys.executable, "-m", "kubedevice", "dra", "cel", "--kubernetes-version", "1.35"]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = {"expression": "device.allowMultipleAllocations", "driver": "d", "env": "NewExpressions"}
        answer = ask(process, json.dumps(line))
        assert answer["error"] == "compile" and "undefined field 'allowMultipleAllocations'" in answer["message"]
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=30)


def test_unknown_feature_gate_is_a_usage_error() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kubedevice",
            "dra",
            "cel",
            "--kubernetes-version",
            "1.35",
            "--feature-gates",
            "DRAListTypeAttributes=true",
        ],
        capture_output=True,
        text=True,
        input="",
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "kubedevice: --feature-gates: unrecognized feature gate: DRAListTypeAttributes"
    ]


def test_help_documents_the_line_formats() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kubedevice", "dra", "cel", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "100"},
    )
    for text in (
        '"expression"',
        '"attributes"',
        '"capacity"',
        '"env"',
        "StoredExpressions",
        '"features"',
        '{"result": true}',
        '"error": "compile" or "runtime"',
        '"error": "input"',
    ):
        assert text in done.stdout


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[1, 2]",
        '{"driver": "x"}',
        '{"expression": "true", "attributes": [1]}',
        '{"expression": "true", "capacity": {"m": {"value": 5}}}',
        '{"expression": "true", "env": "Other"}',
        # what Go could not decode into a DeviceAttribute either
        '{"expression": "true", "attributes": {"a": {"int": "5"}}}',
        '{"expression": "true", "attributes": {"a": {"int": true}}}',
        '{"expression": "true", "attributes": {"a": {"ints": [1, "x"]}}}',
        '{"expression": "true", "attributes": {"a": {"strings": "x"}}}',
    ],
)
def test_malformed_lines_get_an_error_line_and_the_command_continues(
    cel_process: subprocess.Popen[str], line: str
) -> None:
    answer = ask(cel_process, line)
    assert set(answer) == {"error", "message"} and answer["message"]
    assert ask(cel_process, json.dumps({"expression": "1 < 2", "driver": "d"})) == {"result": True}


def test_attribute_fields_of_the_wrong_json_type_are_input_errors(cel_process: subprocess.Popen[str]) -> None:
    """Go's decoder refuses them before DeviceMatches runs; null and unknown fields it accepts."""
    line = {"expression": "true", "driver": "d", "attributes": {"a": {"int": "5"}}}
    assert ask(cel_process, json.dumps(line)) == {"error": "input", "message": "attribute a: int must be an integer"}
    line["attributes"] = {"a": {"int": 5, "float": 1.5}, "b": {"version": None, "string": "x"}}
    assert ask(cel_process, json.dumps(line)) == {"result": True}


@pytest.mark.parametrize(
    ("attribute", "message"),
    [
        ({"int": 99999999999999999999}, "attribute a: int must be an integer within int64"),
        ({"int": -(2**63) - 1}, "attribute a: int must be an integer within int64"),
        ({"ints": [1, 2**64]}, "attribute a: ints must be a list of integers within int64"),
    ],
)
def test_integers_go_cannot_decode_are_input_errors(
    cel_process: subprocess.Popen[str], attribute: dict[str, Any], message: str
) -> None:
    """An attribute's int is an int64 in Go (issue #27: dra cel evaluated 99999999999999999999)."""
    line = {"expression": "true", "driver": "d", "attributes": {"a": attribute}}
    assert ask(cel_process, json.dumps(line)) == {"error": "input", "message": message}
    line["attributes"] = {"a": {"int": 2**63 - 1}, "b": {"int": -(2**63)}}
    assert ask(cel_process, json.dumps(line)) == {"result": True}
