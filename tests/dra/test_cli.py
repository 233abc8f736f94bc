"""`kubedevice dra` end to end on real files: exit codes, messages, generated objects."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubedevice.dra.cli import app
from kubedevice.dra.models import ResourceClaim, ResourceSlice, load_text
from kubedevice.dra.validation import validate
from kubedevice.testing import FakeHost

runner = CliRunner()
DRIVER = "gpu.example.com"

CLASS = f"""\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: a100}}
spec:
  selectors:
  - cel: {{expression: 'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].model == "a100"'}}
"""
SLICES = f"""\
apiVersion: resource.k8s.io/v1beta1
kind: ResourceSlice
metadata: {{name: node-1-gpus}}
spec:
  driver: {DRIVER}
  nodeName: node-1
  pool: {{name: node-1, resourceSliceCount: 1}}
  devices:
  - {{name: gpu-0, basic: {{attributes: {{model: {{string: t4}}}}}}}}
  - {{name: gpu-1, basic: {{attributes: {{model: {{string: a100}}}}}}}}
  - {{name: gpu-2, basic: {{attributes: {{model: {{string: a100}}}}}}}}
"""
CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: pair, namespace: default}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {deviceClassName: a100, count: 2}
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_validate_accepts_good_files(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", write(tmp_path, "all.yaml", "---\n".join([CLASS, SLICES, CLAIM]))])
    assert result.exit_code == 0, result.output
    assert "3 objects valid" in result.output


def test_validate_reports_api_server_errors_with_file_and_line(tmp_path: Path) -> None:
    bad = CLASS.replace("name: a100", "name: A100").replace('== "a100"', "== ")
    path = write(tmp_path, "bad.yaml", CLAIM + "---\n" + bad)
    result = runner.invoke(app, ["validate", path])
    assert result.exit_code == 1
    line = CLAIM.count("\n") + 2  # the class's first line; each problem is placed at its field
    name_error = f'{path}:{line + 2}:18: DeviceClass "A100" is invalid: metadata.name: Invalid value: "A100": '
    assert name_error in result.output
    assert (
        f'{path}:{line + 5}:23: DeviceClass "A100" is invalid: spec.selectors[0].cel.expression: Invalid value: '
        in result.output
    )
    assert "1 of 2 objects invalid" in result.output


def test_validate_unknown_kind_is_invalid_and_malformed_yaml_is_exit_2(tmp_path: Path) -> None:
    unknown = runner.invoke(
        app, ["validate", write(tmp_path, "k.yaml", "apiVersion: resource.k8s.io/v1\nkind: Gadget\n")]
    )
    assert unknown.exit_code == 1 and 'no matches for kind "Gadget"' in unknown.output
    broken = runner.invoke(app, ["validate", write(tmp_path, "b.yaml", "kind: DeviceClass\n  bad: [\n")])
    assert broken.exit_code == 2
    assert "b.yaml:2:" in broken.output and "Traceback" not in broken.output
    missing = runner.invoke(app, ["validate", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2 and "cannot read" in missing.output


def test_validate_refuses_a_huge_expression_quickly(tmp_path: Path) -> None:
    huge = "device.driver == 'x' && " * 2000 + "true"
    doc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "huge"},
        "spec": {"selectors": [{"cel": {"expression": huge}}]},
    }
    result = runner.invoke(app, ["validate", write(tmp_path, "h.json", json.dumps(doc))])
    assert result.exit_code == 1
    assert "spec.selectors[0].cel.expression: Too long: may not be more than 10240 bytes" in result.output


def test_explain_text_and_json(tmp_path: Path) -> None:
    args = ["explain", "--class", write(tmp_path, "c.yaml", CLASS), "--slices", write(tmp_path, "s.yaml", SLICES)]
    text = runner.invoke(app, args)
    assert text.exit_code == 0, text.output
    assert f"{DRIVER}/node-1/gpu-0: does not match" in text.output
    assert f'first failing clause: device.attributes["{DRIVER}"].model == "a100"' in text.output
    assert "2 of 3 devices match" in text.output
    report = json.loads(runner.invoke(app, [*args, "--json"]).output)
    assert [d["matches"] for d in report[0]["devices"]] == [False, True, True]


def test_explain_exits_1_when_nothing_matches(tmp_path: Path) -> None:
    slices = SLICES.replace("a100", "v100")
    result = runner.invoke(
        app, ["explain", "--class", write(tmp_path, "c.yaml", CLASS), "--slices", write(tmp_path, "s.yaml", slices)]
    )
    assert result.exit_code == 1
    assert "0 of 3 devices match" in result.output


def test_allocate_prints_the_claim_with_its_allocation(tmp_path: Path) -> None:
    path = write(tmp_path, "all.yaml", "---\n".join([CLASS, SLICES, CLAIM]))
    result = runner.invoke(app, ["allocate", path, "--node", "node-1"])
    assert result.exit_code == 0, result.output
    [claim] = load_text(result.output)
    assert isinstance(claim, ResourceClaim) and claim.status is not None
    devices = [r["device"] for r in claim.status["allocation"]["devices"]["results"]]
    assert devices == ["gpu-1", "gpu-2"]


def test_allocate_explains_why_not(tmp_path: Path) -> None:
    path = write(tmp_path, "all.yaml", "---\n".join([CLASS, SLICES, CLAIM.replace("count: 2", "count: 3")]))
    result = runner.invoke(app, ["allocate", path, "--node", "node-1"])
    assert result.exit_code == 1
    assert "needs 3 device(s) of class a100, but only 2 on node node-1 match" in result.output
    other = runner.invoke(app, ["allocate", path, "--node", "node-2"])
    assert other.exit_code == 1 and "no ResourceSlice targets node node-2" in other.output


def test_allocate_skips_devices_of_already_allocated_claims(tmp_path: Path) -> None:
    first = runner.invoke(
        app, ["allocate", write(tmp_path, "a.yaml", "---\n".join([CLASS, SLICES, CLAIM])), "--node", "node-1"]
    )
    second_claim = CLAIM.replace("name: pair", "name: single").replace("count: 2", "count: 1")
    files = [
        write(tmp_path, "b.yaml", "---\n".join([CLASS, SLICES, second_claim])),
        write(tmp_path, "done.yaml", first.output),
    ]
    result = runner.invoke(app, ["allocate", *files, "--node", "node-1"])
    assert result.exit_code == 1 and "only 0 on node node-1" in result.output


@pytest.fixture
def pci_host(tmp_path: Path) -> Path:
    host = FakeHost(tmp_path / "root")
    host.pci_device("0000:3b:00.0", "10de", "20b0", "030200", numa_node=1, iommu_group=41, driver="vfio-pci")
    host.pci_device("0000:5e:00.0", "10de", "20b0", "030200", numa_node=0, iommu_group=42, driver="vfio-pci")
    host.pci_device("0000:af:00.0", "8086", "0d5c", "120000", numa_node=1, iommu_group=43, driver="vfio-pci")
    return tmp_path / "root"


def test_slices_from_a_real_config_and_fake_host(tmp_path: Path, pci_host: Path) -> None:
    config = write(
        tmp_path, "config.yaml", 'resources:\n  - name: example.com/gpu\n    pci: {vendor: "10de", vfio: true}\n'
    )
    result = runner.invoke(
        app, ["slices", "--config", config, "--host-root", str(pci_host), "--node", "node-1", "--driver", DRIVER]
    )
    assert result.exit_code == 0, result.output
    [slice_] = load_text(result.output)
    assert isinstance(slice_, ResourceSlice) and validate(slice_) == []
    ids = [d.attributes["id"].string for d in slice_.spec.devices]
    assert ids == ["0000:3b:00.0", "0000:5e:00.0"]
    numa = sorted(d.attributes["numaNode"].int_ or 0 for d in slice_.spec.devices)
    assert numa == [0, 1]
    as_json = runner.invoke(
        app, ["slices", "--config", config, "--host-root", str(pci_host), "--node", "node-1", "-o", "json"]
    )
    assert json.loads(as_json.output)["kind"] == "ResourceSlice"


def test_slices_bad_config_is_one_line_exit_2(tmp_path: Path) -> None:
    config = write(tmp_path, "config.yaml", "resources: [{name: gpu}]\n")
    result = runner.invoke(app, ["slices", "--config", config, "--node", "n"])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_generated_slices_explain_against_a_class(tmp_path: Path, pci_host: Path) -> None:
    config = write(
        tmp_path, "config.yaml", 'resources:\n  - name: example.com/gpu\n    pci: {vendor: "10de", vfio: true}\n'
    )
    out = runner.invoke(
        app, ["slices", "--config", config, "--host-root", str(pci_host), "--node", "n", "--driver", DRIVER]
    ).output
    numa1 = yaml.safe_dump(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "numa1"},
            "spec": {"selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].numaNode == 1'}}]},
        }
    )
    result = runner.invoke(
        app, ["explain", "--class", write(tmp_path, "c.yaml", numa1), "--slices", write(tmp_path, "s.yaml", out)]
    )
    assert result.exit_code == 0, result.output
    assert "1 of 2 devices match" in result.output


TAINTED = f"""\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: node-1-tainted}}
spec:
  driver: {DRIVER}
  nodeName: node-1
  pool: {{name: node-1, resourceSliceCount: 1}}
  devices:
  - name: gpu-0
    taints: [{{key: example.com/broken, effect: Drain}}]
