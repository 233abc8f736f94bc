"""Differential test: ``kubedevice dra allocate``'s allocator against the scheduler's own.

The Go peer (tests/interop/allocator, built once per version: v0.37.2 from that module, v0.36.3
from v036/, the same main.go) runs ``k8s.io/dynamic-resource-allocation/structured``'s
``NewAllocator``/``Allocate`` with the allocated state the scheduler gathers. Seeded cases from
tests/dra/allocgen.py go through both; the verdict (allocated, unschedulable, aborted with an
error) must be the same, and every allocation of ours must be one the scheduler accepts: the Go
allocator, given only the devices we chose (the slices otherwise unchanged, shared counters
included), must find an allocation too. Which devices are chosen when several answers exist is
not compared (docs/dra.md); where the scheduler chose the same devices, the results'
``consumedCapacity`` must be written the same. Cases are drawn per construct family (and all
together) so that a disagreement names its family; ``KUBEDEVICE_ALLOCATOR_CASES`` raises the per-version count. Every
disagreement found is kept under allocator/cases/ with Go's verdict and always runs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from typer.testing import CliRunner

from kubedevice.dra import models
from kubedevice.dra.cli import app as dra_app
from kubedevice.dra.deviceattribute import NUMA_NODE, PCI_BUS_ID, PCIE_ROOT
from kubedevice.dra.models import DeviceClass, ResourceClaim, ResourceSlice
from kubedevice.dra.structured import AllocationError, ClaimAllocation, Node, Unallocatable, allocate, allocated_devices
from kubedevice.testing import FakeHost, gobuild, hosts
from tests.dra import allocgen
from tests.dra.test_seed_walkthrough import walk
from tests.sources.test_pci_nodes import MACHINES as PCI_MACHINES

pytestmark = pytest.mark.interop

MODULE = Path(__file__).resolve().parent / "allocator"
ROOT = MODULE.parents[2]
CLAIMS = ("seed-claim.yaml", "seed-claim-three.yaml")
"""The seed walk-through's claims (examples/dra/): every device of its class, and three."""
CASES_DIR = MODULE / "cases"
VERSIONS = {"v0.36.3": (MODULE / "v036", allocgen.GATES_136), "v0.37.2": (MODULE, allocgen.GATES_137)}
CASES = int(os.environ.get("KUBEDEVICE_ALLOCATOR_CASES", "200"))
"""Cases per version, spread over the family sets below."""
FAMILY_SETS = {
    "core": frozenset[str](),
    **{f: frozenset({f}) for f in allocgen.FAMILIES},
    "everything": frozenset(allocgen.FAMILIES),
}
BETA_FAMILIES = ("constraints", "counters", "per_device_nodes", "capacity", "binding", "taints", "everything")
"""The family sets whose constructs the beta gates govern (distinctAttribute is consumable capacity's)."""
T = TypeVar("T")
KNOWN_GAPS: dict[tuple[str, str], str] = {}
"""(version, family set) -> why our allocator still disagrees there (those generated cases run as strict xfail)."""
KNOWN_GAPS_BETA_OFF: dict[tuple[str, str], str] = {}
"""Like KNOWN_GAPS, for the cases run with the beta gates off."""


def go_binary(version: str) -> Path:
    binary = gobuild.build(VERSIONS[version][0], ".", f"allocdiff-{version}")
    if binary is None:
        pytest.skip("Go toolchain not installed: cannot build the scheduler's allocator")
    return binary


