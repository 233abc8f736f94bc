"""``status.devices`` (KEP-4817) after prepare, in claims-dir mode: the apply patch the API server
would get, written as a file. In process over the real DRA socket, and as ``kubedevice serve
--claims-dir`` with ``dra.device_status: true`` (the configured daemon, opaque env included)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from kubedevice.dra.driver import DraDriver, DriverService
from kubedevice.dra.driver.claims import FileClaims
from kubedevice.dra.driver.devicestatus import FileStatus
from kubedevice.kubelet.dra.plugin import DraClient, register
from kubedevice.testing.dradriver import DRIVER, NODE, Node, claim_object, kubelet, null_plugin

ROOT = Path(__file__).resolve().parents[3]
KIND = f"k8s.{DRIVER}/device"
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@asynccontextmanager
async def with_status(node: Node, status_dir: Path) -> AsyncIterator[DriverService]:
    service = DriverService(
        DraDriver(DRIVER, [null_plugin()]), FileClaims(node.claims_dir), node.options(), None, FileStatus(status_dir)
    )
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


def stamps_checked(patch: dict[str, Any]) -> dict[str, Any]:
    """The patch with each condition's ``lastTransitionTime`` checked for RFC 3339 and removed."""
    for device in patch["status"]["devices"]:
        for condition in device["conditions"]:
            assert STAMP.match(condition.pop("lastTransitionTime"))
    return patch


def ready(requests: str) -> list[dict[str, str]]:
    message = f"prepared for the requests {requests}"
    return [{"type": "Ready", "status": "True", "reason": "Prepared", "message": message}]


async def test_each_prepared_device_gets_a_ready_entry_with_its_cdi_ids(node: Node) -> None:
    obj = claim_object("two", [("a", "null0"), ("b", "null1")])
    obj["status"]["allocation"]["devices"]["results"][1]["shareID"] = "7b4bb1fa-1b4f-4bd7-8c3b-8a4e2dd4f0e1"
    two = node.add_claim(obj)
    broken = node.add_claim(claim_object("broken", ["gone"]))
    elsewhere = node.add_claim(claim_object("elsewhere", ["gpu0"], driver="other.example.com"))
    status_dir = node.root / "status"
    async with with_status(node, status_dir) as service, kubelet(service) as client:
        response = await client.prepare([two, broken, elsewhere])
        assert response.claims[two[2]].error == "" and response.claims[broken[2]].error != ""
        written = (status_dir / "default-two.json").read_text()
        (status_dir / "default-two.json").unlink()
        assert (await client.prepare([two])).claims[two[2]] == response.claims[two[2]]
        assert not (status_dir / "default-two.json").exists()  # a repeated prepare writes nothing
        (status_dir / "default-two.json").write_text(written)
    assert sorted(p.name for p in status_dir.iterdir()) == ["default-two.json"]  # nothing for a failure or no devices
    patch = json.loads((status_dir / "default-two.json").read_text())
    assert stamps_checked(patch) == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": "default", "name": "two"},
        "status": {
            "devices": [
                {"driver": DRIVER, "pool": NODE, "device": "null0", "conditions": ready("a"),
                 "data": {"cdiDeviceIDs": [f"{KIND}={two[2]}-null0"]}},
                {"driver": DRIVER, "pool": NODE, "device": "null1", "conditions": ready("b"),
                 "shareID": "7b4bb1fa-1b4f-4bd7-8c3b-8a4e2dd4f0e1",
                 "data": {"cdiDeviceIDs": [f"{KIND}={two[2]}-null1"]}},
            ]
        },
    }  # fmt: skip


async def test_a_status_that_cannot_be_written_does_not_fail_the_prepare(node: Node) -> None:
    blocked = node.root / "status"
    blocked.write_text("a file where the status directory would go\n")
    ref = node.add_claim(claim_object("one", ["null2"]))
    async with with_status(node, blocked) as service, kubelet(service) as client:
        answer = (await client.prepare([ref])).claims[ref[2]]
        assert answer.error == "" and [d.device_name for d in answer.devices] == ["null2"]
        assert ref[2] in service.state.prepared()


async def _expect(proc: asyncio.subprocess.Process, text: str, seen: list[str]) -> None:
    assert proc.stdout is not None
    async with asyncio.timeout(30):
        while text not in (line := (await proc.stdout.readline()).decode()):
            if not line:
                raise AssertionError(f"exited before {text!r}: {seen}")
            seen.append(line)


async def test_serve_with_claims_dir_writes_status_and_opaque_env(node: Node) -> None:
    config = node.root / "config.yaml"
    example = (ROOT / "examples" / "dra-null.yaml").read_text()
    config.write_text(example.replace("driver: null.example.com", "driver: null.example.com\n  device_status: true"))
    obj = claim_object("web", ["null-1"])
    claim_env = {"driver": DRIVER, "parameters": {"env": {"MODE": "claim"}}}
    obj["status"]["allocation"]["devices"]["config"] = [
        {"source": "FromClass", "opaque": {"driver": DRIVER, "parameters": {"env": {"MODE": "class", "TIER": "a"}}}},
        {"source": "FromClaim", "requests": ["req"], "opaque": claim_env},
    ]
    ref = node.add_claim(obj)
    node.kubelet_started()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    serve = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubedevice", "serve", "--config", str(config), "--node", NODE,
        "--kubelet-dir", str(node.kubelet_dir), "--cdi-dir", str(node.cdi_dir), "--claims-dir", str(node.claims_dir),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env,
    )  # fmt: skip
    seen: list[str] = []
    try:
        await _expect(serve, "serving on", seen)
        registered = await register(node.kubelet_dir / "plugins_registry" / f"{DRIVER}-reg.sock")
        async with DraClient(registered) as client:
            assert (await client.prepare([ref])).claims[ref[2]].error == ""
        [spec] = node.cdi_specs().values()
        assert spec["devices"][0]["containerEdits"]["env"] == ["MODE=claim", "NULL_DEVICE=null-1", "TIER=a"]
        patch = stamps_checked(json.loads((node.claims_dir / "status" / "default-web.json").read_text()))
        assert patch["status"]["devices"] == [
            {"driver": DRIVER, "pool": NODE, "device": "null-1", "conditions": ready("req"),
             "data": {"cdiDeviceIDs": [f"{KIND}={ref[2]}-null-1"]}}
        ]  # fmt: skip
        serve.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(serve.wait(), 20) == 0
    finally:
        if serve.returncode is None:
            serve.kill()
            await serve.wait()
