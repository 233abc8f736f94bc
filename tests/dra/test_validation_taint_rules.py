"""DeviceTaintRules per release, and which kinds and versions a release serves.

1.34's v1alpha3 selector has ``deviceClassName`` and CEL ``selectors`` and no ``status``; 1.35
tombstoned both and added the status (k8s.io/api v0.34.4 and v0.35.4 resource/v1alpha3/types.go,
kubernetes v1.34.4 ``validateDeviceTaintSelector``). Whether the API server serves a kind is its
REST storage's question, asked of the enabled API versions (``--runtime-config``), never of a feature
gate: ``API_KINDS`` and ``default_api_versions`` are compared below with each release's Go source,
and tests/interop/test_validation_apiserver.py asks live servers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kubedevice.dra import features
from kubedevice.dra.cli import app
from kubedevice.dra.models import DecodeError, DeviceTaintRule, from_document, to_document
from kubedevice.dra.validation import validate

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
GOOD_134 = {
    "deviceSelector": {
        "deviceClassName": "gpu.example.com",
        "driver": "gpu.example.com",
        "pool": "node-1",
        "device": "gpu-0",
        "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
    },
    "taint": {"key": "example.com/maintenance", "effect": "NoExecute"},
}


def rule(spec: dict[str, Any], release: str, version: str = "v1alpha3", **extra: Any) -> DeviceTaintRule:
    obj = from_document(
        {
            "apiVersion": f"resource.k8s.io/{version}",
            "kind": "DeviceTaintRule",
            "metadata": {"name": "r"},
            "spec": spec,
            **extra,
        },
        "",
        release,
    )
    assert isinstance(obj, DeviceTaintRule)
    return obj


def messages(obj: Any, release: str, gates: str = "") -> list[str]:
    return [str(e) for e in validate(obj, features.from_flags(release, gates), release)]


# --- the v1alpha3 shape of each release -------------------------------------------------------


def test_1_34_selects_by_class_and_cel_too() -> None:
    obj = rule(GOOD_134, "1.34")
    assert messages(obj, "1.34") == []
    assert to_document(obj)["spec"]["deviceSelector"]["deviceClassName"] == "gpu.example.com"  # written back


def test_1_34_checks_the_class_name_and_each_selector() -> None:
    """The class name is a DNS subdomain even when empty (no Required: ``validateDeviceClassName``
    alone), and the selectors are a claim's: each compiled, then the limit of 32 (1.34's order)."""
    selector = {"deviceClassName": "", "selectors": [{"cel": {"expression": "1 +"}}, {}] + [{"cel": {}}] * 31}
    found = messages(rule({**GOOD_134, "deviceSelector": selector}, "1.34"), "1.34")
    assert found[0] == f'spec.deviceSelector.deviceClassName: Invalid value: "": {SUBDOMAIN_MSG}'
    assert found[1].startswith('spec.deviceSelector.selectors[0].cel.expression: Invalid value: "1 +": compilation')
    assert found[2] == "spec.deviceSelector.selectors[1].cel: Required value"
    assert found[-1] == "spec.deviceSelector.selectors: Too many: 33: must have at most 32 items"
    assert len(found) == 3 + 31 + 1  # an empty expression does not compile either


def test_cel_selectors_compile_in_the_environment_of_the_gates() -> None:
    """``allowMultipleAllocations`` is declared only with DRAConsumableCapacity (1.34's dracel.Features)."""
    spec = {**GOOD_134, "deviceSelector": {"selectors": [{"cel": {"expression": "device.allowMultipleAllocations"}}]}}
    obj = rule(spec, "1.34")
    assert [m.split(":")[0] for m in messages(obj, "1.34")] == ["spec.deviceSelector.selectors[0].cel.expression"]
    assert messages(obj, "1.34", "DRAConsumableCapacity=true") == []


@pytest.mark.parametrize("release", ["1.35", "1.36", "1.37"])
@pytest.mark.parametrize("field", ["deviceClassName", "selectors"])
def test_later_releases_refuse_the_tombstoned_fields(release: str, field: str) -> None:
    """Unknown fields from 1.35, whatever their value (Go skips it: no type error)."""
    spec = {"deviceSelector": {"driver": "gpu.example.com", field: 1}, "taint": GOOD_134["taint"]}
    with pytest.raises(DecodeError) as caught:
        rule(spec, release)
    assert caught.value.messages == [f'unknown field "spec.deviceSelector.{field}"']


def test_the_status_is_unknown_in_1_34_and_reset_later() -> None:
    condition = {
        "type": "EvictionInProgress",
        "status": "True",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "reason": "r",
        "message": "m",
        "observedGeneration": 1,
    }
    with pytest.raises(DecodeError) as caught:
        rule(GOOD_134, "1.34", status={"conditions": [condition]})
    assert caught.value.messages == ['unknown field "status"']
    spec = {"taint": GOOD_134["taint"]}
    assert messages(rule(spec, "1.35", status={"conditions": [condition]}), "1.35") == []
    for bad in (
        {"conditions": [{**condition, "lastTransitionTime": "yesterday"}]},
        {"conditions": [{**condition, "status": 1}]},
        {"conditions": "x"},
        {"x": 1},
    ):
        with pytest.raises(DecodeError):
            rule(spec, "1.35", status=bad)


# --- which kinds and versions a release serves ------------------------------------------------


def _go_module(module: str) -> Path:
    """A module's source from the Go module cache, fetched with ``go mod download`` when missing;
    skipped without Go or the module proxy, failed under CI (a table never compared proves nothing)."""
    why = "no go on PATH"
    if shutil.which("go"):
        done = subprocess.run(
            ["go", "mod", "download", "-json", module],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            cwd="/",
        )
        try:
            return Path(json.loads(done.stdout)["Dir"])
        except (ValueError, KeyError):
            why = f"go mod download {module} failed: {(done.stdout + done.stderr)[-300:]}"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(why)
    pytest.skip(why)


@pytest.mark.parametrize("version", ["v1.31.14", "v1.32.13", "v1.33.13", "v1.34.4", "v1.35.4", "v1.36.3", "v1.37.2"])
def test_served_kinds_follow_the_rest_storage(version: str) -> None:
    """Each ``v…Storage`` function of storage_resource.go registers exactly our kinds of that version,
    none behind a feature gate (1.31's PodSchedulingContexts say so in a comment), and only v1 is
    enabled by default from 1.34, nothing before (instance.go)."""
    source = _go_module(f"k8s.io/kubernetes@{version}")
    release = version[1:].rsplit(".", 1)[0]
    storage = (source / "pkg/registry/resource/rest/storage_resource.go").read_text()
    plurals = set(features.RESOURCES.values())
    for api_version, kinds in features.API_KINDS[release].items():
        body = re.search(rf"\) {api_version}Storage\(.*?\n}}\n", storage, re.S)
        assert body is not None, api_version
        code = re.sub(r"//[^\n]*", "", body[0])
        assert "feature" not in code.lower(), api_version  # no gate decides what is served
        registered = set(re.findall(r'resource := "(\w+)"', body[0])) & plurals
        assert registered == {features.RESOURCES[kind] for kind in kinds}, api_version
    instance = (source / "pkg/controlplane/instance.go").read_text()
    enabled = re.search(r"\tstableAPIGroupVersionsEnabledByDefault = .*?\n\t}", instance, re.S)
    assert enabled is not None
    versions = set(re.findall(r"\bresource(v\w+)\.SchemeGroupVersion", enabled[0]))
    assert versions == set(features.default_api_versions(release))
    assert features.runtime_config(release, None).versions == {
        v: v in features.default_api_versions(release) for v in features.API_KINDS[release]
    }


def test_runtime_config_as_kube_apiserver_merges_it() -> None:
    """``MergeAPIResourceConfigs``: api/* first, then versions, then resources; another group skipped."""
    alpha = features.runtime_config("1.34", "api/alpha=true, resource.k8s.io/v1beta1 ,apps/v1=false")
    assert alpha.versions == {"v1alpha3": True, "v1beta1": True, "v1beta2": False, "v1": True}
    only = features.runtime_config("1.35", "api/all=false,resource.k8s.io/v1alpha3/devicetaintrules=true")
    assert only.enabled("v1alpha3", "devicetaintrules") and not only.enabled("v1", "resourceclaims")
    off = features.runtime_config("1.37", "resource.k8s.io/v1/devicetaintrules=false")
    assert not off.enabled("v1", "devicetaintrules") and off.enabled("v1", "deviceclasses")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("api/beta=yes", "invalid value api/beta=yes"),
        ("api/all", "invalid value api/all="),
        ("resource.k8s.io/v2=true", "group version resource.k8s.io/v2 that has not been registered"),
        (
            "resource.k8s.io/v1alpha3=on",
            'invalid value of resource.k8s.io/v1alpha3: on, err: strconv.ParseBool: parsing "on": invalid syntax',
        ),
        (
            "resource.k8s.io/v1alpha3/DeviceTaintRules=true",
            "invalid key resource.k8s.io/v1alpha3/DeviceTaintRules: "
            'group/version/resource and resource is always lowercase plural, not "DeviceTaintRules"',
        ),
    ],
)
def test_runtime_config_refusals_say_what_kube_apiserver_says(value: str, message: str) -> None:
    with pytest.raises(features.RuntimeConfigError) as caught:
        features.runtime_config("1.35", value)
    assert str(caught.value) == message


