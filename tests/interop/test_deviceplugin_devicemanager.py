"""The kubelet's real device manager (k8s.io/kubernetes/pkg/kubelet/cm/devicemanager) driving plugins.

The Go harness runs in a private mount namespace where /var/lib/kubelet/device-plugins is the
test's directory; the plugins run outside it, on that same directory. Checked: registration,
node capacity and allocatable, Allocate and the run options for a pod's container, kubelet
restarts with the checkpoint restored, and the plugin registering again.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubedevice.device import ContainerAllocation, Device, DeviceSpec, Health, Mount
from kubedevice.kubelet import Container, Pod, checkpoint
from kubedevice.kubelet.simulator import KubeletSimulator
from kubedevice.plugin.base import Plugin
from kubedevice.plugin.manager import Manager
from tests.interop.deviceplugin.gobuild import GoPlugin, StartHarness

pytestmark = pytest.mark.interop
RESOURCE = "example.com/dm"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def make_devices() -> list[Device]:
    return [
        Device(
            f"gpu{n}",
            numa_nodes=(n % 2,),
            grant=ContainerAllocation(
                envs={f"GPU_{n}": f"gpu{n}"},
                mounts=[Mount(f"/opt/gpu{n}", f"/gpu/{n}", read_only=True)],
                devices=[DeviceSpec(f"/dev/gpu{n}", permissions="rw")],
                annotations={f"example.com/gpu{n}": "1"},
                cdi_devices=[f"example.com/gpu=gpu{n}"],
            ),
        )
        for n in range(3)
    ] + [Device("gpu3", Health.UNHEALTHY)]


def run_options(allocation: ContainerAllocation) -> dict[str, Any]:
    return {
        "envs": dict(allocation.envs),
        "annotations": dict(allocation.annotations),
        "mounts": [
            {"container_path": m.container_path, "host_path": m.host_path, "read_only": m.read_only}
            for m in allocation.mounts
        ],
        "devices": [
            {"container_path": d.container_path, "host_path": d.host_path, "permissions": d.permissions}
            for d in allocation.devices
        ],
        "cdi_devices": list(allocation.cdi_devices),
    }


def test_real_device_manager_with_kubedevice(
    mount_namespace: None, start_harness: StartHarness, plugin_dir: Path
) -> None:
    devices = make_devices()
    plugin = Plugin(RESOURCE, devices)
    healthy = [d for d in devices if d.healthy]
    by_id = {d.id: d for d in devices}

    async def main() -> None:
        manager = Manager([plugin], plugin_dir)
        args = (
            "devicemanager",
            "-resource",
            RESOURCE,
            "-devices",
            str(len(devices)),
            "-healthy",
            str(len(healthy)),
            "-request",
            "2",
            "-restarts",
            "2",
            "-timeout",
            "20s",
        )
        async with start_harness(*args, kubelet_dir=plugin_dir) as go:
            await go.next("kubelet_started")
            await manager.start()
            try:
                capacity = await go.next("capacity")
                # The manager counts only healthy devices; GetAllocatableDevices lists those.
                assert capacity["devices"] == [
                    {"id": d.id, "health": "Healthy", "numa_nodes": list(d.numa_nodes)} for d in healthy
                ]
                allocated = await go.next("allocate")
                assert "error" not in allocated, allocated
                ids = allocated["device_ids"]
                assert len(ids) == 2 and set(ids) <= {d.id for d in healthy}
                expected = run_options(ContainerAllocation.merge(by_id[i].grant for i in sorted(ids)))
                assert sorted_options(allocated["run_options"]) == sorted_options(expected)
                for _ in range(2):
                    again = await go.next("reregistered")
                    assert (again["capacity"], again["allocatable"]) == (len(devices), len(healthy))
                    restored = await go.next("restored")
                    assert restored["device_ids"] == ids
                    assert sorted_options(restored["run_options"]) == sorted_options(expected)
                await go.next("done")
            finally:
                await manager.stop()
            assert await go.stop() == 0, go.stderr_tail()

    asyncio.run(main())


def test_simulator_reads_real_device_manager_checkpoint(
    mount_namespace: None, start_harness: StartHarness, plugin_dir: Path
) -> None:
    """A checkpoint written by the real device manager reads back the same in our simulator."""

    async def main() -> None:
        manager = Manager([Plugin(RESOURCE, make_devices())], plugin_dir)
        async with start_harness(
            "devicemanager",
            "-resource",
            RESOURCE,
            "-devices",
            "4",
            "-healthy",
            "3",
            "-request",
            "2",
            "-restarts",
            "0",
            kubelet_dir=plugin_dir,
        ) as go:
            await go.next("kubelet_started")
            await manager.start()
            try:
                ids = (await go.next("allocate"))["device_ids"]
                await go.next("done")
            finally:
                await manager.stop()
        sim = KubeletSimulator(plugin_dir)
        await sim.start()
        await sim.stop()
        assert sim.assignments() == {"pod-interop-1": {"c": {RESOURCE: ids}}}, sim.events

    asyncio.run(main())


def test_real_device_manager_reads_simulator_checkpoint(
    mount_namespace: None, start_harness: StartHarness, plugin_dir: Path
) -> None:
    """The reverse: the device manager restores what the simulator admitted and checkpointed."""

    async def main() -> None:
        sim = KubeletSimulator(plugin_dir)
        manager = Manager([Plugin(RESOURCE, make_devices())], plugin_dir)
        await sim.start()
        try:
            await manager.start()
            await sim.wait_until(lambda: sim.allocatable().get(RESOURCE, 0) == 3, timeout=10)
            admitted = (await sim.admit(Pod("pod-sim-1", "sim", [Container("c", {RESOURCE: 2})])))["c"]
        finally:
            await sim.stop()
        try:
            async with start_harness(
                "devicemanager",
                "-resource",
                RESOURCE,
                "-devices",
                "4",
                "-healthy",
                "3",
                "-request",
                "2",
                "-restarts",
                "0",
                "-restored-pod",
                "pod-sim-1",
                kubelet_dir=plugin_dir,
            ) as go:
                restored = await go.next("restored")
                await go.next("done")
        finally:
            await manager.stop()
        assert restored["device_ids"] == sorted(admitted.device_ids[RESOURCE]), restored
        assert sorted_options(restored["run_options"]) == sorted_options(run_options(admitted.allocation))

    asyncio.run(main())


CHARS = 'ab-_./0<&>"\\ \n\t\x01\x7fé设😀\u2028'


def random_text(rng: random.Random) -> str:
    return "".join(rng.choice(CHARS) for _ in range(rng.randrange(0, 6)))


def random_data(rng: random.Random) -> checkpoint.CheckpointData:
    entries = [
        checkpoint.Entry(
            random_text(rng),
            random_text(rng),
            random_text(rng),
            {
                rng.choice([-1, 0, 1, 2, 10, 2**63 - 1, -(2**63)]): [
                    random_text(rng) for _ in range(rng.randrange(0, 3))
                ]
                for _ in range(rng.randrange(0, 4))
            },
            rng.randbytes(rng.randrange(0, 8)),
        )
        for _ in range(rng.randrange(0, 4))
    ]
    return checkpoint.CheckpointData(
        entries,
        {random_text(rng): [random_text(rng) for _ in range(rng.randrange(0, 3))] for _ in range(rng.randrange(0, 4))},
    )


def random_raw(rng: random.Random) -> bytes:
    """A file another writer may leave: JSON nulls and missing fields where Go would decode them."""

    def maybe(value: object) -> object:
        return None if rng.random() < 0.3 else value

    entries = [
        {
            k: v
            for k, v in {
                "PodUID": maybe(random_text(rng)),
                "ContainerName": random_text(rng),
                "DeviceIDs": maybe(
                    {str(rng.randrange(-2, 12)): maybe([maybe(random_text(rng))]) for _ in range(rng.randrange(0, 3))}
                ),
                "AllocResp": maybe(base64.b64encode(rng.randbytes(3)).decode()),
            }.items()
            if rng.random() < 0.8
        }
        for _ in range(rng.randrange(0, 3))
    ]
    registered = {random_text(rng): maybe([random_text(rng)]) for _ in range(rng.randrange(0, 3))}
    body = {"PodDeviceEntries": maybe(entries), "RegisteredDevices": maybe(registered)}
    return json.dumps({"Data": {k: v for k, v in body.items() if rng.random() < 0.8}, "Checksum": 0}).encode()


def test_checkpoint_files_match_kubelet_code(dpharness: Path, tmp_path: Path) -> None:
    """Random data through our writer and Go's checkpoint package: same dump, checksum and bytes."""
    rng = random.Random(1109)
    path = tmp_path / "kubelet_internal_checkpoint"
    written = []
    for _ in range(60):
        checkpoint.write(path, random_data(rng))
        written.append(path.read_bytes())
    raw = [random_raw(rng) for _ in range(60)]
    go = subprocess.run(
        [str(dpharness), "checkpoint"],
        input=b"\n".join(written + raw) + b"\n",
        capture_output=True,
        check=True,
        timeout=120,
    )
    results = [json.loads(line) for line in go.stdout.splitlines()]
    assert len(results) == len(written) + len(raw), go.stderr
    for blob, result in zip(written + raw, results, strict=True):
        data, stored = checkpoint.parse(blob)
        assert (checkpoint.spew_dump(data), checkpoint.checksum(data)) == (result["dump"], result["checksum"]), blob
        assert checkpoint.marshal(data) == result["file"].encode(), blob
        assert (result["verify_error"] == "") == (stored == result["checksum"])
    assert all(r["verify_error"] == "" for r in results[: len(written)])


