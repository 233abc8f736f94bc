"""One real cluster for the whole e2e session (starting one costs ~30 s; building it once, ~10 min).

Where a component cannot run (no root, no unshare, no Go and nothing cached), the tests skip with
the exact reason on a developer machine and FAIL with it in CI (``CI`` set), so CI never passes
without having run them.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubedevice.testing import components
from kubedevice.testing.cluster import Cluster, ClusterError, leftovers, missing_prerequisite
from kubedevice.testing.gobuild import BuildError


def unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"e2e tests cannot run here: {reason}", pytrace=False)
    pytest.skip(reason)


RELEASE_ENV = "KUBEDEVICE_K8S_RELEASE"
"""The Kubernetes release of the session's cluster (``1.34`` … ``1.37``; unset: the default).
``scripts/matrix.sh`` sets it to run the compact suite (marker ``release``) on each release."""


def session_version() -> str:
    """The patch version the session's cluster runs."""
    return components.version_of(os.environ.get(RELEASE_ENV) or None)


def session_minor() -> int:
    return int(session_version().split(".")[1])


@pytest.fixture(scope="session")
def kubernetes_minor() -> int:
    """The minor release of the session's cluster (36 for v1.36.3), for tests of a feature a
    release turns on by default."""
    return session_minor()


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    yield from _session_cluster(nodes=1)


MULTINODE = 3


@pytest.fixture(scope="session")
def multinode() -> Iterator[Cluster]:
    """A 3-node cluster of its own (``up --nodes 3``), started only by the tests that ask for it
    (tests/e2e/test_multinode.py), so the one-node tests' cluster stays as it is."""
    yield from _session_cluster(nodes=MULTINODE)


def _session_cluster(nodes: int, version: str | None = None, kubelet_version: str | None = None) -> Iterator[Cluster]:
    """Start a cluster (of the session's release unless ``version``; its kubelets of ``kubelet_version``
    if given); stop it after and fail if it left anything on the host."""
    reason = missing_prerequisite()
    if reason is not None:
        unavailable(reason)
    version = version or session_version()
    try:
        binaries = components.ensure_all(version)
    except BuildError as err:
        if shutil.which("go") is None:
            unavailable(str(err))
        raise
    # Short: unix socket paths below it must stay under 108 bytes.
    directory = Path(tempfile.mkdtemp(prefix="kd-e2e-"))
    cluster = Cluster(directory)
    try:
        cluster.up(binaries, version=version, nodes=nodes, kubelet_version=kubelet_version)
    except ClusterError as err:
        pytest.fail(f"the cluster did not start: {err}", pytrace=False)
    try:
        yield cluster
    finally:
        state = cluster.state()  # as it is now: processes spawned by the tests too
        assert state is not None
        cluster.down()
        left = leftovers(cluster.dir, state)
        if not left:
            shutil.rmtree(directory, ignore_errors=True)
        assert not left, f"the cluster left things behind (logs kept in {directory}): {left}"


@pytest.fixture(scope="session")
def binaries(cluster: Cluster) -> components.Binaries:
    return cluster.binaries


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kd-") as path:
        yield Path(path)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run ``async def`` tests, each in a fresh event loop (as ``asyncio.run``), within 180 s: a
    bound on a hang only (each wait inside has its own), so it must exceed a test's waits added up
    on a loaded machine (one waits 60 s for the garbage collector alone)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs: dict[str, Any] = {name: pyfuncitem.funcargs[name] for name in names}
    asyncio.run(asyncio.wait_for(pyfuncitem.obj(**kwargs), 180))
    return True
