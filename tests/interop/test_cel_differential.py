"""Differential test: our CEL engine against Kubernetes' k8s.io/dynamic-resource-allocation/cel.

A seeded corpus of expression × device cases goes through the real Go code (tests/interop/cel)
and through both of our evaluation paths (generated fast path and general closures); every
case must land in the same class (match, no match, compile error, runtime error) and every
runtime error read the same (bar which bad attribute is named), every
compiled selector must carry Kubernetes' static cost estimate, and every compile error must
read as the API server's: the first reported error's ``compilation failed: ERROR: <input>:L:C:``
line, source snippet and caret (or ``program instantiation failed: ...``) exactly. Where cel-go's
compiler panics (an optional literal element of type dyn), ours must refuse the expression as a
compile error that names the panic.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kubedevice.dra.cel import CELError, DeviceInput, Selector, compile_general, compile_selector

from .cel import celcorpus, celgo

pytestmark = pytest.mark.interop
SEEDS = [20260521, 7, 1312]  # several seeds every run: each draws a different corpus
# a few thousand cases per seed; KUBEDEVICE_CEL_EXPRESSIONS asks for more (or fewer) per seed
EXPRESSIONS = int(os.environ.get("KUBEDEVICE_CEL_EXPRESSIONS", "600"))
DEVICES_PER_EXPRESSION = 5


@pytest.fixture(scope="module")
def go_program() -> Path:
    binary = celgo.go_binary()
    if binary is None:
        pytest.skip("Go toolchain not installed: cannot build the Kubernetes CEL reference program")
    return binary


def classify_go(answer: dict[str, Any]) -> str:
    if "result" in answer:
        return "match" if answer["result"] else "no match"
    return str(answer["error"])


def first_error(message: str) -> str:
    """The first error cel-go displays (header, source line, caret); Kubernetes lists them all,
    we stop at the first. cel-go numbers its free type variables (``_var9``), we do not."""
    return re.sub(r"_var\d+", "_var", "\n".join(message.split("\n")[:3]))


def classify_python(
    case: dict[str, Any], compile_fn: Any, go_message: str | None = None
) -> tuple[str, Selector | None, str]:
    try:
        options = {"env": case["env"]} if "env" in case else {}  # else our default, which must be the library's
        selector = compile_fn(case["expression"], features=case["features"], **options)
    except CELError as exc:
        if go_message is not None and exc.kind == "compile" and first_error(exc.message) != first_error(go_message):
            return f"compile: {first_error(exc.message)!r}", None, exc.message
        return exc.kind, None, exc.message
    device = DeviceInput(
        case["driver"],
        case["attributes"],
        {k: v["value"] for k, v in case["capacity"].items()},
        case.get("allowMultipleAllocations"),
    )
    try:
        return ("match" if selector.matches(device) else "no match"), selector, ""
    except CELError as exc:
        return exc.kind, selector, exc.message


def run_go(binary: Path, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    text = "".join(json.dumps(case) + "\n" for case in cases)
    done = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True, timeout=600)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(cases), done.stderr
    return answers


def _bad_attribute(message: str) -> bool:
    """DeviceMatches' error for an attribute it cannot convert: with several, Go names the first
    of its randomly ordered map, so only the class is compared."""
    return message.startswith("attribute ")


def describe(case: dict[str, Any], go: str, ours: str, path: str) -> str:
    device = {k: case[k] for k in ("driver", "attributes", "capacity") if case.get(k)}
    return (
        f"[{path}] kubernetes={go} ours={ours} env={case.get('env')} features={case['features']}\n"
        f"    expression: {case['expression']}\n    device: {json.dumps(device)}"
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_corpus_classified_like_kubernetes(go_program: Path, seed: int) -> None:
    cases = celcorpus.corpus(seed, EXPRESSIONS, DEVICES_PER_EXPRESSION)
    assert len(cases) >= 2000
    answers = run_go(go_program, cases)
    mismatches: list[str] = []
    classes: Counter[str] = Counter()
    fast_cases = 0
    for case, answer in zip(cases, answers, strict=True):
        go = classify_go(answer)
        classes[go] += 1
        go_message = answer.get("message") if go == "compile" else None
        for path, compile_fn in (("fast", compile_selector), ("general", compile_general)):
            ours, selector, message = classify_python(case, compile_fn, go_message)
            fast_cases += bool(path == "fast" and selector is not None and selector.fast)
            if go == "panic":
                if ours != "compile" or answer["message"] not in message:
                    mismatches.append(describe(case, f"panic {answer['message']!r}", f"{ours} {message!r}", path))
            elif ours != go:
                shown = go if go_message is None or ours == "runtime" else f"compile: {first_error(go_message)!r}"
                mismatches.append(describe(case, shown, ours, path))
            elif go == "runtime" and message != answer["message"] and not _bad_attribute(answer["message"]):
                mismatches.append(describe(case, repr(answer["message"]), repr(message), path))
            elif selector is not None and selector.cost_estimate != answer["cost"]:
                mismatches.append(describe(case, f"cost {answer['cost']}", f"cost {selector.cost_estimate}", path))
    assert not mismatches, f"{len(mismatches)} of {2 * len(cases)} differ:\n" + "\n".join(mismatches[:25])
    assert all(classes[c] >= 50 for c in ("match", "no match", "compile", "runtime")), classes
    assert fast_cases >= 200, f"fast path exercised by only {fast_cases} cases"


def test_corpus_covers_every_library_function() -> None:
    text = "\n".join(c["expression"] for seed in SEEDS for c in celcorpus.corpus(seed, EXPRESSIONS, 1))
    functions = [
        "quantity(",
        "isQuantity(",
        ".compareTo(",
        ".isGreaterThan(",
        ".isLessThan(",
        ".add(",
        ".sub(",
        ".asInteger()",
        ".isInteger()",
        ".asApproximateFloat()",
        "sign(",
        "semver(",
        "isSemver(",
        ".major()",
        ".minor()",
        ".patch()",
        ".includes(",
        "cel.bind(",
        ".matches(",
        ".find(",
        ".findAll(",
        ".split(",
        ".join(",
        ".substring(",
        ".charAt(",
        ".trim()",
        ".replace(",
        ".lowerAscii()",
        ".upperAscii()",
        ".indexOf(",
        ".lastIndexOf(",
        ".isSorted()",
        ".sum()",
        ".min()",
        ".max()",
        "optional.of(",
        "optional.none()",
        ".?",
        "[?",
        ".orValue(",
        ".optMap(",
        ".all(",
        ".exists(",
        ".exists_one(",
        ".map(",
        ".filter(",
        "has(",
        # the rest of the base environment
        ".sort()",
        ".slice(",
        ".flatten(",
        ".distinct()",
        ".reverse()",
        "lists.range(",
        ".sortBy(",
        "sets.contains(",
        "sets.intersects(",
        "sets.equivalent(",
        ".existsOne(",
        ".transformList(",
        ".transformMap(",
        ".transformMapEntry(",
        "ip(",
        "isIP(",
        "ip.isCanonical(",
        ".family()",
        ".isLoopback()",
        ".isUnspecified()",
        ".isGlobalUnicast()",
        ".isLinkLocalMulticast()",
        ".isLinkLocalUnicast()",
        "cidr(",
        "isCIDR(",
        ".containsIP(",
        ".containsCIDR(",
        ".prefixLength()",
        ".masked()",
        "url(",
        "isURL(",
        ".getScheme()",
        ".getHost()",
        ".getHostname()",
        ".getPort()",
        ".getEscapedPath()",
        ".getQuery()",
        "type(",
        "timestamp(",
        "duration(",
        ".getFullYear(",
        ".getDayOfWeek()",
        ".getMilliseconds()",
        ".format(",
        "strings.quote(",
        "format.named(",
        ".validate(",
        "format.dns1123Label()",
        "format.qualifiedName()",
        "format.labelValue()",
        "format.uuid()",
        "format.byte()",
        "format.date()",
        "format.datetime()",
        "format.uri()",
    ]
    missing = [f for f in functions if f not in text]
    assert not missing, f"corpus never calls {missing}"