def test_served_with_a_runtime_config_whatever_the_gates() -> None:
    alpha = features.runtime_config("1.34", "resource.k8s.io/v1alpha3=true")
    for gates in ("", "DRADeviceTaints=true"):
        on = features.from_flags("1.34", gates)
        assert features.not_served("DeviceTaintRule", "resource.k8s.io/v1alpha3", "1.34", on, alpha) is None
        default = features.runtime_config("1.34", None)
        off = features.not_served("DeviceTaintRule", "resource.k8s.io/v1alpha3", "1.34", on, default)
        assert off is not None and "resource.k8s.io/v1alpha3=true enables it" in off
    missing = features.not_served("DeviceTaintRule", "resource.k8s.io/v1beta2", "1.35", {}, alpha)
    assert missing == (
        'no matches for kind "DeviceTaintRule" in version "resource.k8s.io/v1beta2" '
        "(Kubernetes 1.35 has no DeviceTaintRule in v1beta2)"
    )
    old = features.not_served("ResourceClaim", "resource.k8s.io/v1alpha3", "1.34", {}, None)
    assert old is not None and "has no ResourceClaim in v1alpha3" in old


@pytest.mark.parametrize(("release", "gate"), [("1.34", "DRADeviceTaints"), ("1.35", "DRADeviceTaintRules")])
def test_without_a_runtime_config_the_features_gate_is_taken_as_the_answer(release: str, gate: str) -> None:
    """1.34 has no DRADeviceTaintRules: its rules act with DRADeviceTaints, so that gate is the guess."""
    gates = features.from_flags(release, "")
    guess = features.not_served("DeviceTaintRule", "resource.k8s.io/v1alpha3", release, gates)
    assert guess is not None and f"({gate} is off in Kubernetes {release};" in guess
    on = features.from_flags(release, f"DRADeviceTaints=true,{gate}=true")
    assert features.not_served("DeviceTaintRule", "resource.k8s.io/v1alpha3", release, on) is None
    assert features.not_served("ResourceClaim", "resource.k8s.io/v1beta1", release, gates) is None  # taken as on


