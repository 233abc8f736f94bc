"""The harness that runs Kubernetes' DRA test driver: it fails loudly, with the driver's own words.

The driver's happy path, against a real API server, is tests/e2e/test_dra_go_driver.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kubedevice.testing import dratestdriver as go

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def program() -> Path:
    built = go.binary()
    if built is None:
        pytest.skip("Go toolchain not installed: cannot build Kubernetes' DRA test driver")
    return built


def test_a_driver_that_cannot_start_is_reported_with_its_log_and_leaves_no_process(
    program: Path, tmp_path: Path
) -> None:
    options = go.GoDriverOptions(tmp_path / "absent.kubeconfig", tmp_path / "kubelet", tmp_path / "cdi", "node-a")

    async def start() -> None:
        async with go.running(program, options, tmp_path / "go.log"):
            raise AssertionError("the driver must not come up without a kubeconfig")

    with pytest.raises(go.GoDriverError, match=r"did not serve .*-reg\.sock(.|\n)*absent\.kubeconfig"):
        asyncio.run(start())
    assert not options.registration.exists()
