"""The releases ``scripts/cluster.sh up --version`` builds: each has a wrapper module pinned to it,
and a release nobody supports is refused with the list (``tests/e2e/`` runs them; ``scripts/matrix.sh``
runs the compact suite on each)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kubedevice.testing import components
from kubedevice.testing.cluster import Cluster, ClusterError, kubelet_skew_error
from kubedevice.testing.cluster.__main__ import main
from kubedevice.testing.cluster.configs import apiserver_release_flags
from kubedevice.testing.gobuild import BuildError


@pytest.mark.parametrize("version", sorted(components.RELEASES.values()))
def test_each_release_has_a_module_that_pins_it_and_its_staging_modules(version: str) -> None:
    module = components._kube_module(version)
    text = (module / "go.mod").read_text()
    assert re.search(rf"^require k8s\.io/kubernetes {re.escape(version)}$", text, re.M), text[:300]
    minor, patch = version.lstrip("v").split(".")[1:]
    staged = re.findall(r"^\s+(k8s\.io/\S+) => (k8s\.io/\S+) (v\S+)$", text, re.M)
    assert len(staged) > 25
    assert all(a == b and v == f"v0.{minor}.{patch}" for a, b, v in staged), staged
    assert (module / "go.sum").stat().st_size > 10_000


@pytest.mark.parametrize(("given", "version"), [
    (None, components.KUBERNETES_VERSION), ("1.34", "v1.34.4"), ("v1.35", "v1.35.4"), ("1.37.2", "v1.37.2"),
    ("v1.37.0", "v1.37.2"),
])  # fmt: skip
def test_a_release_names_the_patch_version_built_for_it(given: str | None, version: str) -> None:
    assert components.version_of(given) == version


def test_an_unsupported_release_is_refused_with_the_list() -> None:
    message = r"Kubernetes 1\.33 is not supported: choose one of 1\.34, 1\.35, 1\.36, 1\.37"
    with pytest.raises(BuildError, match=message):
        components.version_of("1.33")


def test_cluster_sh_refuses_an_unknown_version_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["up", "--version", "1.30"]) == 2
    assert capsys.readouterr().err == (
        "kubedevice: invalid value for '--version': '1.30' is not one of 1.34, 1.35, 1.36, 1.37 "
        "(see 'cluster.sh up --help')\n"
    )


def test_only_1_37_and_later_turn_the_endpoint_reconciler_off() -> None:
    assert apiserver_release_flags("v1.36.3") == []
    assert apiserver_release_flags("v1.37.2") == ["--endpoint-reconciler-type=none"]


@pytest.mark.parametrize(("apiserver", "kubelet", "refused"), [
    ("v1.37.2", "v1.37.2", None), ("v1.37.2", "v1.36.3", None), ("v1.37.2", "v1.34.4", None),
    ("v1.36.3", "v1.37.2", "may not be newer than the API server v1.36.3"),
    ("v1.38.0", "v1.34.4", "more than 3 minor releases older"),
])  # fmt: skip
def test_the_kubelet_follows_the_version_skew_policy(apiserver: str, kubelet: str, refused: str | None) -> None:
    error = kubelet_skew_error(apiserver, kubelet)
    assert error is None if refused is None else refused in (error or "")


def test_cluster_sh_refuses_a_kubelet_newer_than_the_control_plane_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["up", "--version", "1.36", "--kubelet-version", "1.37", "--dir", "/nonexistent/kd"]) == 2
    assert capsys.readouterr().err == (
        "kubedevice: --kubelet-version: a kubelet v1.37.2 may not be newer than the "
        "API server v1.36.3 (upgrade the control plane first)\n"
    )


def test_a_skewed_kubelet_is_refused_before_anything_starts(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path / "cluster")
    unused = Path("/nonexistent")
    with pytest.raises(ClusterError, match=r"^kubelet version: a kubelet v1\.37\.2 may not be newer"):
        cluster.up(
            components.Binaries(unused, unused, unused, unused, unused), version="v1.36.3", kubelet_version="v1.37.2"
        )
    assert not (tmp_path / "cluster").exists() or not any((tmp_path / "cluster").iterdir())
