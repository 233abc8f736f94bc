"""Running a DRA driver on a node: sockets, registration, claims state, health and slices.

Order matters and follows ``kubeletplugin.Start``: the DRA socket serves before the
registration socket appears (the kubelet calls us as soon as it sees the latter); slices are
published once the kubelet has accepted us (it deletes the node's slices when it starts).
Stale sockets of ours are removed, a live one is left alone and reported.

The kubelet's ``plugins/`` and ``plugins_registry/`` are the kubelet's to create (it does at
start): a driver that made them would sit registered with nobody on a machine without a
kubelet, or under a mistyped ``--kubelet-dir``. So, like the device-plugin side, we say what we
wait for and wait on inotify; only our own ``plugins/<driver>/`` is ours to make.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grpc import aio

from ...api import pluginregistration_v1_pb2_grpc as regpb_grpc
from ...api.malformed import add_refusing_malformed
from ...plugin.watcher import wait_for_directory
from ...unixsocket import check_path, clear_stale, listen
from .cdi import ClaimSpecs
from .checkpoint import BOOT_ID_PATH, FILE_NAME, read_boot_id
from .devicestatus import ApiStatus, DeviceStatusReporter, StatusSink
from .driver import DraDriver
from .health import HealthFeed
from .metadata import Attributes, MetadataFiles
from .publisher import SlicePublisher
from .registration import RegistrationServicer, Sockets
from .server import RpcObserver, add_services
from .state import ClaimSource, ClaimState, Offered

log = logging.getLogger("kubedevice.dra.service")
DEFAULT_KUBELET_DIR = Path("/var/lib/kubelet")
DEFAULT_CDI_DIR = Path("/var/run/cdi")


@dataclass
class ServiceOptions:
    node: str
    kubelet_dir: Path = DEFAULT_KUBELET_DIR
    cdi_dir: Path = DEFAULT_CDI_DIR
    boot_id_path: Path = BOOT_ID_PATH
    observe: RpcObserver | None = None
    on_publish: Callable[[float], None] | None = None
    rolling_update_uid: str = ""
    """A pod UID: socket names carry it and changes are serialized through a file lock, so an
    old and a new driver pod can serve side by side during a DaemonSet update."""
    on_ready: Callable[[bool], None] | None = None
    """Called when readiness changes: registered with the kubelet and (if publishing) slices published."""
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    device_status: bool = False
    """Write each prepared claim's ``status.devices`` (through the API server unless a sink is given)."""


