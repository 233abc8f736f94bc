"""Apply a changed config file to a running daemon without disturbing what did not change.

Triggered by SIGHUP or by the config file changing on disk (a ConfigMap update swaps a
``..data`` symlink in the file's directory; an edit rewrites the file). Resources whose
config is unchanged keep their socket, registration and streams; removed ones stop cleanly
(final all-Unhealthy list); an invalid new config is refused and the old one stays.

With ``node_selector`` the file's config and the served one differ: ``select`` narrows the
first to the resources this node's labels pick, and a label change (:meth:`Reloader.reselect`)
starts and stops resources exactly as an edit of the file would.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
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
        *,
        select: Callable[[Config], Config] = lambda config: config,
    ) -> None:
        self.path = path
        self.config = config
        """The file's config, as last loaded."""
        self._select = select
        self.served = select(config)
        """What this node serves of it (``select`` raises ValueError when it cannot tell)."""
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
        self._spawn(self.reload())

    def trigger_reselect(self, why: str) -> None:
        """Schedule :meth:`reselect` (from a callback of the event loop)."""
        self._spawn(self.reselect(why))

    def _spawn(self, work: Coroutine[None, None, None]) -> None:
        task = asyncio.create_task(work)
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

    async def reselect(self, why: str) -> None:
        """Serve what the config selects now (the node's labels changed, ``why`` says how): one line."""
        async with self._lock:
            switched = await self._switch(self._select(self.config), f"node labels changed ({why})")
            if switched is not None:
                started, stopped = switched
                log.info(
                    "node labels changed (%s): started %s; stopped %s",
                    why,
                    ", ".join(started) or "none",
                    ", ".join(stopped) or "none",
                )

    async def _apply(self, new: Config) -> None:
        if new.model_dump(exclude={"resources"}) != self.config.model_dump(exclude={"resources"}):
            log.warning("plugin_dir, host_root and cdi_dir changes take effect at the next restart")
            new = new.model_copy(update={k: getattr(self.config, k) for k in ("plugin_dir", "host_root", "cdi_dir")})
        try:
            served = self._select(new)
        except ValueError as err:
            log.error("config reload refused, keeping the running config: %s", err)
            return
        switched = await self._switch(served, "config reload")
        if switched is None:
            return
        started, stopped = switched
        for name in stopped:
            log.info("resource stopped by config reload", extra={"resource": name})
        for name in started:
            log.info("resource started by config reload", extra={"resource": name})
        self.config = new
        self.reloads += 1

    async def _switch(self, served: Config, cause: str) -> tuple[list[str], list[str]] | None:
        """Serve ``served`` instead of :attr:`served`, touching only resources that differ.

        The names started and stopped (a changed resource is both), or None when the new plugins
        cannot be built: then nothing changed.
        """
        old = {r.name: r for r in self.served.resources}
        wanted = {r.name: r for r in served.resources}
        fresh = [r for r in served.resources if old.get(r.name) != r]  # added or changed
        try:
            added = self._build(served.model_copy(update={"resources": fresh})) if fresh else []
        except ValueError as err:
            log.error("%s refused, keeping what is served: %s", cause, err)
            return None
        stopped = [n for n in old if wanted.get(n) != old[n]]  # removed or changed
        for name in stopped:
            await self._manager.remove(name)
        for plugin in added:
            await self._manager.add(plugin)
        self.served = served
        self._on_applied(served, added)
        return [p.resource_name for p in added], stopped
