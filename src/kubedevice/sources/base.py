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
    """One physical device: ``key`` is its stable ID (also its CDI device name)."""

    key: str
    host_paths: tuple[str, ...]
    numa_nodes: tuple[int, ...] = ()
    sysfs: str | None = None
    attributes: Attributes = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", MappingProxyType(dict(self.attributes)))


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
