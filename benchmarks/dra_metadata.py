"""Device metadata's cost: ``python benchmarks/dra_metadata.py [--rounds N]``.

NodePrepareResources and NodeUnprepareResources of 1 and 32 claims (one device each), against
four processes serving at once in one kubelet directory on disk (as ``/var/lib/kubelet`` is)
with the CDI directory on tmpfs (as ``/var/run/cdi`` often is): ``kubedevice serve
--claims-dir`` with ``dra.device_metadata`` on and off, and the Go ``kubeletplugin`` helper
(v0.37.2, ``tests/interop/drametadata``: a stub driver writing one small CDI spec per claim)
with ``EnableDeviceMetadata`` on and off. All get the same claims and attributes, so both write
the same metadata; the same client (kubedevice's ``DraClient``) calls all four in interleaved
rounds, each round's order alternating. What device metadata costs each is its median with the
option on less its median with it off: ours reads claims from files and the helper from a tiny
API server in its own process, so only these differences compare.

Not alike: the helper fsyncs every metadata file and spec and their directories, we fsync none
of them (``kubedevice.dra.driver.metadata``, ``MetadataFiles.write``, says why); we also record
the metadata in the checkpoint.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from kubedevice.config import parse_config
from kubedevice.dra.driver.daemon import build_driver
from kubedevice.kubelet.dra.plugin import DraClient, Registered, register
from kubedevice.testing import gobuild
from kubedevice.testing.dradriver import claim_object

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procstat import noise, percentile

ROOT = Path(__file__).resolve().parents[1]
NODE = "bench-node"
SIZES = (1, 32)
OURS = "ours.bench.example.com"
PLAIN = "plain.bench.example.com"
GO = "go.bench.example.com"
GO_PLAIN = "plain.go.bench.example.com"


def config(driver: str, metadata: bool) -> str:
    return (
        "resources: [{name: example.com/bench, static: {count: 32, paths: [/dev/null]}}]\n"
        f"dra: {{driver: {driver}, publish: false, device_metadata: {str(metadata).lower()}}}\n"
    )


def claims(driver: str, devices: Sequence[str]) -> list[dict[str, Any]]:
    return [
        claim_object(f"c{i}", [("req", device)], driver=driver, pool=NODE, uid=f"{driver}-uid-{i}")
        for i, device in enumerate(devices)
    ]


@asynccontextmanager
async def ours(work: Path, cdi: Path, driver: str, metadata: bool) -> AsyncIterator[DraClient]:
    claims_dir = work / f"claims-{driver}"
    claims_dir.mkdir()
    (work / f"{driver}.yaml").write_text(config(driver, metadata))
    devices = sorted(build_driver(parse_config(config(driver, metadata)), Path("/")).offered())
    for obj in claims(driver, devices):
        (claims_dir / f"{obj['metadata']['name']}.json").write_text(json.dumps(obj))
    argv = [sys.executable, "-m", "kubedevice", "serve", "--config", str(work / f"{driver}.yaml"), "--node", NODE]
    argv += ["--kubelet-dir", str(work / "kubelet"), "--cdi-dir", str(cdi), "--claims-dir", str(claims_dir)]
    log = (work / f"{driver}.log").open("wb")
    process = await asyncio.create_subprocess_exec(*argv, stdout=log, stderr=log)
    try:
        async with DraClient(await registered(work, driver, process)) as connection:
            yield connection
    finally:
        process.send_signal(signal.SIGTERM)
        await process.wait()
        log.close()


@asynccontextmanager
async def go_helper(work: Path, cdi: Path, program: Path, driver: str, metadata: bool) -> AsyncIterator[DraClient]:
    example = build_driver(parse_config(config(driver, True)), Path("/"))
    attributes = example.device_attributes(NODE)
    settings = {
        "driver": driver,
        "pluginDir": str(work / "kubelet" / "plugins" / driver),
        "registrarDir": str(work / "kubelet" / "plugins_registry"),
        "cdiDir": str(cdi),
        "versions": ["v1beta1", "v1alpha1"] if metadata else [],
        "claims": claims(driver, sorted(attributes)),
        "attributes": attributes,
    }
    (work / f"{driver}.json").write_text(json.dumps(settings))
    log = (work / f"{driver}.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        str(program), "serve", str(work / f"{driver}.json"), stdin=asyncio.subprocess.PIPE, stdout=log, stderr=log
    )
    try:
        async with DraClient(await registered(work, driver, process)) as connection:
            yield connection
    finally:
        assert process.stdin is not None
        process.stdin.close()
        await process.wait()
        log.close()


async def registered(work: Path, driver: str, process: asyncio.subprocess.Process) -> Registered:
    """The driver registered as the kubelet registers it, once its socket appears (60 s at most)."""
    registration = work / "kubelet" / "plugins_registry" / f"{driver}-reg.sock"
    deadline = time.monotonic() + 60
    while not registration.is_socket():
        if process.returncode is not None or time.monotonic() > deadline:
            raise SystemExit(f"dra_metadata: {registration} never appeared (see {work}/*.log)")
        await asyncio.sleep(0.05)
    return await register(registration)


async def measure(program: Path, rounds: int, work: Path, cdi: Path) -> None:
    for made_by_the_kubelet in ("plugins", "plugins_registry"):
        (work / "kubelet" / made_by_the_kubelet).mkdir(parents=True)
    async with (
        go_helper(work, cdi, program, GO, True) as go,
        go_helper(work, cdi, program, GO_PLAIN, False) as go_plain,
        ours(work, cdi, OURS, True) as mine,
        ours(work, cdi, PLAIN, False) as plain,
    ):
        drivers = {
            "kubedevice": (mine, OURS),
            "kubedevice, off": (plain, PLAIN),
            "Go helper": (go, GO),
            "Go helper, off": (go_plain, GO_PLAIN),
        }
        for size in SIZES:
            times: dict[tuple[str, str], list[float]] = {}
            for r in range(rounds):
                order = list(drivers) if r % 2 == 0 else list(reversed(drivers))
                for name in order:
                    connection, driver = drivers[name]
                    refs = [("default", f"c{i}", f"{driver}-uid-{i}") for i in range(size)]
                    start = time.perf_counter()
                    prepared = await connection.prepare(refs)
                    middle = time.perf_counter()
                    unprepared = await connection.unprepare(refs)
                    end = time.perf_counter()
                    errors = [a.error for a in (*prepared.claims.values(), *unprepared.claims.values()) if a.error]
                    if errors:
                        raise SystemExit(f"dra_metadata: {name}: {errors[0]}")
                    times.setdefault((name, "prepare"), []).append((middle - start) * 1000)
                    times.setdefault((name, "unprepare"), []).append((end - middle) * 1000)
            for call in ("prepare", "unprepare"):
                for name in drivers:
                    values = times[name, call]
                    print(
                        f"  Node{call.capitalize()}Resources {size:2d} claims, {name:16s}: median "
                        f"{statistics.median(values):7.2f} ms, p99 {percentile(values, 0.99):7.2f} ms ({rounds} rounds)"
                    )
                cost = {
                    who: statistics.median(times[who, call]) - statistics.median(times[f"{who}, off", call])
                    for who in ("kubedevice", "Go helper")
                }
                print(
                    f"    device metadata costs kubedevice {cost['kubedevice']:.2f} ms, "
                    f"the Go helper {cost['Go helper']:.2f} ms (medians, on less off)"
                )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50, help="rounds per size (default 50)")
    args = parser.parse_args()
    program = gobuild.build(ROOT / "tests" / "interop" / "drametadata", ".", "drametadata")
    if program is None:
        print("dra_metadata: needs Go to build tests/interop/drametadata", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="kdm-", dir="/tmp"))  # on disk, as /var/lib/kubelet
    cdi = Path(tempfile.mkdtemp(prefix="kdm-cdi-", dir="/dev/shm" if Path("/dev/shm").is_dir() else "/tmp"))
    try:
        print("device metadata on, one device per claim, the kubelet directory on disk:")
        asyncio.run(measure(program, args.rounds, work, cdi))
    finally:
        shutil.rmtree(work)
        shutil.rmtree(cdi)
    print(f"\n{noise()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
