#!/usr/bin/env python3
"""``allocate`` on 1,000 devices × 100 claims, kubedevice next to the scheduler's own allocator.

    python benchmarks/allocate_vs_go.py                 # a few minutes
    python benchmarks/allocate_vs_go.py --runs 5 --go-runs 20
    python benchmarks/allocate_vs_go.py --instructions --only matchAttribute   # ours, under callgrind

The Go peer is tests/interop/allocator (``k8s.io/dynamic-resource-allocation/structured``
v0.37.2, the scheduler's ``NewAllocator``/``Allocate`` with the allocated state it gathers, one
CEL cache kept across runs as the scheduler keeps it), built with ``kubedevice.testing.gobuild``
and run with ``-repeat``, so it times itself. Both sides time the same span: from the decoded
objects to the results (the allocated state, pools, search); process start, JSON and model
decoding are left out of both. Each workload runs on both in the same run, in interleaved rounds
(Go's share of the runs, then ours; ``--rounds``), so both see the same load; the verdicts must
agree or the benchmark stops. ``--instructions`` counts instead the instructions one allocation
of ours executes (valgrind's callgrind, switched on only around the runs, after a first run), a
figure the machine's load does not move. 1,000 devices, eight to a pool and slice, on
pools of every node kind (``nodeName``, ``allNodes``, ``nodeSelector``), with attributes and
capacity; the partitionable workload puts each pool's eight devices on two GPUs' shared
counters (a whole GPU, two halves, one quarter each). Claims (100 per workload): one device each
by a CEL selector; eight devices each under ``matchAttribute`` (a whole pool); a
``firstAvailable`` list whose first choice is scarce.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from procstat import noise, percentile

from kubedevice.dra import models
from kubedevice.dra.structured import Node, Unallocatable, allocate, allocated_devices
from kubedevice.testing import gobuild

ROOT = Path(__file__).resolve().parents[1]
PEER = ROOT / "tests" / "interop" / "allocator"
DRIVER = "gpu.example.com"
NODE = {"name": "node-a", "labels": {"kubernetes.io/hostname": "node-a", "zone": "z1"}}
GATES = {  # 1.37's DRA defaults (kube_features.go of k8s.io/kubernetes v1.37.2)
    "DRAAdminAccess": True,
    "DRAPrioritizedList": True,
    "DRAPartitionableDevices": True,
    "DRADeviceTaints": True,
    "DRADeviceBindingConditions": True,
    "DRAResourceClaimDeviceStatus": True,
    "DRAConsumableCapacity": True,
    "DRAListTypeAttributes": False,
}
POOLS = 125
PER_POOL = 8
CLAIMS = 100


def _node_fields(pool: int) -> dict[str, Any]:
    """A fifth of the pools by name, two fifths on all nodes, two fifths by the node's labels."""
    if pool % 5 == 0:
        return {"nodeName": "node-a"}
    if pool % 5 in (1, 2):
        return {"allNodes": True}
    selector = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
    return {"nodeSelector": {"nodeSelectorTerms": [selector]}}


def _device(pool: int, index: int, memory: int, model: str) -> dict[str, Any]:
    return {
        "name": f"dev-{index}",
        "attributes": {
            "model": {"string": model},
            "group": {"int": pool},
            "numa": {"int": index % 2},
            "healthy": {"bool": True},
            "driverVersion": {"version": "1.2.3"},
            "index": {"int": index},
        },
        "capacity": {"memory": {"value": f"{memory}Gi"}},
    }


def _slice(name: str, pool: int, count: int, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": f"pool-{pool}", "generation": 1, "resourceSliceCount": count},
            **_node_fields(pool),
            **spec,
        },
    }


def plain_slices() -> list[dict[str, Any]]:
    """125 pools of one slice, eight devices each; one pool in ten has the scarce model."""
    return [
        _slice(
            f"pool-{p}",
            p,
            1,
            {"devices": [_device(p, i, 80, "h100" if p % 10 == 0 else "a100") for i in range(PER_POOL)]},
        )
        for p in range(POOLS)
    ]


