"""CEL for DRA device selectors with Kubernetes' semantics (k8s.io/dynamic-resource-allocation/cel).

Expressions are parsed, type-checked against the environment Kubernetes would use, and
compiled once into Python closures; ``Selector.matches`` then evaluates one device.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from ...cel import engine
from ...cel.cost import estimate
from ...cel.diagnostics import display
from ...cel.engine import CheckError, Compiler
from ...cel.parser import Node, ParseError, flatten, location, parse
from ...cel.values import Err, Optional, type_name
from ...errors import KubedeviceError
from .device import UNCHECKED, precheck
from .environment import DeviceEnvironment
from .fastpath import generate

MAX_EXPRESSION_BYTES = 10240
MAX_COST = 1_000_000
Environment = Literal["NewExpressions", "StoredExpressions"]
CONSUMABLE_CAPACITY = "DRAConsumableCapacity"
LIST_TYPE_ATTRIBUTES = "DRAListTypeAttributes"


class CELError(KubedeviceError):
    """A selector failed to compile or to evaluate."""

    kind: Literal["compile", "runtime"]

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CompileError(CELError):
    kind: Literal["compile", "runtime"] = "compile"


class EvalError(CELError):
    kind: Literal["compile", "runtime"] = "runtime"


@dataclass(frozen=True, slots=True)
class DeviceInput:
    """One device as a selector sees it; attribute values use the ResourceSlice one-key form.

    Slots rather than an instance dict: the precheck verdict is written into every device
    evaluated, and a slot costs a quarter of what making the dict did on a cold evaluation.
    """

    driver: str
    attributes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    capacity: Mapping[str, str] = field(default_factory=dict)
    allow_multiple_allocations: bool | None = None
    _checked: Any = field(default=UNCHECKED, init=False, repr=False, compare=False)
    _memo: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)


def env_config(env: Environment, features: Mapping[str, bool] | None) -> DeviceEnvironment:
    """Stored expressions see every field; new ones only what the feature gates enable."""
    if env == "StoredExpressions":
        return DeviceEnvironment("dyn", True, True)
    gates = features or {}
    lists = bool(gates.get(LIST_TYPE_ATTRIBUTES, False))
    return DeviceEnvironment("dyn" if lists else "any", bool(gates.get(CONSUMABLE_CAPACITY, False)), lists)


class Selector:
    """A compiled selector; thread-safe and reusable for any number of devices."""

    def __init__(self, expression: str, fn: Any, cost_estimate: int, fast: bool) -> None:
        self.expression = expression
        self.cost_estimate = cost_estimate
        self.fast = fast  # generated straight-line code rather than the general closures
        self._fn = fn

    def matches(self, device: DeviceInput) -> bool:
        """True/False, or EvalError exactly where Kubernetes' DeviceMatches fails."""
        try:
            if device._checked is not None:
                precheck(device)
            result = self._fn(device) if self.fast else self._fn({"device": device})
        except Err as exc:
            raise EvalError(str(exc)) from None
        except RecursionError:
            raise EvalError("expression too deeply nested") from None
        if result is True or result is False:
            return result
        return _as_bool(result)

    def __repr__(self) -> str:
        return f"Selector({self.expression!r})"


# ref.Val.ConvertToNative(bool)'s refusal, per CEL type (cel-go common/types, Kubernetes' types).
_NOT_BOOL = {
    "int": "unsupported type conversion from 'int' to bool",
    "uint": "unsupported type conversion from 'uint' to bool",
    "string": "unsupported native conversion from string to 'bool'",
    "list": "type conversion error from list to 'bool'",
    "map": "type conversion error from map to 'bool'",
    "type": "type conversion not supported for 'type'",
    "bytes": "type conversion error from Bytes to 'bool'",
    "double": "type conversion error from Double to 'bool'",
    "null_type": "type conversion error from 'null_type' to 'bool'",
    "google.protobuf.Duration": "type conversion error from 'Duration' to 'bool'",
    "google.protobuf.Timestamp": "type conversion error from 'Timestamp' to 'bool'",
    "net.IP": "type conversion error from 'IP' to 'bool'",
    "net.CIDR": "type conversion error from 'CIDR' to 'bool'",
    "kubernetes.Quantity": "type conversion error from 'Quantity' to 'bool'",
    "kubernetes.Semver": "type conversion error from 'Semver' to 'bool'",
    "kubernetes.URL": "type conversion error from 'URL' to 'bool'",
    "kubernetes.NamedFormat": "type conversion error from 'Format' to 'bool'",
}


