"""A device plugin written straight on the generated gRPC code, conformant unless a test breaks it.

Each test flips one knob to break exactly one rule, so the checker must fail exactly that check.
It registers when ``kubelet.sock`` appears and, unless told not to, again whenever it is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc

from kubedevice.api import pb, pb_grpc

POLL = 0.02  # test helper: watching kubelet.sock by polling keeps it independent of kubedevice.plugin
Grant = Callable[[list[str]], pb.ContainerAllocateResponse]


def device(device_id: str, health: str = "Healthy", numa: list[int] | None = None) -> pb.Device:
    message = pb.Device(ID=device_id, health=health)
    if numa is not None:
        message.topology.nodes.extend(pb.NUMANode(ID=n) for n in numa)
    return message


def good_grant(ids: list[str]) -> pb.ContainerAllocateResponse:
    """Every kind of artefact, all valid: device nodes, a mount, envs, annotations, CDI names."""
    return pb.ContainerAllocateResponse(
        envs={"SCRIPTED_DEVICES": ",".join(ids)},
        mounts=[pb.Mount(host_path="/dev/null", container_path="/run/scripted/null", read_only=True)],
        devices=[
            pb.DeviceSpec(host_path="/dev/null", container_path=f"/dev/scripted-{i}", permissions="rw") for i in ids
        ],
        annotations={"cdi.k8s.io/scripted": ",".join(f"example.com/scripted={i}" for i in ids)},
        cdi_devices=[pb.CDIDevice(name=f"example.com/scripted={i}") for i in ids],
    )


def good_preference(request: pb.ContainerPreferredAllocationRequest) -> list[str]:
    chosen = list(request.must_include_deviceIDs)
    chosen += [i for i in request.available_deviceIDs if i not in chosen]
    return chosen[: request.allocation_size]


class ScriptedPlugin:
    """Knobs are plain attributes, set before :meth:`run`."""

    def __init__(self, plugin_dir: Path, resource: str = "example.com/scripted") -> None:
        self.plugin_dir = plugin_dir
        self.resource = resource
        self.endpoint = "scripted.sock"
        self.register_endpoint: str | None = None  # None: the same as ``endpoint``
        self.version = "v1beta1"
        self.devices = [device(f"dev-{i}", numa=[0]) for i in range(4)]
        self.options = pb.DevicePluginOptions(pre_start_required=True, get_preferred_allocation_available=True)
        self.register_options: pb.DevicePluginOptions | None = None  # None: the same as ``options``
        self.grant: Grant = good_grant
        self.drop_responses = 0  # answer this many fewer container responses than asked
        self.accept_unknown = False
        self.preference: Callable[[pb.ContainerPreferredAllocationRequest], list[str]] = good_preference
        self.pre_start_error: grpc.StatusCode | None = None
        self.first_list_delay = 0.0
        self.allocate_delay = 0.0
        self.register = True
        self.reregister = True
        self.reregister_delay = 0.0
        self.registrations = 0
        self._server: grpc.aio.Server | None = None

    @property
    def socket(self) -> Path:
        return self.plugin_dir / self.endpoint

    async def run(self) -> None:
        """Serve and register for every kubelet.sock that appears (the first one always)."""
        seen: tuple[int, int] | None = None
        try:
            while True:
                inode = _identity(self.plugin_dir / "kubelet.sock")
                if inode is not None and inode != seen:
                    if seen is not None and not self.reregister:
                        return
                    if seen is not None:
                        await asyncio.sleep(self.reregister_delay)
                    seen = inode
                    await self._serve_and_register()
                await asyncio.sleep(POLL)
        finally:
            await self._stop()

    async def _serve_and_register(self) -> None:
        await self._stop()
        self._server = grpc.aio.server()
        pb_grpc.add_DevicePluginServicer_to_server(self, self._server)
        self._server.add_insecure_port(f"unix://{self.socket}")
        await self._server.start()
        if not self.register:
            return
        options = self.register_options if self.register_options is not None else self.options
        request = pb.RegisterRequest(
            version=self.version,
            endpoint=self.register_endpoint or self.endpoint,
            resource_name=self.resource,
            options=options,
        )
        async with grpc.aio.insecure_channel(f"unix://{self.plugin_dir / 'kubelet.sock'}") as channel:
            with contextlib.suppress(grpc.aio.AioRpcError):  # a refusal is the checker's to report
                await pb_grpc.RegistrationStub(channel).Register(request, timeout=10)
        self.registrations += 1

    async def _stop(self) -> None:
        if self._server is not None:
            await self._server.stop(None)
            self._server = None

    # ---- the DevicePlugin service ----

    async def GetDevicePluginOptions(self, request: pb.Empty, context: Any) -> pb.DevicePluginOptions:
        return self.options

    async def ListAndWatch(self, request: pb.Empty, context: Any) -> AsyncIterator[pb.ListAndWatchResponse]:
        await asyncio.sleep(self.first_list_delay)
        yield pb.ListAndWatchResponse(devices=self.devices)
        await asyncio.Event().wait()  # the list never changes; the stream stays open

    async def Allocate(self, request: pb.AllocateRequest, context: Any) -> pb.AllocateResponse:
        await asyncio.sleep(self.allocate_delay)
        known = {d.ID for d in self.devices}
        for r in request.container_requests:
            unknown = sorted(set(r.devices_ids) - known)
            if unknown and not self.accept_unknown:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown devices: {', '.join(unknown)}")
        responses = [self.grant(list(r.devices_ids)) for r in request.container_requests]
        return pb.AllocateResponse(container_responses=responses[: len(responses) - self.drop_responses])

    async def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: Any
    ) -> pb.PreferredAllocationResponse:
        answers = [
            pb.ContainerPreferredAllocationResponse(deviceIDs=self.preference(r)) for r in request.container_requests
        ]
        return pb.PreferredAllocationResponse(container_responses=answers)

    async def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: Any
    ) -> pb.PreStartContainerResponse:
        if self.pre_start_error is not None:
            await context.abort(self.pre_start_error, "device reset failed")
        return pb.PreStartContainerResponse()


def main() -> None:
    """``python scripted.py PLUGIN_DIR ALLOCATE_DELAY``: a plugin in its own process, for hangs a test must kill."""
    plugin = ScriptedPlugin(Path(sys.argv[1]))
    plugin.allocate_delay = float(sys.argv[2])
    asyncio.run(plugin.run())


def _identity(path: Path) -> tuple[int, int] | None:
    """Inode and change time: a new kubelet.sock may reuse the old inode number."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_ctime_ns


if __name__ == "__main__":
    main()