def partitionable_slices() -> list[dict[str, Any]]:
    """125 pools of a counter slice (two GPUs of 40Gi) and a device slice: per GPU a whole, two halves, a quarter."""
    slices = []
    for p in range(POOLS):
        sets = [{"name": f"gpu-{g}", "counters": {"memory": {"value": "40Gi"}}} for g in range(2)]
        devices = []
        for g in range(2):
            for k, share in enumerate((40, 20, 20, 10)):
                device = _device(p, 4 * g + k, share, "h100" if p % 10 == 0 else "a100")
                counters = {"memory": {"value": f"{share}Gi"}}
                device["consumesCounters"] = [{"counterSet": f"gpu-{g}", "counters": counters}]
                devices.append(device)
        slices.append(_slice(f"pool-{p}-counters", p, 2, {"sharedCounters": sets}))
        slices.append(_slice(f"pool-{p}-devices", p, 2, {"devices": devices}))
    return slices


def _claim(n: int, requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"claim-{n}", "namespace": "default", "uid": f"uid-claim-{n}"},
        "spec": {"devices": devices},
    }


def _exact(count: int, expression: str | None = None) -> dict[str, Any]:
    exact: dict[str, Any] = {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count}
    if expression:
        exact["selectors"] = [{"cel": {"expression": expression}}]
    return exact


def single_claims() -> list[dict[str, Any]]:
    selector = (
        f"device.attributes['{DRIVER}'].model == 'a100' && device.capacity['{DRIVER}'].memory"
        ".compareTo(quantity('10Gi')) >= 0"
    )
    return [_claim(n, [{"name": "gpu", "exactly": _exact(1, selector)}]) for n in range(CLAIMS)]


def match_claims() -> list[dict[str, Any]]:
    """Eight devices that share ``group``: one whole pool each (100 of the 125)."""
    constraint = [{"matchAttribute": f"{DRIVER}/group"}]
    return [_claim(n, [{"name": "gpus", "exactly": _exact(PER_POOL)}], constraint) for n in range(CLAIMS)]


def first_available_claims() -> list[dict[str, Any]]:
    """Two h100s if there are any left, else one a100: the scarce pools run out after a few claims."""
    subrequests = [
        {"name": "big", **_exact(2, f"device.attributes['{DRIVER}'].model == 'h100'")},
        {"name": "small", **_exact(1, f"device.attributes['{DRIVER}'].model == 'a100'")},
    ]
    return [_claim(n, [{"name": "gpu", "firstAvailable": subrequests}]) for n in range(CLAIMS)]


def workload(slices: list[dict[str, Any]], claims: list[dict[str, Any]]) -> dict[str, Any]:
    gpu_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
    }
    return {
        "features": GATES,
        "node": NODE,
        "classes": [gpu_class],
        "slices": slices,
        "claims": claims,
        "allocated": [],
    }


WORKLOADS: dict[str, Callable[[], dict[str, Any]]] = {
    "1 device each": lambda: workload(plain_slices(), single_claims()),
    "8 devices, matchAttribute": lambda: workload(plain_slices(), match_claims()),
    "firstAvailable": lambda: workload(plain_slices(), first_available_claims()),
    "partitionable, 1 device each": lambda: workload(partitionable_slices(), single_claims()),
    "partitionable, firstAvailable": lambda: workload(partitionable_slices(), first_available_claims()),
}


def go_runs(binary: Path, case: dict[str, Any], runs: int) -> tuple[str, list[float]]:
    """Go's verdict and its own per-run seconds."""
    done = subprocess.run(
        [str(binary), f"-repeat={runs}"],
        input=json.dumps(case) + "\n",
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    )
    answer = json.loads(done.stdout)
    verdict = "allocated" if "results" in answer else "unschedulable" if "unschedulable" in answer else "error"
    return verdict, [n / 1e9 for n in answer["nanos"]]


def decoded(case: dict[str, Any]) -> tuple[Any, ...]:
    """The case's objects as the allocator takes them, decoded once, outside the clock."""
    classes = [models.from_document(d) for d in case["classes"]]
    slices = [models.from_document(d) for d in case["slices"]]
    claims = [models.from_document(d) for d in case["claims"]]
    held = [models.from_document(d) for d in case["allocated"]]
    return classes, slices, claims, held, Node(case["node"]["name"], case["node"]["labels"])