# --- the command line -------------------------------------------------------------------------


def test_validate_with_a_runtime_config(tmp_path: Path) -> None:
    path = tmp_path / "rule.yaml"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "resource.k8s.io/v1alpha3",
                "kind": "DeviceTaintRule",
                "metadata": {"name": "r"},
                "spec": GOOD_134,
            }
        )
    )
    runner = CliRunner()
    release = ["--kubernetes-version", "1.34"]
    guessed = runner.invoke(app, ["validate", str(path), *release])
    assert guessed.exit_code == 1 and "DRADeviceTaints is off in Kubernetes 1.34" in guessed.output
    gated = runner.invoke(app, ["validate", str(path), *release, "--feature-gates", "DRADeviceTaints=true"])
    assert gated.exit_code == 0, gated.output
    exact = runner.invoke(app, ["validate", str(path), *release, "--runtime-config", "resource.k8s.io/v1alpha3=true"])
    assert exact.exit_code == 0, exact.output
    default = runner.invoke(
        app,
        [
            "validate",
            str(path),
            *release,
            "--runtime-config",
            "resource.k8s.io/v1beta2=true",
            "--feature-gates",
            "DRADeviceTaints=true",
        ],
    )
    assert default.exit_code == 1
    assert f'{path}:1:16: no matches for kind "DeviceTaintRule" in version "resource.k8s.io/v1alpha3"' in default.output
    later = runner.invoke(
        app,
        ["validate", str(path), "--kubernetes-version", "1.35", "--runtime-config", "resource.k8s.io/v1alpha3=true"],
    )
    assert later.exit_code == 1 and 'unknown field "spec.deviceSelector.deviceClassName"' in later.output
    bad = runner.invoke(app, ["validate", str(path), "--runtime-config", "api/alpha=maybe"])
    assert bad.exit_code == 2 and "--runtime-config: invalid value api/alpha=maybe" in bad.output
