"""Preferred allocation at 10,000 devices: ``python benchmarks/preferred_allocation.py`` (``--quick``).

10,000 advertised IDs = 2,500 physical devices × 4 replicas over 4 NUMA nodes with a SLIT
distance matrix; requests of 1–16 devices, half with a must-include. Measured: our policy
in-process (spread and pack), the same requests as GetPreferredAllocation RPCs to a
``ConfiguredPlugin`` over a unix socket (PCI source on a fake sysfs tree), and a Go port of the
same algorithm, in-process, on the same requests. Target: p99 ≤ 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
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
from kubedevice.testing import FakeHost

PHYSICAL, REPLICAS, NODES = 2_500, 4, 4
TARGET_MS = 5.0
DISTANCES = {0: (10, 21, 31, 31), 1: (21, 10, 31, 31), 2: (31, 31, 10, 21), 3: (31, 31, 21, 10)}
GO_PEER = r"""
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"
)

type Device struct {
	ID    string
	Node  int
	Group string
}

type node struct {
	groups map[string][]*Device
	count  int
}

type request struct {
	Size int   `json:"size"`
	Must []int `json:"must"`
}

var distances = map[int][]int{0: {10, 21, 31, 31}, 1: {21, 10, 31, 31}, 2: {31, 31, 10, 21}, 3: {31, 31, 21, 10}}

func distance(origin, n int) int {
	row, ok := distances[origin]
	if !ok || n < 0 || n >= len(row) {
		return 0
	}
	return row[n]
}

func choose(available, must []*Device, size int) []string {
	chosen := []string{}
	used := map[string]int{}
	exclude := map[string]bool{}
	for _, d := range must {
		chosen = append(chosen, d.ID)
		used[d.Group]++
		exclude[d.ID] = true
	}
	nodes := map[int]*node{}
	for _, d := range available {
		if exclude[d.ID] {
			continue
		}
		n := nodes[d.Node]
		if n == nil {
			n = &node{groups: map[string][]*Device{}}
			nodes[d.Node] = n
		}
		n.groups[d.Group] = append(n.groups[d.Group], d)
		n.count++
	}
	need := size - len(chosen)
	order := []int{}
	seen := map[int]bool{}
	for _, d := range must {
		if _, ok := nodes[d.Node]; ok && !seen[d.Node] {
			order = append(order, d.Node)
			seen[d.Node] = true
		}
	}
	rest := []int{}
	for n := range nodes {
		if !seen[n] {
			rest = append(rest, n)
		}
	}
	if len(order) == 0 && len(rest) > 0 {
		best := -1
		for _, n := range rest { // spread: fewest distinct devices that still fit
			if len(nodes[n].groups) >= need && (best < 0 || len(nodes[n].groups) < len(nodes[best].groups) ||
				len(nodes[n].groups) == len(nodes[best].groups) && n < best) {
				best = n
			}
		}
		if best < 0 {
			for _, n := range rest {
				if best < 0 || nodes[n].count > nodes[best].count {
					best = n
				}
			}
		}
		order = append(order, best)
		filtered := rest[:0]
		for _, n := range rest {
			if n != best {
				filtered = append(filtered, n)
			}
		}
		rest = filtered
	}
	origin := order[0]
	sort.Slice(rest, func(i, j int) bool {
		a, b := rest[i], rest[j]
		if distance(origin, a) != distance(origin, b) {
			return distance(origin, a) < distance(origin, b)
		}
		if nodes[a].count != nodes[b].count {
			return nodes[a].count > nodes[b].count
		}
		return a < b
	})
	for _, n := range append(order, rest...) {
		if len(chosen) >= size {
			break
		}
		chosen = append(chosen, spread(nodes[n], used, size-len(chosen))...)
	}
	return chosen
}

func spread(n *node, used map[string]int, need int) []string {
	names := make([]string, 0, len(n.groups))
	for g := range n.groups {
		names = append(names, g)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := names[i], names[j]
		if used[a] != used[b] {
			return used[a] < used[b]
		}
		if len(n.groups[a]) != len(n.groups[b]) {
			return len(n.groups[a]) > len(n.groups[b])
		}
		return a < b
	})
	taken := []string{}
	for depth := 0; len(taken) < need && len(names) > 0; depth++ {
		live := names[:0]
		for _, g := range names {
			if depth < len(n.groups[g]) {
				live = append(live, g)
			}
		}
		names = live
		for _, g := range names {
			taken = append(taken, n.groups[g][depth].ID)
			used[g]++
			if len(taken) >= need {
				break
			}
		}
	}
	return taken
}

func main() {
	var requests []request
	if err := json.NewDecoder(os.Stdin).Decode(&requests); err != nil {
		panic(err)
	}
	devices := []*Device{}
	for p := 0; p < PHYSICAL; p++ {
		group := fmt.Sprintf("0000:%02x:%02x.0", p/32, p%32)
		for r := 0; r < REPLICAS; r++ {
			devices = append(devices, &Device{ID: fmt.Sprintf("%s::%d", group, r), Node: p % NODES, Group: group})
		}
	}
	samples := make([]float64, 0, len(requests))
	for _, req := range requests {
		must := []*Device{}
		for _, i := range req.Must {
			must = append(must, devices[i])
		}
		start := time.Now()
		answer := choose(devices, must, req.Size)
		samples = append(samples, float64(time.Since(start).Nanoseconds())/1e6)
		if len(answer) != req.Size {
			panic("short answer")
		}
	}
	json.NewEncoder(os.Stdout).Encode(samples)
}
"""


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


def time_go(work: Path, reqs: list[dict[str, object]]) -> list[float]:
    src = work / "prefpeer"
    src.mkdir()
    source = GO_PEER.replace("PHYSICAL", str(PHYSICAL)).replace("REPLICAS", str(REPLICAS))
    (src / "main.go").write_text(source.replace("% NODES", f"% {NODES}"))
    (src / "go.mod").write_text("module kubedevice.bench/prefpeer\n\ngo 1.22\n")
    subprocess.run(["go", "build", "-o", "prefpeer", "."], cwd=src, check=True, capture_output=True)
    out = subprocess.run([str(src / "prefpeer")], input=json.dumps(reqs).encode(), check=True, capture_output=True)
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
    if shutil.which("go") is None:
        print("needs Go for the peer", file=sys.stderr)
        return 1
    reqs = requests(count)
    pool = devices()
    with tempfile.TemporaryDirectory(prefix="kubedevice-preferred-") as tmp:
        work = Path(tmp)
        go = time_go(work, reqs)
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
