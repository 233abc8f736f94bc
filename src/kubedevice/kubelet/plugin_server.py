"""The kubelet's side of device-plugin registration: ``kubelet.sock`` and the ``Registration`` service.

Kept apart from the device manager (:mod:`.simulator`) as upstream keeps
``pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go`` (the plugin directory cleaned of
sockets, ``kubelet.sock`` served) and ``handler.go`` (a ``Register`` checked in the kubelet's
order: version, name, dial, ``GetDevicePluginOptions``) apart from ``manager.go``, which gets the
connected plugin.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc

from .. import names
from ..api import VERSION, pb, pb_grpc
from ..errors import KubedeviceError
from ..unixsocket import MAX_PATH_BYTES, CannotBind, is_live, listen
from .endpoint import DialError, Endpoint, endpoint_path, go_error
from .model import PluginOptions

SUPPORTED_VERSIONS = (VERSION,)
Register = Callable[[pb.RegisterRequest], Awaitable[str | None]]
"""What answers a ``Register``: None when accepted, else the error the plugin is told."""


class CannotServe(KubedeviceError):
    """The simulator cannot serve ``kubelet.sock`` in its directory; ``str()`` is one line saying why."""


class KubeletSocketInUse(CannotServe):
    """``kubelet.sock`` is live (a kubelet or another simulator answers on it) or is not a socket."""


def refuse_a_live_kubelet(path: Path) -> None:
    """:class:`KubeletSocketInUse` when ``path`` (``kubelet.sock``) is not ours to replace:
    something serves it, or it is not a socket; :class:`CannotServe` when too long to bind."""
    if len(os.fsencode(path)) > MAX_PATH_BYTES:
        raise CannotServe(f"{path}: longer than a unix socket path may be ({MAX_PATH_BYTES} bytes)")
    try:
        mode = path.lstat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return  # nothing there to take over; a bad directory is reported when it is created
    if not stat.S_ISSOCK(mode):
        raise KubeletSocketInUse(f"{path} exists and is not a socket; not replacing it")
    if is_live(path):
        raise KubeletSocketInUse(
            f"{path} is served by a running kubelet or simulator; not taking it over "
            "(stop it, or use another --plugin-dir)"
        )


def cleanup_plugin_dir(plugin_dir: Path, checkpoint: Path) -> None:
    """``CleanupPluginDirectory``: remove sockets only, never the checkpoint or other files."""
    for path in plugin_dir.iterdir():
        if path == checkpoint:
            continue
        try:
            mode = path.stat().st_mode
        except OSError:
            continue
        if stat.S_ISSOCK(mode):
            path.unlink(missing_ok=True)


class _RegistrationService:
    """The ``Registration`` gRPC service; returns a plain error as grpc-go does (code Unknown)."""

    def __init__(self, register: Register) -> None:
        self._register = register

    async def Register(
        self, request: pb.RegisterRequest, context: grpc.aio.ServicerContext[pb.RegisterRequest, pb.Empty]
    ) -> pb.Empty:
        error = await self._register(request)
        if error is not None:
            await context.abort(grpc.StatusCode.UNKNOWN, error)
        return pb.Empty()


async def serve_registration(kubelet_sock: Path, register: Register) -> grpc.aio.Server:
    """The ``Registration`` service on ``kubelet_sock``, started; ``register`` answers each call."""
    server = grpc.aio.server()
    pb_grpc.add_RegistrationServicer_to_server(_RegistrationService(register), server)
    try:
        listen(server, kubelet_sock)
    except CannotBind as err:
        raise CannotServe(str(err)) from None
    await server.start()
    return server


async def check_and_dial(
    request: pb.RegisterRequest, plugin_dir: Path, dial_timeout: float
) -> tuple[Endpoint, PluginOptions] | str:
    """The kubelet's order: version, name, dial (blocking), GetDevicePluginOptions; the connected
    endpoint and its options, or the error the plugin is answered."""
    name = request.resource_name
    if request.version not in SUPPORTED_VERSIONS:
        return (
            f'requested API version "{request.version}" is not supported by kubelet. '
            f"Supported version is {_go_list(SUPPORTED_VERSIONS)}"
        )
    if names.extended_resource_name_error(name) is not None:
        return f'the ResourceName "{name}" is invalid'
    path = endpoint_path(plugin_dir, request.endpoint)
    try:
        endpoint = await Endpoint.dial(name, request.endpoint, path, dial_timeout)
    except DialError as err:
        return str(err)
    try:
        options = await endpoint.options()
    except grpc.aio.AioRpcError as err:
        await endpoint.close()
        return f"failed to get device plugin options: {go_error(err)}"
    return endpoint, options


def _go_list(values: list[str] | tuple[str, ...]) -> str:
    """Go's ``%q`` of a string slice."""
    return "[" + " ".join(f'"{v}"' for v in values) + "]"
