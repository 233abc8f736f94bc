"""Keep glibc's heap from growing where Python's does not: two arenas, and a trim once a minute.

An hour of hotplug churn, health flapping and Allocate load (``benchmarks/soak.py
--trace-memory``) showed what Python objects hold and glibc's bytes in use flat, while glibc's
free-but-kept bytes grew in steps of 1-3 MiB and RSS with them: freed chunks between live ones
are not returned by ``free`` itself, and every new thread (grpc's, the executor's) may get an
arena of its own (up to 8 per core) to fragment. ``mallopt(M_ARENA_MAX, 2)`` makes later threads
share two arenas; ``malloc_trim(0)`` returns every whole free page (about a millisecond for the
daemon's heap). Other C libraries than glibc are left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
from collections.abc import AsyncIterator, Callable

TRIM_SECONDS = 60.0


M_ARENA_MAX = -8  # glibc's mallopt parameter
ARENAS = 2


def _glibc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None) if os.confstr("CS_GNU_LIBC_VERSION") else None
    except (ValueError, OSError):  # no such confstr name: another C library
        return None


def malloc_trim() -> Callable[[], int] | None:
    """glibc's ``malloc_trim(0)`` (1 if memory was returned), or None on another C library."""
    libc = _glibc()
    if libc is None:
        return None
    trim = libc.malloc_trim
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: int(trim(0))


def cap_arenas(arenas: int = ARENAS) -> bool:
    """Threads started from now on share ``arenas`` malloc arenas; False without glibc."""
    libc = _glibc()
    return libc is not None and bool(libc.mallopt(M_ARENA_MAX, arenas))


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
    """Arenas capped, and trim_forever in the background for the body of the ``async with``."""
    cap_arenas()
    task = asyncio.create_task(trim_forever(interval))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
