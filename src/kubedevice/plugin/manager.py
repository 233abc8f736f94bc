"""Run several plugins in one process and keep them registered with the kubelet.

Registration is driven by kernel events, never by a timer: a new ``kubelet.sock`` means
"register now", and our own socket disappearing means "the kubelet wiped the directory:
serve again, then register as soon as the new kubelet listens".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..api import DEFAULT_PLUGIN_DIR, KUBELET_SOCKET
from ..names import endpoint_for, extended_resource_name_error
from .base import Plugin
from .registration import KubeletUnavailable, RegistrationRejected, register
from .server import PluginServer, RpcObserver
from .watcher import DirectoryWatcher

_CLIENT_CLOSING = "the client connection is closing"
"""A refusal that is no verdict on us: when a resource's old stream ends, the kubelet disconnects
whichever client is registered under its name by then (handler.go runClient), which can be our new
one, so Register fails with "failed to get device plugin options: … Canceled … the client
connection is closing". Seen on kubelet v1.36.3 after a config reload re-served a resource."""
_CLOSING_RETRIES = 5
_CLOSING_RETRY_DELAY = 0.2
_READD_SETTLE = 0.5
"""Seconds between re-serving a resource (config reload) and registering it again: the kubelet
handles the end of the old stream by disconnecting the client registered under the resource's
name, and if that is already the new one, the resource stays disconnected (seen on v1.36.3)."""

log = logging.getLogger(__name__)


@dataclass
class ManagerHooks:
    """Optional observers (metrics, readiness); all default to doing nothing."""

    on_rpc: RpcObserver | None = None
    on_registration: Callable[[str, str], None] = lambda resource, result: None
    on_ready: Callable[[str, bool], None] = lambda resource, ready: None
    on_kubelet_restart: Callable[[], None] = lambda: None


@dataclass(eq=False)
class _Resource:
    server: PluginServer
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    registration: asyncio.Task[None] | None = None
    watch: asyncio.Task[None] | None = None
    registered: bool = False
    rejected: str | None = None

    @property
    def name(self) -> str:
        return self.server.plugin.resource_name


