"""``glob``: host paths by glob; each match is a device, or matches are grouped into devices."""

from __future__ import annotations

import re

from .base import Found, log, stable_key, string_attr
from .hostroot import HostRoot
from .schema import GlobConfig


def discover(config: GlobConfig, host: HostRoot, stem: str) -> list[Found]:
    matches = sorted({path for pattern in config.paths for path in host.glob(pattern)})
    if not matches:
        log.warning("%s: no host path matches %s", stem, ", ".join(config.paths))
        return []
    if config.group:
        return [Found(stable_key(stem), tuple(matches), attributes={"paths": string_attr(",".join(matches))})]
    if config.group_by is not None:
        return _grouped(matches, re.compile(config.group_by))
    return [Found(_key_of(path), (path,), attributes={"path": string_attr(path)}) for path in matches]


def _key_of(path: str) -> str:
    """``/dev/ttyUSB0`` → ``ttyUSB0``, ``/dev/serial/by-id/x`` → ``serial_by-id_x``."""
    trimmed = path.removeprefix("/dev/").lstrip("/")
    return stable_key(trimmed.replace("/", "_"))


def _grouped(paths: list[str], pattern: re.Pattern[str]) -> list[Found]:
    """Paths whose ``group_by`` match (first capture group, else whole match) agree form one device."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        match = pattern.search(path)
        if match is None:
            log.warning("glob match %s does not match group_by %r; skipped", path, pattern.pattern)
            continue
        key = match.group(1) if match.re.groups else match.group(0)
        groups.setdefault(key, []).append(path)
    return [
        Found(stable_key(key), tuple(members), attributes={"paths": string_attr(",".join(members))})
        for key, members in sorted(groups.items())
    ]


def watched(config: GlobConfig) -> list[str]:
    return list(config.paths)
