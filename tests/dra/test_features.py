"""Releases and feature gates as kube_features.go and component-base's featuregate define them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kubedevice.dra import features


def kube_features_go(version: str) -> str:
    """kube_features.go of ``k8s.io/kubernetes@version`` (with 1.32's versioned_kube_features.go,
    where that release keeps its versioned specs): from the Go module cache, fetched with
    ``go mod download`` when missing (a fresh machine has only what the default release's build
    pulled). Without Go or the module proxy the test skips, and fails under CI: a table of gate
    defaults that is never compared with the source proves nothing."""
    why = "no go on PATH"
    if shutil.which("go"):
        done = subprocess.run(
            ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            cwd="/",
        )
        try:
            source = Path(json.loads(done.stdout)["Dir"]) / "pkg" / "features" / "kube_features.go"
        except (ValueError, KeyError):
            why = f"go mod download k8s.io/kubernetes@{version} failed: {(done.stdout + done.stderr)[-300:]}"
        else:
            if source.is_file():
                versioned = source.with_name("versioned_kube_features.go")
                return source.read_text() + (versioned.read_text() if versioned.is_file() else "")
            why = f"{source} missing"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(why)
    pytest.skip(why)


@pytest.mark.parametrize(
    ("release", "gate", "default"),
    [
        ("1.34", "DRAConsumableCapacity", False),
        ("1.35", "DRAPartitionableDevices", False),
        ("1.36", "DRAConsumableCapacity", True),
        ("1.36", "DRADeviceTaintRules", False),
        ("1.37", "DRADeviceTaintRules", True),
        ("1.36", "DRAListTypeAttributes", False),
        ("1.34", "DRAPrioritizedList", True),
        ("1.35", "DRADeviceTaints", False),
        ("1.36", "DRADeviceTaints", True),
    ],
)
def test_release_defaults(release: str, gate: str, default: bool) -> None:
    assert features.defaults(release)[gate] is default


def test_a_release_knows_only_the_gates_it_has() -> None:
    assert "DRADeviceTaintRules" not in features.defaults("1.34")  # alpha from 1.35
    assert "DRAListTypeAttributes" not in features.defaults("1.35")  # alpha from 1.36
    assert "DRAFractionalCapacityRange" in features.defaults("1.37")


VERSIONS = ["v1.31.14", "v1.32.13", "v1.33.13", "v1.34.4", "v1.35.4", "v1.36.3", "v1.37.2"]


@pytest.mark.parametrize("version", VERSIONS)
def test_table_follows_kube_features_go(version: str) -> None:
    """Each gate's specs up to that release, read from the Go source in the module cache; 1.31's
    gates are not versioned yet (one ``{Default: …}`` each), so only the default and lock count."""
    text = kube_features_go(version)
    release = version[1:].rsplit(".", 1)[0]
    for gate, specs in features.SPECS.items():
        flat = re.search(rf"\n\t{gate}: {{Default: (true|false)[^\n]*?(LockToDefault: true)?}},", text)
        if flat is not None:
            spec = features.spec_at(gate, release)
            assert spec is not None and (spec.default, spec.locked) == (flat[1] == "true", bool(flat[2])), gate
            continue
        block = re.search(rf"\n\t{gate}: {{\n(.*?)\n\t}},", text, re.S)
        if block is None:
            assert features.spec_at(gate, release) is None or gate == "GenericWorkload", gate
            continue
        # A spec with MinCompatibilityVersion applies only with --min-compatibility-version at least
        # that release; the default is the release before (component-base/compatibility), so never.
        lines = "\n".join(line for line in block[1].splitlines() if "MinCompatibilityVersion" not in line)
        found = re.findall(r'MustParse\("([\d.]+)"\), Default: (true|false)[^\n]*?(LockToDefault: true)?}', lines)
        expected = [(v, d == "true", bool(lock)) for v, d, lock in found]
        ours = [(s.version, s.default, s.locked) for s in specs if float(s.version) <= float(release)]
        assert ours == expected, gate


@pytest.mark.parametrize("version", VERSIONS)
def test_every_gate_of_dra_is_known(version: str) -> None:
    """The release's DRA gates (``DRA*``, ``DynamicResourceAllocation``, and ``GenericWorkload``,
    which a DRA gate depends on) are exactly the ones we know for it."""
    text = kube_features_go(version)
    release = version[1:].rsplit(".", 1)[0]
    names = set(re.findall(r"\n\t(DRA\w+|DynamicResourceAllocation|GenericWorkload): {", text))
    assert names == set(features.defaults(release))


def test_overrides_on_top_of_the_release() -> None:
    gates = features.from_flags("1.35", "DRAConsumableCapacity=true, DRADeviceTaints=false,")
    assert gates["DRAConsumableCapacity"] is True and gates["DRADeviceTaints"] is False
    assert gates["DRAPrioritizedList"] is True


@pytest.mark.parametrize(
    ("release", "value", "message"),
    [
        ("1.35", "DRAListTypeAttributes=true", "unrecognized feature gate: DRAListTypeAttributes"),
        ("1.37", "NoSuchGate=true", "unrecognized feature gate: NoSuchGate"),
        ("1.37", "DRAConsumableCapacity", "missing bool value for DRAConsumableCapacity"),
        (
            "1.37",
            "DRAConsumableCapacity=yes",
            'invalid value of DRAConsumableCapacity=yes, err: strconv.ParseBool: parsing "yes": invalid syntax',
        ),
        ("1.36", "DRAAdminAccess=false", "cannot set feature gate DRAAdminAccess to false, feature is locked to true"),
        (
            "1.36",
            "DRADeviceTaints=false,DRADeviceTaintRules=true",
            "DRADeviceTaintRules is enabled, but depends on features that are disabled: [DRADeviceTaints]",
        ),
        (
            "1.37",
            "DRAWorkloadResourceClaims=true",
            "DRAWorkloadResourceClaims is enabled, but depends on features that are disabled: [GenericWorkload]",
        ),
    ],
)
def test_refusals_say_what_kubernetes_says(release: str, value: str, message: str) -> None:
    with pytest.raises(features.FeatureGateError) as caught:
        features.from_flags(release, value)
    assert str(caught.value) == message


def test_unknown_release() -> None:
    with pytest.raises(features.FeatureGateError, match=r"unsupported Kubernetes version '1\.30'"):
        features.from_flags("1.30", None)


def test_classic_dra_is_1_31s_alone() -> None:
    """``DRAControlPlaneController`` (the control-plane controller of classic DRA) exists in 1.31
    only; no gate depends on another before 1.35 (``featureDependencies``), so 1.34 takes
    ``DRAAdminAccess`` on with ``DynamicResourceAllocation`` off."""
    assert features.defaults("1.31") == {"DRAControlPlaneController": False, "DynamicResourceAllocation": False}
    with pytest.raises(features.FeatureGateError, match="unrecognized feature gate: DRAControlPlaneController"):
        features.from_flags("1.32", "DRAControlPlaneController=true")
    gates = features.from_flags("1.34", "DynamicResourceAllocation=false,DRAAdminAccess=true")
    assert gates["DRAAdminAccess"] and not gates["DynamicResourceAllocation"]
