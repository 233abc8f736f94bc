"""Helm for the chart tests: found on PATH or in a cache dir, else built once with ``go install``.

The pinned version is built from source through the Go toolchain's default module proxy, so
CI needs nothing but Go; :mod:`kubedevice.testing.gobuild` caches the binary, so later runs
start at once. ``KUBEDEVICE_HELM`` points at a Helm binary to use instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from kubedevice.testing import gobuild

HELM_VERSION = "v3.21.4"
REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "kubedevice"
MANIFESTS = REPO / "deploy" / "manifests"
INSTALL_TIMEOUT = 1500  # a cold build of Helm takes a few minutes on two cores


def _version_of(binary: str) -> str:
    out = subprocess.run([binary, "version", "--short"], check=False, capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


def find_or_build_helm() -> str:
    """The pinned Helm: explicit override, a matching one on PATH, the cache, or a fresh build."""
    override = os.environ.get("KUBEDEVICE_HELM")
    if override:
        return override
    on_path = shutil.which("helm")
    if on_path and _version_of(on_path).startswith(HELM_VERSION):
        return on_path
    built = gobuild.install(
        "helm.sh/helm/v3/cmd/helm",
        HELM_VERSION,
        "helm",
        {"GOFLAGS": "-trimpath", "CGO_ENABLED": "0"},
        timeout=INSTALL_TIMEOUT,
    )
    if built is None:
        pytest.fail(f"Helm {HELM_VERSION} is needed: install Go (to build it) or set KUBEDEVICE_HELM")
    return str(built)


class Helm:
    """Runs the pinned Helm with no cluster and an isolated Helm home."""

    def __init__(self, binary: str, home: Path) -> None:
        self.binary = binary
        self.env = {
            **os.environ,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
            "KUBECONFIG": str(home / "no-kubeconfig"),
        }

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, *args], check=False, env=self.env, capture_output=True, text=True, timeout=120
        )

    def template(
        self, *sets: str, values: Sequence[Path] = (), namespace: str = "kube-system", release: str = "kubedevice"
    ) -> list[dict[str, Any]]:
        """Render the chart; every ``sets`` item is a ``--set`` expression."""
        args = ["template", release, str(CHART), "--namespace", namespace, "--kube-version", "1.34.0"]
        args += [arg for item in sets for arg in ("--set", item)]
        args += [arg for path in values for arg in ("--values", str(path))]
        result = self.run(*args)
        assert result.returncode == 0, result.stderr
        return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def load_manifests(name: str = "kubedevice.yaml") -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((MANIFESTS / name).read_text()) if doc]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (doc,) = by_kind(docs, kind)
    return doc


# The chart's kubeVersion floor and the newest schemas kubernetes-validate ships.
K8S_VERSIONS = ("1.28.0", "1.37.0")
# Prometheus-operator kinds have no schema in Kubernetes' OpenAPI; their tests check them by hand.
CRD_KINDS = frozenset({"PodMonitor", "ServiceMonitor"})


def validate_all(docs: list[dict[str, Any]], versions: Sequence[str] | None = None) -> None:
    """Every object against the strict Kubernetes OpenAPI schema (unknown fields are errors)."""
    for doc in docs:
        if doc["kind"] in CRD_KINDS:
            continue
        for version in versions or K8S_VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                where = "/".join(str(part) for part in error.path)
                pytest.fail(
                    f"{doc['kind']}/{doc['metadata']['name']} invalid for Kubernetes {version} "
                    f"at {where}: {error.message}"
                )
