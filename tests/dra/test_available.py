"""`kubedevice dra available` end to end on real files: the shipped example, filters, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

import kubedevice
from kubedevice.dra.available import parse_amount
from kubedevice.dra.cli import app
from kubedevice.dra.structured.consumable_capacity import canonical

runner = CliRunner()
EXAMPLE = Path(kubedevice.__file__).parent / "examples" / "dra" / "available.yaml"


def run_json(*args: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["available", *args, "--json"])
    assert result.exit_code == 0, result.output
    report: list[dict[str, Any]] = json.loads(result.output)
    return report


def pool(report: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(p for p in report if f"{p['driver']}/{p['pool']}" == name)


def devices(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for d in entry["devices"]}


def test_example_table_counts_devices_counters_and_capacity() -> None:
    result = runner.invoke(app, ["available", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines()]
    assert rows[0] == ["NODES", "DRIVER", "POOL", "DEVICES", "FREE", "SHARED", "ALLOCATED", "BLOCKED"]
    assert ["node-1", "gpu.example.com", "node-1", "3", "1", "0", "1", "1"] in rows
    assert ["node-1", "nic.example.com", "node-1", "1", "0", "1", "0", "0"] in rows
    assert ["node-2", "fpga.example.com", "rack-a", "1", "1", "0", "0", "0"] in rows
    assert ["<all", "nodes>", "fpga.example.com", "rack-a", "1", "1", "0", "0", "0"] in rows
    assert ["gpu.example.com", "node-1", "gpu-0", "memory", "80Gi", "40Gi"] in rows
    assert ["nic.example.com", "node-1", "eth1", "bandwidth", "100G", "60G"] in rows


def test_example_json_follows_the_scheduler_accounting() -> None:
    report = run_json(str(EXAMPLE))
    gpus = pool(report, "gpu.example.com/node-1")
    assert gpus["counters"] == [{"counterSet": "gpu-0", "counter": "memory", "total": "80Gi", "left": "40Gi"}]
    states = {name: d["state"] for name, d in devices(gpus).items()}
    # the whole GPU needs 80Gi of the 40Gi left; the other half fits
    assert states == {"gpu-0": "blocked", "gpu-0-half-0": "allocated", "gpu-0-half-1": "free"}
    assert devices(gpus)["gpu-0-half-0"]["claims"] == ["default/half-gpu"]
    nic = devices(pool(report, "nic.example.com/node-1"))["eth1"]
    assert nic["state"] == "shared" and nic["capacity"] == {"bandwidth": {"total": "100G", "left": "60G"}}
    fpgas = devices(pool(report, "fpga.example.com/rack-a"))
    assert fpgas["fpga-1"] == {"name": "fpga-1", "nodes": "node-2", "state": "free"}  # admin access only
    assert gpus["complete"] is True and "invalid" not in gpus


def test_node_keeps_only_the_devices_that_node_can_use() -> None:
    report = run_json(str(EXAMPLE), "--node", "node-2")
    assert [(p["driver"], sorted(devices(p))) for p in report] == [("fpga.example.com", ["fpga-1", "fpga-2"])]
    assert report[0]["summary"] == {"free": 2, "shared": 0, "allocated": 0, "blocked": 0}


SELECTOR_SLICES = """\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: zone-a}
spec:
  driver: net.example.com
  nodeSelector:
    nodeSelectorTerms:
    - matchExpressions: [{key: zone, operator: In, values: [a]}]
  pool: {name: zone-a, generation: 2, resourceSliceCount: 2}
  devices:
  - {name: link-0}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: zone-a-old}
spec:
  driver: net.example.com
  nodeSelector:
    nodeSelectorTerms:
    - matchExpressions: [{key: zone, operator: In, values: [a]}]
  pool: {name: zone-a, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: stale-0}
