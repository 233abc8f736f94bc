"""A faithful model of the kubelet's device manager, served over a real ``kubelet.sock``.

Follows ``pkg/kubelet/cm/devicemanager`` (``manager.go``, ``endpoint.go``, ``pod_devices.go``,
``plugin/v1beta1/server.go`` and ``handler.go``): the same checks, order of operations and
error messages, so a plugin that works here behaves the same against a real node.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from ..api import CHECKPOINT_FILE, KUBELET_SOCKET, PRE_START_TIMEOUT_SECONDS, pb
from ..api.convert import allocation_from_pb, device_from_pb
from ..device import ContainerAllocation, Device, DeviceError, Health
from ..errors import counted, os_reason
from . import checkpoint
from .endpoint import Endpoint, go_error
from .model import (
    UNEXPECTED_ADMISSION_ERROR,
    AdmissionError,
    Call,
    Container,
    ContainerAdmission,
    ContainerStartError,
    PluginOptions,
    Pod,
    Registration,
    Resource,
)
from .plugin_server import CannotServe, check_and_dial, cleanup_plugin_dir, refuse_a_live_kubelet, serve_registration
from .pod_devices import PodDevices
from .podresources import PodResourcesServer, PodResourcesView, kubelet_root_of

ADMISSION_DELAY_S = 0.25
"""After a start no pod reaches the real kubelet's admission at once: its sync loop waits for the
first container runtime check, and pods created when it answers healthz arrived 0.28-0.82 s after
its new kubelet.sock (v1.36.3, kubelet log; tests/e2e/test_fidelity.py). A plugin back by then
loses no pod created meanwhile; the conformance checker's restart limit is the same figure."""
_EMPTY_ALLOCATE_RESPONSE = "&AllocateResponse{ContainerResponses:[]*ContainerAllocateResponse{},}"
T = TypeVar("T", bound=Message)


class _AllocateFailed(Exception):
    """An error from the device manager's allocation path, wrapped by admission."""


def _plain(message: Message) -> dict[str, object]:
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def _pod_ref(pod: Pod) -> str:
    return pod.name if pod.name == pod.uid else f"{pod.name} ({pod.uid})"