"""


def test_validate_follows_the_chosen_release(tmp_path: Path) -> None:
    """Taints are checked where DRADeviceTaints is on (1.36 on) and dropped where it is off."""
    path = write(tmp_path, "tainted.yaml", TAINTED)
    newest = runner.invoke(app, ["validate", path])
    assert newest.exit_code == 1
    assert 'spec.devices[0].taints[0].effect: Unsupported value: "Drain"' in newest.output
    old = runner.invoke(app, ["validate", path, "--kubernetes-version", "1.35"])
    assert old.exit_code == 0 and "1 object valid" in old.output
    gated = runner.invoke(
        app, ["validate", path, "--kubernetes-version", "1.35", "--feature-gates", "DRADeviceTaints=true"]
    )
    assert gated.exit_code == 1


@pytest.mark.parametrize("command", ["validate", "allocate", "explain"])
def test_bad_release_or_gate_is_one_line_exit_2(tmp_path: Path, command: str) -> None:
    files = {
        "validate": [write(tmp_path, "c.yaml", CLASS)],
        "allocate": [write(tmp_path, "c.yaml", CLASS + "---\n" + CLAIM), "--node", "node-1"],
        "explain": ["--class", write(tmp_path, "c.yaml", CLASS), "--slices", write(tmp_path, "s.yaml", SLICES)],
    }[command]
    gate = runner.invoke(app, [command, *files, "--feature-gates", "DRAListTypeAttributes=true,Nope=false"])
    assert gate.exit_code == 2
    assert gate.output.strip().splitlines() == ["kubedevice: --feature-gates: unrecognized feature gate: Nope"]
    release = runner.invoke(app, [command, *files, "--kubernetes-version", "1.30"])
    assert release.exit_code == 2
    assert release.output.strip().splitlines() == [
        "kubedevice: --kubernetes-version: unsupported Kubernetes version '1.30': "
        "expected one of 1.31, 1.32, 1.33, 1.34, 1.35, 1.36, 1.37"
    ]


def test_allocate_follows_the_chosen_release(tmp_path: Path) -> None:
    """A NoSchedule taint rules the device out from 1.36 on; in 1.35 the API server drops it."""
    tainted = SLICES.replace("  - {name: gpu-1, basic: {attributes: {model: {string: a100}}}}\n", "").replace(
        "{name: gpu-2, basic: {attributes: {model: {string: a100}}}}",
        "{name: gpu-2, basic: {attributes: {model: {string: a100}}, taints: [{key: k, effect: NoSchedule}]}}",
    )
    one = CLAIM.replace("count: 2", "count: 1")
    path = write(tmp_path, "all.yaml", "---\n".join([CLASS, tainted, one]))
    newest = runner.invoke(app, ["allocate", path, "--node", "node-1"])
    assert newest.exit_code == 1, newest.output
    old = runner.invoke(app, ["allocate", path, "--node", "node-1", "--kubernetes-version", "1.35"])
    assert old.exit_code == 0, old.output
    assert "device: gpu-2" in old.output


RULE = """\
apiVersion: resource.k8s.io/v1beta2
kind: DeviceTaintRule
metadata: {name: maintenance}
spec:
  deviceSelector: {driver: gpu.example.com, pool: node-1}
  taint: {key: example.com/maintenance, effect: NoExecute}
