"""The checkpoint's guarantee against a real process: ``kill -9`` right after each answer, then restart.

A real ``kubedevice serve`` (claims from files, no API server), the kubelet's side over its real
sockets. After each answered prepare the process is killed and started again with the claim files
gone, so only the checkpoint can answer: the claim must come back with the same devices and its
CDI spec kept. After each answered unprepare, the same: the claim must be forgotten and its spec
gone (a restarted driver that still believed in it would restore the spec).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from kubedevice.kubelet.dra.plugin import DraClient, register
from kubedevice.testing.dradriver import Node, claim_object
from kubedevice.testing.waiting import eventually

ROOT = Path(__file__).resolve().parents[3]
DRIVER = "null.example.com"
NODE = "crash-node"


@asynccontextmanager
async def serving(node: Node) -> AsyncIterator[tuple[subprocess.Popen[bytes], DraClient]]:
    """``kubedevice serve`` on ``node`` and a registered kubelet client; killed with SIGKILL on exit."""
    registration = node.kubelet_dir / "plugins_registry" / f"{DRIVER}-reg.sock"
    with (node.root / "serve.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "kubedevice", "serve", "--config", str(ROOT / "examples" / "dra-null.yaml"),
             "--node", NODE, "--kubelet-dir", str(node.kubelet_dir), "--cdi-dir", str(node.cdi_dir),
             "--claims-dir", str(node.claims_dir)],
            stdout=log, stderr=log, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )  # fmt: skip
    try:

        def serving() -> bool:  # the killed process's socket is still there until this one replaces it
            assert process.poll() is None, (node.root / "serve.log").read_text()[-2000:]
            return accepts(registration)

        await eventually("serve's registration socket", serving, 30)
        async with DraClient(await register(registration)) as client:
            yield process, client
    finally:
        process.kill()
        process.wait()


def accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def killed_now(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL at once: nothing after the answer may run (no stop, no flush)."""
    os.kill(process.pid, signal.SIGKILL)
    process.wait()


async def test_a_killed_driver_keeps_what_it_answered(node: Node) -> None:
    node.kubelet_started()
    node.claims_dir.mkdir()
    devices = [f"null-{i}" for i in range(4)]  # one resource: no prefix
    single = node.add_claim(claim_object("one", [devices[0]], driver=DRIVER, pool=NODE))
    batch = [node.add_claim(claim_object(f"b{i}", [devices[1 + i % 3]], driver=DRIVER, pool=NODE)) for i in range(32)]
    for refs in ([single], batch):
        async with serving(node) as (process, client):
            answered = await client.prepare(refs)
            killed_now(process)
        assert all(a.error == "" for a in answered.claims.values()), answered
        specs = node.cdi_specs()
        assert len(specs) == len(refs)
        for namespace, name, _ in refs:  # from now on only the checkpoint knows these claims
            (node.claims_dir / f"{namespace}-{name}.json").unlink()
        async with serving(node) as (process, client):
            assert node.cdi_specs() == specs  # recovery kept them: the claims are still prepared
            again = await client.prepare(refs)
            assert again.claims == answered.claims
            unanswered = await client.unprepare(refs)
            killed_now(process)
        assert all(c.error == "" for c in unanswered.claims.values()), unanswered
        async with serving(node) as (process, client):
            assert node.cdi_specs() == {}
            forgotten = await client.prepare(refs[:1])
            assert "not found" in forgotten.claims[refs[0][2]].error