def sorted_options(options: dict[str, Any]) -> dict[str, Any]:
    """The device manager merges per-device responses through maps: compare lists as sets."""
    key = repr
    return {k: sorted(v, key=key) if isinstance(v, list) else v for k, v in options.items()}


def test_real_device_manager_with_kubedevice_serve(
    mount_namespace: None, start_harness: StartHarness, plugin_dir: Path, tmp_path: Path
) -> None:
    """The config-driven daemon (``kubedevice serve``, examples/null.yaml) as a separate process."""

    async def main() -> None:
        async with start_harness(
            "devicemanager",
            "-resource",
            "example.com/null",
            "-devices",
            "4",
            "-request",
            "1",
            "-restarts",
            "1",
            "-timeout",
            "20s",
            kubelet_dir=plugin_dir,
        ) as go:
            await go.next("kubelet_started")
            log = (tmp_path / "serve.log").open("wb")
            daemon = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "kubedevice",
                "serve",
                "--config",
                str(EXAMPLES / "null.yaml"),
                "--plugin-dir",
                str(plugin_dir),
                stdout=log,
                stderr=log,
            )
            try:
                assert (await go.next("capacity"))["capacity"] == 4
                allocated = await go.next("allocate")
                assert allocated["run_options"]["devices"] == [
                    {"container_path": "/dev/null", "host_path": "/dev/null", "permissions": "rw"}
                ], allocated
                await go.next("reregistered")
                assert (await go.next("restored"))["device_ids"] == allocated["device_ids"]
            finally:
                daemon.terminate()
                assert await daemon.wait() == 0, (tmp_path / "serve.log").read_text()
                log.close()

    asyncio.run(main())


def test_real_device_manager_with_sample_plugin(
    start_harness: StartHarness, sample_device_plugin: GoPlugin, plugin_dir: Path
) -> None:
    """Validates the harness on a real Go plugin; its re-registration takes ~10 s (a 10 s poll)."""

    async def main() -> None:
        async with start_harness(
            "devicemanager",
            "-resource",
            "example.com/resource",
            "-devices",
            "2",
            "-request",
            "1",
            "-restarts",
            "1",
            "-timeout",
            "30s",
            kubelet_dir=plugin_dir,
        ) as go:
            await go.next("kubelet_started")
            async with sample_device_plugin(plugin_dir):
                assert [d["id"] for d in (await go.next("capacity"))["devices"]] == ["Dev-1", "Dev-2"]
                allocated = await go.next("allocate")
                (dev,) = allocated["device_ids"]
                assert allocated["run_options"]["mounts"] == [
                    {"container_path": f"/tmp/{dev}", "host_path": f"/tmp/{dev}", "read_only": False}
                ]
                await go.next("reregistered", timeout=60)
                assert (await go.next("restored"))["device_ids"] == [dev]

    asyncio.run(main())
