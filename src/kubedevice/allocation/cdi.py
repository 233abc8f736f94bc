"""CDI spec files: one per physical device, written atomically, removed when the device goes.

A container runtime reads ``<cdi_dir>/*.json`` whenever a container asks for a CDI name, so a
file must never be seen half-written (write a temp file in the same directory, fsync, chmod
0644, rename) and must disappear with its device. Only regular files carrying our prefix *and*
our kind are ever removed: the prefix of ``example.com/gpu`` also matches the files of
``example.com/gpu-x``, which another resource owns.

**Across versions.** A spec's format is the CDI one, named by its ``cdiVersion`` for the
runtime; we read back only its ``kind``. Which files are ours is the prefix and kind (and, for
the DRA driver's, the claim UID in the name), unchanged since the first release that wrote them
(``tests/dra/driver/test_checkpoint_upgrade.py`` reads files older code wrote), so an upgraded
daemon rewrites, keeps and removes the specs its predecessor wrote. A change to that rule would
leave an older version's files unrecognised: it must keep recognising the old names here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Container, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import files
from ..device import Mount
from ..errors import KubedeviceError

CDI_VERSION = "0.6.0"
FILE_PREFIX = "kubedevice"
_DEVICE_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?\Z")
_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_SPEC_BYTES = 1 << 20
log = logging.getLogger("kubedevice.cdi")

Spec = dict[str, Any]


class CdiError(KubedeviceError, ValueError):
    """The CDI directory cannot be written (one line, for a clear start-up error)."""


def device_name_error(name: str) -> str | None:
    """Why ``name`` is not a CDI device name (CDI ``ValidateDeviceName``), or ``None``."""
    if _DEVICE_NAME.match(name):
        return None
    return (
        f"CDI device name {name!r} must start and end with a letter or digit and use only "
        "letters, digits, '_', '-', '.' and ':'"
    )


def container_edits(
    host_paths: Sequence[str], permissions: str, mounts: Sequence[Mount], container_paths: Sequence[str] = ()
) -> dict[str, Any]:
    """The OCI edits that grant a device: its nodes and the configured mounts.

    Each node is created at its container path (the host path when none is given) from the node
    at ``hostPath``, as the device-plugin answer would place it.
    """
    inside = container_paths or host_paths
    edits: dict[str, Any] = {
        "deviceNodes": [
            {"path": c, "hostPath": h, "permissions": permissions} for h, c in zip(host_paths, inside, strict=True)
        ],
    }
    if mounts:
        edits["mounts"] = [
            {
                "hostPath": m.host_path,
                "containerPath": m.container_path,
                "options": ["ro", "bind"] if m.read_only else ["rw", "bind"],
            }
            for m in mounts
        ]
    return edits


def with_ownership(
    edits: Mapping[str, Any], uid: int | None = None, gid: int | None = None, file_mode: int | None = None
) -> dict[str, Any]:
    """``edits`` with each device node created with this owner and mode (``device_ownership``).

    The runtime otherwise copies the host node's owner and mode, which a pod running as a
    non-root user usually cannot open (kubernetes#92211). CDI's ``DeviceNode`` carries ``uid``,
    ``gid`` (uint32) and ``fileMode`` (Go's ``os.FileMode``: a number in JSON, 0o660 is 432).
    """
    fields = {key: value for key, value in (("uid", uid), ("gid", gid), ("fileMode", file_mode)) if value is not None}
    nodes = [{**node, **fields} for node in edits.get("deviceNodes", [])]
    return {**edits, "deviceNodes": nodes} if nodes else dict(edits)


def spec_document(kind: str, name: str, edits: Mapping[str, Any]) -> Spec:
    error = device_name_error(name)
    if error:
        raise ValueError(error)
    return {"cdiVersion": CDI_VERSION, "kind": kind, "devices": [{"name": name, "containerEdits": dict(edits)}]}


def spec_kind(path: Path) -> object:
    """The ``kind`` of a regular spec file (never read through a symlink); None if it is not one."""
    raw = files.read_regular(path, _MAX_SPEC_BYTES)
    try:
        document = json.loads(raw) if raw is not None else None
    except ValueError:  # not JSON
        return None
    return document.get("kind") if isinstance(document, dict) else None


class CdiSpecDir:
    """Keeps ``<dir>/kubedevice-<vendor>-<class>-<device>.json`` in step with one resource's devices."""

    def __init__(self, directory: Path, kind: str) -> None:
        self.directory = Path(directory)
        self.kind = kind
        self._prefix = f"{FILE_PREFIX}-{_UNSAFE_FILE_CHARS.sub('_', kind.replace('/', '-'))}-"

    def path_for(self, name: str) -> Path:
        return self.directory / f"{self._prefix}{_UNSAFE_FILE_CHARS.sub('_', name)}.json"

    def owned(self, keep: Container[Path] = ()) -> list[Path]:
        """Our spec files for this kind (from this run or an earlier one), except those in ``keep``
        (whose content is not read: a sync has just written them)."""
        if not self.directory.is_dir():
            return []
        found = self.directory.glob(f"{self._prefix}*.json")
        return sorted(p for p in found if p not in keep and spec_kind(p) == self.kind)

    def sync(self, devices: Mapping[str, Mapping[str, Any]]) -> None:
        """Write a spec per device name → edits (unchanged files untouched); remove the rest of ours."""
        wanted = {self.path_for(name): spec_document(self.kind, name, edits) for name, edits in devices.items()}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            for path, document in wanted.items():
                write_atomically(path, document)
            self._remove(self.owned(keep=wanted))
        except OSError as exc:
            raise CdiError(f"cannot write CDI spec files in {self.directory}: {exc.strerror or exc}") from exc

    def remove_owned(self) -> list[Path]:
        """Remove every spec file of ours for this kind (an uninstall); the paths removed."""
        return self._remove(self.owned())

    @staticmethod
    def _remove(paths: Iterable[Path]) -> list[Path]:
        removed = []
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                log.info("removed CDI spec %s", path)
                removed.append(path)
        return removed


def write_atomically(path: Path, document: Spec) -> bool:
    """Write the spec as JSON, mode 0644 (runtimes read it); False when it was already there."""
    return files.write_atomically(path, (json.dumps(document, indent=2, sort_keys=True) + "\n").encode(), 0o644)
