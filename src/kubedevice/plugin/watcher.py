"""Kernel notifications for a directory, delivered on the asyncio loop.

Kubelet restarts are seen the moment they happen: the kubelet deletes every socket in
the plugin directory (ours included) and creates a new ``kubelet.sock``. inotify reports
both without polling, which is what lets kubedevice re-register in milliseconds where
plugins that poll take seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from inotify_simple import INotify, flags

log = logging.getLogger(__name__)

Handler = Callable[[str, bool], None]
"""Called with (file name, created) for each entry created/moved in (True) or deleted/moved out (False)."""

_CREATED = flags.CREATE | flags.MOVED_TO
_REMOVED = flags.DELETE | flags.MOVED_FROM
_GONE = flags.DELETE_SELF | flags.MOVE_SELF


class DirectoryWatcher:
    """Watch one directory's entries; call ``handler`` on the loop for each change."""

    def __init__(self, directory: Path, handler: Handler, writes: bool = False) -> None:
        self.directory = directory
        self._handler = handler
        # Files rewritten in place (an editor, `cp`) report CLOSE_WRITE; count them as created.
        self._created = _CREATED | flags.CLOSE_WRITE if writes else _CREATED
        self._inotify: INotify | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._inotify = INotify()
        self._wd: int | None = None
        self._parent_wd: int | None = None
        self._watch_directory()
        self._loop.add_reader(self._inotify.fileno(), self._read)

    def stop(self) -> None:
        if self._inotify is None or self._loop is None:
            return
        self._loop.remove_reader(self._inotify.fileno())
        self._inotify.close()
        self._inotify = None

    def _watch_directory(self) -> bool:
        """Watch the directory; while it is missing, watch its parent for it to come back."""
        assert self._inotify is not None
        while True:
            try:
                self._wd = self._inotify.add_watch(str(self.directory), self._created | _REMOVED)
            except FileNotFoundError:
                if self._parent_wd is None:
                    self._parent_wd = self._inotify.add_watch(str(self.directory.parent), _CREATED)
                if not self.directory.is_dir():  # not back between the two calls: wait for the event
                    return False
                continue
            if self._parent_wd is not None:
                self._inotify.rm_watch(self._parent_wd)
                self._parent_wd = None
            return True

    def _read(self) -> None:
        assert self._inotify is not None
        for event in self._inotify.read(timeout=0):
            if event.wd == self._parent_wd:
                if event.name == self.directory.name and self._wd is None and self._watch_directory():
                    self._replay()
            elif event.wd == self._wd and event.mask & flags.IGNORED:  # the directory itself is gone
                log.warning("%s was removed; waiting for it to come back", self.directory)
                self._wd = None
                if self._watch_directory():
                    self._replay()
            elif event.name and event.wd == self._wd:
                self._deliver(event.name, bool(event.mask & self._created))

    def _replay(self) -> None:
        """The directory is back: what it already holds counts as created."""
        log.info("%s is back", self.directory)
        with contextlib.suppress(OSError):
            for name in sorted(os.listdir(self.directory)):
                self._deliver(name, True)

    def _deliver(self, name: str, created: bool) -> None:
        try:
            self._handler(name, created)
        except Exception:  # a handler bug must not stop the watch
            log.exception("handling %s in %s failed", name, self.directory)


def nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


async def wait_for_directory(directory: Path) -> None:
    """Return once ``directory`` exists; raise ``NotADirectoryError`` if it never can.

    inotify on the nearest existing ancestor wakes us as each missing level is created (or
    when that ancestor itself goes): no polling, and nothing is created on our side.
    """
    loop = asyncio.get_running_loop()
    inotify = INotify()
    readable: asyncio.Future[None] | None = None

    def wake() -> None:
        if readable is not None and not readable.done():
            readable.set_result(None)

    loop.add_reader(inotify.fileno(), wake)
    try:
        while True:
            ancestor = nearest_existing(directory)
            if not ancestor.is_dir():
                raise NotADirectoryError(f"{ancestor} is not a directory, so {directory} can never appear")
            if ancestor == directory:
                return
            readable = loop.create_future()
            inotify.add_watch(str(ancestor), _CREATED | _GONE)
            if nearest_existing(directory) == ancestor:  # nothing happened between the check and the watch
                await readable
            inotify.read(timeout=0)
    finally:
        loop.remove_reader(inotify.fileno())
        inotify.close()
