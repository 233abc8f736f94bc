"""DRA driver benchmark: ``python benchmarks/dra_prepare.py [--quick]``.

NodePrepareResources + NodeUnprepareResources round trips for 1 and 32 claims, from the
kubelet-side client in this process to the driver in this process over a real unix socket,
with claims held in memory (no API server): what the driver itself costs per call, CDI
spec files and checkpoint writes (fsync) included. As on a node, the CDI directory is on
tmpfs (/dev/shm here, /var/run/cdi there) and the checkpoint on disk (/tmp here, the kubelet
directory there), so a call costs about one disk fsync. Prints medians and p99.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from kubedevice.device import ContainerAllocation, Device, DeviceSpec
from kubedevice.dra.driver import DraDriver, DriverService, ServiceOptions
from kubedevice.dra.driver.model import AllocatedDevice, Claim
from kubedevice.dra.driver.state import ClaimError
from kubedevice.kubelet.dra import DraClient, register
from kubedevice.plugin.base import Plugin

DRIVER = "bench.example.com"
NODE = "bench-node"


class MemoryClaims:
    """Claims already allocated, kept in memory: the benchmark measures the driver, not an API server."""

    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], Claim] = {}

    def add(self, name: str, device: str) -> tuple[str, str, str]:
        uid = str(uuid.uuid4())
        result = AllocatedDevice("req", DRIVER, NODE, device)
        self.claims["default", name] = Claim("default", name, uid, True, (result,))
        return "default", name, uid

    async def get(self, namespace: str, name: str) -> Claim:
        try:
            return self.claims[namespace, name]
        except KeyError:
            raise ClaimError(f"no claim {namespace}/{name}") from None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(rounds: int, root: Path, cdi: Path) -> None:
    grant = ContainerAllocation(envs={"DEV": "x"}, devices=[DeviceSpec("/dev/null")])
    driver = DraDriver(DRIVER, [Plugin("example.com/bench", [Device(f"d{i}", grant=grant) for i in range(64)])])
    claims = MemoryClaims()
    options = ServiceOptions(NODE, root / "kubelet", cdi, root / "boot_id")
    service = DriverService(driver, claims, options, None)
    await service.start()
    try:
        async with DraClient(await register(service.sockets.registration)) as client:
            for size in (1, 32):
                prepare: list[float] = []
                unprepare: list[float] = []
                for r in range(rounds):
                    refs = [claims.add(f"c{r}-{i}", f"d{i}") for i in range(size)]
                    start = time.perf_counter()
                    await client.prepare(refs)
                    middle = time.perf_counter()
                    await client.unprepare(refs)
                    prepare.append((middle - start) * 1000)
                    unprepare.append((time.perf_counter() - middle) * 1000)
                for name, times in (("NodePrepareResources", prepare), ("NodeUnprepareResources", unprepare)):
                    print(
                        f"{name:22s} {size:2d} claims: median {statistics.median(times):7.2f} ms, "
                        f"p99 {percentile(times, 0.99):7.2f} ms ({rounds} rounds)"
                    )
    finally:
        await service.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few rounds only (smoke run)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kdb-", dir="/tmp"))
    cdi = Path(tempfile.mkdtemp(prefix="kdb-cdi-", dir="/dev/shm" if Path("/dev/shm").is_dir() else "/tmp"))
    try:
        (root / "boot_id").write_text("bench\n")
        asyncio.run(measure(5 if args.quick else 200, root, cdi))
    finally:
        shutil.rmtree(root)
        shutil.rmtree(cdi)


if __name__ == "__main__":
    main()
