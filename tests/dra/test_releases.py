"""The releases users still meet: 1.31's DeviceClass (the seed's, examples/dra/class-1.31.yaml) as
a 1.31 API server with DRA enabled judges it, and ``dra convert`` between the versions of a
release. Each expected line is one a live API server of that release gave
(tests/interop/test_validation_apiserver.py compares every field of every kind)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from kubedevice.dra import features, models
from kubedevice.dra.cli import app
from kubedevice.dra.convert import ConversionError, convert
from kubedevice.dra.models import DeviceClass, from_document
from kubedevice.dra.strategy import drop_disabled_fields
from kubedevice.dra.validation import validate

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "kubedevice" / "examples" / "dra" / "class-1.31.yaml"
DRA = "DynamicResourceAllocation=true"  # 1.31 serves DRA with it (and resource.k8s.io/v1alpha3 enabled)
runner = CliRunner()


def seed() -> dict[str, Any]:
    document = yaml.safe_load(EXAMPLE.read_text())
    assert isinstance(document, dict)
    return document


def judged(document: dict[str, Any], gates: str = DRA) -> list[str]:
    obj = from_document(document, release="1.31")
    return [str(e) for e in validate(obj, features.from_flags("1.31", gates), "1.31")]


def test_the_seed_class_is_valid_on_1_31_with_suitable_nodes_kept_only_by_the_controller_gate() -> None:
    obj = from_document(seed(), release="1.31")
    assert isinstance(obj, DeviceClass) and obj.spec.suitable_nodes is not None
    assert judged(seed()) == [] and judged(seed(), f"{DRA},DRAControlPlaneController=true") == []
    without = drop_disabled_fields(obj, features.from_flags("1.31", DRA), "1.31")
    with_controller = drop_disabled_fields(
        obj, features.from_flags("1.31", f"{DRA},DRAControlPlaneController=true"), "1.31"
    )
    assert isinstance(without, DeviceClass) and without.spec.suitable_nodes is None
    assert isinstance(with_controller, DeviceClass) and with_controller.spec.suitable_nodes == obj.spec.suitable_nodes


def test_the_seed_class_needs_1_31_to_know_its_fields() -> None:
    """suitableNodes went with classic DRA: 1.32's v1alpha3 has no such field."""
    with pytest.raises(models.DecodeError) as caught:
        from_document(seed(), release="1.32")
    assert caught.value.messages == ['unknown field "spec.suitableNodes"']
    assert features.not_served("DeviceClass", "resource.k8s.io/v1alpha3", "1.34", features.defaults("1.34")) == (
        'no matches for kind "DeviceClass" in version "resource.k8s.io/v1alpha3" '
        "(Kubernetes 1.34 has no DeviceClass in v1alpha3)"
    )


