"""The claim's ``status.devices`` (KEP-4817, ``DRAResourceClaimDeviceStatus``), written after prepare.

Users and controllers read there what the driver did with each allocated device: a ``Ready``
condition and driver data (here the CDI device IDs the container gets). Entries are owned by
their driver (``status.devices`` is a map list keyed by driver, pool, device and shareID), so
each driver writes its own with a server-side apply on the ``status`` subresource under a field
manager of its own: two drivers of one claim, or two kubedevice drivers, never remove each
other's entries, and re-applying the same entries is a no-op. The API server drops the entries
of deallocated devices itself (``dropDeallocatedStatusDevices`` in
``pkg/registry/resource/resourceclaim/strategy.go``), so unprepare writes nothing.

A failed write is logged and never fails the prepare: the status informs, the container does
not need it, and the kubelet would only retry a prepare that is already done.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ... import files
from ..nodeclaims import ClaimRef, PreparedDevice, PrepareResult

if TYPE_CHECKING:
    from lightkube import AsyncClient

log = logging.getLogger("kubedevice.dra.devicestatus")
READY = "Ready"
REASON = "Prepared"
API_VERSION = "resource.k8s.io/v1"


class StatusSink(Protocol):
    """Where a claim's status patch goes: the API server, or a file in claims-dir mode."""

    async def apply(self, namespace: str, name: str, patch: dict[str, Any]) -> None: ...


def device_entries(driver: str, devices: Sequence[PreparedDevice], now: datetime.datetime) -> list[dict[str, Any]]:
    """``AllocatedDeviceStatus`` entries for the prepared devices (``networkData`` left out)."""
    stamp = now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    entries = []
    for device in devices:
        entry: dict[str, Any] = {
            "driver": driver,
            "pool": device.pool,
            "device": device.device,
            "conditions": [
                {
                    "type": READY,
                    "status": "True",
                    "reason": REASON,
                    "message": "prepared for the requests " + ", ".join(device.request_names),
                    "lastTransitionTime": stamp,
                }
            ],
            "data": {"cdiDeviceIDs": list(device.cdi_device_ids)},
        }
        if device.share_id is not None:
            entry["shareID"] = device.share_id
        entries.append(entry)
    return entries


def status_patch(namespace: str, name: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The apply configuration: only ``status.devices``, so nothing else of the claim is claimed."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {"namespace": namespace, "name": name},
        "status": {"devices": entries},
    }


class DeviceStatusReporter:
    """Writes ``status.devices`` for every claim a prepare answered with devices of ours."""

    def __init__(self, driver: str, sink: StatusSink) -> None:
        self.driver = driver
        self._sink = sink

    async def __call__(self, refs: Sequence[ClaimRef], results: dict[str, PrepareResult]) -> None:
        now = datetime.datetime.now(datetime.UTC)
        wanted = {(r.namespace, r.name, r.uid): results[r.uid] for r in refs if r.uid in results}
        await asyncio.gather(
            *(
                self._write(namespace, name, result.devices, now)
                for (namespace, name, _), result in wanted.items()
                if not result.error and result.devices
            )
        )

    async def _write(
        self, namespace: str, name: str, devices: Sequence[PreparedDevice], now: datetime.datetime
    ) -> None:
        patch = status_patch(namespace, name, device_entries(self.driver, devices, now))
        try:
            await self._sink.apply(namespace, name, patch)
        except Exception as err:  # an API or file error must never fail the prepare
            log.warning("cannot write status.devices of claim %s/%s: %s", namespace, name, err)


class ApiStatus:
    """Server-side apply on ``resourceclaims/status`` (RBAC: ``patch`` on that subresource)."""

    def __init__(self, client: AsyncClient, driver: str) -> None:
        self._client = client
        self.field_manager = f"kubedevice/{driver}"

    async def apply(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        from lightkube.resources.resource_v1 import ResourceClaimStatus  # noqa: PLC0415 - API client only when used
        from lightkube.types import PatchType  # noqa: PLC0415

        await self._client.patch(
            ResourceClaimStatus,
            name,
            patch,
            namespace=namespace,
            patch_type=PatchType.APPLY,
            field_manager=self.field_manager,
            force=True,
        )


class FileStatus:
    """Claims-dir mode (testing without a cluster): each patch as ``<dir>/<namespace>-<name>.json``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    async def apply(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self.directory.mkdir(exist_ok=True)
        body = (json.dumps(patch, indent=2, sort_keys=True) + "\n").encode()
        files.write_atomically(self.directory / f"{namespace}-{name}.json", body, 0o644)
