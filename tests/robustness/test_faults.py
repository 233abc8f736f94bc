"""Faults around a real ``kubedevice serve`` process: each one, the daemon recovers by itself,
loses no device and deletes nothing it does not own."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc

from kubedevice.api import pb, pb_grpc
from kubedevice.errors import counted
from kubedevice.kubelet import KubeletSimulator
from kubedevice.testing.waiting import eventually, wait_for

from .daemon import SERIAL, STATIC, Daemon

TIMEOUT = 60.0  # a bound on a hang: a `kubedevice serve` took 12 s to import at a load of 20 on 2 cores
ALL = {STATIC: 8, SERIAL: 1}


@asynccontextmanager
async def kubelet(plugin_dir: Path) -> AsyncIterator[KubeletSimulator]:
    sim = KubeletSimulator(plugin_dir, grace_period=1.0)
    await sim.start()
    try:
        yield sim
    finally:
        await sim.stop()


async def all_devices(sim: KubeletSimulator, expected: dict[str, int] = ALL) -> None:
    await sim.wait_until(lambda: all(sim.allocatable().get(r) == n for r, n in expected.items()), TIMEOUT)


def foreign_files(plugin_dir: Path) -> dict[str, Path]:
    """Files of someone else in the plugin directory: a regular file and a live socket."""
    note = plugin_dir / "someone-elses.txt"
    note.write_text("not ours")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(plugin_dir / "other-vendor.sock"))
    listener.listen()
    foreign_files.keep = listener  # type: ignore[attr-defined]  # stays alive for the test
    return {"note": note, "sock": plugin_dir / "other-vendor.sock"}


def spawn_kubelet(plugin_dir: Path, output: Path) -> subprocess.Popen[bytes]:
    """``kubedevice kubelet`` in a process of its own; its events, one a line, go to ``output``."""
    args = [sys.executable, "-m", "kubedevice", "kubelet", "--plugin-dir", str(plugin_dir), "--grace-period", "1"]
    with output.open("wb") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)


def streaming(output: Path) -> bool:
    """Whether the kubelet's output shows a first device list from each resource: both
    ListAndWatch streams are open (the simulator prints ``RES: N devices`` per list received)."""
    text = output.read_text()
    return all(f"{resource}: {counted(count, 'device')}" in text for resource, count in ALL.items())


def test_kubelet_sigkilled_mid_stream_then_back(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path)
    daemon.start()
    theirs = foreign_files(daemon.plugin_dir)
    try:
        for n in range(1, 4):
            output = tmp_path / f"kubelet-{n}.out"
            proc = spawn_kubelet(daemon.plugin_dir, output)
            try:
                wait_for(
                    f"both ListAndWatch streams open to kubelet {n}",
                    lambda o=output: streaming(o),
                    TIMEOUT,
                    seen=lambda o=output: o.read_text(),
                )
            finally:  # also when the wait fails: no simulator may outlive the test
                proc.send_signal(signal.SIGKILL)
                proc.wait(5)
        assert (daemon.plugin_dir / "kubelet.sock").exists()  # a dead kubelet leaves its socket behind

        async def back() -> None:
            async with kubelet(daemon.plugin_dir) as sim:
                await all_devices(sim)

        asyncio.run(back())
        assert daemon.alive()
        assert theirs["note"].read_text() == "not ours"  # the kubelet removes other sockets, never files
    finally:
        assert daemon.stop() == 0
    assert theirs["note"].exists()


ALLOCATE_LOOP = """
import sys, grpc
from kubedevice.api import pb, pb_grpc
stub = pb_grpc.DevicePluginStub(grpc.insecure_channel("unix://" + sys.argv[1]))
ids = [d.ID for d in next(iter(stub.ListAndWatch(pb.Empty()))).devices]
big = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=[i]) for i in ids * 5000])
print("ready", flush=True)
while True:
    stub.Allocate(big)