class KubeletSimulator:
    """The kubelet's device manager: registration, ListAndWatch, admission, checkpoint, restart.

    Every list and dict it exposes is a record for tests and tools to read; do not mutate them.
    """

    def __init__(
        self,
        plugin_dir: Path,
        *,
        grace_period: float = 300.0,
        dial_timeout: float = 10.0,
        pre_start_timeout: float = float(PRE_START_TIMEOUT_SECONDS),
        admission_delay: float = ADMISSION_DELAY_S,
    ) -> None:
        self.plugin_dir = Path(plugin_dir)
        self.grace_period = grace_period
        self.dial_timeout = dial_timeout
        self.pre_start_timeout = pre_start_timeout
        self.admission_delay = admission_delay
        self.kubelet_sock_created_at = float("nan")
        self.registrations: list[Registration] = []
        self.resources: dict[str, Resource] = {}
        self.calls: list[Call] = []
        self.events: list[str] = []
        self._endpoints: dict[str, Endpoint] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._expiry: dict[str, asyncio.Task[None]] = {}
        self._pod_devices = PodDevices()
        self._allocated: dict[str, set[str]] = {}
        self._pods: dict[str, Pod] = {}
        self._active: set[str] = set()
        self._server: grpc.aio.Server | None = None
        self._changed = asyncio.Event()
        self._admission = asyncio.Lock()
        self.known_pods: dict[str, Pod] = {}
        """Admitted pods not removed, kept across a restart as the API server keeps them (PodResources lists them)."""
        root = kubelet_root_of(self.plugin_dir)
        view = PodResourcesView(self.known_pods.values, devices=self)
        self.pod_resources = PodResourcesServer.in_root(root, view, self._event) if root else None
        """The PodResources API, at ``<root>/pod-resources/kubelet.sock`` for a ``<root>/device-plugins``."""

    @property
    def kubelet_sock(self) -> Path:
        return self.plugin_dir / KUBELET_SOCKET

    @property
    def checkpoint_path(self) -> Path:
        return self.plugin_dir / CHECKPOINT_FILE

    # ---- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the checkpoint, delete stale sockets, then serve ``kubelet.sock`` (``Start``).

        Raises :class:`KubeletSocketInUse`, before touching anything, when a live kubelet (or
        another simulator) serves ``kubelet.sock`` there: only a stale socket is replaced. A
        missing directory is created, with an event saying so. Any other reason the socket
        cannot be served is a :class:`CannotServe`.
        """
        refuse_a_live_kubelet(self.kubelet_sock)
        try:
            if not self.plugin_dir.is_dir():
                self.plugin_dir.mkdir(mode=0o750, parents=True)
                self._event(f"created plugin directory {self.plugin_dir}")
            self._load_checkpoint()
            cleanup_plugin_dir(self.plugin_dir, self.checkpoint_path)
            self.kubelet_sock.unlink(missing_ok=True)
        except OSError as err:
            raise CannotServe(f"{self.plugin_dir}: cannot use as the plugin directory: {os_reason(err)}") from None
        self._server = await serve_registration(self.kubelet_sock, self._register)
        self.kubelet_sock_created_at = time.monotonic()
        self._event(f"serving {self.kubelet_sock}")
        if self.pod_resources is not None:
            await self.pod_resources.start()

    async def stop(self) -> None:
        """Disconnect every plugin and stop serving; the socket goes away as Go's listener removes it."""
        for name in list(self._endpoints):
            self._mark_stopped(name)
        await asyncio.gather(*self._background, return_exceptions=True)
        for task in self._expiry.values():
            task.cancel()
        await asyncio.gather(*self._expiry.values(), return_exceptions=True)
        self._expiry.clear()
        if self._server is not None:
            await self._server.stop(None)
            self._server = None
        self.kubelet_sock.unlink(missing_ok=True)
        if self.pod_resources is not None:
            await self.pod_resources.stop()
        self._event("stopped")

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    # ---- state queries ---------------------------------------------------------------------

    def capacity(self) -> dict[str, int]:
        return {name: r.capacity for name, r in self.resources.items()}

    def allocatable(self) -> dict[str, int]:
        return {name: r.allocatable for name, r in self.resources.items()}

    def container_devices(self, pod_uid: str, container: str) -> dict[str, dict[int, list[str]]]:
        """``GetDevices``: a container's device IDs per resource and NUMA node, as recorded."""
        assigned = self._pod_devices.container(pod_uid, container) or {}
        return {name: {node: list(ids) for node, ids in a.device_ids.items()} for name, a in assigned.items()}

    def assignments(self) -> dict[str, dict[str, dict[str, list[str]]]]:
        """Device IDs per pod UID, container and resource, as recorded (and checkpointed)."""
        return self._pod_devices.assignments()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> None:
        """Wait, woken on every state change, until ``predicate()`` holds; ``TimeoutError`` after ``timeout``."""
        async with asyncio.timeout(timeout):
            while True:
                changed = self._changed
                if predicate():
                    return
                await changed.wait()

    def _event(self, text: str) -> None:
        self.events.append(text)
        self._changed.set()
        self._changed = asyncio.Event()

    # ---- registration ----------------------------------------------------------------------

    async def _register(self, request: pb.RegisterRequest) -> str | None:
        received = time.monotonic()
        error = await self._check_and_connect(request)
        options = PluginOptions(request.options.pre_start_required, request.options.get_preferred_allocation_available)
        self.registrations.append(
            Registration(received, request.version, request.endpoint, request.resource_name, options, error)
        )
        verdict = f"refused: {error}" if error else "accepted"
        self._event(f"Register {request.resource_name} at {request.endpoint}: {verdict}")
        return error

    async def _check_and_connect(self, request: pb.RegisterRequest) -> str | None:
        """The kubelet's order: version, name, dial (blocking), GetDevicePluginOptions; only then answer."""
        connected = await check_and_dial(request, self.plugin_dir, self.dial_timeout)
        if isinstance(connected, str):
            return connected
        self._connect(*connected)
        return None

    def _connect(self, endpoint: Endpoint, options: PluginOptions) -> None:
        """``PluginConnected``: the new endpoint replaces any old one; devices stay until its first list."""
        name = endpoint.resource
        old = self._endpoints.pop(name, None)
        resource = self.resources.setdefault(name, Resource(name))
        resource.options = options
        resource.endpoint = endpoint.endpoint
        resource.connected = True
        resource.stopped_at = None
        if (expiry := self._expiry.pop(name, None)) is not None:
            expiry.cancel()
        self._endpoints[name] = endpoint
        self._spawn(self._watch(endpoint))
        if old is not None:
            if old.endpoint != endpoint.endpoint:
                self._event(f"{name}: {endpoint.endpoint} replaces {old.endpoint} (the newest registration wins)")
            self._spawn(old.close())

    def _spawn(self, work: Coroutine[object, object, None]) -> None:
        """Run ``work`` in the background, keeping a reference so that :meth:`stop` can wait for it."""
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _watch(self, endpoint: Endpoint) -> None:
        """``client.Run``: every message replaces the device set; the end of the stream stops the endpoint."""
        reason = "stream ended"
        try:
            async for reply in endpoint.list_and_watch():
                if self._endpoints.get(endpoint.resource) is not endpoint:
                    break
                self._update_devices(endpoint.resource, reply)
        except grpc.aio.AioRpcError as err:
            reason = go_error(err)
        except asyncio.CancelledError:
            if not endpoint.closed:
                raise
        if self._endpoints.get(endpoint.resource) is endpoint:
            self._event(f"ListAndWatch ended unexpectedly for {endpoint.resource}: {reason}")
            self._mark_stopped(endpoint.resource)
        await endpoint.close()

    def _update_devices(self, name: str, reply: pb.ListAndWatchResponse) -> None:
        devices: dict[str, Device] = {}
        for message in reply.devices:
            try:
                devices[message.ID] = device_from_pb(message)
            except DeviceError as err:
                self._event(f"{name}: device {message.ID!r} ignored: {err}")
        self.resources[name].devices = devices
        self._write_checkpoint()
        healthy = sum(1 for d in devices.values() if d.healthy)
        self._event(f"{name}: {counted(len(devices), 'device')}, {healthy} healthy")

    def _mark_stopped(self, name: str) -> None:
        """``PluginDisconnected``: all devices unhealthy, stop time kept, removal after the grace period."""
        endpoint = self._endpoints.pop(name, None)
        if endpoint is not None:
            self._spawn(endpoint.close())
        resource = self.resources[name]
        resource.devices = {i: dataclasses.replace(d, health=Health.UNHEALTHY) for i, d in resource.devices.items()}
        resource.connected = False
        resource.stopped_at = time.monotonic()
        self._schedule_expiry(name, resource.stopped_at)
        self._event(f"{name}: plugin disconnected, all devices unhealthy")

    def _schedule_expiry(self, name: str, stopped_at: float) -> None:
        if (old := self._expiry.pop(name, None)) is not None:
            old.cancel()
        self._expiry[name] = asyncio.create_task(self._expire(name, stopped_at))

    async def _expire(self, name: str, stopped_at: float) -> None:
        """``GetCapacity`` drops a resource whose endpoint stayed stopped past ``endpointStopGracePeriod``."""
        await asyncio.sleep(max(0.0, stopped_at + self.grace_period - time.monotonic()))
        resource = self.resources.get(name)
        if resource is not None and not resource.connected and resource.stopped_at == stopped_at:
            del self.resources[name]
            self._expiry.pop(name, None)
            self._write_checkpoint()
            self._event(f"{name}: removed after the {self.grace_period:g} s grace period")

    # ---- checkpoint ------------------------------------------------------------------------

    def _write_checkpoint(self) -> None:
        entries = self._pod_devices.to_checkpoint()
        registered = {name: sorted(i for i, d in r.devices.items() if d.healthy) for name, r in self.resources.items()}
        try:
            checkpoint.write(self.checkpoint_path, checkpoint.CheckpointData(entries, registered))
        except OSError as err:  # the kubelet logs "Failed to write checkpoint file" and goes on
            self._event(f"failed to write checkpoint file: {err.strerror or err}")

    def _load_checkpoint(self) -> None:
        """``readCheckpoint``: restore assignments; known resources come back stopped with zero devices."""
        self.resources.clear()
        self._pod_devices.clear()
        self._pods.clear()
        try:
            data = checkpoint.read(self.checkpoint_path)
        except checkpoint.CheckpointError as err:
            self._event(f"Continue after failing to read checkpoint file: {err}")
            data = None
        self._pod_devices.from_checkpoint(data.entries if data else [], self._event)
        self._allocated = self._pod_devices.devices()
        self._active = set(self._pod_devices.pods())
        now = time.monotonic()
        for name in data.registered if data else {}:
            self.resources[name] = Resource(name, stopped_at=now)
            self._schedule_expiry(name, now)

    # ---- admission -------------------------------------------------------------------------

    async def admit(self, pod: Pod) -> dict[str, ContainerAdmission]:
        """Admit a pod as the kubelet's resource allocation handler does, container by container.

        Within ``admission_delay`` of a start, the pod waits as it would in the kubelet's sync loop.
        """
        wait = self.kubelet_sock_created_at + self.admission_delay - time.monotonic()
        if wait > 0:  # false for NaN: never started
            await asyncio.sleep(wait)
        async with self._admission:
            self._pods[pod.uid] = pod
            self.known_pods[pod.uid] = pod
            self._active.add(pod.uid)
            try:
                result = await self._admit(pod)
            except AdmissionError as err:
                self._reject(pod)
                self._event(f"rejected pod {_pod_ref(pod)}: {err}")
                raise
        got = "; ".join(
            f"{name} {resource}=[{', '.join(ids)}]"
            for name, admission in result.items()
            for resource, ids in admission.device_ids.items()
        )
        self._event(f"admitted pod {_pod_ref(pod)}" + (f": {got}" if got else ""))
        return result

    async def _admit(self, pod: Pod) -> dict[str, ContainerAdmission]:
        try:
            preferred = {c.name: await self._allocate_container(pod.uid, c) for c in pod.containers}
        except _AllocateFailed as err:
            raise AdmissionError(
                UNEXPECTED_ADMISSION_ERROR, f"Allocate failed due to {err}, which is unexpected"
            ) from None
        return {c.name: self._admission_of(pod, c, preferred[c.name]) for c in pod.containers}

    def remove_pod(self, pod_uid: str) -> bool:
        """The pod terminated: its devices are freed at the next allocation (``UpdateAllocatedDevices``).

        False when no such pod was running (never admitted, rejected or removed before).
        """
        running = pod_uid in self._active
        self._active.discard(pod_uid)
        self._pods.pop(pod_uid, None)
        self.known_pods.pop(pod_uid, None)
        return running

    def _reject(self, pod: Pod) -> None:
        """A rejected pod is no longer active; what it got stays recorded until the next purge."""
        self._active.discard(pod.uid)
        self._pods.pop(pod.uid, None)
        self.known_pods.pop(pod.uid, None)

    def _admission_of(self, pod: Pod, container: Container, preferred: dict[str, list[str]]) -> ContainerAdmission:
        assigned = self._pod_devices.container(pod.uid, container.name) or {}
        ordered = [assigned[r] for r in container.requests if r in assigned]
        try:
            allocation = ContainerAllocation.merge(allocation_from_pb(a.response) for a in ordered)
        except DeviceError as err:
            raise AdmissionError(
                UNEXPECTED_ADMISSION_ERROR, f"invalid allocation for container {container.name}: {err}"
            ) from None
        ids = {r: sorted(assigned[r].ids()) for r in container.requests if r in assigned}
        return ContainerAdmission(ids, allocation, preferred)

    def _is_device_plugin_resource(self, name: str) -> bool:
        return name in self.resources or name in self._allocated

    def _update_allocated_devices(self) -> None:
        """``UpdateAllocatedDevices``: forget pods that are no longer active."""
        gone = [uid for uid in self._pod_devices.pods() if uid not in self._active]
        if not gone:
            return
        self._pod_devices.delete(gone)
        self._allocated = self._pod_devices.devices()

    async def _allocate_container(self, pod_uid: str, container: Container) -> dict[str, list[str]]:
        """``allocateContainerResources``: choose devices, call Allocate with one container request."""
        preferred: dict[str, list[str]] = {}
        updated = False
        needs_checkpoint = False
        for name, needed in container.requests.items():
            if not self._is_device_plugin_resource(name):
                continue
            if not updated:
                self._update_allocated_devices()
                updated = True
            chosen = await self._devices_to_allocate(pod_uid, container.name, name, needed, preferred)
            if not chosen:
                continue
            needs_checkpoint = True
            response = await self._allocate_rpc(name, chosen)
            self._record(pod_uid, container.name, name, chosen, response)
        if needs_checkpoint:
            self._write_checkpoint()
        return preferred

    def _record(
        self, pod_uid: str, container: str, name: str, chosen: list[str], response: pb.AllocateResponse
    ) -> None:
        devices = self.resources[name].devices if name in self.resources else {}
        per_node: dict[int, list[str]] = {}
        for device_id in chosen:
            device = devices.get(device_id)
            for node in device.numa_nodes if device and device.numa_nodes else (checkpoint.NO_TOPOLOGY,):
                per_node.setdefault(node, []).append(device_id)
        self._pod_devices.insert(pod_uid, container, name, per_node, response.container_responses[0])

    async def _allocate_rpc(self, name: str, chosen: list[str]) -> pb.AllocateResponse:
        endpoint = self._endpoints.get(name)
        if name not in self.resources:
            self._allocated = self._pod_devices.devices()
            raise _AllocateFailed(f"unknown Device Plugin {name}")
        request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=chosen)])
        try:
            if endpoint is None:
                raise _AllocateFailed(f"endpoint {name} has been stopped")
            response = await self._call("Allocate", name, request, endpoint.allocate(request))
        except (grpc.aio.AioRpcError, _AllocateFailed) as err:
            self._allocated = self._pod_devices.devices()
            text = go_error(err) if isinstance(err, grpc.aio.AioRpcError) else str(err)
            raise _AllocateFailed(text) from None
        if not response.container_responses:
            raise _AllocateFailed(f"no containers return in allocation response {_EMPTY_ALLOCATE_RESPONSE}")
        return response

    async def _devices_to_allocate(
        self, pod_uid: str, container: str, name: str, required: int, preferred: dict[str, list[str]]
    ) -> list[str]:
        """``devicesToAllocate`` with the Topology Manager's default ``none`` policy (no NUMA alignment)."""
        existing = self._pod_devices.container_devices(pod_uid, container, name)
        needed = required
        if existing is not None:
            needed -= len(existing)
            if needed != 0:
                raise _AllocateFailed(
                    f'pod "{pod_uid}" container "{container}" changed request for resource "{name}" '
                    f"from {len(existing)} to {required}"
                )
        resource = self.resources.get(name)
        if resource is None:
            raise _AllocateFailed(f"cannot allocate unregistered device {name}")
        healthy = {i for i, d in resource.devices.items() if d.healthy}
        if not healthy:
            raise _AllocateFailed(f"no healthy devices present; cannot allocate unhealthy devices {name}")
        if existing and not existing <= healthy:
            raise _AllocateFailed(
                f"previously allocated devices are no longer healthy; cannot allocate unhealthy devices {name}"
            )
        if needed == 0:
            return []
        in_use = self._allocated.setdefault(name, set())
        available = healthy - in_use
        if len(available) < needed:
            raise _AllocateFailed(
                f"requested number of devices unavailable for {name}. Requested: {needed}, Available: {len(available)}"
            )
        wanted = await self._preferred(resource, available, required, preferred)
        chosen = (sorted(wanted & available) + sorted(available - wanted))[:needed]
        in_use.update(chosen)
        return chosen

    async def _preferred(
        self, resource: Resource, available: set[str], size: int, preferred: dict[str, list[str]]
    ) -> set[str]:
        """``callGetPreferredAllocationIfAvailable``: only when the plugin offered it; errors fail admission."""
        if resource.options is None or not resource.options.get_preferred_allocation_available:
            return set()
        name = resource.name
        request = pb.PreferredAllocationRequest(
            container_requests=[
                pb.ContainerPreferredAllocationRequest(
                    available_deviceIDs=sorted(available), must_include_deviceIDs=[], allocation_size=size
                )
            ]
        )
        endpoint = self._endpoints.get(name)
        try:
            if endpoint is None:
                raise _AllocateFailed(f"endpoint {name} has been stopped")
            response = await self._call("GetPreferredAllocation", name, request, endpoint.preferred(request))
        except (grpc.aio.AioRpcError, _AllocateFailed) as err:
            text = go_error(err) if isinstance(err, grpc.aio.AioRpcError) else str(err)
            raise _AllocateFailed(f"device plugin GetPreferredAllocation rpc failed with err: {text}") from None
        ids = list(response.container_responses[0].deviceIDs) if response.container_responses else []
        preferred[name] = ids
        return set(ids)

    async def _call(self, method: str, resource: str, request: Message, rpc: Awaitable[T]) -> T:
        """Make one RPC to a plugin and keep a plain record of it in :attr:`calls`."""
        started = time.monotonic()
        try:
            response = await rpc
        except grpc.aio.AioRpcError as err:
            self.calls.append(Call(method, resource, _plain(request), None, go_error(err), started, time.monotonic()))
            raise
        self.calls.append(Call(method, resource, _plain(request), _plain(response), None, started, time.monotonic()))
        return response

    # ---- container start -------------------------------------------------------------------

    async def start_container(self, pod_uid: str, container: str) -> None:
        """``GetDeviceRunContainerOptions``: PreStartContainer where required, re-allocate if state is missing."""
        try:
            await self._start_container(pod_uid, container)
        except ContainerStartError as err:
            self._event(f"container {pod_uid}/{container} cannot start: {err}")
            raise
        self._event(f"container {pod_uid}/{container} started")

    async def _start_container(self, pod_uid: str, container: str) -> None:
        if pod_uid not in self._active:  # the kubelet starts containers of its running pods only
            raise ContainerStartError(f"no running pod {pod_uid!r} (never admitted, rejected or removed)")
        requests = self._requests_of(pod_uid, container)
        reallocate = False
        for name, count in requests.items():
            if not self._is_device_plugin_resource(name) or count == 0:
                continue
            await self._pre_start_if_needed(pod_uid, container, name)
            if pod_uid in self._active and self._pod_devices.container_devices(pod_uid, container, name) is None:
                reallocate = True
        if reallocate and pod_uid in self._pods:
            async with self._admission:
                try:
                    await self._allocate_container(pod_uid, Container(container, requests))
                except _AllocateFailed as err:
                    raise ContainerStartError(str(err)) from None

    def _requests_of(self, pod_uid: str, container: str) -> dict[str, int]:
        """The container's requests from its pod, or from the checkpoint for a pod admitted before a restart."""
        pod = self._pods.get(pod_uid)
        if pod is not None:
            for c in pod.containers:
                if c.name == container:
                    return c.requests
        assigned = self._pod_devices.container(pod_uid, container)
        if assigned is None:
            raise ContainerStartError(f"no container {container!r} in pod {pod_uid!r}")
        return {name: len(a.ids()) for name, a in assigned.items()}

    async def _pre_start_if_needed(self, pod_uid: str, container: str, name: str) -> None:
        """``callPreStartContainerIfNeeded``, under the kubelet's 30 s deadline."""
        resource = self.resources.get(name)
        if resource is None:
            raise ContainerStartError(f"endpoint not found in cache for a registered resource: {name}")
        if resource.options is None or not resource.options.pre_start_required:
            return
        devices = self._pod_devices.container_devices(pod_uid, container, name)
        if devices is None:
            raise ContainerStartError(
                f"no devices found allocated in local cache for pod {pod_uid}, container {container}, resource {name}"
            )
        endpoint = self._endpoints.get(name)
        request = pb.PreStartContainerRequest(devices_ids=sorted(devices))
        try:
            if endpoint is None:
                raise ContainerStartError(f"endpoint {name} has been stopped")
            await self._call("PreStartContainer", name, request, self._pre_start(endpoint, request))
            self._event(f"PreStartContainer {name} [{', '.join(request.devices_ids)}]: ok")
        except grpc.aio.AioRpcError as err:
            raise ContainerStartError(f"device plugin PreStartContainer rpc failed with err: {go_error(err)}") from None
        except ContainerStartError as err:
            raise ContainerStartError(f"device plugin PreStartContainer rpc failed with err: {err}") from None

    async def _pre_start(
        self, endpoint: Endpoint, request: pb.PreStartContainerRequest
    ) -> pb.PreStartContainerResponse:
        await endpoint.pre_start(request, self.pre_start_timeout)
        return pb.PreStartContainerResponse()
