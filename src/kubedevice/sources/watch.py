"""inotify on the directories where a resource's devices come and go (no polling loop).

A pattern such as ``/dev/bus/usb/*/*`` is watched at every directory level it can match, and
at the nearest existing ancestor of a level that does not exist yet, so a bus directory or
``/dev/serial/by-id`` created later is picked up: every event re-syncs the watch set.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob as globlib
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from types import TracebackType

from inotify_simple import INotify, flags

from .hostroot import HostRoot

MASK = (
    flags.CREATE
    | flags.DELETE
    | flags.MOVED_FROM
    | flags.MOVED_TO
    | flags.ATTRIB
    | flags.DELETE_SELF
    | flags.MOVE_SELF
    | flags.ONLYDIR
)


def watch_dirs(host: HostRoot, patterns: Iterable[str]) -> set[Path]:
    """Local directories to watch for ``patterns`` (host path globs) as the tree is now."""
    dirs: set[Path] = set()
    for pattern in patterns:
        parts = PurePosixPath(pattern).parent.parts[1:]
        levels = [host.root]
        for part in parts:
            dirs.update(levels)
            expanded = [Path(m) for level in levels for m in globlib.glob(str(level / part))]
            levels = [p for p in expanded if p.is_dir()]
            if not levels:
                break
        dirs.update(levels)
    return {d for d in dirs if d.is_dir()}


class HotplugWatcher:
    """Calls ``on_change`` from the event loop whenever a watched directory changes."""

    def __init__(self, host: HostRoot, patterns: Iterable[str], on_change: Callable[[], None]) -> None:
        self._host = host
        self._patterns = list(patterns)
        self._on_change = on_change
        self._inotify = INotify()
        self._watches: dict[Path, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def __enter__(self) -> HotplugWatcher:
        self._loop = asyncio.get_running_loop()
        self.resync()
        self._loop.add_reader(self._inotify.fileno(), self._readable)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self._inotify.fileno())
        self._inotify.close()

    @property
    def watched(self) -> set[Path]:
        return set(self._watches)

    def resync(self) -> None:
        """Watch what the patterns match now; drop watches on directories that are gone."""
        wanted = watch_dirs(self._host, self._patterns)
        for path in [p for p in self._watches if p not in wanted]:
            with contextlib.suppress(OSError):  # already gone: the kernel dropped the watch
                self._inotify.rm_watch(self._watches[path])
            del self._watches[path]
        for path in wanted - self._watches.keys():
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                self._watches[path] = self._inotify.add_watch(path, MASK)

    def _readable(self) -> None:
        if self._inotify.read(timeout=0):
            self.resync()
            self._on_change()
