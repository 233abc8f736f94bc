"""Run several plugins in one process and keep them registered with the kubelet.

Registration is driven by kernel events, never by a timer: a new ``kubelet.sock`` means
"register now", and our own socket disappearing means "the kubelet wiped the directory:
serve again, then register as soon as the new kubelet listens".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import eventloop
from ..api import DEFAULT_PLUGIN_DIR, KUBELET_SOCKET
from ..logs import fallback_logging
from ..names import endpoint_for, extended_resource_name_error
from ..plugin_dir import PLUGIN_DIR_ENV, plugin_dir_from_env
from ..unixsocket import SocketInUse, check_path, is_socket
from .base import Plugin
from .registration import KubeletUnavailable, RegistrationRejected, register
from .server import PluginServer, RpcObserver
from .watcher import DirectoryWatcher, wait_for_directory

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
    closed: bool = False

    @property
    def name(self) -> str:
        return self.server.plugin.resource_name


class Manager:
    """Serve ``plugins`` from ``plugin_dir`` and (re-)register each with the kubelet."""

    def __init__(
        self,
        plugins: Sequence[Plugin],
        plugin_dir: Path,
        hooks: ManagerHooks | None = None,
        *,
        plugin_dir_source: str = "--plugin-dir",
    ) -> None:
        check_plugins(plugins)  # fail before touching the directory
        self.plugin_dir = plugin_dir
        # Where plugin_dir came from, in the words its user would change it with: the missing-directory
        # warning names it (--plugin-dir for the daemon, plugin_dir= or the variable for the library).
        self.plugin_dir_source = plugin_dir_source
        self.kubelet_socket = plugin_dir / KUBELET_SOCKET
        self.hooks = hooks or ManagerHooks()
        self._plugins = list(plugins)
        self._resources: dict[str, _Resource] = {}
        self._watcher = DirectoryWatcher(plugin_dir, self._on_entry)
        self._done = asyncio.Event()
        self._exit_code = 0
        self._seen_kubelet = False
        self._removed_at: dict[str, float] = {}
        self.started = asyncio.Event()
        """Set once :meth:`start` has served the first plugins: :meth:`add` works as meant from then on."""

    # -- lifecycle ------------------------------------------------------------------
    async def start(self) -> None:
        """Wait for the directory, watch it, serve every plugin, register if the kubelet is there.

        The directory is the kubelet's: we never create it. A missing one means no kubelet here
        yet (or a mistyped directory, named by ``plugin_dir_source``), which the log says; a stop
        request ends the wait.
        """
        if not await self._directory_ready():
            return
        self._watcher.start()  # before serving, so no kubelet.sock creation can slip past
        self._seen_kubelet = self.kubelet_socket.exists()
        for plugin in self._plugins:
            await self.add(plugin)
        self.started.set()
        if not self._seen_kubelet:
            log.info("waiting for the kubelet to create %s", self.kubelet_socket)

    async def _directory_ready(self) -> bool:
        """Whether the plugin directory exists, waiting for it (until a stop) if it does not yet."""
        if self.plugin_dir.is_dir():
            return True
        if self.plugin_dir.exists():
            raise ValueError(f"plugin directory {self.plugin_dir} ({self.plugin_dir_source}) is not a directory")
        log.warning(
            "plugin directory %s does not exist: no kubelet on this node yet, or a wrong %s; "
            "waiting for it to appear (not creating it)",
            self.plugin_dir,
            self.plugin_dir_source,
        )
        appeared = asyncio.ensure_future(wait_for_directory(self.plugin_dir))
        stopped = asyncio.ensure_future(self._done.wait())
        done, pending = await asyncio.wait({appeared, stopped}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if appeared not in done:
            return False
        try:
            appeared.result()
        except NotADirectoryError as err:
            raise ValueError(f"{err} ({self.plugin_dir_source})") from None
        log.info("plugin directory %s appeared", self.plugin_dir)
        return True

    async def add(self, plugin: Plugin) -> None:
        """Serve one more plugin (at start, or on a config reload)."""
        check_plugins([*self.plugins, plugin])
        endpoint = endpoint_for(plugin.resource_name)
        check_path(self.plugin_dir / endpoint)
        server = PluginServer(
            plugin, self.plugin_dir / endpoint, self.hooks.on_rpc, on_client_gone=lambda: self._client_gone(endpoint)
        )
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
        """Stop one resource for good, also when a kubelet restart is re-serving it right now.

        Cancelling the registration leaves its shielded re-serve running; under the lock, and
        with ``closed`` set, that one either finishes before the stop or never starts a server
        (one started after the stop would outlive the event loop).
        """
        resource.closed = True
        tasks = [t for t in (resource.registration, resource.watch) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        async with resource.lock:
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
        elif name == KUBELET_SOCKET:
            self._lost_kubelet(list(self._resources.values()), f"{self.kubelet_socket} was removed")
        elif not created and name in self._resources:
            resource = self._resources[name]
            if not resource.server.owns_socket():
                log.info("socket of %s removed: serving again", resource.name, extra={"resource": resource.name})
                self._set_registered(resource, False)
                self._schedule(resource)

    def _client_gone(self, endpoint: str) -> None:
        """The kubelet closed its last ListAndWatch stream: it exited, or dropped us. Register again."""
        resource = self._resources.get(endpoint)
        if resource is not None and resource.registered:
            self._lost_kubelet([resource], "its ListAndWatch stream closed")
            self._schedule(resource)  # a live kubelet takes us back; a dead one is waited for

    def _lost_kubelet(self, resources: list[_Resource], why: str) -> None:
        """Log once and drop readiness for the resources that were registered."""
        lost = [r for r in resources if r.registered]
        for resource in lost:
            self._set_registered(resource, False)
        if lost:
            names = ", ".join(r.name for r in lost)
            log.warning("lost the kubelet (%s): %s no longer registered; waiting for it to return", why, names)

    def _schedule(self, resource: _Resource) -> None:
        """Start a fresh registration attempt, superseding any attempt still waiting."""
        if resource.rejected is not None:
            return
        if resource.registration is not None:
            resource.registration.cancel()
        resource.registration = asyncio.create_task(self._reconcile(resource), name=f"register {resource.name}")

    async def _reconcile(self, resource: _Resource) -> None:
        if not await asyncio.shield(self._ensure_serving(resource)):
            return
        if not is_socket(self.kubelet_socket):
            if self.kubelet_socket.exists():
                log.warning("%s is not a socket; waiting for the kubelet", self.kubelet_socket)
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
                log.info("kubelet not answering %s yet: %s", resource.name, err, extra={"resource": resource.name})
                self.hooks.on_registration(resource.name, "error")
                return
            except RegistrationRejected as err:
                if _CLIENT_CLOSING in str(err) and attempt < _CLOSING_RETRIES:
                    log.info(
                        "kubelet closed our new connection with the old one; registering again",
                        extra={"resource": resource.name},
                    )
                    await asyncio.sleep(_CLOSING_RETRY_DELAY)
                    continue
                await self._reject(resource, str(err))
                return
        self._set_registered(resource, True)
        self.hooks.on_registration(resource.name, "ok")
        log.info(
            "registered %s with the kubelet",
            resource.name,
            extra={"resource": resource.name, "endpoint": server.socket_path.name},
        )

    async def _ensure_serving(self, resource: _Resource) -> bool:
        """Serve again if our socket went; False while that fails (the directory is gone)."""
        async with resource.lock:
            if resource.closed:
                return False
            if not resource.server.owns_socket():
                await resource.server.stop(grace=0)
                try:
                    await resource.server.serve()
                except (OSError, RuntimeError, SocketInUse) as err:  # grpc's bind failure is a RuntimeError
                    log.warning("cannot serve yet: %s", err, extra={"resource": resource.name})
                    return False
            return True

    async def _reject(self, resource: _Resource, message: str) -> None:
        """The kubelet refused us: stop this resource; exit non-zero once nothing is served."""
        log.error("kubelet rejected %s: %s", resource.name, message, extra={"resource": resource.name})
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
            log.exception(
                "device watcher of %s failed; its devices no longer update",
                resource.name,
                extra={"resource": resource.name},
            )


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


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def run(manager: Manager, early_signal: Callable[[], int | None] = lambda: None) -> int:
    """Serve until SIGTERM/SIGINT (exit 0) or until every resource is rejected (exit 1).

    ``early_signal`` tells of a stop signal caught before this loop took the signals over
    (the command line catches them from its first line); the daemon then stops at once.
    """
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, _stop, manager, sig)
    try:
        early = early_signal()
        if early is not None:
            _stop(manager, signal.Signals(early))
        else:
            await manager.start()
        code = await manager.wait()
    finally:
        await manager.stop()
        for sig in STOP_SIGNALS:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
    log.info("stopped: final Unhealthy lists sent, our sockets removed")
    return code


def _stop(manager: Manager, sig: signal.Signals) -> None:
    log.info("received %s: stopping", sig.name)
    manager.request_stop()


def serve(*plugins: Plugin, plugin_dir: Path | str | None = None, hooks: ManagerHooks | None = None) -> int:
    """Serve ``plugins`` until SIGTERM/SIGINT and return the exit code: the library's main.

    The plugin directory comes from ``plugin_dir``, else ``$KUBEDEVICE_PLUGIN_DIR``, else the
    kubelet's default. A library plugin is a bare script, so unless the application has set up
    logging itself (any handler on the root or ``kubedevice`` logger, which is then left alone),
    kubedevice's INFO records go to stderr while it serves: without them registration, a kubelet
    restart and re-registration would pass in silence, since Python shows only warnings by default.
    """
    directory, source = library_plugin_dir(plugin_dir)

    async def main() -> int:
        return await run(Manager(plugins, directory, hooks, plugin_dir_source=source))

    with fallback_logging():
        return eventloop.run(main())


def library_plugin_dir(plugin_dir: Path | str | None) -> tuple[Path, str]:
    """The library's plugin directory and, for the missing-directory warning, how to change it.

    A library user has no ``--plugin-dir`` flag: the hint names the ``serve()`` argument or the
    environment variable actually in effect, or both when the kubelet's default was used.
    """
    if plugin_dir:
        return Path(plugin_dir), "plugin_dir= argument of serve()"
    from_env = plugin_dir_from_env()
    if from_env is not None:
        return from_env, f"${PLUGIN_DIR_ENV}"
    return Path(DEFAULT_PLUGIN_DIR), (
        f"default directory (pass plugin_dir= to serve() or set ${PLUGIN_DIR_ENV} if the kubelet uses another)"
    )
