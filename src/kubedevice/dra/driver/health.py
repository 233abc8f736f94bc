"""Device health for the kubelet's resource health stream (``v1alpha1.DRAResourceHealth``).

The kubelet opens ``NodeWatchResources`` once per registered driver and shows each device's
health in the status of pods using it. Every message must be the complete list for the
driver (the kubelet treats a device missing from it as Unknown after a timeout), so each
change sends everything again. Streams wait on an event that every change replaces.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DeviceHealth:
    pool: str
    device: str
    healthy: bool
    message: str = ""


Snapshot = Callable[[], Sequence[DeviceHealth]]


class HealthFeed:
    """Current health of every published device, and a wake-up for each change."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
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
        """Yield ``(unix time, full list)`` now and after every change that alters the list."""
        last: Sequence[DeviceHealth] | None = None
        while not self._stopped:
            event = self._changed
            current = list(self._snapshot())
            if current != last:
                last = current
                yield int(time.time()), current
            await event.wait()
