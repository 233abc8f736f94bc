"""``kubedevice dra`` as a real process: exit codes, one error format, output without noise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "dra"
NULL_CONFIG = str(ROOT / "examples" / "null.yaml")


def dra(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubedevice", "dra", *args], capture_output=True, text=True, timeout=120, check=False
    )


def example(name: str) -> str:
    return str(EXAMPLES / name)


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result
    assert result.stdout == "" and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result
    assert result.stderr.startswith("kubedevice: ")
    return result.stderr.strip()


def test_a_bad_node_or_driver_for_slices_is_a_usage_error() -> None:
    line = one_error_line(dra("slices", "--config", NULL_CONFIG, "--node", "N1_bad"))
    assert line.startswith('kubedevice: --node: Invalid value: "N1_bad": a lowercase RFC 1123 subdomain')
    line = one_error_line(dra("slices", "--config", NULL_CONFIG, "--node", "n1", "--driver", "Bad_Driver"))
    assert line.startswith('kubedevice: --driver: Invalid value: "Bad_Driver"')


def test_unreadable_and_malformed_files_use_the_one_format(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert (
        one_error_line(dra("validate", str(missing)))
        == f"kubedevice: {missing}: cannot read: no such file or directory"
    )
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: DeviceClass\n  bad: [\n")
    assert one_error_line(dra("explain", "--class", str(broken), "--slices", example("slices.yaml"))).startswith(
        f"kubedevice: {broken}:2:6: "
    )
    assert one_error_line(dra("allocate", str(missing), "--node", "n1")).endswith("no such file or directory")


def test_explain_refuses_a_class_validate_refuses_with_validates_line() -> None:
    """One judgement per object (issue #27): a class the API server would not store is not explained;
    explain prints the first line validate prints for it, counts the rest, and exits 2."""
    args = ("explain", "--class", example("invalid-class.yaml"), "--slices", example("slices.yaml"))
    text = dra(*args)
    assert text.returncode == 2 and text.stdout == ""
    [line] = text.stderr.splitlines()
    first = dra("validate", example("invalid-class.yaml")).stdout.split("\n | ")[0]
    caret = " | device.driver ==  | ................^"
    assert line == f"kubedevice: {first} {caret} (and 1 more: kubedevice dra validate lists them)"


def test_validate_keeps_its_report_together_and_counts_in_english() -> None:
    good = dra("validate", example("class.yaml"))
    assert (good.returncode, good.stdout, good.stderr) == (0, "1 object valid\n", "")
    bad = dra("validate", example("invalid-class.yaml"), example("slices.yaml"))
    assert bad.returncode == 1 and bad.stderr == ""
    assert bad.stdout.splitlines()[-1] == "1 of 2 objects invalid"
    # a CEL compile error continues with the API server's source line and caret (" | ...")
    assert all(line.startswith((example("invalid-class.yaml"), " | ")) for line in bad.stdout.splitlines()[:-1])


def test_allocate_leaves_out_empty_fields() -> None:
    result = dra("allocate", example("class.yaml"), example("slices.yaml"), example("claim.yaml"), "--node", "node-1")
    assert result.returncode == 0, result.stderr
    for empty in ("firstAvailable", "constraints", "config", "selectors", "[]", "{}"):
        assert empty not in result.stdout, empty
    claim = yaml.safe_load(result.stdout)
    assert claim["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert claim["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "big-gpu",
        "allocationMode": "ExactCount",
        "count": 1,
    }


def test_opaque_parameters_are_kept_even_when_empty(tmp_path: Path) -> None:
    claim = Path(example("claim.yaml")).read_text() + (
        "    config:\n    - requests: [gpu]\n      opaque: {driver: gpu.example.com, parameters: {}}\n"
    )
    (tmp_path / "claim.yaml").write_text(claim)
    result = dra(
        "allocate", example("class.yaml"), example("slices.yaml"), str(tmp_path / "claim.yaml"), "--node", "node-1"
    )
    assert result.returncode == 0, result.stderr
    printed = yaml.safe_load(result.stdout)
    assert printed["spec"]["devices"]["config"][0]["opaque"] == {"driver": "gpu.example.com", "parameters": {}}
