"""Preferred allocation at 10,000 devices: ``python benchmarks/preferred_allocation.py`` (``--quick``).

10,000 advertised IDs = 2,500 physical devices × 4 replicas over 4 NUMA nodes with a SLIT
distance matrix; requests of 1–16 devices, half with a must-include. Measured: our policy
in-process (spread and pack), the same requests as GetPreferredAllocation RPCs to a
``ConfiguredPlugin`` over a unix socket (PCI source on a fake sysfs tree), and a Go port of the
same algorithm (benchmarks/go/prefpeer), in-process, on the same requests. Target: p99 ≤ 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from grpc import aio

from kubedevice.allocation.sharing import Layout, SharingPolicy
from kubedevice.api import pb, pb_grpc
from kubedevice.device import Device
from kubedevice.names import endpoint_for
from kubedevice.plugin.manager import Manager
from kubedevice.sources.configured import ConfiguredPlugin
from kubedevice.sources.schema import ResourceConfig
from kubedevice.testing import FakeHost, gobuild

PHYSICAL, REPLICAS, NODES = 2_500, 4, 4
TARGET_MS = 5.0
GO_MODULE = Path(__file__).resolve().parent / "go"
DISTANCES = {0: (10, 21, 31, 31), 1: (21, 10, 31, 31), 2: (31, 31, 10, 21), 3: (31, 31, 21, 10)}


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def address(p: int) -> str:
    return f"0000:{p // 32:02x}:{p % 32:02x}.0"


def devices() -> list[Device]:
    return [
        Device(f"{address(p)}::{r}", numa_nodes=(p % NODES,), group=address(p))
        for p in range(PHYSICAL)
        for r in range(REPLICAS)
    ]


def requests(count: int) -> list[dict[str, object]]:
    rng = random.Random(7)
    return [
        {"size": rng.choice((1, 2, 4, 8, 16)), "must": [rng.randrange(PHYSICAL * REPLICAS)] if i % 2 else []}
        for i in range(count)
    ]


def time_policy(policy: SharingPolicy, pool: list[Device], reqs: list[dict[str, object]]) -> list[float]:
    """The policy as ``ConfiguredPlugin`` calls it: with the layout built once per device-list change."""
    layout = Layout.of(pool)
    samples = []
    for req in reqs:
        must = [pool[i] for i in req["must"]]  # type: ignore[attr-defined]
        start = time.perf_counter()
        answer = policy.choose(pool, must, req["size"], layout)  # type: ignore[arg-type]
        samples.append((time.perf_counter() - start) * 1000)
        assert len(answer) == req["size"]
    return samples


def time_go(binary: Path, reqs: list[dict[str, object]]) -> list[float]:
    shape = ["-physical", str(PHYSICAL), "-replicas", str(REPLICAS), "-nodes", str(NODES)]
    out = subprocess.run([str(binary), *shape], input=json.dumps(reqs).encode(), check=True, capture_output=True)
    samples: list[float] = json.loads(out.stdout)
    return samples


def fake_fpga_node(root: Path) -> None:
    host = FakeHost(root)
    for p in range(PHYSICAL):
        host.pci_device(address(p), "10ee", "903f", "120000", numa_node=p % NODES)
    host.numa_distances([list(DISTANCES[n]) for n in range(NODES)])


async def time_rpc(work: Path, reqs: list[dict[str, object]]) -> list[float]:
    config = ResourceConfig.model_validate(
        {"name": "example.com/fpga", "pci": {"vendor": "10ee"}, "replicas": REPLICAS}
    )
    plugin = ConfiguredPlugin(config, work / "root")
    ids = [d.id for d in plugin.devices()]
    assert len(ids) == PHYSICAL * REPLICAS
    (work / "plugins").mkdir(exist_ok=True)  # the kubelet's directory: the runtime never creates it
    manager = Manager([plugin], work / "plugins")
    await manager.start()
    samples = []
    try:
        socket = work / "plugins" / endpoint_for(config.name)
        async with aio.insecure_channel(f"unix://{socket}") as channel:
            stub = pb_grpc.DevicePluginStub(channel)
            for req in reqs:
                must = [ids[i] for i in req["must"]]  # type: ignore[attr-defined]
                container = pb.ContainerPreferredAllocationRequest(
                    available_deviceIDs=ids, must_include_deviceIDs=must, allocation_size=req["size"]
                )
                message = pb.PreferredAllocationRequest(container_requests=[container])
                start = time.perf_counter()
                await stub.GetPreferredAllocation(message)
                samples.append((time.perf_counter() - start) * 1000)
    finally:
        await manager.stop()
    return samples


def line(name: str, samples: Sequence[float], target: bool = True) -> None:
    p99 = percentile(samples, 0.99)
    verdict = ("PASS" if p99 <= TARGET_MS else "MISS") if target else ""
    print(f"  {name:<44} median {statistics.median(samples):7.3f} ms  p99 {p99:7.3f} ms  {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 requests instead of 1,000")
    count = 50 if parser.parse_args().quick else 1000
    binary = gobuild.build(GO_MODULE, "./prefpeer", "prefpeer")
    if binary is None:
        print("needs Go for the peer", file=sys.stderr)
        return 1
    reqs = requests(count)
    pool = devices()
    go = time_go(binary, reqs)
    with tempfile.TemporaryDirectory(prefix="kubedevice-preferred-") as tmp:
        work = Path(tmp)
        spread = time_policy(SharingPolicy("spread", distances=DISTANCES), pool, reqs)
        pack = time_policy(SharingPolicy("pack", distances=DISTANCES), pool, reqs)
        fake_fpga_node(work / "root")
        rpc = asyncio.run(time_rpc(work, reqs[: max(20, count // 5)]))
    print(f"preferred allocation, {PHYSICAL * REPLICAS:,} devices, {count} requests (target p99 ≤ {TARGET_MS:g} ms)")
    line("kubedevice policy, spread (in-process)", spread)
    line("kubedevice policy, pack (in-process)", pack)
    line("Go port, spread (in-process, buckets per call)", go, target=False)
    line("kubedevice GetPreferredAllocation RPC, spread", rpc, target=False)
    print(
        f"  ratio kubedevice/Go (spread): median {statistics.median(spread) / statistics.median(go):.1f}×, "
        f"p99 {percentile(spread, 0.99) / percentile(go, 0.99):.1f}×"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
