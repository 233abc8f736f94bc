"""Apply a changed config file to a running daemon without disturbing what did not change.

Triggered by SIGHUP or by the config file changing on disk (a ConfigMap update swaps a
``..data`` symlink in the file's directory; an edit rewrites the file). Resources whose
config is unchanged keep their socket, registration and streams; removed ones stop cleanly
(final all-Unhealthy list); an invalid new config is refused and the old one stays.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from ..config import Config, ConfigError, load_config
from ..plugin.base import Plugin
from ..plugin.manager import Manager
from ..plugin.watcher import DirectoryWatcher

log = logging.getLogger(__name__)

PluginFactory = Callable[[Config], list[Plugin]]
"""Builds the plugins of a config (raises ValueError when it cannot)."""


class Reloader:
    """Watches the config file and reconciles the manager's plugins with it."""

    def __init__(
        self,
        path: Path,
        config: Config,
        manager: Manager,
        build: PluginFactory,
        on_applied: Callable[[Config, list[Plugin]], None] = lambda config, added: None,
    ) -> None:
        self.path = path
        self.config = config
        self._manager = manager
        self._build = build
        self._on_applied = on_applied
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        # The directory the file was named in, not the one its symlinks resolve to: a ConfigMap
        # update swaps ..data to a new directory there and abandons the old one.
        self._watcher = DirectoryWatcher(path.absolute().parent, self._on_entry, writes=True)
        self.reloads = 0

    def start(self) -> None:
        self._watcher.start()

    def stop(self) -> None:
        self._watcher.stop()

    def trigger(self) -> None:
        """Schedule a reload (safe from a signal handler)."""
        task = asyncio.create_task(self.reload())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_entry(self, name: str, created: bool) -> None:
        if created and name in (self.path.name, "..data"):
            self.trigger()

    async def reload(self) -> None:
        async with self._lock:
            try:
                new = load_config(self.path)
            except ConfigError as err:
                log.error("config reload refused, keeping the running config: %s", err)
                return
            if new == self.config:
                return
            await self._apply(new)

    async def _apply(self, new: Config) -> None:
        if new.model_dump(exclude={"resources"}) != self.config.model_dump(exclude={"resources"}):
            log.warning("plugin_dir, host_root and cdi_dir changes take effect at the next restart")
            new = new.model_copy(update={k: getattr(self.config, k) for k in ("plugin_dir", "host_root", "cdi_dir")})
        old = {r.name: r for r in self.config.resources}
        wanted = {r.name: r for r in new.resources}
        fresh = [r for r in new.resources if old.get(r.name) != r]  # added or changed
        try:
            added = self._build(new.model_copy(update={"resources": fresh})) if fresh else []
        except ValueError as err:
            log.error("config reload refused, keeping the running config: %s", err)
            return
        for name in [n for n in old if wanted.get(n) != old[n]]:  # removed or changed
            await self._manager.remove(name)
            log.info("resource stopped by config reload", extra={"resource": name})
        for plugin in added:
            await self._manager.add(plugin)
            log.info("resource started by config reload", extra={"resource": plugin.resource_name})
        self.config = new
        self.reloads += 1
        self._on_applied(new, added)