"""


def test_node_selector_pools_use_labels_and_the_newest_generation(tmp_path: Path) -> None:
    path = tmp_path / "slices.yaml"
    path.write_text(SELECTOR_SLICES)
    assert run_json(str(path), "--node", "n1", "--label", "zone=b") == []
    (entry,) = run_json(str(path), "--node", "n1", "--label", "zone=a")
    assert list(devices(entry)) == ["link-0"] and entry["generation"] == 2 and entry["complete"] is False
    assert devices(entry)["link-0"]["nodes"] == "zone In (a)"
    table = runner.invoke(app, ["available", str(path)])
    assert table.exit_code == 0, table.output
    assert "pool net.example.com/zone-a is incomplete: 1 of 2 slices\n" in table.output


def test_a_missing_counter_set_makes_the_pool_invalid(tmp_path: Path) -> None:
    path = tmp_path / "bad-counters.yaml"
    text = EXAMPLE.read_text().replace(
        "- counterSet: gpu-0\n      counters: {memory: {value: 40Gi}}",
        "- counterSet: gpu-9\n      counters: {memory: {value: 40Gi}}",
        1,
    )
    assert text != EXAMPLE.read_text()
    path.write_text(text)
    gpus = pool(run_json(str(path)), "gpu.example.com/node-1")
    assert gpus["invalid"] == "counter set gpu-9 not found"


def test_bad_quantities_name_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(EXAMPLE.read_text().replace("memory: {value: 80Gi}\n---", "memory: {value: lots}\n---", 1))
    result = runner.invoke(app, ["available", str(path)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    # a bad quantity fails decoding, as in the API server (its line and column, not the object's, are named)
    assert f'{path}:15:23: spec.sharedCounters[0].counters.memory.value: Invalid value: "lots"' in result.output
    path.write_text(
        EXAMPLE.read_text().replace("consumedCapacity: {bandwidth: 40G}", "consumedCapacity: {bandwidth: x}")
    )
    result = runner.invoke(app, ["available", str(path)])
    assert result.exit_code == 2
    # the claim's status decodes as the API server decodes it (issue #27): placed at the quantity
    consumed = 'status.allocation.devices.results[0].consumedCapacity.bandwidth: Invalid value: "x": quantities'
    assert result.output.startswith(f"kubedevice: {path}:104:39: {consumed}")


def test_bad_command_lines_and_files_exit_2(tmp_path: Path) -> None:
    missing = runner.invoke(app, ["available", str(tmp_path / "none.yaml")])
    assert missing.exit_code == 2 and "none.yaml" in missing.output
    assert runner.invoke(app, ["available", str(EXAMPLE), "--node", "Not_A_Node"]).exit_code == 2
    labels = runner.invoke(app, ["available", str(EXAMPLE), "--label", "a=b"])
    assert labels.exit_code == 2 and "--label needs --node" in labels.output


def test_canonical_quantities_print_as_kubernetes_does() -> None:
    from fractions import Fraction

    assert canonical(Fraction(40 * 2**30), "BinarySI") == "40Gi"
    assert canonical(Fraction(1000), "BinarySI") == "1k"  # below 1024: decimal
    assert canonical(Fraction(1536 * 2**20), "BinarySI") == "1536Mi"
    assert canonical(Fraction(-20 * 10**9), "DecimalSI") == "-20G"
    assert canonical(Fraction(1, 2), "DecimalSI") == "500m"
    assert canonical(Fraction(12000), "DecimalExponent") == "12e3"
    assert canonical(Fraction(0), "BinarySI") == "0"


def test_left_keeps_the_format_of_the_declared_value() -> None:
    assert str(parse_amount("2E", "x").minus(parse_amount("1E", "y"))) == "1E"  # exa, not an exponent
    assert str(parse_amount("2e3", "x").minus(parse_amount("1k", "y"))) == "1e3"
    assert (
        str(parse_amount("80Gi", "x").minus(parse_amount("40G", "y"))) == "44823580Ki"
    )  # 45899345920: whole KiB, as Kubernetes prints it