"""


def test_client_sigkilled_mid_allocate(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path)
    daemon.start()
    try:
        for delay in (0.05, 0.2, 0.5):
            proc = subprocess.Popen([sys.executable, "-c", ALLOCATE_LOOP, str(daemon.socket())], stdout=subprocess.PIPE)
            assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait(5)
        with grpc.insecure_channel(f"unix://{daemon.socket()}") as channel:
            stub = pb_grpc.DevicePluginStub(channel)
            ids = [d.ID for d in next(iter(stub.ListAndWatch(pb.Empty(), timeout=5))).devices]
            assert len(ids) == 8
            reply = stub.Allocate(pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)]))
            assert len(reply.container_responses) == 1
        assert daemon.alive()
    finally:
        assert daemon.stop() == 0


def _removed(directory: Path) -> bool:
    shutil.rmtree(directory, ignore_errors=True)
    return not directory.exists()


def test_plugin_directory_removed_and_recreated(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path)
    daemon.start()

    async def main() -> None:
        async with kubelet(daemon.plugin_dir) as sim:
            await all_devices(sim)
        # the daemon may serve its socket again while rm -rf runs (the kubelet just left): as an
        # operator would, remove until the directory is gone
        await eventually("the plugin directory removed", lambda: _removed(daemon.plugin_dir), 10.0)
        await asyncio.sleep(0.3)
        daemon.plugin_dir.mkdir()
        async with kubelet(daemon.plugin_dir) as sim:
            await all_devices(sim)

    try:
        asyncio.run(main())
        assert daemon.alive()
    finally:
        assert daemon.stop() == 0


def test_kubelet_sock_replaced_by_a_non_socket(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path)
    daemon.start()
    squatter = daemon.plugin_dir / "kubelet.sock"
    try:
        squatter.write_text("I am a file")
        wait_for("the squatter logged", lambda: "kubelet.sock is not a socket" in daemon.log.read_text(), TIMEOUT)
        assert squatter.read_text() == "I am a file"  # never deleted: not ours
        assert daemon.alive()
        squatter.unlink()

        async def main() -> None:
            async with kubelet(daemon.plugin_dir) as sim:
                await all_devices(sim)

        asyncio.run(main())
    finally:
        assert daemon.stop() == 0


def test_devfs_entries_vanishing_during_discovery(tmp_path: Path) -> None:
    """Hundreds of ttyUSB nodes created and removed while the daemon rescans; it ends exact."""
    daemon = Daemon(tmp_path)
    daemon.start()
    dev = daemon.host / "dev"

    async def main() -> None:
        async with kubelet(daemon.plugin_dir) as sim:
            await all_devices(sim)
            for round_ in range(30):
                for n in range(1, 40):
                    (dev / f"ttyUSB{n}").touch()
                for n in range(1, 40):
                    (dev / f"ttyUSB{n}").unlink()
                if round_ % 10 == 0:
                    await asyncio.sleep(0.05)
            for n in range(1, 4):
                (dev / f"ttyUSB{n}").touch()
            await all_devices(sim, {STATIC: 8, SERIAL: 4})

    try:
        asyncio.run(main())
        assert daemon.alive()
    finally:
        assert daemon.stop() == 0


def test_sighup_storm_then_sigterm_storm(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path)
    daemon.start()
    theirs: dict[str, Path] = {}

    async def main() -> None:
        async with kubelet(daemon.plugin_dir) as sim:
            await all_devices(sim)
            theirs.update(foreign_files(daemon.plugin_dir))  # after the kubelet's own clean-up
            before = len(sim.registrations)
            for _ in range(200):
                daemon.signal(signal.SIGHUP)
            await asyncio.sleep(1.0)
            assert daemon.alive()
            await all_devices(sim)
            assert all(r.error is None for r in sim.registrations[before:])
            for _ in range(20):
                if daemon.alive():
                    os.kill(daemon.pid, signal.SIGTERM)
            assert await asyncio.to_thread(daemon.stop) == 0
            await sim.wait_until(lambda: not sim.allocatable().get(STATIC), TIMEOUT)

    asyncio.run(main())
    assert not daemon.socket().exists() and not daemon.socket(SERIAL).exists()
    assert theirs["sock"].is_socket() and theirs["note"].read_text() == "not ours"


def test_reload_arriving_during_a_kubelet_restart(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path)
    daemon.start()
    extra = "example.com/extra"

    async def main() -> None:
        async with kubelet(daemon.plugin_dir) as sim:
            await all_devices(sim)
            restart = asyncio.create_task(sim.restart())
            daemon.config.write_text(
                daemon.config.read_text() + f"  - name: {extra}\n    static: {{count: 2, paths: [/dev/null]}}\n"
            )
            daemon.signal(signal.SIGHUP)
            await restart
            await all_devices(sim, {**ALL, extra: 2})

    try:
        asyncio.run(main())
        assert daemon.alive()
    finally:
        assert daemon.stop() == 0