class Manager:
    """Serve ``plugins`` from ``plugin_dir`` and (re-)register each with the kubelet."""

    def __init__(self, plugins: Sequence[Plugin], plugin_dir: Path, hooks: ManagerHooks | None = None) -> None:
        check_plugins(plugins)  # fail before touching the directory
        self.plugin_dir = plugin_dir
        self.kubelet_socket = plugin_dir / KUBELET_SOCKET
        self.hooks = hooks or ManagerHooks()
        self._plugins = list(plugins)
        self._resources: dict[str, _Resource] = {}
        self._watcher = DirectoryWatcher(plugin_dir, self._on_entry)
        self._done = asyncio.Event()
        self._exit_code = 0
        self._seen_kubelet = False
        self._removed_at: dict[str, float] = {}

    # -- lifecycle ------------------------------------------------------------------
    async def start(self) -> None:
        """Watch the directory, serve every plugin, register if the kubelet is there."""
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        self._watcher.start()  # before serving, so no kubelet.sock creation can slip past
        self._seen_kubelet = self.kubelet_socket.exists()
        if not self._seen_kubelet:
            log.info("waiting for the kubelet", extra={"socket": str(self.kubelet_socket)})
        for plugin in self._plugins:
            await self.add(plugin)

    async def add(self, plugin: Plugin) -> None:
        """Serve one more plugin (at start, or on a config reload)."""
        check_plugins([*self.plugins, plugin])
        endpoint = endpoint_for(plugin.resource_name)
        server = PluginServer(plugin, self.plugin_dir / endpoint, self.hooks.on_rpc)
        await server.serve()
        resource = _Resource(server)
        resource.watch = asyncio.create_task(self._watch(resource), name=f"run {resource.name}")
        self._resources[endpoint] = resource
        if self._seen_kubelet:
            self._schedule(resource)

    async def remove(self, resource_name: str) -> None:
        """Stop serving one resource: final Unhealthy list, stream closed, socket removed."""
        resource = self._resources.pop(endpoint_for(resource_name))
        await self._shutdown(resource)
        self._removed_at[resource_name] = time.monotonic()

    @property
    def plugins(self) -> list[Plugin]:
        return [r.server.plugin for r in self._resources.values()]

    async def stop(self) -> None:
        """Final all-Unhealthy lists, stop serving, remove only our own sockets."""
        self._watcher.stop()
        resources, self._resources = list(self._resources.values()), {}
        await asyncio.gather(*(self._shutdown(r) for r in resources))
        self._done.set()

    async def _shutdown(self, resource: _Resource) -> None:
        tasks = [t for t in (resource.registration, resource.watch) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await resource.server.stop()
        resource.server.close()
        self.hooks.on_ready(resource.name, False)

    def request_stop(self) -> None:
        self._done.set()

    async def wait(self) -> int:
        """Until a stop is requested or every resource was rejected; the process exit code."""
        await self._done.wait()
        return self._exit_code

    def registered(self, resource_name: str) -> bool:
        return any(r.registered for r in self._resources.values() if r.name == resource_name)

    @property
    def servers(self) -> list[PluginServer]:
        return [r.server for r in self._resources.values()]

    # -- events ---------------------------------------------------------------------
    def _on_entry(self, name: str, created: bool) -> None:
        if name == KUBELET_SOCKET and created:
            if self._seen_kubelet:
                log.info("kubelet restarted: re-registering")
                self.hooks.on_kubelet_restart()
            self._seen_kubelet = True
            for resource in self._resources.values():
                self._schedule(resource)
        elif not created and name in self._resources:
            resource = self._resources[name]
            if not resource.server.owns_socket():
                log.info("socket removed, serving again", extra={"resource": resource.name})
                self._set_registered(resource, False)
                self._schedule(resource)

    def _schedule(self, resource: _Resource) -> None:
        """Start a fresh registration attempt, superseding any attempt still waiting."""
        if resource.rejected is not None:
            return
        if resource.registration is not None:
            resource.registration.cancel()
        resource.registration = asyncio.create_task(self._reconcile(resource), name=f"register {resource.name}")

    async def _reconcile(self, resource: _Resource) -> None:
        await asyncio.shield(self._ensure_serving(resource))
        if not self.kubelet_socket.exists():
            return
        server = resource.server
        settle = self._removed_at.pop(resource.name, -_READD_SETTLE) + _READD_SETTLE - time.monotonic()
        if settle > 0:
            await asyncio.sleep(settle)
        for attempt in range(1 + _CLOSING_RETRIES):
            try:
                await register(str(self.kubelet_socket), server.socket_path.name, resource.name, server.options)
                break
            except KubeletUnavailable as err:
                log.info("kubelet not answering yet: %s", err, extra={"resource": resource.name})
                self.hooks.on_registration(resource.name, "error")
                return
            except RegistrationRejected as err:
                if _CLIENT_CLOSING in str(err) and attempt < _CLOSING_RETRIES:
                    log.info("kubelet closed our new connection with the old one; registering again",
                             extra={"resource": resource.name})
                    await asyncio.sleep(_CLOSING_RETRY_DELAY)
                    continue
                await self._reject(resource, str(err))
                return
        self._set_registered(resource, True)
        self.hooks.on_registration(resource.name, "ok")
        log.info("registered with the kubelet", extra={"resource": resource.name, "endpoint": server.socket_path.name})

    async def _ensure_serving(self, resource: _Resource) -> None:
        async with resource.lock:
            if not resource.server.owns_socket():
                await resource.server.stop(grace=0)
                await resource.server.serve()

    async def _reject(self, resource: _Resource, message: str) -> None:
        """The kubelet refused us: stop this resource; exit non-zero once nothing is served."""
        log.error("kubelet rejected registration: %s", message, extra={"resource": resource.name})
        self.hooks.on_registration(resource.name, "rejected")
        resource.rejected = message
        if resource.watch is not None:
            resource.watch.cancel()
        await resource.server.stop()
        if all(r.rejected is not None for r in self._resources.values()):
            self._exit_code = 1
            self._done.set()

    def _set_registered(self, resource: _Resource, registered: bool) -> None:
        resource.registered = registered
        self.hooks.on_ready(resource.name, registered)

    async def _watch(self, resource: _Resource) -> None:
        """Run the plugin's hardware watcher; a crash is logged, and serving goes on."""
        try:
            await resource.server.plugin.run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("device watcher failed; devices no longer update", extra={"resource": resource.name})


def check_plugins(plugins: Sequence[Plugin]) -> None:
    """Refuse resource names the kubelet would reject, and two plugins for one resource."""
    seen: set[str] = set()
    for plugin in plugins:
        error = extended_resource_name_error(plugin.resource_name)
        if error:
            raise ValueError(error)
        if plugin.resource_name in seen:
            raise ValueError(f"resource {plugin.resource_name!r} is served twice")
        seen.add(plugin.resource_name)


async def run(manager: Manager) -> int:
    """Serve until SIGTERM/SIGINT (exit 0) or until every resource is rejected (exit 1)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, manager.request_stop)
    try:
        await manager.start()
        code = await manager.wait()
    finally:
        await manager.stop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
    return code


def serve(*plugins: Plugin, plugin_dir: Path | str | None = None, hooks: ManagerHooks | None = None) -> int:
    """Serve ``plugins`` until SIGTERM/SIGINT and return the exit code: the library's main.

    The plugin directory comes from ``plugin_dir``, else ``$KUBEDEVICE_PLUGIN_DIR``, else the
    kubelet's default.
    """
    directory = Path(plugin_dir or os.environ.get("KUBEDEVICE_PLUGIN_DIR") or DEFAULT_PLUGIN_DIR)

    async def main() -> int:
        return await run(Manager(plugins, directory, hooks))

    return asyncio.run(main())
