"""Unit tests for the DRA CEL engine: Kubernetes documentation examples and answers observed
from Kubernetes' own k8s.io/dynamic-resource-allocation/cel (v0.37), plus our API contract."""

from __future__ import annotations

import time

import pytest

from kubedevice.dra.cel import (
    MAX_COST,
    CELError,
    CompileError,
    DeviceInput,
    EvalError,
    compile_general,
    compile_selector,
    top_level_clauses,
)

DRIVER = "gpu.example.com"
GPU = DeviceInput(
    DRIVER,
    {
        "model": {"string": "a100"},
        "cores": {"int": 108},
        "ecc": {"bool": True},
        "fw": {"version": "1.2.3"},
        "numa.example.com/node": {"int": 1},
        "ids": {"ints": [1, 2]},
    },
    {"memory": "40Gi", "numa.example.com/slots": "4"},
)
COMPILERS = [compile_selector, compile_general]


def evaluate(expression: str, device: DeviceInput = GPU, **kwargs: object) -> bool:
    return compile_selector(expression, **kwargs).matches(device)  # type: ignore[arg-type]


@pytest.mark.parametrize("compile_fn", COMPILERS)
@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # From the Kubernetes DRA documentation (DeviceClass / ResourceClaim selectors).
        (f'device.driver == "{DRIVER}"', True),
        (f'device.attributes["{DRIVER}"].model == "a100"', True),
        (f'device.capacity["{DRIVER}"].memory.compareTo(quantity("10Gi")) >= 0', True),
        (f'device.attributes["{DRIVER}"].fw.isGreaterThan(semver("1.0.0"))', True),
        # Names without a domain belong to the driver's domain; other domains stay separate.
        (f'device.attributes["{DRIVER}"].cores > 100 && device.attributes["numa.example.com"].node == 1', True),
        ('device.capacity["numa.example.com"].slots == quantity("4")', True),
        # An unknown domain is an empty map, not an error.
        ('device.attributes["nowhere.example.com"].size() == 0', True),
        ("has(device.attributes.nowhere)", True),
        ('"nowhere" in device.attributes', False),
        (f'"model" in device.attributes["{DRIVER}"]', True),
        # && / || absorb errors when the other side decides.
        (f'device.attributes["{DRIVER}"].missing == 1 || true', True),
        (f'false && device.attributes["{DRIVER}"].missing == 1', False),
        ('cel.bind(q, quantity("1.5"), q.isGreaterThan(quantity("1")) && !q.isInteger())', True),
        ('"a,b".split(",").join("-") == "a-b" && "ABC".lowerAscii() == "abc"', True),
        ('"x12".find("[0-9]+") == "12" && "gpu-0".matches("^gpu-[0-9]$")', True),
        ("optional.of(1).orValue(2) == 1 && !optional.none().hasValue()", True),
        (f'device.attributes["{DRIVER}"].?missing.orValue("x") == "x"', True),
        ("[3, 1, 2].max() == 3 && [1, 2].sum() == 3 && ![2, 1].isSorted()", True),
    ],
)
def test_selector(compile_fn: object, expression: str, expected: bool) -> None:
    assert compile_fn(expression).matches(GPU) is expected  # type: ignore[operator]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # Kubernetes' answers (observed with the Go reference program).
        ('quantity("1000m").isInteger()', False),
        ('quantity("1").isInteger()', True),
        ('quantity("1.5").isInteger()', False),
        ('quantity("1Ki").asInteger() == 1024', True),
        ('quantity("0.1n").isGreaterThan(quantity("0"))', True),
        ('quantity("99999999999999999999").isInteger()', False),
        ('quantity("1e3").asInteger() == 1000', True),
        ('quantity("9223372036854775807").add(1).isInteger()', False),
        ('quantity("1.G").asInteger() == 1000000000', True),
        ('quantity("2Ki").asApproximateFloat() == 2048.0', True),
        ('sign(quantity("-5m")) == -1', True),
        ('quantity("1Gi").sub(quantity("1Gi")).isInteger()', True),
        ('quantity("100Ei") == quantity("9223372036854775807")', True),
        ('isQuantity("1.2.3")', False),
        ('semver("1.2.3-rc.1").isLessThan(semver("1.2.3"))', True),
        ('semver("1.2.3-alpha.10").isGreaterThan(semver("1.2.3-alpha.9"))', True),
        ('semver("1.2.3-alpha").isLessThan(semver("1.2.3-alpha.1"))', True),
        ('semver("1.2.3+a") == semver("1.2.3+b")', True),
        ('isSemver("v1.2", true)', True),
        ('isSemver("v1.2")', False),
        ('isSemver("1.2.3-01")', False),
        ('semver("v01.02.03", true).minor() == 2', True),
        ('isSemver("1.2-rc.1", true)', False),
    ],
)
def test_kubernetes_library_answers(expression: str, expected: bool) -> None:
    assert evaluate(expression) is expected