def _variant(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    document = seed()
    node = document
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return document


@pytest.mark.parametrize(
    ("path", "value", "gates", "expected"),
    [
        (
            ("metadata", "name"),
            "Large-GPU",
            DRA,
            [
                'metadata.name: Invalid value: "Large-GPU": a lowercase RFC 1123 subdomain must consist of lower '
                "case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character "
                "(e.g. 'example.com', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ],
        ),
        (
            ("spec", "selectors", 1, "cel", "expression"),
            'device.attributes["gpu.example.com"].model.startsWith(1)',
            DRA,
            [
                'spec.selectors[1].cel.expression: Invalid value: "device.attributes[\\"gpu.example.com\\"].model.'
                'startsWith(1)": compilation failed: ERROR: <input>:1:54: found no matching overload for '
                "'startsWith' applied to 'any.(int)'\n | device.attributes[\"gpu.example.com\"].model."
                "startsWith(1)\n | .....................................................^"
            ],
        ),
        (
            ("spec", "suitableNodes", "nodeSelectorTerms", 0, "matchExpressions", 0, "operator"),
            "Bogus",
            f"{DRA},DRAControlPlaneController=true",
            [
                "suitableNodes.nodeSelectorTerms[0].matchExpressions[0].operator: Invalid value: "
                '"Bogus": not a valid selector operator'
            ],
        ),
        (  # the same, dropped before validation without the controller's gate
            ("spec", "suitableNodes", "nodeSelectorTerms", 0, "matchExpressions", 0, "operator"),
            "Bogus",
            DRA,
            [],
        ),
        (  # 1.31 does not check a node selector's values (1.32 does)
            ("spec", "suitableNodes", "nodeSelectorTerms", 0, "matchExpressions", 0, "values"),
            ["-not a label value-"],
            f"{DRA},DRAControlPlaneController=true",
            [],
        ),
        (
            ("spec", "config"),
            [{"opaque": {"driver": "GPU_example", "parameters": ["not", "an", "object"]}}],
            DRA,
            [
                'spec.config[0].opaque.driver: Invalid value: "GPU_example": a lowercase RFC 1123 subdomain must '
                "consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character (e.g. 'example.com', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                'spec.config[0].opaque.parameters: Invalid value: "<value omitted>": parameters must be a valid '
                "JSON object",
            ],
        ),
        (  # 1.31's list limit is TooLongMaxLength's, and it has no limit on a CEL expression's length
            ("spec", "selectors"),
            [{"cel": {"expression": "true" + " && true" * 1500}}] * 33,
            DRA,
            ["spec.selectors: Too long: may not be longer than 32"],
        ),
    ],
)
def test_each_invalid_variant_is_refused_with_1_31s_message_and_path(
    path: tuple[Any, ...], value: Any, gates: str, expected: list[str]
) -> None:
    assert judged(_variant(path, value), gates) == expected


def test_the_seed_class_converts_to_v1_for_1_37() -> None:
    """Read as 1.31 wrote it; written as 1.37's v1, where suitableNodes has no place (reported)."""
    document, lost = convert(from_document(seed(), release="1.37"), "v1", "1.37")
    assert lost == ["spec.suitableNodes"]
    assert document["apiVersion"] == "resource.k8s.io/v1" and "suitableNodes" not in document["spec"]
    assert document["spec"]["selectors"] == seed()["spec"]["selectors"]
    assert validate(from_document(document, release="1.37"), release="1.37") == []


def test_convert_refuses_a_version_the_release_lacks() -> None:
    with pytest.raises(ConversionError, match=r"Kubernetes 1\.31 has no DeviceClass in resource\.k8s\.io/v1beta1"):
        convert(from_document(seed(), release="1.31"), "v1beta1", "1.31")


SLICE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: node-1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes: {model: {string: h100}}
    capacity:
      memory:
        value: 80Gi
        requestPolicy: {default: 8Gi, validValues: [8Gi, 80Gi]}
    allowMultipleAllocations: true
"""


def test_dra_convert_writes_the_target_shape_and_warns_of_each_lost_field(tmp_path: Path) -> None:
    source = tmp_path / "slice.yaml"
    source.write_text(SLICE)
    result = runner.invoke(
        app, ["convert", "--kubernetes-version", "1.33", "--output-version", "resource.k8s.io/v1alpha3", str(source)]
    )
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["spec"]["devices"] == [
        {"name": "gpu-0", "basic": {"attributes": {"model": {"string": "h100"}}, "capacity": {"memory": "80Gi"}}}
    ]
    assert result.stderr.splitlines() == [
        f"kubedevice: warning: {source}:1: {field} has no place in resource.k8s.io/v1alpha3: left out"
        for field in (
            "spec.devices[0].basic.capacity.memory.requestPolicy",
            "spec.devices[0].basic.allowMultipleAllocations",
        )
    ]
    as_json = runner.invoke(app, ["convert", "--output-version", "resource.k8s.io/v1beta2", "-o", "json", str(source)])
    assert as_json.exit_code == 0 and json.loads(as_json.stdout)["apiVersion"] == "resource.k8s.io/v1beta2"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--output-version", "v1"], "kubedevice: --output-version 'v1': expected resource.k8s.io/{v1alpha3,"),
        (
            ["--output-version", "resource.k8s.io/v1alpha3"],
            "Kubernetes 1.37 has no ResourceSlice in resource.k8s.io/v1alpha3",
        ),
        (["--output-version", "resource.k8s.io/v1", "--kubernetes-version", "1.30"], "--kubernetes-version '1.30'"),
    ],
)
def test_dra_convert_refuses_bad_input_in_one_line(tmp_path: Path, arguments: list[str], message: str) -> None:
    source = tmp_path / "slice.yaml"
    source.write_text(SLICE)
    result = runner.invoke(app, ["convert", *arguments, str(source)])
    assert result.exit_code == 2 and message in result.stderr and len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.output


def test_convert_writes_what_gos_encoder_writes() -> None:
    """A v1beta1 request's ``deviceClassName`` has no ``omitempty`` (written even when empty), a
    count of 0 has it (left out); as a 1.36 API server answered a read in v1beta1."""
    claim = from_document(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "any",
                            "firstAvailable": [{"name": "all", "deviceClassName": "gpu", "allocationMode": "All"}],
                        }
                    ]
                }
            },
        },
        release="1.36",
    )
    document, lost = convert(claim, "v1beta1", "1.36")
    assert lost == []
    assert document["spec"]["devices"]["requests"] == [
        {
            "name": "any",
            "deviceClassName": "",
            "firstAvailable": [{"name": "all", "deviceClassName": "gpu", "allocationMode": "All"}],
        }
    ]
