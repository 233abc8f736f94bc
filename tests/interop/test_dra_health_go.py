"""Our DRA driver's health stream watched by the official Go clients of k8s.io/kubelet v0.37.2.

``drahealth/`` picks the health service as a 1.37 kubelet does (first of ``v1``, ``v1alpha1``
listed in GetInfo) and reads ``v1alpha1`` through the kubelet's own ``V1Alpha1ClientWrapper``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from kubedevice.device import Health
from kubedevice.dra.driver import DraDriver
from kubedevice.testing import gobuild
from kubedevice.testing.dradriver import DRIVER, NODE, Node, null_plugin, running

pytestmark = pytest.mark.interop
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def watcher() -> Path:
    binary = gobuild.build(HERE / "drahealth", ".", "drahealth")
    if binary is None:
        pytest.skip("Go toolchain not installed: cannot build the k8s.io/kubelet v0.37.2 health client")
    return binary


@pytest.fixture
def node() -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))  # unix socket paths end at 107 bytes
    yield Node(root)
    shutil.rmtree(root)


@asynccontextmanager
async def watching(binary: Path, registration: Path, *service: str) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        str(binary), str(registration), *service,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def line(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None
    text = await asyncio.wait_for(process.stdout.readline(), 10)
    if not text:
        assert process.stderr is not None
        raise AssertionError((await process.stderr.read()).decode())
    return text.decode().strip()


@pytest.mark.parametrize(
    ("service", "chosen"),
    [((), "v1.DRAResourceHealth"), (("v1alpha1.DRAResourceHealth",), "v1alpha1.DRAResourceHealth")],
    ids=["as-1.37-picks", "v1alpha1-wrapper"],
)
def test_the_kubelets_go_client_sees_every_change(
    watcher: Path, node: Node, service: tuple[str, ...], chosen: str
) -> None:
    asyncio.run(asyncio.wait_for(_watch(watcher, node, service, chosen), 60))


async def _watch(watcher: Path, node: Node, service: tuple[str, ...], chosen: str) -> None:
    plugin = null_plugin(2)
    async with (
        running(node, DraDriver(DRIVER, [plugin])) as driver,
        watching(watcher, driver.sockets.registration, *service) as process,
    ):
        assert await line(process) == chosen
        healthy = {f"{NODE}/null0": "HEALTHY", f"{NODE}/null1": "HEALTHY"}
        assert json.loads(await line(process)) == healthy
        plugin.set_health("null1", Health.UNHEALTHY)
        assert json.loads(await line(process)) == {**healthy, f"{NODE}/null1": "UNHEALTHY"}
        plugin.set_health("null1", Health.HEALTHY)
        assert json.loads(await line(process)) == healthy
        assert process.stdin is not None
        process.stdin.close()  # the watcher cancels its stream and exits cleanly
        assert await asyncio.wait_for(process.wait(), 10) == 0
