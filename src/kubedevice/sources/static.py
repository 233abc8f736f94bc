"""``static``: N interchangeable devices that each grant the same fixed paths."""

from __future__ import annotations

from .base import Found, int_attr, log
from .hostroot import HostRoot
from .schema import StaticConfig


def discover(config: StaticConfig, host: HostRoot, stem: str) -> list[Found]:
    """``count`` devices named ``<stem>-<i>``; paths are resolved inside the host root, and a
    configured path that is a symlink keeps its name in the container, as a glob match does."""
    paths = tuple(host.resolve(p) for p in config.paths)
    missing = [p for p in paths if not host.local(p).exists()]
    if missing:
        log.warning("%s: static paths missing under host root: %s", stem, ", ".join(missing))
    configured = tuple(config.paths)
    return [
        Found(f"{stem}-{i}", paths, attributes={"index": int_attr(i)}, matched_paths=configured)
        for i in range(config.count)
    ]


def watched(config: StaticConfig) -> list[str]:
    return list(config.paths)
