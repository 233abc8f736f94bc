"""Register a served plugin with the kubelet through ``kubelet.sock``."""

from __future__ import annotations

import grpc
from grpc import aio

from ..api import VERSION, pb, pb_grpc
from ..api.convert import options_to_pb

# The kubelet's socket appears at bind(); listen() follows within microseconds, so retry
# the connection quickly instead of grpc's default one-second first backoff.
_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 5),
    ("grpc.min_reconnect_backoff_ms", 5),
    ("grpc.max_reconnect_backoff_ms", 200),
    ("grpc.enable_retries", 0),
]
# CANCELLED: the kubelet stopped while our call was in flight (a restart), not a refusal.
_TRANSIENT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)
# Register returns only after the kubelet has dialled us back (up to ~10 s upstream).
REGISTER_TIMEOUT = 15.0


class RegistrationRejected(Exception):
    """The kubelet answered Register with an error: its message says why."""


class KubeletUnavailable(Exception):
    """No kubelet listening on ``kubelet.sock`` (yet): wait for it to appear."""


async def register(
    kubelet_socket: str,
    endpoint: str,
    resource_name: str,
    options: tuple[bool, bool],
    timeout: float = REGISTER_TIMEOUT,
) -> None:
    """Send one RegisterRequest; options go in the request as well as GetDevicePluginOptions."""
    request = pb.RegisterRequest(
        version=VERSION, endpoint=endpoint, resource_name=resource_name, options=options_to_pb(*options)
    )
    async with aio.insecure_channel(f"unix://{kubelet_socket}", options=_CHANNEL_OPTIONS) as channel:
        stub = pb_grpc.RegistrationStub(channel)
        try:
            await stub.Register(request, timeout=timeout, wait_for_ready=True)
        except aio.AioRpcError as err:
            if err.code() in _TRANSIENT:
                raise KubeletUnavailable(err.details() or err.code().name) from err
            raise RegistrationRejected(err.details() or err.code().name) from err
