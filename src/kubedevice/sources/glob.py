"""``glob``: host paths by glob; each match is a device, or matches are grouped into devices."""

from __future__ import annotations

import glob as globlib
import re
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from ..errors import FieldProblem
from .base import Found, log, stable_key, string_attr
from .fields import AbsPath, Model, regex
from .hostroot import HostRoot
from .source import Source


class GlobConfig(Model):
    """Host paths by glob: each match is a device, or matches form groups (``group``/``group_by``)."""

    paths: list[AbsPath] = Field(min_length=1)
    group: bool = False
    group_by: Annotated[str, AfterValidator(regex)] | None = None

    @model_validator(mode="after")
    def _one_grouping(self) -> GlobConfig:
        if self.group and self.group_by is not None:
            raise FieldProblem(("group_by",), "set either group or group_by, not both")
        return self


def discover(config: GlobConfig, host: HostRoot, stem: str) -> list[Found]:
    """One device per node (or group of nodes); each keeps the path it was matched by.

    Two matches of one node (``/dev/ttyUSB0`` and its by-id link) are one device: the first
    pattern that matched it, then the first match in sorted order, names it in the container.
    """
    seen: dict[str, str] = {}  # node -> the path it was matched by
    for pattern in config.paths:
        for matched, node in host.glob(pattern):
            seen.setdefault(node, matched)
    if not seen:
        log.warning("%s: no host path matches %s", stem, ", ".join(config.paths))
        return []
    nodes = sorted(seen)
    if config.group:
        return [_device(stable_key(stem), nodes, seen, "paths")]
    if config.group_by is not None:
        return _grouped(nodes, seen, re.compile(config.group_by))
    return [_device(_key_of(node), [node], seen, "path") for node in nodes]


def _device(key: str, nodes: list[str], seen: dict[str, str], attribute: str) -> Found:
    matched = tuple(seen[n] for n in nodes)
    return Found(key, tuple(nodes), attributes={attribute: string_attr(",".join(nodes))}, matched_paths=matched)


def _key_of(path: str) -> str:
    """``/dev/ttyUSB0`` → ``ttyUSB0``, ``/dev/serial/by-id/x`` → ``serial_by-id_x``."""
    trimmed = path.removeprefix("/dev/").lstrip("/")
    return stable_key(trimmed.replace("/", "_"))


def _grouped(nodes: list[str], seen: dict[str, str], pattern: re.Pattern[str]) -> list[Found]:
    """Nodes whose ``group_by`` match (first capture group, else whole match) agree form one device."""
    groups: dict[str, list[str]] = {}
    for node in nodes:
        match = pattern.search(node)
        if match is None:
            log.warning("glob match %s does not match group_by %r; skipped", node, pattern.pattern)
            continue
        key = match.group(1) if match.re.groups else match.group(0)
        groups.setdefault(key, []).append(node)
    return [_device(stable_key(key), members, seen, "paths") for key, members in sorted(groups.items())]


def watched(config: GlobConfig) -> list[str]:
    return list(config.paths)


def _several(config: GlobConfig) -> str | None:
    if len(config.paths) != 1 or globlib.has_magic(config.paths[0]):
        return "the glob can match several devices (only a glob of one literal path yields one)"
    return None


SOURCE = Source("glob", GlobConfig, discover, watched, several=_several)