def run_go(version: str, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    text = "".join(json.dumps(case) + "\n" for case in cases)
    done = subprocess.run(
        [str(go_binary(version))], input=text, capture_output=True, text=True, check=True, timeout=600
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(cases), done.stderr
    return answers


def go_verdict(answer: dict[str, Any]) -> str:
    if "results" in answer:
        return "allocated"
    return "unschedulable" if "unschedulable" in answer else "error"


def _objects(documents: Iterable[dict[str, Any]]) -> list[Any]:
    return [models.from_document(document) for document in documents]


def ours(case: dict[str, Any]) -> tuple[str, list[ClaimAllocation], str]:
    """Our verdict as ``kubedevice dra allocate`` reaches it (cli.py), the allocations and the message."""
    try:
        classes = _objects(case["classes"])
        slices = _objects(case["slices"])
        claims = _objects(case["claims"])
        held = _objects(case["allocated"])
    except models.DecodeError as error:
        return "refused input", [], str(error)
    node = Node(case["node"]["name"], case["node"]["labels"])
    try:
        found = allocate(
            _only(claims, ResourceClaim),
            _only(classes, DeviceClass),
            _only(slices, ResourceSlice),
            node,
            allocated_devices(_only(held, ResourceClaim)),
            features=case["features"],
        )
    except Unallocatable as error:
        return "unschedulable", [], str(error)
    except AllocationError as error:
        return "error", [], str(error)
    return "allocated", found, ""


def _only(objects: list[Any], kind: type[T]) -> list[T]:
    assert all(isinstance(o, kind) for o in objects)
    return list(objects)


def restricted(case: dict[str, Any], found: list[ClaimAllocation]) -> dict[str, Any]:
    """The case with every slice keeping only the devices we chose (counter sets and slice counts kept)."""
    chosen = {(r.id.driver, r.id.pool, r.id.device) for allocation in found for r in allocation.results}
    slices = []
    for slice_ in case["slices"]:
        spec = slice_["spec"]
        if "devices" in spec:
            kept = [d for d in spec["devices"] if (spec["driver"], spec["pool"]["name"], d["name"]) in chosen]
            spec = {**spec, "devices": kept}
        slices.append({**slice_, "spec": spec})
    return {**case, "slices": slices}


def compare(version: str, cases: list[dict[str, Any]]) -> list[str]:
    """Every disagreement between the scheduler and us on ``cases``, one line each."""
    answers = run_go(version, cases)
    problems: list[str] = []
    checks: list[tuple[int, dict[str, Any]]] = []
    for index, (case, answer) in enumerate(zip(cases, answers, strict=True)):
        theirs = go_verdict(answer)
        mine, found, message = ours(case)
        if mine != theirs:
            why = answer.get("error") or answer.get("unschedulable") or ""
            problems.append(f"case {index}: scheduler {theirs} ({why}), ours {mine} ({message})")
        elif mine == "allocated":
            checks.append((index, restricted(case, found)))
            differences = consumed_capacity_differences(answer, found, case["node"]["name"])
            problems += [f"case {index}: {difference}" for difference in differences]
    for (index, _), answer in zip(checks, run_go(version, [c for _, c in checks]), strict=True):
        if go_verdict(answer) != "allocated":
            problems.append(f"case {index}: our allocation is not valid for the scheduler: {answer}")
    return problems


def consumed_capacity_differences(answer: dict[str, Any], found: list[ClaimAllocation], node: str) -> list[str]:
    """Where the scheduler took the same devices for the same requests, each result's
    ``consumedCapacity`` must be written as it writes it (the quantities' text, not only their values)."""
    problems = []
    for theirs, mine in zip(answer["results"], found, strict=True):
        go_results = theirs["devices"]["results"]
        our_results = mine.as_status(node)["devices"]["results"]
        picks = [[(r["request"], r["driver"], r["pool"], r["device"]) for r in rs] for rs in (go_results, our_results)]
        if picks[0] != picks[1]:
            continue  # another choice: which devices are chosen is not compared
        for go_result, our_result in zip(go_results, our_results, strict=True):
            if go_result.get("consumedCapacity") != our_result.get("consumedCapacity"):
                problems.append(
                    f"claim {mine.claim.metadata.name}, device {go_result['device']}: consumedCapacity "
                    f"{go_result.get('consumedCapacity')} (scheduler) != {our_result.get('consumedCapacity')} (ours)"
                )
    return problems


def generated(family_set: str) -> list[dict[str, Any]]:
    per_set = max(1, CASES // len(FAMILY_SETS))
    base = 1000 * (list(FAMILY_SETS).index(family_set) + 1)
    return [allocgen.case(base + i, FAMILY_SETS[family_set], {}) for i in range(per_set)]


def _params(family_sets: Iterable[str], gaps: dict[tuple[str, str], str]) -> list[Any]:
    params = []
    for version in VERSIONS:
        for family_set in family_sets:
            gap = gaps.get((version, family_set))
            marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
            params.append(pytest.param(version, family_set, marks=marks, id=f"{version}-{family_set}"))
    return params


@pytest.mark.parametrize(("version", "family_set"), _params(FAMILY_SETS, KNOWN_GAPS))
def test_generated_cases_agree(version: str, family_set: str) -> None:
    cases = [{**case, "features": dict(VERSIONS[version][1])} for case in generated(family_set)]
    problems = compare(version, cases)
    assert not problems, f"{len(problems)} of {len(cases)} disagree:\n" + "\n".join(problems)


@pytest.mark.parametrize(("version", "family_set"), _params(BETA_FAMILIES, KNOWN_GAPS_BETA_OFF))
def test_beta_gates_off_agree(version: str, family_set: str) -> None:
    """With partitionable devices, consumable capacity, binding conditions and taints off, the
    scheduler ignores or refuses their fields (the API server would have dropped most of them), and
    so must we, on the objects as given."""
    gates = {**VERSIONS[version][1], **allocgen.BETA_OFF}
    cases = [{**case, "features": gates} for case in generated(family_set)]
    problems = compare(version, cases)
    assert not problems, f"{len(problems)} of {len(cases)} disagree:\n" + "\n".join(problems)


def test_validity_check_refuses_a_short_allocation() -> None:
    """The validity check can fail: an allocation one device short of what a claim asks for is
    not one the scheduler finds among the devices it names."""
    version = "v0.37.2"
    for drawn in generated("core"):
        case = {**drawn, "features": dict(VERSIONS[version][1])}
        verdict, found, _ = ours(case)
        if verdict == "allocated":
            break
    else:
        pytest.fail("no generated core case is feasible")
    assert go_verdict(run_go(version, [restricted(case, found)])[0]) == "allocated"
    short = [dataclasses.replace(found[0], results=found[0].results[1:]), *found[1:]]
    assert go_verdict(run_go(version, [restricted(case, short)])[0]) == "unschedulable"


def test_generator_produces_every_construct() -> None:
    """The generated cases must use every construct the issue lists, or the differential proves less."""
    text = json.dumps([generated(family_set) for family_set in FAMILY_SETS])
    for construct in (
        "sharedCounters",
        "consumesCounters",
        "perDeviceNodeSelection",
        '"nodeSelector"',
        '"allNodes"',
        "requestPolicy",
        "validValues",
        "validRange",
        '"step"',
        '"capacity": {"requests"',
        "allowMultipleAllocations",
        "bindingConditions",
        "bindingFailureConditions",
        "bindsToNode",
        '"taints"',
        '"tolerations"',
        "firstAvailable",
        '"adminAccess"',
        "matchAttribute",
        "distinctAttribute",
        '"All"',
        "ExactCount",
        "device.capacity",
        "device.attributes",
        '"shareID"',
        "resourceSliceCount",
    ):
        assert construct in text, construct


@pytest.mark.parametrize("version", VERSIONS)
def test_the_seed_walkthrough_agrees(version: str, tmp_path: Path) -> None:
    """docs/dra-driver.md's seed, end to end: on the slices our driver publishes for the fake node,
    the scheduler gives the class's claim for all devices the same two GPUs and refuses three."""
    walk(tmp_path)
    examples = ROOT / "examples" / "dra"
    base = {
        "node": {"name": "node-1", "labels": {}},
        "classes": [yaml.safe_load((tmp_path / "class.yaml").read_text())],
        "slices": list(yaml.safe_load_all((tmp_path / "slices.yaml").read_text())),
        "allocated": [],
        "features": dict(VERSIONS[version][1]),
    }
    every, three = ({**base, "claims": [yaml.safe_load((examples / name).read_text())]} for name in CLAIMS)
    answers = run_go(version, [every, three])
    assert [go_verdict(answer) for answer in answers] == ["allocated", "unschedulable"], answers
    (results,) = [r["devices"]["results"] for r in answers[0]["results"]]
    assert sorted(r["device"] for r in results) == ["gpu-h64-0000-03-00-0-9c4bcece", "gpu-h64-0000-43-00-0-57af3c81"]
    assert not compare(version, [every, three])


DRIVER = "accel.example.com"
IDS = ("vendor", "device")


def machine_slices(tmp_path: Path, machine: str) -> tuple[hosts.Machine, list[dict[str, Any]], dict[str, str]]:
    """``dra slices`` on one of :mod:`kubedevice.testing.hosts`' machines, served by config only:
    its ``pci.nodes`` resource (as tests/sources/test_pci_nodes.py selects it) with the model from
    a ``pci.ids`` naming every function; the slices and each function's model by address."""
    host = FakeHost(tmp_path / "root")
    builder, text = PCI_MACHINES[machine]
    built = builder(host)
    config = yaml.safe_load(text)
    ids = {  # address -> (vendor, device), as sysfs writes them without the "0x"
        f.address: tuple(host.path(f"/sys/bus/pci/devices/{f.address}/{n}").read_text().strip()[2:] for n in IDS)
        for f in built.functions
    }
    models_by = {address: f"Model {device}" for address, (_, device) in ids.items()}
    vendors: dict[str, dict[str, str]] = {}
    for vendor, device in ids.values():
        vendors.setdefault(vendor, {})[device] = f"Model {device}"
    host.write("/usr/share/misc/pci.ids", "".join(
        f"{v}  Vendor {v}\n" + "".join(f"\t{d}  {name}\n" for d, name in sorted(devs.items()))
        for v, devs in sorted(vendors.items())
    ))  # fmt: skip
    document = {
        "resources": [config],
        "dra": {"driver": DRIVER, "resources": {config["name"]: {"attributes": {"model": "{model}"}}}},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(document))
    args = ["slices", "--config", str(path), "--host-root", str(host.root), "--node", "node-1"]
    result = CliRunner().invoke(dra_app, args)
    assert result.exit_code == 0, result.output
    return built, [d for d in yaml.safe_load_all(result.output) if d], models_by


@pytest.mark.parametrize("machine", sorted(PCI_MACHINES))
def test_every_fake_machine_publishes_its_functions_with_the_standard_attributes(tmp_path: Path, machine: str) -> None:
    """Each function is one device with its model and Kubernetes' ``pciBusID``, ``pcieRoot`` and
    ``numaNode`` (none where the kernel says -1), and the slices are valid for 1.37."""
    built, slices, models_by = machine_slices(tmp_path, machine)
    devices = [d for s in slices for d in s["spec"]["devices"]]
    by_address = {d["attributes"][PCI_BUS_ID]["string"]: d["attributes"] for d in devices}
    assert sorted(by_address) == sorted(f.address for f in built.functions)
    for function in built.functions:
        attributes = by_address[function.address]
        assert attributes["model"]["string"] == models_by[function.address]
        assert attributes[PCIE_ROOT]["string"].startswith("pci0000:")
        numa = attributes.get(NUMA_NODE, {}).get("int")
        assert numa == (function.numa_node if function.numa_node >= 0 else None)
    stored = tmp_path / "slices.yaml"
    stored.write_text(yaml.safe_dump_all(slices))
    result = CliRunner().invoke(dra_app, ["validate", "--kubernetes-version", "1.37", str(stored)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("machine", sorted(PCI_MACHINES))
def test_the_scheduler_allocates_every_fake_machine_as_we_do(tmp_path: Path, machine: str, version: str) -> None:
    """On those slices, a class selecting by the configured model (one function's, the seed's
    ``startsWith`` form) and a claim for all its devices, then one for more than there are."""
    built, slices, models_by = machine_slices(tmp_path, machine)
    model = models_by[built.functions[-1].address]
    expression = f'device.attributes["{DRIVER}"].model.startsWith("{model}")'
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "accel"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }

    def claim(exactly: dict[str, Any]) -> dict[str, Any]:
        request = {"name": "r", "exactly": {"deviceClassName": "accel", **exactly}}
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default", "uid": "u-1"},
            "spec": {"devices": {"requests": [request]}},
        }

    same = sum(1 for m in models_by.values() if m == model)
    base = {"node": {"name": "node-1", "labels": {}}, "classes": [device_class], "slices": slices,
            "allocated": [], "features": dict(VERSIONS[version][1])}  # fmt: skip
    cases = [
        {**base, "claims": [claim({"allocationMode": "All"})]},
        {**base, "claims": [claim({"allocationMode": "ExactCount", "count": same + 1})]},
    ]
    assert [go_verdict(answer) for answer in run_go(version, cases)] == ["allocated", "unschedulable"]
    assert not compare(version, cases)


KEPT = sorted(CASES_DIR.glob("*.json"))


def _kept_params() -> list[Any]:
    params = []
    for path in KEPT:
        kept = json.loads(path.read_text())
        for version in kept["go"]:
            gap = kept.get("gap", {}).get(version)
            marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
            params.append(pytest.param(path, version, marks=marks, id=f"{path.stem}-{version}"))
    return params


@pytest.mark.parametrize(("path", "version"), _kept_params())
def test_kept_disagreements(path: Path, version: str) -> None:
    """A disagreement once found: Go's verdict is as recorded, and ours must now be the same."""
    kept = json.loads(path.read_text())
    case = {**kept["case"], "features": {**VERSIONS[version][1], **kept.get("gates", {})}}
    recorded = kept["go"][version]
    if isinstance(recorded, list):  # Go's own answer varies from run to run (its map order)
        _one_of_gos_answers(version, case, recorded, kept["note"])
        return
    assert go_verdict(run_go(version, [case])[0]) == recorded
    problems = compare(version, [case])
    assert not problems, f"{kept['note']}: {problems}"


def _one_of_gos_answers(version: str, case: dict[str, Any], answers: list[str], note: str) -> None:
    """Where the scheduler walks pools in Go's random map order, each run may answer differently:
    every answer it gives must be a recorded one, ours must be one of them, and an allocation of
    ours must be valid for the scheduler."""
    assert go_verdict(run_go(version, [case])[0]) in answers
    mine, found, message = ours(case)
    assert mine in answers, f"{note}: ours {mine} ({message}), the scheduler's {answers}"
    if mine == "allocated":
        (answer,) = run_go(version, [restricted(case, found)])
        assert go_verdict(answer) == "allocated", f"our allocation is not valid for the scheduler: {answer}"
