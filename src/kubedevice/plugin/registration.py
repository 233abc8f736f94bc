"""Register a served plugin with the kubelet through ``kubelet.sock``."""

from __future__ import annotations

import grpc
from grpc import aio

from ..api import VERSION, pb, pb_grpc
from ..api.convert import options_to_pb
from ..errors import KubedeviceError

# The kubelet's socket appears at bind(); listen() follows within microseconds, so retry
# the connection quickly instead of grpc's default one-second first backoff.
_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 5),
    ("grpc.min_reconnect_backoff_ms", 5),
    ("grpc.max_reconnect_backoff_ms", 200),
    ("grpc.enable_retries", 0),
]
# Register returns only after the kubelet has dialled us back (up to ~10 s upstream).
REGISTER_TIMEOUT = 15.0
# Answers that are no verdict on us, in our words. grpc's own text follows only where it says
# something ("GOAWAY received", "connection refused"); its "Cancelling all calls" says nothing.
_NOT_A_VERDICT = {
    grpc.StatusCode.UNAVAILABLE: "kubelet.sock does not answer",
    grpc.StatusCode.DEADLINE_EXCEEDED: f"no answer within {REGISTER_TIMEOUT:g} s",
    grpc.StatusCode.CANCELLED: "the kubelet went away while answering (a restart?)",
}


def _unavailable(err: aio.AioRpcError) -> str:
    words = _NOT_A_VERDICT[err.code()]
    details = err.details() if err.code() is grpc.StatusCode.UNAVAILABLE else None
    return f"{words} (grpc: {details})" if details else words


class RegistrationRejected(KubedeviceError):
    """The kubelet answered Register with an error: its message says why."""


class KubeletUnavailable(KubedeviceError):
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
            # CANCELLED: the kubelet stopped while answering (a restart); that is no verdict on us.
            if err.code() in _NOT_A_VERDICT:
                raise KubeletUnavailable(_unavailable(err)) from err
            raise RegistrationRejected(err.details() or err.code().name) from err
