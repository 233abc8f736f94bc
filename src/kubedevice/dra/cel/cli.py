"""`kubedevice dra cel`: evaluate selector cases given as JSON lines, one answer line each."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Annotated, Any

import typer

from ...errors import fail
from .. import features as feature_gates
from ..godecode import is_int64
from . import CELError, DeviceInput, compile_selector


def _capacity(raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise ValueError("capacity must be an object")
    out = {}
    for name, value in raw.items():
        if not isinstance(value, dict) or not isinstance(value.get("value"), str):
            raise ValueError(f'capacity {name!r} needs a string "value"')
        out[name] = value["value"]
    return out


# The JSON each attribute field must hold (resource.k8s.io DeviceAttribute): (scalar type, words).
# null means unset and other keys are ignored, as Go's decoder does.
_KINDS: dict[str, tuple[type, str]] = {
    "int": (int, "an integer"),
    "bool": (bool, "a boolean"),
    "string": (str, "a string"),
    "version": (str, "a string"),
    "ints": (int, "a list of integers"),
    "bools": (bool, "a list of booleans"),
    "strings": (str, "a list of strings"),
    "versions": (str, "a list of strings"),
}


def _check_attribute(name: str, value: dict[str, Any]) -> None:
    """Refuse what Go could not decode into a DeviceAttribute (a string for an int, ...)."""
    for kind, item in value.items():
        if item is None or kind not in _KINDS:
            continue
        wanted, words = _KINDS[kind]
        plural = kind.endswith("s")
        items = item if plural and isinstance(item, list) else [item]  # a list for a scalar kind fails below
        if (plural and not isinstance(item, list)) or any(type(x) is not wanted for x in items):
            raise ValueError(f"attribute {name}: {kind} must be {words}")
        if wanted is int and not all(is_int64(x) for x in items):  # Go's decoder refuses the rest
            raise ValueError(f"attribute {name}: {kind} must be {words} within int64")


def _features(case: dict[str, Any], default: Mapping[str, bool] | None) -> Mapping[str, bool]:
    """The line's "features" when it has them (even ``{}``: every gate off), else the command's."""
    given = case.get("features")
    if given is None:
        return default or {}
    if not isinstance(given, dict):
        raise ValueError("features must map gate names to booleans")
    return given


def answer(line: str, default_features: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """One input line to one answer object; never raises.

    A line's own "features" replace ``default_features`` (the command's release and gates).
    """
    try:
        case = json.loads(line)
        if not isinstance(case, dict) or not isinstance(case.get("expression"), str):
            raise ValueError('input must be an object with a string "expression"')
        attributes = case.get("attributes") or {}
        if not isinstance(attributes, dict) or not all(isinstance(a, dict) for a in attributes.values()):
            raise ValueError("attributes must map names to objects")
        for name, value in attributes.items():
            _check_attribute(name, value)
        device = DeviceInput(
            str(case.get("driver", "")),
            attributes,
            _capacity(case.get("capacity") or {}),
            case.get("allowMultipleAllocations"),
        )
        env = case.get("env") or "StoredExpressions"
        if env not in ("NewExpressions", "StoredExpressions"):
            raise ValueError(f"unknown env {env!r}")
        selector = compile_selector(
            case["expression"],
            env="NewExpressions" if env == "NewExpressions" else "StoredExpressions",
            features=_features(case, default_features),
        )
        return {"result": selector.matches(device)}
    except CELError as exc:
        return {"error": exc.kind, "message": exc.message}
    except (ValueError, TypeError, AttributeError) as exc:
        return {"error": "input", "message": str(exc)}
    except RecursionError:  # JSON nested deeper than the interpreter's stack
        return {"error": "input", "message": "input nested too deeply"}


def cel_command(
    kubernetes_version: Annotated[
        str,
        typer.Option(
            "--kubernetes-version",
            metavar="|".join(feature_gates.RELEASES),
            help='The release whose feature-gate defaults NewExpressions lines without "features" use.',
        ),
    ] = feature_gates.NEWEST,
    gates: Annotated[
        str | None,
        typer.Option("--feature-gates", metavar="NAME=BOOL,...", help="Feature gates on top of the release's."),
    ] = None,
) -> None:
    """Evaluate DRA CEL selectors: JSON lines on stdin, one flushed answer line each.

    Input (only "expression" is required):
    {"expression": "device.driver == 'gpu.example.com'",
     "driver": "gpu.example.com",
     "attributes": {"model": {"string": "a100"}, "x.io/ids": {"ints": [1]}},
     "capacity": {"memory": {"value": "40Gi"}},
     "allowMultipleAllocations": true,
     "env": "StoredExpressions" or "NewExpressions",
     "features": {"DRAConsumableCapacity": true, "DRAListTypeAttributes": true}}
    Attribute values: int, bool, string, version, ints, bools, strings, versions.

    "env" defaults to StoredExpressions, as Options{} of the Go library
    k8s.io/dynamic-resource-allocation/cel does (the scheduler's view);
    NewExpressions is how the API server validates new objects, and only
    there do "features" change the environment; a line without them gets
    the gates of --kubernetes-version and --feature-gates.

    Output: {"result": true} or {"result": false},
    {"error": "compile" or "runtime", "message": "..."} for CEL errors,
    {"error": "input", "message": "..."} for a malformed line (reading goes on).
    """
    try:
        defaults = feature_gates.from_flags(kubernetes_version, gates)
    except feature_gates.FeatureGateError as error:
        option = "--kubernetes-version" if kubernetes_version not in feature_gates.RELEASES else "--feature-gates"
        fail(f"{option}: {error}")
    for line in sys.stdin:
        if not line.strip():
            continue
        sys.stdout.write(json.dumps(answer(line, defaults)) + "\n")
        sys.stdout.flush()
