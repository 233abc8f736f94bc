"""The seed, end to end (docs/dra-driver.md): the founding 1.31 DeviceClass validated, converted to
``resource.k8s.io/v1``, served from an AMD-like fake node by config, and allocated.

The section's Python block (``docs/snippets/seed_node.py``, byte-identical to it:
``tests/test_docs_snippets.py``) builds the node; its ``$`` commands then run as printed, through the
real CLI, and print what the doc shows (``...`` standing for lines left out). The allocation is
then checked against the class's clauses, read from the slices the driver published: each
allocated device satisfies them all, each other device fails one, and the model and the capacity
clause each rule a device out. That ``suitableNodes`` is kept as 1.31 with
``DRAControlPlaneController`` and dropped without is ``tests/dra/test_releases.py``'s.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubedevice.dra.structured.consumable_capacity import parse

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "dra-driver.md"
SNIPPET = ROOT / "docs" / "snippets" / "seed_node.py"
FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
DRIVER = "gpu.example.com"
ELIDED = "..."


def section() -> str:
    text = DOC.read_text()
    return text.split("## The seed, end to end\n", 1)[1].split("\n## ", 1)[0]


def documented_runs() -> list[tuple[str, str]]:
    """The section's ``$ command`` lines with the output printed under each, in order."""
    runs: list[tuple[str, str]] = []
    for language, block in FENCE.findall(section()):
        if language:
            continue
        for chunk in re.split(r"^\$ ", block, flags=re.MULTILINE)[1:]:
            command, _, output = chunk.partition("\n")
            runs.append((command, output))
    return runs


def shows(documented: str, actual: str) -> bool:
    """Whether ``actual`` is ``documented`` with each ``...`` line standing for any lines."""
    parts = [re.escape(part) for part in re.split(rf"^{re.escape(ELIDED)}\n", documented, flags=re.MULTILINE)]
    return re.fullmatch("(?:.*\n)*?".join(parts), actual) is not None


def run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A documented command through a shell (``>``, ``grep``), ``kubedevice`` being this interpreter's."""
    words = shlex.split(command)
    if words[0] == "kubedevice":
        command = f"{shlex.quote(sys.executable)} -m kubedevice{command[len('kubedevice') :]}"
    return subprocess.run(
        command,
        shell=True,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


def walk(cwd: Path) -> list[tuple[str, str, subprocess.CompletedProcess[str]]]:
    """Run the section's block, then its commands, in ``cwd``: each command, the output the doc
    shows for it and what it did. ``cwd`` then holds ``class.yaml`` and ``slices.yaml``."""
    (cwd / "examples").symlink_to(ROOT / "examples")
    built = subprocess.run(
        [sys.executable, str(SNIPPET)], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    assert (built.returncode, built.stdout, built.stderr) == (0, "", "")
    return [(command, output, run(command, cwd)) for command, output in documented_runs()]


@pytest.fixture(scope="module")
def walked(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, list[tuple[str, str, subprocess.CompletedProcess[str]]]]:
    """A directory where the section's block and commands ran, and each command's result."""
    cwd = tmp_path_factory.mktemp("seed")
    return cwd, walk(cwd)


def test_the_section_runs_the_steps_of_the_seed() -> None:
    verbs = [shlex.split(command)[:3] for command, _ in documented_runs() if command.startswith("kubedevice")]
    assert verbs == [["kubedevice", "dra", v] for v in ("validate", "convert", "slices", "allocate", "allocate")]


def test_each_command_prints_what_the_doc_shows(walked: tuple[Path, list[Any]]) -> None:
    _, results = walked
    for command, output, result in results:
        assert "Traceback" not in result.stderr, command
        said = result.stdout + result.stderr
        assert shows(output, said), f"{command}\nshown:\n{output}\nprinted:\n{said}"
    codes = [result.returncode for _, _, result in results]
    assert codes == [0, 0, 0, 0, 0, 1], codes  # validate, convert, slices, grep, allocate, allocate three


def test_the_class_is_v1_without_suitable_nodes(walked: tuple[Path, list[Any]]) -> None:
    cwd, _ = walked
    seed = yaml.safe_load((ROOT / "examples" / "dra" / "class-1.31.yaml").read_text())
    converted = yaml.safe_load((cwd / "class.yaml").read_text())
    assert converted["apiVersion"] == "resource.k8s.io/v1" and "suitableNodes" in seed["spec"]
    assert converted["spec"] == {"selectors": seed["spec"]["selectors"]}


def clauses(device: dict[str, Any]) -> dict[str, bool]:
    """The class's four selectors, read by hand from a published device (a name with the driver's
    domain is the same attribute as the bare one, as in CEL)."""
    attributes = {name.removeprefix(f"{DRIVER}/"): value for name, value in device["attributes"].items()}
    capacity = device.get("capacity", {})
    return {
        "driver": True,  # every device of these slices is the driver's
        "model": attributes["model"]["string"].startswith("H"),
        "memory": attributes["memory"]["int"] >= 16,
        "capacity": parse(capacity["memory"]["value"], "memory").quantity.cmp(parse("40Gi", "memory").quantity) >= 0,
    }


def test_exactly_the_devices_that_satisfy_every_clause_are_allocated(walked: tuple[Path, list[Any]]) -> None:
    cwd, results = walked
    (slice_,) = list(yaml.safe_load_all((cwd / "slices.yaml").read_text()))
    assert slice_["spec"]["driver"] == DRIVER
    verdicts = {device["name"]: clauses(device) for device in slice_["spec"]["devices"]}
    models = {device["name"]: device["attributes"]["model"]["string"] for device in slice_["spec"]["devices"]}
    assert sorted(models.values()) == ["H32", "H64", "H64", "M64"]
    claim = yaml.safe_load(results[4][2].stdout)
    allocated = [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]]
    matching = sorted(name for name, verdict in verdicts.items() if all(verdict.values()))
    assert sorted(allocated) == matching and len(matching) == 2
    assert {models[name] for name in matching} == {"H64"}
    failed = {clause for verdict in verdicts.values() for clause, holds in verdict.items() if not holds}
    assert failed == {"model", "capacity"}, verdicts  # each rules a device out


def test_more_devices_than_match_are_refused(walked: tuple[Path, list[Any]]) -> None:
    _, results = walked
    command, _, refused = results[5]
    assert "seed-claim-three.yaml" in command
    assert (refused.returncode, refused.stdout) == (1, "")
    assert "needs 3 device(s) of class large-gpu.example.com, but only 2" in refused.stderr
