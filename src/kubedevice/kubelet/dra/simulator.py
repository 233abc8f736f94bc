"""The kubelet's DRA side, served in a directory: plugin watcher, DRA manager calls, health streams.

Follows ``pkg/kubelet/pluginmanager`` and ``pkg/kubelet/cm/dra`` (v1.36): every socket that
appears in ``<kubelet-dir>/plugins_registry`` (inotify, and those already there at start) gets
``GetInfo`` and ``NotifyRegistrationStatus``, a refusal carrying the kubelet's message; an
accepted driver is called on its endpoint with the service the kubelet picks, and its health
stream is opened when offered. Claims come from files (:mod:`.claims`); a prepare calls every
driver named in the claim's allocation and checks the answer as the kubelet's DRA manager does.
Pods admitted with :meth:`DraKubelet.admit` have their claims prepared, and the PodResources API
(:mod:`.podresources`) at ``<kubelet-dir>/pod-resources/kubelet.sock`` lists them with their devices.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from ...dra.nodeclaims import Claim
from ...errors import counted, os_reason
from ...plugin.watcher import DirectoryWatcher
from ...unixsocket import is_live, is_socket
from ..endpoint import go_error
from ..model import Pod
from ..plugin_server import CannotServe, KubeletSocketInUse
from ..podresources import PodResourcesServer, PodResourcesView
from .claims import drivers_of, find_claim, load_claims
from .plugin import DraClient, Registered, get_info, kubelet_refusal, notify, registered_as

REGISTRY = "plugins_registry"
# The plugin manager's back-off on a failed registration (pkg/util/goroutinemap/exponentialbackoff).
RETRY_FIRST = 0.5
RETRY_MAX = 122.0


def refuse_live_kubelet(kubelet_dir: Path, refusal: str) -> None:
    """A real kubelet watching the same registry would register the drivers too: ``KubeletSocketInUse``,
    its message ending in ``refusal`` (what the caller will not do)."""
    kubelet_sock = kubelet_dir / "device-plugins" / "kubelet.sock"
    if kubelet_sock.is_socket() and is_live(kubelet_sock):
        raise KubeletSocketInUse(
            f"{kubelet_sock} is served by a running kubelet or simulator; {refusal} "
            "(stop it, or use another --kubelet-dir)"
        )


@dataclass(frozen=True, slots=True)
class PreparedDevice:
    driver: str
    requests: tuple[str, ...]
    pool: str
    device: str
    cdi_ids: tuple[str, ...]
    share_id: str | None = None


@dataclass(frozen=True, slots=True)
class PreparedClaim:
    namespace: str
    name: str
    uid: str
    devices: tuple[PreparedDevice, ...]

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Driver:
    """A registered driver: where the kubelet calls it and the last health it reported."""

    registered: Registered
    socket: Path
    client: DraClient
    health: dict[tuple[str, str], str] = field(default_factory=dict)
    health_task: asyncio.Task[None] | None = None


class DraKubelet:
    """The simulated kubelet DRA side for one kubelet directory and one claims directory."""

    def __init__(self, kubelet_dir: Path, claims_dir: Path) -> None:
        self.kubelet_dir = kubelet_dir
        self.registry = kubelet_dir / REGISTRY
        self.claims_dir = claims_dir
        self.drivers: dict[str, Driver] = {}
        self.prepared: dict[str, PreparedClaim] = {}
        self.events: list[str] = []
        self._changed = asyncio.Event()
        self._watcher: DirectoryWatcher | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._sockets: set[Path] = set()  # the plugin watcher's desired state: one handshake per socket
        self.pods: dict[str, Pod] = {}
        """Pods on the node (:meth:`admit`), for the PodResources API."""
        view = PodResourcesView(self.pods.values, claims=self)
        self.pod_resources = PodResourcesServer.in_root(kubelet_dir, view, self._event)

    def _event(self, text: str) -> None:
        self.events.append(text)
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> None:
        """Return when ``predicate()`` holds after some event; ``TimeoutError`` after ``timeout``."""
        async with asyncio.timeout(timeout):
            while not predicate():
                await self._changed.wait()

    def claims(self) -> list[Claim]:
        return load_claims(self.claims_dir)

    async def start(self) -> None:
        """Watch the registry; refuse a live kubelet's directory.

        ``plugins_registry/`` and ``plugins/`` are created if missing, as the kubelet does at start:
        drivers wait for both rather than make them.
        """
        refuse_live_kubelet(self.kubelet_dir, "not watching its plugins")
        try:
            self.registry.mkdir(parents=True, exist_ok=True)
            (self.kubelet_dir / "plugins").mkdir(exist_ok=True)
        except OSError as err:
            raise CannotServe(f"{self.registry}: cannot use as the plugin registry: {os_reason(err)}") from None
        self._watcher = DirectoryWatcher(self.registry, self._on_entry)
        self._watcher.start()
        self._event(f"watching {self.registry}")
        for path in sorted(self.registry.iterdir()):
            self._on_entry(path.name, True)
        await self.pod_resources.start()

    async def stop(self) -> None:
        await self.pod_resources.stop()
        if self._watcher is not None:
            self._watcher.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for name in list(self.drivers):
            await self._drop(name)

    def _spawn(self, work: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _on_entry(self, name: str, created: bool) -> None:
        """The plugin watcher ignores dot files and anything that is not a socket."""
        path = self.registry / name
        if name.startswith("."):
            return
        if created:
            if is_socket(path) and path not in self._sockets:
                self._sockets.add(path)
                self._spawn(self._register(path))
            return
        self._sockets.discard(path)
        for driver in [d for d in self.drivers.values() if d.socket == path]:
            self._spawn(self._unregister(driver.registered.driver, path))

    async def _register(self, socket: Path) -> None:
        """Register the socket, retrying a failed ``GetInfo`` while the socket is still there.

        The kubelet's plugin manager reconciles every second and runs each registration through
        ``goroutinemap`` with exponential back-off on error (0.5 s doubling to 2 min 2 s,
        ``pkg/util/goroutinemap/exponentialbackoff``), so a driver slow to answer its first
        ``GetInfo`` (a loaded node, imports still running) is registered on a later try.
        """
        delay = RETRY_FIRST
        while True:
            try:
                info = await get_info(socket)
                break
            except grpc.RpcError as err:
                self._event(
                    f"RegisterPlugin error -- failed to get plugin info using RPC GetInfo at socket {socket}, "
                    f"err: {_rpc_message(err)}"
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)
            if socket not in self._sockets:
                return
        problem = kubelet_refusal(info, socket)
        try:
            await notify(socket, not problem, problem)
        except grpc.RpcError as err:
            self._event(
                f"RegisterPlugin error -- failed to send registration status at socket {socket}, "
                f"err: {_rpc_message(err)}"
            )
            return
        if problem:
            self._event(f"refused {socket.name}: {problem}")
            return
        registered = registered_as(info, socket)
        await self._drop(registered.driver)
        driver = Driver(registered, socket, DraClient(registered))
        self.drivers[registered.driver] = driver
        offered = ", health stream" if registered.health else ""
        where = f"{registered.endpoint} ({registered.service}{offered})"
        self._event(f"registered DRA driver {registered.driver} at {where}")
        if registered.health:
            driver.health_task = self._spawn(self._watch_health(driver))

    async def _unregister(self, name: str, socket: Path) -> None:
        await self._drop(name)
        self._event(f"DRA driver {name} unregistered ({socket.name} removed)")

    async def _drop(self, name: str) -> None:
        driver = self.drivers.pop(name, None)
        if driver is None:
            return
        if driver.health_task is not None:
            driver.health_task.cancel()
        await driver.client.__aexit__(None, None, None)

    async def _watch_health(self, driver: Driver) -> None:
        name = driver.registered.driver
        try:
            async for health in driver.client.watch_health():
                driver.health = health
                bad = sorted(f"{p}/{d}" for (p, d), h in health.items() if h != "HEALTHY")
                unwell = f", not healthy: {', '.join(bad)}" if bad else ""
                self._event(f"health of {name}: {counted(len(health), 'device')}{unwell}")
        except grpc.RpcError as err:
            self._event(f"health stream of {name} failed: {_rpc_message(err)}")
            return
        self._event(f"health stream of {name} ended")

    async def admit(self, pod: Pod) -> bool:
        """``PrepareDynamicResources``: the pod is on the node, and each claim its containers use is
        prepared unless it is already (a claim shared with another pod); False if one could not be.

        The pod stays on the node either way, as a pod waiting in ContainerCreating does.
        """
        self.pods[pod.uid] = pod
        refs = _claim_refs(pod)
        ready = [ref in self.prepared or await self.prepare(ref) is not None for ref in refs]
        self._event(f"admitted pod {pod.namespace}/{pod.name} ({pod.uid}) with {len(refs)} claims")
        return all(ready)

    async def remove_pod(self, uid: str) -> None:
        """``UnprepareResources``: the pod is gone; its claims that no other pod uses are unprepared."""
        pod = self.pods.pop(uid, None)
        if pod is None:
            return
        used = {ref for other in self.pods.values() for ref in _claim_refs(other)}
        for ref in _claim_refs(pod):
            if ref in self.prepared and ref not in used:
                await self.unprepare(ref)
        self._event(f"removed pod {pod.namespace}/{pod.name} ({pod.uid})")

    async def prepare(self, ref: str) -> PreparedClaim | None:
        """NodePrepareResources for one claim on each of its drivers; ``None`` and an event on failure."""
        claim = self._claim(ref)
        if claim is None:
            return None
        try:
            devices = await self._call_drivers(claim, prepare=True)
        except _Failed as err:
            self._event(f"prepare {claim.namespace}/{claim.name}: {err}")
            return None
        prepared = PreparedClaim(claim.namespace, claim.name, claim.uid, tuple(devices))
        self.prepared[prepared.ref] = prepared
        shown = ", ".join(f"{d.pool}/{d.device}" for d in devices) or "no devices"
        self._event(f"prepared {prepared.ref} ({claim.uid}): {shown}")
        return prepared

    async def unprepare(self, ref: str) -> bool:
        claim = self._claim(ref)
        if claim is None:
            return False
        try:
            await self._call_drivers(claim, prepare=False)
        except _Failed as err:
            self._event(f"unprepare {claim.namespace}/{claim.name}: {err}")
            return False
        self.prepared.pop(f"{claim.namespace}/{claim.name}", None)
        self._event(f"unprepared {claim.namespace}/{claim.name} ({claim.uid})")
        return True

    def _claim(self, ref: str) -> Claim | None:
        try:
            claim = find_claim(self.claims(), ref)
        except (KeyError, ValueError) as err:
            self._event(f"{ref}: {str(err).strip(chr(39))}")
            return None
        if not claim.allocated:
            self._event(f"{claim.namespace}/{claim.name}: ResourceClaim is not allocated")
            return None
        return claim

    async def _call_drivers(self, claim: Claim, prepare: bool) -> list[PreparedDevice]:
        """The DRA manager's loop: one call per driver, the answer for exactly this claim's UID."""
        method = "NodePrepareResources" if prepare else "NodeUnprepareResources"
        devices: list[PreparedDevice] = []
        for name in drivers_of(claim):
            driver = self.drivers.get(name)
            if driver is None:
                raise _Failed(f"DRA driver {name} is not registered")
            ref = [(claim.namespace, claim.name, claim.uid)]
            try:
                response = await (driver.client.prepare(ref) if prepare else driver.client.unprepare(ref))
            except grpc.RpcError as err:
                raise _Failed(f"{method}: {_rpc_message(err)}") from None
            for uid in response.claims:
                if uid != claim.uid:
                    raise _Failed(f"{method} returned result for unknown claim UID {uid}")
            if claim.uid not in response.claims:
                raise _Failed(f"{method} skipped 1 ResourceClaims")
            answer = response.claims[claim.uid]
            if answer.error:
                raise _Failed(f"{method} failed for ResourceClaim {claim.name}: {answer.error}")
            if prepare:
                devices += [
                    PreparedDevice(
                        name, tuple(d.request_names), d.pool_name, d.device_name, tuple(d.cdi_device_ids), _share_id(d)
                    )
                    for d in answer.devices
                ]
        return devices


class _Failed(Exception):
    pass


def _claim_refs(pod: Pod) -> list[str]:
    """The pod's claims as ``NS/NAME``, each once, in the order its containers name them."""
    return list(dict.fromkeys(f"{pod.namespace}/{name}" for c in pod.containers for name in c.claims))


def _share_id(device: Any) -> str | None:
    """A v1 answer's ``share_id`` when set; v1beta1 has no such field (the kubelet's wrapper leaves it unset)."""
    return device.share_id if "share_id" in device.DESCRIPTOR.fields_by_name and device.HasField("share_id") else None


def _rpc_message(err: grpc.RpcError) -> str:
    return go_error(err) if isinstance(err, grpc.aio.AioRpcError) else str(err)
