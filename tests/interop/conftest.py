"""Fixtures that build and start real Kubernetes Go code for the device-plugin interop tests.

Go builds are cached under ~/.cache/kubedevice/ (see deviceplugin/gobuild.py); a test skips
when no Go toolchain is installed, and fails when a build does.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.interop.deviceplugin import gobuild
from tests.interop.deviceplugin.gobuild import GoPlugin, StartHarness


@pytest.fixture(scope="session")
def dpharness() -> Path:
    """The kubelet-side Go harness (client, bench-allocate, devicemanager)."""
    binary = gobuild.harness()
    if binary is None:
        pytest.skip("Go toolchain not installed: cannot build the kubelet-side harness")
    return binary


@pytest.fixture(scope="session")
def mount_namespace() -> None:
    """Skip where /var/lib/kubelet/device-plugins cannot be privately rebound."""
    reason = gobuild.mount_namespace_error()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def sample_plugin_binary() -> Path:
    binary = gobuild.sample_plugin()
    if binary is None:
        pytest.skip("Go toolchain not installed: cannot build the Kubernetes sample device plugin")
    return binary


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    """A short path: unix socket paths are limited to 107 bytes, and pytest's tmp_path is long."""
    with tempfile.TemporaryDirectory(prefix="kd-dp-") as path:
        yield Path(path)


@pytest.fixture
def sample_device_plugin(mount_namespace: None, sample_plugin_binary: Path, tmp_path: Path) -> Iterator[GoPlugin]:
    """Start k8s.io/kubernetes/test/images/sample-device-plugin against a plugin directory.

    It serves ``example.com/resource`` with devices Dev-1 and Dev-2 and registers at once, so
    the kubelet (simulator or real device manager) must already be serving ``kubelet.sock``.
    """

    @contextlib.asynccontextmanager
    async def start(directory: Path) -> AsyncIterator[asyncio.subprocess.Process]:
        log = (tmp_path / "sample-device-plugin.log").open("wb")
        argv = gobuild.in_kubelet_dir(directory, [str(sample_plugin_binary)])
        process = await asyncio.create_subprocess_exec(*argv, stdout=log, stderr=log)
        try:
            yield process
        finally:
            if process.returncode is None:
                process.terminate()
            await process.wait()
            log.close()

    yield start


@pytest.fixture
def start_harness(dpharness: Path, tmp_path: Path) -> StartHarness:
    """Run ``dpharness COMMAND ARGS``, optionally inside the kubelet-directory namespace."""

    @contextlib.asynccontextmanager
    async def start(*args: str, kubelet_dir: Path | None = None) -> AsyncIterator[gobuild.GoEvents]:
        argv = [str(dpharness), *args]
        if kubelet_dir is not None:
            argv = gobuild.in_kubelet_dir(kubelet_dir, argv)
        go = await gobuild.GoEvents.start(argv, tmp_path / f"dpharness-{args[0]}.log")
        try:
            yield go
        finally:
            await go.stop()

    return start