"""


def test_device_taint_rules_need_their_gate(tmp_path: Path) -> None:
    """DRADeviceTaintRules is off in 1.36 (its beta API is off by default) and on in 1.37."""
    path = write(tmp_path, "rule.yaml", RULE)
    assert runner.invoke(app, ["validate", path]).exit_code == 0
    off = runner.invoke(app, ["validate", path, "--kubernetes-version", "1.36"])
    assert off.exit_code == 1
    assert f'{path}:1:13: no matches for kind "DeviceTaintRule" in version "resource.k8s.io/v1beta2"' in off.output
    gate = ["--feature-gates", "DRADeviceTaintRules=true"]
    on = runner.invoke(app, ["validate", path, "--kubernetes-version", "1.36", *gate])
    assert on.exit_code == 0, on.output


def test_explain_follows_the_chosen_release(tmp_path: Path) -> None:
    """The taint rules gpu-2 out for the claim in 1.37; the 1.35 API server would have dropped it."""
    tainted = SLICES.replace(
        "{name: gpu-2, basic: {attributes: {model: {string: a100}}}}",
        "{name: gpu-2, basic: {attributes: {model: {string: a100}}, taints: [{key: k, effect: NoSchedule}]}}",
    )
    files = ["--class", write(tmp_path, "c.yaml", CLASS), "--slices", write(tmp_path, "s.yaml", tainted)]
    files += ["--claim", write(tmp_path, "claim.yaml", CLAIM)]
    ruled_out = "ruled out for request gpus: taint k:NoSchedule is not tolerated"
    assert ruled_out in runner.invoke(app, ["explain", *files]).output
    old = runner.invoke(app, ["explain", *files, "--kubernetes-version", "1.35"])
    assert old.exit_code == 0 and "gpu-2: matches" in old.output and ruled_out not in old.output


# -- issue #27: numbers Go cannot decode, one judgement per object, empty files -------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            CLAIM.replace("count: 2", "count: 9223372036854775808"),
            '8:47: ResourceClaim in version "v1" cannot be handled as a ResourceClaim: json: cannot unmarshal '
            "number 9223372036854775808 into Go struct field ExactDeviceRequest.spec.devices.requests.exactly.count "
            "of type int64",
        ),
        (
            SLICES.replace("{model: {string: t4}}", "{model: {int: 99999999999999999999}}"),
            '9:53: ResourceSlice in version "v1beta1" cannot be handled as a ResourceSlice: json: cannot unmarshal '
            "number 99999999999999999999 into Go struct field DeviceAttribute.spec.devices.basic.attributes.int "
            "of type int64",
        ),
        (
            CLAIM.replace("metadata: {", "metadata: {generation: -9223372036854775809, "),
            '3:24: ResourceClaim in version "v1" cannot be handled as a ResourceClaim: json: cannot unmarshal number '
            "-9223372036854775809 into Go struct field ObjectMeta.metadata.generation of type int64",
        ),
    ],
)
def test_numbers_past_int64_are_refused_as_go_decodes_them(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, "o.yaml", text)
    result = runner.invoke(app, ["validate", path])
    assert result.exit_code == 1
    assert result.output.splitlines()[0] == f"{path}:{expected}"


def test_allocate_refuses_what_validate_refuses_with_its_line(tmp_path: Path) -> None:
    """A claim with count: -1 was allocated (results: []) although validate refused it."""
    files = [write(tmp_path, "c.yaml", CLASS), write(tmp_path, "s.yaml", SLICES)]
    claim = write(tmp_path, "claim.yaml", CLAIM.replace("count: 2", "count: -1"))
    verdict = runner.invoke(app, ["validate", claim])
    assert verdict.exit_code == 1
    first = verdict.output.splitlines()[0]
    assert first.endswith("spec.devices.requests[0].exactly.count: Invalid value: -1: must be greater than zero")
    for args in (
        ["allocate", *files, claim, "--node", "node-1"],
        ["explain", "--class", files[0], "--slices", files[1], "--claim", claim],
    ):
        result = runner.invoke(app, args)
        assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"kubedevice: {first}\n"), args[0]


def test_every_command_ignores_other_api_groups_and_validate_says_so(tmp_path: Path) -> None:
    """available exited 2 on examples/dra/pod.yaml, which allocate and explain read."""
    pod = str(Path(__file__).resolve().parents[2] / "examples" / "dra" / "pod.yaml")
    config_map = write(tmp_path, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\n")
    slices = write(tmp_path, "s.yaml", SLICES)
    available = runner.invoke(app, ["available", pod, config_map, slices])
    assert available.exit_code == 0, available.output
    checked = runner.invoke(app, ["validate", pod, config_map])
    assert checked.exit_code == 0
    assert checked.output.splitlines()[-2:] == [
        f"{config_map}:1:13: v1 ConfigMap is not a resource.k8s.io object: not checked",
        "1 object valid, 2 other objects not checked",
    ]
    examples = Path(pod).parent
    deployment = write(tmp_path, "d.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n")
    files = [str(examples / "class.yaml"), str(examples / "slices.yaml"), pod, config_map, deployment]
    allocate = runner.invoke(app, ["allocate", *files, "--node", "node-1"])
    assert allocate.exit_code == 0, allocate.output


@pytest.mark.parametrize("text", ["", "# nothing\n", "---\n---\n"])
def test_a_file_without_objects_is_a_usage_error(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "empty.yaml", text)
    for args in (["validate", path], ["available", path], ["allocate", path, "--node", "n"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, args
        assert (
            result.stderr
            == f"kubedevice: {path}: no objects in the file (it is empty, or holds only comments and empty documents)\n"
        )


def test_a_file_of_dash_is_standard_input(tmp_path: Path) -> None:
    """As kubectl's ``-f -``: objects piped from ``kubectl get ... -o yaml``, named ``-`` in messages."""
    objects = "---\n".join([CLASS, SLICES, CLAIM])
    assert runner.invoke(app, ["validate", "-"], input=objects).output.splitlines()[-1] == "3 objects valid"
    slices = write(tmp_path, "s.yaml", SLICES)
    allocated = runner.invoke(app, ["allocate", "-", slices, "--node", "node-1"], input=CLASS + "---\n" + CLAIM)
    assert allocated.exit_code == 0, allocated.output
    assert "gpu-1" in allocated.stdout and "gpu-2" in allocated.stdout
    bad = runner.invoke(app, ["validate", "-"], input=CLASS.replace("name: a100", "name: A100"))
    assert bad.exit_code == 1 and bad.output.startswith("-:3:"), bad.output
    explained = runner.invoke(app, ["explain", "--class", "-", "--slices", "-"], input=CLASS + "---\n" + SLICES)
    assert explained.exit_code == 0, explained.output  # one input, read once, for both
    assert "gpu-1" in explained.stdout
    empty = runner.invoke(app, ["available", "-"], input="")
    assert (empty.exit_code, empty.stderr) == (
        2,
        "kubedevice: -: no objects in the file (it is empty, or holds only comments and empty documents)\n",
    )


NO_STDIN = {
    "</dev/null": "kubedevice: -: no objects in the file (it is empty, or holds only comments and empty documents)",
    "<&-": "kubedevice: -: cannot read: standard input is closed",
}


def test_standard_input_through_a_real_pipe_and_closed() -> None:
    piped = subprocess.run(
        [sys.executable, "-m", "kubedevice", "dra", "convert", "--output-version", "resource.k8s.io/v1beta1", "-"],
        input=CLASS,
        capture_output=True,
        text=True,
        check=False,
    )
    assert piped.returncode == 0, piped.stderr
    assert yaml.safe_load(piped.stdout)["apiVersion"] == "resource.k8s.io/v1beta1"
    for stdin in ("</dev/null", "<&-"):  # empty, and closed (no file descriptor 0 at all)
        done = subprocess.run(
            ["sh", "-c", f'exec "$0" -m kubedevice dra validate - {stdin}', sys.executable],
            capture_output=True,
            text=True,
            check=False,
        )
        assert (done.returncode, done.stderr.splitlines()) == (2, [NO_STDIN[stdin]]), stdin