class DriverService:
    """One driver served on one node until :meth:`stop`."""

    def __init__(
        self,
        driver: DraDriver,
        claims: ClaimSource,
        options: ServiceOptions,
        publisher: SlicePublisher | None,
        status: StatusSink | None = None,
    ) -> None:
        """``status``: where ``status.devices`` goes after each prepare (None: not written)."""
        self.driver = driver
        self._report = DeviceStatusReporter(driver.name, status) if status is not None else None
        self.options = options
        self.sockets = Sockets(options.kubelet_dir, driver.name, options.rolling_update_uid)
        self.registered = False
        self._claims = claims
        self._publisher = publisher
        self._offered = driver.offered()
        self._attributes: dict[str, Attributes] | None = None
        """Every device's attributes for device metadata, computed at the first prepare after a change."""
        self.metadata = MetadataFiles(driver.name, self.sockets.plugin_dir, options.cdi_dir)
        self.feed = HealthFeed(lambda: driver.health(options.node))
        self.state: ClaimState
        """Set by :meth:`start` once the kubelet's directories exist: loading it writes our checkpoint."""
        self._servers: list[aio.Server] = []
        self._accepted = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        driver.subscribe(self._on_change)

    def _lookup(self, name: str) -> Offered | None:
        return self._offered.get(name)

    def _on_change(self) -> None:
        """Plugins may publish from any thread; the loop's objects are touched from the loop only."""
        self._loop.call_soon_threadsafe(self._changed)

    def _device_attributes(self, name: str) -> Attributes:
        if self._attributes is None:
            self._attributes = self.driver.device_attributes(self.options.node)
        return self._attributes.get(name, {})

    def _changed(self) -> None:
        self._offered = self.driver.offered()
        self._attributes = None
        self.feed.changed()
        if self._publisher is not None:
            self._publisher.changed()

    async def start(self) -> None:
        """Serve the DRA socket, then the registration socket (nothing left running on failure)."""
        try:
            await self._start()
        except BaseException:
            await self.stop(0)
            raise

    async def _start(self) -> None:
        await self._kubelet_directories()
        self.sockets.plugin_dir.mkdir(exist_ok=True)  # ours; its parent is the kubelet's
        self.state = self._claim_state()
        dra = await self._serve(
            self.sockets.dra,
            lambda s: add_services(s, self.state, self._claims, self.feed, self.options.observe, report=self._report),
        )
        self._servers.append(dra)
        registrar = RegistrationServicer(self.driver.name, self.sockets.dra, self._status)
        reg = await self._serve(
            self.sockets.registration,
            lambda s: add_refusing_malformed(regpb_grpc.add_RegistrationServicer_to_server, registrar, s),
        )
        self._servers.append(reg)
        log.info("DRA driver %s serving on %s", self.driver.name, self.sockets.dra)

    async def _kubelet_directories(self) -> None:
        """Return once the kubelet's ``plugins/`` and ``plugins_registry/`` exist, never creating them.

        One line says what is missing and why we wait; a stop (cancellation) ends the wait.
        """
        missing = [d for d in self.sockets.kubelet_dirs if not d.is_dir()]
        if not missing:
            return
        log.warning(
            "DRA driver %s is waiting for the kubelet to create %s (a kubelet makes them when it starts; "
            "we never do): no kubelet on this node yet, or a wrong --kubelet-dir",
            self.driver.name,
            " and ".join(str(d) for d in missing),
        )
        for directory in missing:
            try:
                await wait_for_directory(directory)
            except NotADirectoryError as err:
                raise ValueError(f"--kubelet-dir: {err}") from None
        log.info("the kubelet's directories appeared in %s", self.options.kubelet_dir)

    def _claim_state(self) -> ClaimState:
        """The prepared claims, from our checkpoint (recovery writes it, so only once our directory exists)."""
        return ClaimState(
            self.driver.name,
            self.options.node,
            self._lookup,
            ClaimSpecs(self.options.cdi_dir, self.driver.name),
            checkpoint_path=self.sockets.plugin_dir / FILE_NAME,
            boot_id=read_boot_id(self.options.boot_id_path),
            shared_lock=self.sockets.plugin_dir / "serialize.lock" if self.options.rolling_update_uid else None,
            metadata=self.metadata,
            attributes=self._device_attributes if self.driver.device_metadata else None,
        )

    @staticmethod
    async def _serve(path: Path, add: Callable[[aio.Server], None]) -> aio.Server:
        check_path(path)
        clear_stale(path)
        # No interceptor: grpc.aio runs one as two more coroutines on every call; the handlers
        # refuse undecodable requests themselves, wrapped once at registration.
        server = aio.server(options=[("grpc.so_reuseport", 0)])
        add(server)
        listen(server, path)
        await server.start()
        return server

    def _status(self, registered: bool, error: str) -> None:
        self.registered = registered
        if registered:
            self._accepted.set()
        if registered and self._publisher is not None:
            self._publisher.changed()
        self._update_ready()

    def _update_ready(self) -> None:
        published = self._publisher is None or self._publisher.published.is_set()
        ready = self.registered and published
        if ready == self.options.ready.is_set():
            return
        if ready:
            self.options.ready.set()
        else:
            self.options.ready.clear()
        if self.options.on_ready is not None:
            self.options.on_ready(ready)

    async def run(self) -> None:
        """Watch the hardware (every plugin's ``run``) and publish slices until cancelled."""
        tasks = [asyncio.create_task(p.run()) for p in self.driver.plugins]
        if self._publisher is not None:
            tasks.append(asyncio.create_task(self._publish()))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _publish(self) -> None:
        assert self._publisher is not None
        publisher = self._publisher
        await self._accepted.wait()  # the kubelet deletes its node's slices when it starts: publish after
        waiter = asyncio.create_task(self._mark_published(publisher))
        try:
            await publisher.run()
        finally:
            waiter.cancel()

    async def _mark_published(self, publisher: SlicePublisher) -> None:
        await publisher.published.wait()
        self._update_ready()

    async def stop(self, grace: float = 1.0) -> None:
        """Stop serving; our sockets go, the checkpoint, CDI specs and metadata of prepared claims stay.

        With no claim prepared the checkpoint holds nothing a restart needs, so it goes too, and
        so does our plugin directory once empty: an uninstall leaves nothing on the node. Not in
        a rolling update, where the other instance shares both.
        """
        self.feed.stop()
        for server in reversed(self._servers):
            await server.stop(grace)
        if self._servers:
            for path in (self.sockets.registration, self.sockets.dra):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            if not self.options.rolling_update_uid and not self.state.prepared():
                with contextlib.suppress(FileNotFoundError):
                    (self.sockets.plugin_dir / FILE_NAME).unlink()
                self.metadata.remove_root_if_empty()
                with contextlib.suppress(OSError):  # not empty: someone else's files stay
                    self.sockets.plugin_dir.rmdir()
        self._servers.clear()


async def serve(
    driver: DraDriver,
    options: ServiceOptions,
    claims: ClaimSource | None = None,
    kubeconfig: Path | None = None,
    publish: bool = True,
    *,
    status: StatusSink | None = None,
) -> None:
    """Serve ``driver`` until cancelled: claims from the API server unless ``claims`` is given, and
    with ``options.device_status`` the claims' ``status.devices`` there too unless ``status`` is given."""
    from ...kubeclient import client  # noqa: PLC0415
    from .claims import ApiClaims  # noqa: PLC0415 - the API client only when it is used

    api_status = options.device_status and status is None
    api = client(kubeconfig) if claims is None or publish or api_status else None
    publisher = None
    if publish:
        assert api is not None
        publisher = SlicePublisher(api, driver.name, options.node, lambda: driver.slices(options.node))
        publisher.on_publish = options.on_publish
    if api_status:
        assert api is not None
        status = ApiStatus(api, driver.name)
    sink = status if options.device_status else None
    service = DriverService(driver, claims or ApiClaims(api), options, publisher, sink)  # type: ignore[arg-type]
    await service.start()
    try:
        await service.run()
    finally:
        await service.stop()
        if api is not None:
            await api.close()
