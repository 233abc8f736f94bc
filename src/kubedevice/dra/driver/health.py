"""Device health for the kubelet's resource health stream (``DRAResourceHealth`` v1 and v1alpha1).

The kubelet opens ``NodeWatchResources`` once per registered driver and shows each device's
health in the status of pods using it. Every message must be the complete list for the
driver, so each change sends everything again. The kubelet also reads a device whose last
report is older than its timeout (30 s unless the driver sets one) as Unknown, so the list is
sent again every :data:`REFRESH_SECONDS` even when nothing changed. Streams wait on an event
that every change replaces.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

REFRESH_SECONDS = 10.0
"""A third of the kubelet's default health timeout (``DefaultHealthTimeout``, 30 s)."""


@dataclass(frozen=True, slots=True)
class DeviceHealth:
    pool: str
    device: str
    healthy: bool
    message: str = ""


Snapshot = Callable[[], Sequence[DeviceHealth]]


class HealthFeed:
    """Current health of every published device, and a wake-up for each change."""

    def __init__(self, snapshot: Snapshot, refresh: float = REFRESH_SECONDS) -> None:
        self._snapshot = snapshot
        self._refresh = refresh
        self._changed = asyncio.Event()
        self._stopped = False

    def changed(self) -> None:
        """Call after any device or health change (from the event loop's thread)."""
        self._changed.set()
        self._changed = asyncio.Event()

    def stop(self) -> None:
        """End every open stream (driver shutdown)."""
        self._stopped = True
        self.changed()

    async def watch(self) -> AsyncIterator[tuple[int, Sequence[DeviceHealth]]]:
        """Yield ``(unix time, full list)`` now, after every change that alters the list, and
        at least every ``refresh`` seconds."""
        loop = asyncio.get_running_loop()
        last: Sequence[DeviceHealth] | None = None
        sent = 0.0
        while not self._stopped:
            event = self._changed
            current = list(self._snapshot())
            if current != last or loop.time() - sent >= self._refresh:
                last = current
                sent = loop.time()
                yield int(time.time()), current
            # Not asyncio.wait_for: on 3.11 it can swallow a cancellation (see the publisher).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(sent + self._refresh):
                    await event.wait()
