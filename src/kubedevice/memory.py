"""Give the heap that glibc keeps after ``free`` back to the system, once a minute.

An hour of hotplug churn, health flapping and Allocate load (``benchmarks/soak.py
--trace-memory``) showed what Python objects hold and glibc's bytes in use flat, while glibc's
free-but-kept bytes grew in steps of 1-3 MiB and RSS with them: freed chunks between live ones
are not returned by ``free`` itself. ``malloc_trim(0)`` returns every such free page. It takes
about a millisecond for the daemon's heap; other C libraries than glibc are left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
from collections.abc import AsyncIterator, Callable

TRIM_SECONDS = 60.0


def malloc_trim() -> Callable[[], int] | None:
    """glibc's ``malloc_trim(0)`` (1 if memory was returned), or None on another C library."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
        trim = ctypes.CDLL(None).malloc_trim
    except (ValueError, OSError, AttributeError):  # no such confstr name, or no such symbol
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: int(trim(0))


async def trim_forever(interval: float = TRIM_SECONDS) -> None:
    """Trim every ``interval`` seconds until cancelled (returns at once without glibc)."""
    trim = malloc_trim()
    if trim is None:
        return
    while True:
        await asyncio.sleep(interval)
        trim()


@contextlib.asynccontextmanager
async def trimming(interval: float = TRIM_SECONDS) -> AsyncIterator[None]:
    """trim_forever in the background for the body of the ``async with``."""
    task = asyncio.create_task(trim_forever(interval))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
