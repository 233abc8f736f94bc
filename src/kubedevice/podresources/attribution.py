"""Which container holds each of the daemon's devices, read from the kubelet before every scrape.

Read on scrape rather than on a timer, as NVIDIA's dcgm-exporter lists on each collection: the
answer is as fresh as the scrape, a daemon nobody scrapes never calls the kubelet, and one
``List`` per scrape is far inside the kubelet's limit (100 calls a second). A kubelet without
the socket, or one that refuses the call, costs one log line when that starts and one when it
ends, never one per scrape; meanwhile the metrics go on without pod labels.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from .client import PodResourcesClient, PodResourcesUnavailable
from .model import Holder, holders

log = logging.getLogger("kubedevice.podresources")
SCRAPE_TIMEOUT = 2.0
"""Seconds a scrape waits for the kubelet (it answers in milliseconds; Prometheus gives 10 s)."""
K = TypeVar("K", bound=Hashable)


class Attribution:
    """The last ``List`` of one kubelet, as holders; ``up`` says whether it answered."""

    def __init__(self, socket: Path, timeout: float = SCRAPE_TIMEOUT) -> None:
        self.socket = socket
        self.holders: tuple[Holder, ...] = ()
        self.up = False
        self._client = PodResourcesClient(socket, timeout)
        self._failing: str | None = None
        self._lock = asyncio.Lock()

    async def refresh(self) -> None:
        """List now (scrapes arriving together take turns); never raises for the kubelet's sake."""
        async with self._lock:
            try:
                pods = await self._client.list()
            except PodResourcesUnavailable as err:
                self.holders, self.up = (), False
                if self._failing is None:
                    log.warning("which pod holds which device is unknown, metrics go without pod labels: %s", err)
                self._failing = str(err)
                return
            if self._failing is not None:
                log.info("the kubelet's PodResources API answers again at %s", self.socket)
            self._failing = None
            self.holders, self.up = tuple(holders(pods)), True

    async def close(self) -> None:
        await self._client.close()


def attributed(
    devices: Iterable[tuple[K, bool]], held: Iterable[tuple[K, Holder]]
) -> Iterator[tuple[K, Holder | None, float]]:
    """Per device, one row per container holding it (``None`` when none does) and its health as
    1.0 or 0.0; then the devices held but no longer ours (hot-unplugged), at 0.0.

    ``devices`` are ``(key, healthy)`` and ``held`` ``(key, holder)``, a key naming a device the
    same way on both sides (resource and ID; driver, pool and name).
    """
    by_key: dict[K, list[Holder | None]] = {}
    for key, holder in held:
        by_key.setdefault(key, []).append(holder)
    for key, healthy in devices:
        value = 1.0 if healthy else 0.0
        for free_or_held in by_key.pop(key, None) or [None]:
            yield key, free_or_held, value
    for key, gone in by_key.items():
        for still_held in gone:
            yield key, still_held, 0.0
