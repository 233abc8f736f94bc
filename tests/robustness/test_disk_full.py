"""A full disk (a small real tmpfs) under CDI spec files and the checkpoint.

Each write fails whole: the old file is intact byte for byte, no temp file is left behind,
the failure is logged in one line, and the next attempt after space returns succeeds.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from kubedevice.allocation.cdi import CdiError, CdiSpecDir, container_edits
from kubedevice.kubelet import KubeletSimulator, checkpoint
from kubedevice.testing.waiting import logged, wait_for

from .daemon import SERIAL, Daemon
from .tmpfs import fill, leftovers, small_tmpfs

SERIAL_CDI = f"""\
resources:
  - name: {SERIAL}
    glob: {{paths: ["/dev/ttyUSB*"]}}
    cdi: {{kind: example.com/serial}}
    health: {{interval_seconds: 0.2}}
"""


def edits(*paths: str) -> dict[str, object]:
    return container_edits(paths, "rw", [])


def test_cdi_sync_on_a_full_disk_keeps_the_old_files(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "cdi") as cdi:
        specs = CdiSpecDir(cdi, "example.com/serial")
        specs.sync({"a": edits("/dev/ttyUSB0"), "b": edits("/dev/ttyUSB1")})
        before = {p.name: p.read_bytes() for p in specs.owned()}
        filler = fill(cdi)
        with pytest.raises(CdiError, match="No space left on device"):
            specs.sync({"a": edits("/dev/ttyUSB0", "/dev/ttyUSB9"), "b": edits("/dev/ttyUSB1", "/dev/ttyUSB8")})
        assert {p.name: p.read_bytes() for p in specs.owned()} == before
        assert leftovers(cdi) == []
        filler.unlink()
        specs.sync({"a": edits("/dev/ttyUSB0", "/dev/ttyUSB9")})
        [only] = specs.owned()
        assert "/dev/ttyUSB9" in only.read_text() and leftovers(cdi) == []


def test_checkpoint_on_a_full_disk_keeps_the_old_one(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "dp") as plugin_dir:
        path = plugin_dir / "kubelet_internal_checkpoint"
        old = checkpoint.CheckpointData([], {"example.com/a": ["a0"]})
        checkpoint.write(path, old)
        blob = path.read_bytes()
        filler = fill(plugin_dir)
        big = checkpoint.CheckpointData([], {"example.com/a": [f"device-{n:05}" for n in range(5_000)]})
        with pytest.raises(OSError, match="No space left"):
            checkpoint.write(path, big)
        assert path.read_bytes() == blob and checkpoint.read(path) == old
        assert leftovers(plugin_dir) == []
        filler.unlink()
        checkpoint.write(path, big)
        assert checkpoint.read(path) == big and oct(path.stat().st_mode & 0o777) == "0o600"


def test_simulator_keeps_serving_when_its_checkpoint_cannot_be_written(tmp_path: Path) -> None:
    async def main(plugin_dir: Path) -> list[str]:
        sim = KubeletSimulator(plugin_dir)
        await sim.start()
        try:
            fill(plugin_dir)
            daemon = Daemon(tmp_path / "d")
            daemon.plugin_dir = plugin_dir
            daemon.start(wait=False)
            try:
                await sim.wait_until(lambda: sim.allocatable().get(SERIAL) == 1, 15)
            finally:
                await asyncio.to_thread(daemon.stop)
            return list(sim.events)
        finally:
            await sim.stop()

    with small_tmpfs(tmp_path / "dp", size="1m") as plugin_dir:
        events = asyncio.run(main(plugin_dir))
    assert any(e.startswith("failed to write checkpoint file: No space left") for e in events), events


def test_daemon_on_a_full_cdi_disk_keeps_serving_and_catches_up(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path, SERIAL_CDI)
    with small_tmpfs(daemon.cdi):
        daemon.start()
        try:
            wait_for("first spec", lambda: len(list(daemon.cdi.glob("kubedevice-*.json"))) == 1, 15)
            [first] = daemon.cdi.glob("kubedevice-*.json")
            blob = first.read_bytes()
            filler = fill(daemon.cdi)
            (daemon.host / "dev" / "ttyUSB1").touch()  # hotplug: a second spec cannot be written
            failure = wait_for("the failure logged", lambda: logged(daemon.log, "No space left on device"), 15)
            assert first.read_bytes() == blob and leftovers(daemon.cdi) == []
            assert json.loads(blob)["devices"][0]["containerEdits"]["deviceNodes"][0]["path"] == "/dev/ttyUSB0"
            assert "Traceback" not in daemon.log.read_text() and "cannot write CDI spec files" in failure
            filler.unlink()  # space returns: the next health round writes the missing spec
            wait_for("caught up", lambda: len(list(daemon.cdi.glob("kubedevice-*.json"))) == 2, 15)
            wait_for("recovery logged", lambda: "CDI spec files written again" in daemon.log.read_text(), 15)
            assert daemon.alive()
        finally:
            assert daemon.stop() == 0