@pytest.mark.parametrize(
    "expression",
    [
        "device.driver == 1",  # no matching overload
        "device.nosuchfield",  # undefined field
        "undefinedVariable",  # undeclared reference
        '"abc"',  # result must be bool (or the attribute type)
        '"abc".matches("[")',  # invalid regex literal
        'int("x") == 1',  # conversion of a literal fails while planning
        f'device.attributes["{DRIVER}"].ids.exists(x, x == 1)',  # attributes are google.protobuf.Any here
        "device.allowMultipleAllocations",  # gated by DRAConsumableCapacity
        "[1, 2].includes(1)",  # gated by DRAListTypeAttributes
        "1 +",
        "(" * 251 + "true" + ")" * 251,
        "1 + " * 300 + "1 > 0",
    ],
)
def test_compile_errors(expression: str) -> None:
    with pytest.raises(CompileError) as info:
        compile_selector(expression, env="NewExpressions")
    assert info.value.kind == "compile" and info.value.message


def test_feature_gates_and_stored_expressions() -> None:
    gated = "device.allowMultipleAllocations == false"
    assert evaluate(gated)  # the default environment is StoredExpressions, like Options{}
    assert evaluate(gated, env="NewExpressions", features={"DRAConsumableCapacity": True})
    lists = f'device.attributes["{DRIVER}"].ids.includes(2) && device.attributes["{DRIVER}"].ids.exists(x, x == 1)'
    assert evaluate(lists)
    assert evaluate(lists, env="NewExpressions", features={"DRAListTypeAttributes": True})
    with pytest.raises(CompileError):
        compile_selector(lists, env="NewExpressions", features={"DRAConsumableCapacity": True})


@pytest.mark.parametrize("compile_fn", COMPILERS)
@pytest.mark.parametrize(
    "expression",
    [
        f'device.attributes["{DRIVER}"].missing == 1',  # no such key
        f'device.attributes["{DRIVER}"].model',  # non-bool result
        f'device.attributes["{DRIVER}"].model > 1',  # string vs int ordering
        f'device.attributes["{DRIVER}"].fw == "1.2.3"',  # semver compared with a string
        'quantity("bad").isInteger()',
        "9223372036854775807 + 1 > 0",
        "1 / 0 == 0",
        "[1, 2][5] == 1",
        "optional.none().value() == 1",
    ],
)
def test_runtime_errors(compile_fn: object, expression: str) -> None:
    selector = compile_fn(expression)  # type: ignore[operator]
    with pytest.raises(EvalError) as info:
        selector.matches(GPU)
    assert info.value.kind == "runtime"


def test_bad_version_attribute_fails_every_selector() -> None:
    broken = DeviceInput(DRIVER, {"fw": {"version": "1.2"}, "model": {"string": "a100"}})
    with pytest.raises(EvalError, match="fw"):
        compile_selector(f'device.driver == "{DRIVER}"').matches(broken)


def test_cost_limit_stops_expensive_expression_quickly() -> None:
    hundred = "[" + ", ".join(str(i) for i in range(100)) + "]"
    selector = compile_selector(f"{hundred}.all(x, {hundred}.all(y, {hundred}.all(z, true)))")
    start = time.monotonic()
    with pytest.raises(EvalError, match="cost limit"):
        selector.matches(GPU)
    assert time.monotonic() - start < 30
    assert selector.cost_estimate > MAX_COST


@pytest.mark.parametrize("compile_fn", COMPILERS)
@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # Kubernetes' regexes are RE2 (Go's regexp), not Python's re.
        ('"abc\\n".matches("abc$")', False),
        ('"abc".matches("abc$") && "abc".matches("c\\\\z")', True),
        ('"ab1".matches("^[[:alpha:]]+[[:digit:]]$")', True),
        ('"é".matches("^\\\\pL$")', True),
        ('"a.b".matches("\\\\Qa.b\\\\E") && !"axb".matches("^\\\\Qa.b\\\\E$")', True),
        ('"axxb".findAll("x*") == ["", "xx", ""]', True),  # Go skips an empty match after a match
        ('"aaa".findAll("a", 2) == ["a", "a"] && "ab".find("z") == ""', True),
    ],
)
def test_regex_is_re2(compile_fn: object, expression: str, expected: bool) -> None:
    assert compile_fn(expression).matches(GPU) is expected  # type: ignore[operator]


@pytest.mark.parametrize(
    "expression",
    [
        '"ab".matches("a(?=b)")',  # lookahead: not RE2
        '"aa".matches("(a)\\\\1")',  # backreference: not RE2
        '"ab".find("(")',  # the find/findAll regex optimisation compiles constant patterns
        '"ab".findAll("[", 1).size() == 0',
        'matches("(", "x")',  # ValidateRegexLiterals checks the first argument of global matches
    ],
)
def test_invalid_constant_regex_is_a_compile_error(expression: str) -> None:
    with pytest.raises(CompileError):
        compile_selector(expression)


def test_invalid_dynamic_regex_is_a_runtime_error() -> None:
    selector = compile_selector(f'device.driver.matches(device.attributes["{DRIVER}"].model + "(?=x)")')
    with pytest.raises(EvalError, match="error parsing regexp"):
        selector.matches(GPU)


def test_compile_once_and_errors_are_cel_errors() -> None:
    expression = f'device.driver == "{DRIVER}"'
    assert compile_selector(expression) is compile_selector(expression)
    assert compile_selector(expression).expression == expression
    assert issubclass(CompileError, CELError) and issubclass(EvalError, CELError)


def test_top_level_clauses() -> None:
    assert top_level_clauses("a == 1 && (b || c) && d.e(f && g)") == ["a == 1", "b || c", "d.e(f && g)"]
    assert top_level_clauses("a || b") == ["a || b"]
    assert top_level_clauses("a &&") == ["a &&"]