def our_runs(case: dict[str, Any], objects: tuple[Any, ...], runs: int) -> tuple[str, list[float]]:
    """Our verdict and per-run seconds."""
    classes, slices, claims, held, node = objects
    verdict, seconds = "", []
    for _ in range(runs):
        start = time.perf_counter()
        try:
            allocate(claims, classes, slices, node, allocated_devices(held), features=case["features"])
            verdict = "allocated"
        except Unallocatable:
            verdict = "unschedulable"
        seconds.append(time.perf_counter() - start)
    return verdict, seconds


def instructions(name: str, runs: int) -> float:
    """Instructions per allocation of ours on workload ``name``, by callgrind: a child process
    decodes the objects and allocates once, then counts ``runs`` allocations."""
    with tempfile.TemporaryDirectory() as tmp:
        valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={tmp}/callgrind.out"]
        done = subprocess.run(
            [*valgrind, sys.executable, __file__, "--count-child", name, "--runs", str(runs)],
            capture_output=True,
            text=True,
            check=True,
            timeout=3600,
        )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        sys.exit(f"{name}: callgrind counted nothing:\n{done.stderr[-2000:]}")
    return int(found.group(1)) / runs


def count_child(name: str, runs: int) -> None:
    """The child of :func:`instructions`: callgrind counts only between the two switches."""
    case = WORKLOADS[name]()
    objects = decoded(case)
    our_runs(case, objects, 1)  # imports done, selectors compiled
    switch = ["callgrind_control", "--instr"]
    subprocess.run([*switch, "on", str(os.getpid())], check=True, capture_output=True)
    our_runs(case, objects, runs)
    subprocess.run([*switch, "off", str(os.getpid())], check=True, capture_output=True)


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:9.2f} {percentile(values, 0.99) * 1e3:9.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="our runs per workload")
    parser.add_argument("--go-runs", type=int, default=50, help="Go's runs per workload")
    parser.add_argument("--only", help="run only the workloads whose name contains this")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per workload, each Go's share of runs then ours")
    parser.add_argument("--instructions", action="store_true", help="count ours' instructions per run instead")
    parser.add_argument("--count-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.count_child:
        count_child(args.count_child, args.runs)
        return
    if args.instructions:
        print(f"allocate, {POOLS * PER_POOL} devices × {CLAIMS} claims; instructions per allocation of all claims")
        for name in WORKLOADS:
            if not args.only or args.only in name:
                print(f"{name:32} {instructions(name, max(1, args.runs // 5)) / 1e6:8.1f} M", flush=True)
        return
    binary = gobuild.build(PEER, ".", "allocdiff-v0.37.2")
    if binary is None:
        sys.exit("Go toolchain not installed: cannot build the scheduler's allocator")
    print(
        f"allocate, {POOLS * PER_POOL} devices × {CLAIMS} claims; ms per allocation of all claims "
        f"(ours {args.runs} runs, Go {args.go_runs}, in {args.rounds} interleaved rounds); median, p99"
    )
    print(noise().replace("at the end", "at the start"))
    print(f"{'workload':32} {'verdict':13} {'ours':>19} {'Go v0.37.2':>19} {'ratio (median)':>15}")
    for name, make in WORKLOADS.items():
        if args.only and args.only not in name:
            continue
        case = make()
        objects = decoded(case)
        go: list[float] = []
        ours: list[float] = []
        for _ in range(args.rounds):
            theirs, seconds = go_runs(binary, case, max(1, args.go_runs // args.rounds))
            go += seconds
            mine, seconds = our_runs(case, objects, max(1, args.runs // args.rounds))
            ours += seconds
        if mine != theirs:
            sys.exit(f"{name}: the verdicts differ: ours {mine}, the scheduler's {theirs}")
        ratio = statistics.median(ours) / statistics.median(go)
        print(f"{name:32} {mine:13} {_ms(ours)} {_ms(go)} {ratio:14.1f}×", flush=True)
    print(noise())


if __name__ == "__main__":
    main()
