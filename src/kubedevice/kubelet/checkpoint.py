"""The device manager checkpoint, ``kubelet_internal_checkpoint``, in the kubelet's JSON shape.

Layout as written by ``checkpoint.Data`` (pkg/kubelet/cm/devicemanager/checkpoint): ``Data``
holds ``PodDeviceEntries`` (device IDs per NUMA node, the marshalled
``ContainerAllocateResponse`` in base64) and ``RegisteredDevices`` (healthy IDs per resource),
next to a ``Checksum``. The real checksum hashes a Go ``spew`` dump of the data; ours is FNV-1a
over canonical JSON, so a checkpoint moves between the simulator runs, not to a real kubelet.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

NO_TOPOLOGY = -1  # the kubelet's nodeWithoutTopology


class CheckpointError(ValueError):
    """The file exists but cannot be trusted (bad JSON, shape or checksum)."""


@dataclass(frozen=True, slots=True)
class Entry:
    pod_uid: str
    container: str
    resource: str
    device_ids: dict[int, list[str]]
    alloc_resp: bytes

    def ids(self) -> set[str]:
        return {d for devs in self.device_ids.values() for d in devs}


@dataclass(slots=True)
class CheckpointData:
    entries: list[Entry] = field(default_factory=list)
    registered: dict[str, list[str]] = field(default_factory=dict)


def _data_json(data: CheckpointData) -> dict[str, object]:
    entries = [
        {
            "PodUID": e.pod_uid,
            "ContainerName": e.container,
            "ResourceName": e.resource,
            "DeviceIDs": {str(node): ids for node, ids in sorted(e.device_ids.items())},
            "AllocResp": base64.b64encode(e.alloc_resp).decode(),
        }
        for e in data.entries
    ]
    # Go marshals the kubelet's nil slice of entries as null.
    return {"PodDeviceEntries": entries or None, "RegisteredDevices": data.registered}


def _checksum(data_json: dict[str, object]) -> int:
    """FNV-1a (32 bit, like the kubelet's hasher) over canonical JSON."""
    value = 0x811C9DC5
    for byte in json.dumps(data_json, sort_keys=True, separators=(",", ":")).encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def write(path: Path, data: CheckpointData) -> None:
    """Write atomically (temp file, then rename) as the kubelet's file store does."""
    body = _data_json(data)
    blob = json.dumps({"Data": body, "Checksum": _checksum(body)})
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(blob)
    os.replace(tmp, path)


def _entry(raw: dict[str, object]) -> Entry:
    ids = raw["DeviceIDs"]
    resp = raw["AllocResp"]
    if not isinstance(ids, dict) or not isinstance(resp, str):
        raise CheckpointError("PodDeviceEntries: DeviceIDs must be an object and AllocResp a string")
    return Entry(
        pod_uid=str(raw["PodUID"]),
        container=str(raw["ContainerName"]),
        resource=str(raw["ResourceName"]),
        device_ids={int(node): [str(d) for d in devs] for node, devs in ids.items()},
        alloc_resp=base64.b64decode(resp),
    )


def read(path: Path) -> CheckpointData | None:
    """The checkpoint at ``path``, ``None`` when there is none."""
    try:
        blob = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise CheckpointError(f"cannot read {path}: {err}") from err
    try:
        body = blob["Data"]
        if blob["Checksum"] != _checksum(body):
            raise CheckpointError(f"checkpoint {path} is corrupted: checksum mismatch")
        entries = [_entry(raw) for raw in body["PodDeviceEntries"] or []]
        registered = {str(k): [str(d) for d in v or []] for k, v in (body["RegisteredDevices"] or {}).items()}
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        if isinstance(err, CheckpointError):
            raise
        raise CheckpointError(f"checkpoint {path} has an unexpected shape: {err!r}") from err
    return CheckpointData(entries, registered)
