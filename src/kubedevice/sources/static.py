"""``static``: N interchangeable devices that each grant the same fixed paths."""

from __future__ import annotations

from pydantic import Field

from ..device import MAX_ID_LENGTH
from ..errors import FieldProblem
from .base import Found, int_attr, log
from .fields import MAX_DEVICES, AbsPath, Model
from .hostroot import HostRoot
from .source import Source


class StaticConfig(Model):
    """``count`` identical devices, each granting the same fixed paths (the null example)."""

    count: int = Field(ge=1, le=MAX_DEVICES)
    paths: list[AbsPath] = Field(default_factory=list)


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


def _not_one_node(config: StaticConfig) -> str | None:
    if len(config.paths) == 1:
        return None
    return f"container_path applies to devices of one node; this static device grants {len(config.paths)} paths"


def _several(config: StaticConfig) -> str | None:
    return f"static has count {config.count}" if config.count != 1 else None


def _ids_fit(config: StaticConfig, name: str, replicas: int) -> None:
    """A static device's ID is ``<name's last part>-<i>`` (``::<replica>`` after it): within the
    63 characters of the device-plugin API, known from the config alone."""
    if config.count * replicas > MAX_DEVICES:
        raise FieldProblem(
            ("replicas",),
            f"static.count {config.count:,} × replicas {replicas:,} is {config.count * replicas:,} "
            f"devices, over the {MAX_DEVICES:,} a resource may advertise",
        )
    stem = name.rsplit("/", 1)[-1]
    longest = f"{stem}-{config.count - 1}" + (f"::{replicas - 1}" if replicas > 1 else "")
    if len(longest) > MAX_ID_LENGTH:
        raise FieldProblem(
            ("name",),
            f"static devices of this resource get IDs up to {longest!r} ({len(longest)} characters), over the "
            f"{MAX_ID_LENGTH} the device plugin API allows: shorten the name after its '/', or lower "
            "static.count or replicas",
        )


SOURCE = Source("static", StaticConfig, discover, watched, _not_one_node, _several, _ids_fit)