def _as_bool(result: Any) -> bool:
    """DeviceMatches' ConvertToNative(bool) of a dyn result: an optional converts its value, so
    ``dyn(optional.of(true))`` matches; anything else fails naming the outer type."""
    value = result
    while type(value) is Optional:
        if not value.present:
            detail = "optional.none() dereference"
            break
        value = value.value
    else:
        if value is True or value is False:
            return value
        name = type_name(value)
        detail = _NOT_BOOL.get(name, f"type conversion error from '{name}' to 'bool'")
    raise EvalError(f"CEL result of type {type_name(result)} could not be converted to bool: {detail}")


def _frozen_features(features: Mapping[str, bool] | None) -> tuple[tuple[str, bool], ...]:
    return tuple(sorted((features or {}).items()))


def compile_selector(
    expression: str, *, env: Environment = "StoredExpressions", features: Mapping[str, bool] | None = None
) -> Selector:
    """Compile (cached) or raise CompileError with cel-go's classification.

    The default environment is the Go library's (``Options{}``): StoredExpressions, which the
    scheduler evaluates with. Pass ``env="NewExpressions"`` to validate a new or changed object
    as the API server does (then ``features`` gates what the environment declares).
    """
    return _compile(expression, env, _frozen_features(features), True)


def compile_general(
    expression: str, *, env: Environment = "StoredExpressions", features: Mapping[str, bool] | None = None
) -> Selector:
    """Like compile_selector but never uses the fast path, so tests can hold both to Kubernetes."""
    return _compile(expression, env, _frozen_features(features), False)


# Parsing and compiling recurse once per nesting level (cel-go allows 250); leave them room.
_RECURSION_NEEDED = 12_000


@lru_cache(maxsize=1024)
def _compile(expression: str, env: Environment, features: tuple[tuple[str, bool], ...], fast: bool) -> Selector:
    config = env_config(env, dict(features))
    if sys.getrecursionlimit() < _RECURSION_NEEDED:
        sys.setrecursionlimit(_RECURSION_NEEDED)
    try:
        tree = parse(expression)
        compiler = Compiler(config)
        compiled = compiler.compile(tree)
    except ParseError as exc:
        raise CompileError("compilation failed: " + display(expression, exc.offset, str(exc))) from None
    except CheckError as exc:
        offset = None if exc.node is None else location(exc.node)
        raise CompileError("compilation failed: " + display(expression, offset, str(exc))) from None
    except RecursionError:
        raise CompileError("compilation failed: expression recursion limit exceeded") from None
    if compiler.errors:  # every type-check error, ordered by location (cel-go's Errors.ToDisplayString)
        raise CompileError("compilation failed: " + _check_errors(expression, compiler.errors)) from None
    if compiler.panics:  # cel-go's validators panic on it: the API server answers an internal error
        raise CompileError(f"compilation failed: cel-go panics: {compiler.panics[0]} (an optional element of type dyn)")
    if compiler.invalid:  # cel-go's validators: every finding, ordered by location
        found = sorted((location(node), message) for node, message in compiler.invalid)
        raise CompileError("compilation failed: " + "\n".join(display(expression, at, m) for at, m in found))
    if compiled.type not in ("bool", config.attribute_type):
        shown = engine.type_string(compiled.type)
        raise CompileError(f"must evaluate to bool or the unknown type, not {shown}")
    if compiler.planning:
        raise CompileError("program instantiation failed: " + compiler.planning[0])
    cost = estimate(tree, compiler.types, config)
    fn = generate(compiler, tree) if fast else None
    return Selector(expression, fn or compiled.fn, cost, fn is not None)


_MAX_ERRORS = 100  # cel-go's maxErrorsToReport


def _check_errors(expression: str, errors: list[CheckError]) -> str:
    found: list[tuple[int, str]] = []
    for exc in errors:
        entry = (-1 if exc.node is None else location(exc.node), str(exc))
        if entry not in found:  # a subtree checked twice (macro expansions) reports once
            found.append(entry)
    found.sort(key=lambda entry: entry[0])
    shown = [display(expression, None if at < 0 else at, message) for at, message in found[:_MAX_ERRORS]]
    if len(found) > _MAX_ERRORS:
        shown.append(f"{len(found) - _MAX_ERRORS} more errors were truncated")
    return "\n".join(shown)


def top_level_clauses(expression: str) -> list[str]:
    """Source text of each operand of a top-level && chain, for explaining which clause failed."""
    try:
        root = parse(expression)
    except (ParseError, RecursionError):
        return [expression]
    clauses: list[Node] = []
    flatten(root, "_&&_", clauses)
    return [expression[n.start : n.end].strip() for n in clauses]


__all__ = [
    "MAX_COST",
    "MAX_EXPRESSION_BYTES",
    "CELError",
    "CompileError",
    "DeviceInput",
    "Environment",
    "EvalError",
    "Selector",
    "compile_selector",
    "top_level_clauses",
]
