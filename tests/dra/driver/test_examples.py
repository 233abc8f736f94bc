"""The shipped DRA example manifests run on the project's own cluster as written (issue #19):
its only image, never pulled, and a class/template/driver chain that names the same driver."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubedevice.config import load_config
from kubedevice.testing.cluster import TEST_IMAGE

EXAMPLES = Path(__file__).resolve().parents[3] / "src" / "kubedevice" / "examples"


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def _pod_specs(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod spec of a Pod, or of a workload's template."""
    if document.get("kind") == "Pod":
        return [document["spec"]]
    template = document.get("spec", {}).get("template", {})
    return [template["spec"]] if "containers" in template.get("spec", {}) else []


MANIFESTS = sorted(p for p in EXAMPLES.rglob("*.yaml") if any("kind" in d for d in _documents(p)))
WITH_PODS = [p for p in MANIFESTS if any(_pod_specs(d) for d in _documents(p))]


def test_the_pod_example_is_found() -> None:
    assert EXAMPLES / "dra-null-pod.yaml" in WITH_PODS


@pytest.mark.parametrize("path", WITH_PODS, ids=lambda p: p.name)
def test_example_pods_use_the_clusters_local_image_and_never_pull(path: Path) -> None:
    specs = [spec for document in _documents(path) for spec in _pod_specs(document)]
    for spec in specs:
        assert spec.get("automountServiceAccountToken") is False, path
        for container in spec["containers"] + spec.get("initContainers", []):
            assert container["image"] == TEST_IMAGE, (path, container["name"])
            assert container["imagePullPolicy"] == "Never", (path, container["name"])
            assert "command" not in container, "the image has no shell: it prints its environment by itself"


def test_the_pod_example_claims_a_device_of_the_example_class_of_the_example_driver() -> None:
    template, pod = _documents(EXAMPLES / "dra-null-pod.yaml")
    [device_class] = _documents(EXAMPLES / "dra-null-class.yaml")
    config = load_config(EXAMPLES / "dra-null.yaml")
    assert config.dra is not None
    [request] = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == device_class["metadata"]["name"]
    assert device_class["spec"]["selectors"][0]["cel"]["expression"] == f'device.driver == "{config.dra.driver}"'
    [claim] = pod["spec"]["resourceClaims"]
    assert claim["resourceClaimTemplateName"] == template["metadata"]["name"]
    assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": claim["name"]}]
