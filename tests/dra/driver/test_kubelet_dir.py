"""The DRA driver never creates the kubelet's directories: it says once what it waits for, waits
on inotify, and registers when a kubelet creates them (issue #19, as the device-plugin side does)."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubedevice.dra.driver import DraDriver, DriverService
from kubedevice.dra.driver.claims import FileClaims
from kubedevice.kubelet.dra.plugin import register
from kubedevice.kubelet.dra.simulator import DraKubelet
from kubedevice.testing.dradriver import DRIVER, NODE, Node, claim_object, null_plugin
from kubedevice.testing.waiting import eventually

REPO = Path(__file__).resolve().parents[3]
WAITING = f"DRA driver {DRIVER} is waiting for the kubelet to create"


@pytest.fixture
def node() -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))  # unix socket paths end at 107 bytes
    yield Node(root)
    shutil.rmtree(root)


class Lines(logging.Handler):
    """The driver's log lines, as the operator reads them."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self.logger = logging.getLogger("kubedevice.dra.service")

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def __enter__(self) -> Lines:
        self.logger.addHandler(self)
        self._level = self.logger.level
        self.logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *_: object) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self._level)

    def waiting(self) -> list[str]:
        return [line for line in self.lines if "waiting" in line]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


async def test_the_driver_creates_nothing_says_why_it_waits_and_registers_once_the_kubelet_is_there(
    node: Node,
) -> None:
    service = DriverService(DraDriver(DRIVER, [null_plugin()]), FileClaims(node.claims_dir), node.options(False), None)
    with Lines() as log:
        starting = asyncio.create_task(service.start())
        try:
            await eventually("the driver's waiting line logged", log.waiting, 10, 0.01, seen=lambda: log.lines)
            await asyncio.sleep(0.3)  # long enough for a driver that would make the directories to do so
            assert not starting.done()
            assert not node.kubelet_dir.exists()
            assert log.waiting() == [
                f"{WAITING} {node.kubelet_dir / 'plugins'} and {node.kubelet_dir / 'plugins_registry'} "
                "(a kubelet makes them when it starts; we never do): no kubelet on this node yet, "
                "or a wrong --kubelet-dir"
            ]

            (node.kubelet_dir / "plugins_registry").mkdir(parents=True)  # the kubelet, one level at a time
            await asyncio.sleep(0.2)
            assert not starting.done(), "plugins/ is still missing"
            assert _tree(node.kubelet_dir) == {"plugins_registry"}
            (node.kubelet_dir / "plugins").mkdir()
            await asyncio.wait_for(starting, 10)
        finally:
            if not starting.done():
                starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
        try:
            assert len(log.waiting()) == 1, log.lines
            assert f"the kubelet's directories appeared in {node.kubelet_dir}" in log.lines
            assert (await register(service.sockets.registration)).driver == DRIVER
            assert service.registered and service.options.ready.is_set()
        finally:
            await service.stop()
    assert _tree(node.kubelet_dir) == {"plugins", "plugins_registry"}, "our own directory and sockets are gone"


async def test_a_stop_while_waiting_leaves_nothing_behind(node: Node) -> None:
    node.kubelet_dir.mkdir()  # a kubelet directory of another layout (k0s, microk8s) or a wrong flag
    service = DriverService(DraDriver(DRIVER, [null_plugin()]), FileClaims(node.claims_dir), node.options(False), None)
    with Lines() as log:
        starting = asyncio.create_task(service.start())
        await eventually("the driver's waiting line logged", log.waiting, 10, 0.01, seen=lambda: log.lines)
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
    assert log.waiting() == [
        f"{WAITING} {node.kubelet_dir / 'plugins'} and {node.kubelet_dir / 'plugins_registry'} "
        "(a kubelet makes them when it starts; we never do): no kubelet on this node yet, or a wrong --kubelet-dir"
    ]
    assert _tree(node.kubelet_dir) == set()


async def test_a_kubelet_dir_that_is_a_file_is_an_error_not_a_wait(node: Node) -> None:
    node.root.joinpath("kubelet").write_text("not a directory")
    service = DriverService(DraDriver(DRIVER, [null_plugin()]), FileClaims(node.claims_dir), node.options(False), None)
    with pytest.raises(ValueError, match=r"^--kubelet-dir: .*kubelet is not a directory, so .*plugins can never"):
        await asyncio.wait_for(service.start(), 10)


# --- `kubedevice serve` in DRA mode, and the kubelet simulator creating the directories -------------


async def _read_until(proc: asyncio.subprocess.Process, text: str, seen: list[str], timeout: float = 30) -> str:
    assert proc.stderr is not None
    async with asyncio.timeout(timeout):
        while True:
            raw = await proc.stderr.readline()
            if not raw:
                raise AssertionError(f"exited before {text!r}; output: {seen}")
            seen.append(raw.decode().rstrip())
            if text in seen[-1]:
                return seen[-1]


async def test_serve_waits_for_the_kubelet_simulator_and_registers_with_it(node: Node) -> None:
    """The order of the docs followed literally on a machine without a kubelet: serve first, kubelet after."""
    node.add_claim(claim_object("late", ["null-1"]))
    serve = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubedevice", "serve", "--config", str(REPO / "examples" / "dra-null.yaml"),
        "--node", NODE, "--kubelet-dir", str(node.kubelet_dir), "--cdi-dir", str(node.cdi_dir),
        "--claims-dir", str(node.claims_dir),
        stderr=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )  # fmt: skip
    seen: list[str] = []
    kubelet = DraKubelet(node.kubelet_dir, node.claims_dir)
    try:
        line = await _read_until(serve, WAITING, seen)
        assert f"{node.kubelet_dir / 'plugins'} and {node.kubelet_dir / 'plugins_registry'}" in line
        await asyncio.sleep(0.3)
        assert not node.kubelet_dir.exists(), "serve created the kubelet's directory"

        await kubelet.start()  # creates plugins/ and plugins_registry/, as a kubelet does at start
        await kubelet.wait_until(lambda: any(f"registered DRA driver {DRIVER}" in e for e in kubelet.events), 30)
        prepared = await kubelet.prepare("default/late")
        assert prepared is not None and [d.device for d in prepared.devices] == ["null-1"]
        assert await kubelet.unprepare("default/late")
        serve.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(serve.wait(), 20) == 0
    finally:
        await kubelet.stop()
        if serve.returncode is None:
            serve.kill()
            await serve.wait()
    assert serve.stderr is not None
    seen += (await serve.stderr.read()).decode().splitlines()
    assert sum(WAITING in line for line in seen) == 1, seen
    assert "Traceback" not in "\n".join(seen)
    assert not [p for p in node.kubelet_dir.rglob("*") if p.is_socket()], "our sockets are removed"


def test_serve_with_a_kubelet_dir_that_is_a_file_fails_in_one_line(node: Node) -> None:
    node.root.joinpath("kubelet").write_text("not a directory")

    done = subprocess.run(
        [sys.executable, "-m", "kubedevice", "serve", "--config", str(REPO / "examples" / "dra-null.yaml"),
         "--node", NODE, "--kubelet-dir", str(node.kubelet_dir), "--cdi-dir", str(node.cdi_dir),
         "--claims-dir", str(node.root)],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr == (  # refused as the command line is read: nothing logged, nothing served
        f"kubedevice: invalid value for '--kubelet-dir': {node.kubelet_dir} is not a directory "
        "(see 'kubedevice serve --help')\n"
    )
