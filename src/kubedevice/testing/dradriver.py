"""Shared set-up for the DRA driver tests (unit and e2e): a driver on real sockets in a temp dir, claims as files."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator, Coroutine, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubedevice.device import ContainerAllocation, Device, DeviceSpec
from kubedevice.dra.driver import DraDriver, DriverService, ServiceOptions
from kubedevice.dra.driver.claims import FileClaims
from kubedevice.kubelet.dra.plugin import DraClient, register
from kubedevice.plugin.base import Plugin

DRIVER = "null.example.com"
NODE = "node-a"


def null_plugin(count: int = 4) -> Plugin:
    return Plugin(
        "example.com/null",
        [
            Device(
                f"null{i}",
                grant=ContainerAllocation(envs={"NULL_DEVICE": f"null{i}"}, devices=[DeviceSpec("/dev/null")]),
            )
            for i in range(count)
        ],
    )


def claim_object(
    name: str,
    devices: Sequence[str | tuple[str, str]],
    *,
    namespace: str = "default",
    uid: str | None = None,
    driver: str = DRIVER,
    pool: str = NODE,
    allocated: bool = True,
) -> dict[str, Any]:
    """A ResourceClaim as the API server returns it; a device is ``name`` or ``(request, name)``."""
    results = []
    for entry in devices:
        request, device = entry if isinstance(entry, tuple) else ("req", entry)
        results.append({"request": request, "driver": driver, "pool": pool, "device": device})
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": namespace, "name": name, "uid": uid or str(uuid.uuid4())},
        "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "null"}}]}},
        "status": {},
    }
    if allocated:
        obj["status"]["allocation"] = {"devices": {"results": results}}
    return obj


@dataclass
class Node:
    """A temp node: kubelet dir, CDI dir, boot ID file and a claims directory."""

    root: Path

    @property
    def kubelet_dir(self) -> Path:
        return self.root / "kubelet"

    @property
    def cdi_dir(self) -> Path:
        return self.root / "cdi"

    @property
    def claims_dir(self) -> Path:
        return self.root / "claims"

    @property
    def boot_id(self) -> Path:
        return self.root / "boot_id"

    def add_claim(self, obj: dict[str, Any]) -> tuple[str, str, str]:
        self.claims_dir.mkdir(parents=True, exist_ok=True)
        meta = obj["metadata"]
        (self.claims_dir / f"{meta['namespace']}-{meta['name']}.json").write_text(json.dumps(obj))
        return meta["namespace"], meta["name"], meta["uid"]

    def kubelet_started(self) -> None:
        """What a kubelet creates at start and the driver waits for: ``plugins/`` and ``plugins_registry/``."""
        for name in ("plugins", "plugins_registry"):
            (self.kubelet_dir / name).mkdir(parents=True, exist_ok=True)

    def options(self, kubelet: bool = True) -> ServiceOptions:
        """The driver's options on this node; ``kubelet=False`` leaves the kubelet's directories out."""
        if kubelet:
            self.kubelet_started()
        if not self.boot_id.exists():
            self.boot_id.write_text("boot-1\n")
        return ServiceOptions(NODE, self.kubelet_dir, self.cdi_dir, self.boot_id)

    def cdi_specs(self) -> dict[str, dict[str, Any]]:
        if not self.cdi_dir.is_dir():
            return {}
        return {p.name: json.loads(p.read_text()) for p in sorted(self.cdi_dir.glob("*.json"))}


def file_service(node: Node, driver: DraDriver) -> DriverService:
    """``driver`` on ``node``, its claims read from the node's claim files, no slices published."""
    return DriverService(driver, FileClaims(node.claims_dir), node.options(), None)


@asynccontextmanager
async def running(node: Node, driver: DraDriver) -> AsyncIterator[DriverService]:
    service = file_service(node, driver)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


@asynccontextmanager
async def kubelet(service: DriverService) -> AsyncIterator[DraClient]:
    registered = await register(service.sockets.registration)
    async with DraClient(registered) as client:
        yield client


class DriverThread:
    """A driver serving on its own event loop thread, for tests that call it with blocking stubs
    as an outside kubelet would."""

    def __init__(self, node: Node, plugin: Plugin) -> None:
        self.node = node
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.service: DriverService = self.run(self._start(plugin))

    async def _start(self, plugin: Plugin) -> DriverService:
        service = file_service(self.node, DraDriver(DRIVER, [plugin]))
        await service.start()
        return service

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` on the driver's loop and wait for it (30 s at most)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def close(self) -> None:
        self.run(self.service.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
