"""The driver's record of prepared claims: atomic, versioned, tied to one boot.

The kubelet does not prepare a running pod's claims again after the driver restarts, so the
driver must remember what it prepared (to unprepare it later and to keep its CDI specs) across
its own restarts. After a reboot nothing prepared survives (containers are gone, CDI
directories are often tmpfs), so entries written under another boot ID are dropped rather
than trusted. The file is replaced atomically (temp file, fsync, rename): a crash leaves
either the old or the new record, never half of one.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import files
from ...allocation.cdi import Spec
from .model import PreparedClaim, PreparedDevice

VERSION = 1
FILE_NAME = "checkpoint.json"
BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")
log = logging.getLogger("kubedevice.dra.checkpoint")


class CheckpointError(Exception):
    """A checkpoint that cannot be read or trusted; the driver must not overwrite it blindly."""


@dataclass(slots=True)
class Entry:
    """One prepared claim and the CDI spec written for it (to restore it if it goes missing)."""

    claim: PreparedClaim
    cdi_spec: Spec | None = None


@dataclass(slots=True)
class Checkpoint:
    boot_id: str
    claims: dict[str, Entry] = field(default_factory=dict)


def read_boot_id(path: Path = BOOT_ID_PATH) -> str:
    try:
        return path.read_text().strip()
    except OSError as err:
        raise CheckpointError(f"cannot read the boot ID from {path}: {err.strerror or err}") from None


def load(path: Path, boot_id: str) -> tuple[Checkpoint, dict[str, Entry]]:
    """The checkpoint for this boot, plus the entries dropped because they belong to another boot."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return Checkpoint(boot_id), {}
    except OSError as err:
        raise CheckpointError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        data = json.loads(text)
        version = data["version"]
        if version != VERSION:
            raise CheckpointError(f"{path}: version {version!r} is not {VERSION}; refusing to overwrite it")
        claims = {uid: _entry(raw) for uid, raw in data["claims"].items()}
        stored_boot = str(data["bootID"])
    except CheckpointError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise CheckpointError(f"{path}: corrupt checkpoint ({type(err).__name__}: {err}); move it away") from None
    if stored_boot != boot_id:
        if claims:
            log.warning("dropping %d prepared claims from before the reboot", len(claims))
        return Checkpoint(boot_id), claims
    return Checkpoint(boot_id, claims), {}


def save(path: Path, checkpoint: Checkpoint) -> None:
    path.parent.mkdir(exist_ok=True)  # our directory, inside the kubelet's plugins/: never create that
    # 0600: which claims hold which devices is the node's business only.
    files.write_atomically(path, (json.dumps(_document(checkpoint), indent=2, sort_keys=True) + "\n").encode(), 0o600)


def _document(checkpoint: Checkpoint) -> dict[str, Any]:
    return {
        "version": VERSION,
        "bootID": checkpoint.boot_id,
        "claims": {
            uid: {
                "namespace": e.claim.namespace,
                "name": e.claim.name,
                "devices": [
                    {
                        "requestNames": list(d.request_names),
                        "pool": d.pool,
                        "device": d.device,
                        "cdiDeviceIDs": list(d.cdi_device_ids),
                        **({"shareID": d.share_id} if d.share_id is not None else {}),
                    }
                    for d in e.claim.devices
                ],
                "cdiSpec": e.cdi_spec,
            }
            for uid, e in sorted(checkpoint.claims.items())
        },
    }


def _entry(raw: dict[str, Any]) -> Entry:
    devices = [
        PreparedDevice(tuple(d["requestNames"]), d["pool"], d["device"], tuple(d["cdiDeviceIDs"]), d.get("shareID"))
        for d in raw["devices"]
    ]
    return Entry(PreparedClaim(raw["namespace"], raw["name"], devices), raw.get("cdiSpec"))
