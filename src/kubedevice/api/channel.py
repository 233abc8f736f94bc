"""Wait for a gRPC channel to connect, under a deadline that grpc itself enforces.

grpc.aio's ``channel_ready()`` watches the connectivity state with no deadline. On a channel
whose target grpc cannot use (a unix socket path longer than 107 bytes makes a "lame" channel),
that watch never resolves, not even when the channel is closed or the caller gives up, so it
stays pending on grpc's process-wide completion queue. When the last grpc.aio object of an
event loop is collected, grpc shuts that queue down and joins its poller thread, which first
waits for every pending operation: the process hangs. Every watch here carries the deadline,
so it always ends by itself.
"""

from __future__ import annotations

import time
from typing import Any

import grpc
from grpc import aio


async def wait_ready(channel: aio.Channel, timeout: float) -> None:
    """Connect ``channel`` within ``timeout`` seconds or raise ``TimeoutError``."""
    deadline = time.time() + timeout  # grpc's core wants wall-clock deadlines
    core: Any = channel._channel  # type: ignore[attr-defined]  # the only way to give the watch a deadline
    state = channel.get_state(try_to_connect=True)
    while state is not grpc.ChannelConnectivity.READY:
        if not await core.watch_connectivity_state(state.value[0], deadline):
            raise TimeoutError(f"not connected within {timeout:g} s")
        state = channel.get_state(try_to_connect=True)
