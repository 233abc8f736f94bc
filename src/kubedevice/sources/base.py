"""What every source finds: physical devices with their host paths, topology and attributes."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..device import MAX_ID_LENGTH

log = logging.getLogger("kubedevice.sources")

Attributes = Mapping[str, dict[str, Any]]  # DRA form: {"vendor": {"string": "10ee"}, "numaNode": {"int": 0}}
_NOT_NAME = re.compile(r"[^A-Za-z0-9_.:-]+")
REPLICA_SEPARATOR = "::"
_REPLICA_ROOM = len(REPLICA_SEPARATOR) + 4  # "::" + up to 1000 replicas


@dataclass(frozen=True, slots=True)
class Found:
    """One physical device: ``key`` is its stable ID (also its CDI device name).

    ``matched_paths`` are the paths its ``host_paths`` were found by, one each (a glob match or a
    configured path that is a symlink, such as ``/dev/serial/by-id/…``): the names a container
    sees by default, while the host side is the resolved node. Empty means the host paths.

    ``details`` is what ``kubedevice discover`` shows beyond the DRA attributes, which must stay
    few and typed: a USB device's nodes by kind, a udev device's symlinks and properties.
    """

    key: str
    host_paths: tuple[str, ...]
    numa_nodes: tuple[int, ...] = ()
    sysfs: str | None = None
    attributes: Attributes = field(default_factory=dict)
    matched_paths: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", MappingProxyType(dict(self.attributes)))

    @property
    def seen_paths(self) -> tuple[str, ...]:
        """Per node, the path it was found by (its host path when it was not a symlink)."""
        return self.matched_paths or self.host_paths


def stable_key(raw: str) -> str:
    """A device ID from a host name: CDI-name characters only, short enough to add a replica suffix.

    Deterministic, so IDs survive restarts; an over-long name keeps a readable head and a hash.
    """
    name = _NOT_NAME.sub("_", raw).strip("_.:-") or "device"
    limit = MAX_ID_LENGTH - _REPLICA_ROOM
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(raw.encode()).hexdigest()[:12]
    return f"{name[: limit - 13].rstrip('_.:-')}-{digest}"


def string_attr(value: str) -> dict[str, Any]:
    return {"string": value}


def int_attr(value: int) -> dict[str, Any]:
    return {"int": value}
