"""Waiting for a result in tests, benchmarks and the test cluster: the one poll loop they share.

A wait must name the *complete* result it needs, not the first sign of progress: a container's log
read as soon as it is not empty holds its first line only (``HOME=/``, not yet the variable the
test looks for), a file read as soon as it exists may be half-written, a list of slices seen with
one of its nodes' pools is not the list of every node's. So the predicate returns the finished
thing (or something falsy while it is not), and the caller asserts on what was returned, not on a
second read. On a loaded machine a wait takes longer, never a different path; when it times out,
the error says what was last seen, so a failure in CI shows how far things got.

``wait_for`` blocks (for code outside an event loop); ``eventually`` is the same loop for a
coroutine, whose predicate may itself be a coroutine function.

A timeout is what the wait needs on a machine with a core to spare for each runnable process. On
one that is oversubscribed (a CI runner shared with other jobs; the 1-minute load average above
the number of cores), every process gets its share of a core, and so the bound is stretched by
the same factor (:func:`budget`, at most :data:`MAX_STRETCH`): a daemon that starts in 1 s on an
idle machine took 5-10 s at a load of 20 on two cores, and a wait of 10 s failed by chance. A
result that never comes still fails, only later.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar, overload

T = TypeVar("T")

MAX_STRETCH = 10.0
"""The most a wait is stretched for load: beyond it, a machine is too busy to judge anything."""

_SHOWN = 3000
"""Characters of the last seen value in a timeout message: the head and the end (a log's last lines)."""


def wait_for(
    what: str,
    predicate: Callable[[], T | None],
    timeout: float,
    interval: float = 0.05,
    seen: Callable[[], object] | None = None,
) -> T:
    """The first truthy value of ``predicate()``, polled every ``interval`` seconds.

    After ``timeout`` seconds: AssertionError naming ``what`` and what was last seen, ``seen()`` when
    given (a log, the object waited on) or else the predicate's last value. An exception from the
    predicate ends the wait at once (a process that died says so instead of timing out).
    """
    allowed = budget(timeout)
    deadline = time.monotonic() + allowed
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(timed_out(what, allowed, value, seen))
        time.sleep(interval)


@overload
async def eventually(
    what: str,
    predicate: Callable[[], Awaitable[T | None]],
    timeout: float,
    interval: float = 0.05,
    seen: Callable[[], object] | None = None,
) -> T: ...


@overload
async def eventually(
    what: str,
    predicate: Callable[[], T | None],
    timeout: float,
    interval: float = 0.05,
    seen: Callable[[], object] | None = None,
) -> T: ...


async def eventually(
    what: str,
    predicate: Callable[[], object],
    timeout: float,
    interval: float = 0.05,
    seen: Callable[[], object] | None = None,
) -> object:
    """:func:`wait_for` inside an event loop: the loop runs between polls, and ``predicate`` may
    return an awaitable (an ``async def``), which is awaited."""
    loop = asyncio.get_running_loop()
    allowed = budget(timeout)
    deadline = loop.time() + allowed
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(timed_out(what, allowed, value, seen))
        await asyncio.sleep(interval)


def stretch(load: float | None = None, cores: int | None = None) -> float:
    """How much longer than on an idle machine a wait may take now: the runnable processes per core
    (the 1-minute load average over the usable cores), at least 1, at most :data:`MAX_STRETCH`."""
    if load is None:
        load = os.getloadavg()[0]
    if cores is None:
        cores = len(os.sched_getaffinity(0)) or 1
    return min(MAX_STRETCH, max(1.0, load / cores))


def budget(timeout: float) -> float:
    """``timeout`` stretched for the machine's load now (module docstring)."""
    return timeout * stretch()


def logged(log: Path, text: str) -> str | None:
    """The first complete line of the file ``log`` that holds ``text``; None while there is none
    (or no file). The writer may be in the middle of a line: one not yet ended by its newline
    is left out, so what a test then asserts about the line is about all of it."""
    try:
        complete = log.read_text(errors="replace").split("\n")[:-1]
    except OSError:
        return None
    return next((line for line in complete if text in line), None)


def timed_out(what: str, timeout: float, last: object, seen: Callable[[], object] | None = None) -> str:
    """The message of a wait that ran out: what it waited for, for how long, what it saw last."""
    try:
        shown = str(seen()) if seen is not None else repr(last)
    except Exception as err:  # the message must still be made: say why it is partial
        shown = f"(could not be read: {err!r})"
    if len(shown) > _SHOWN:
        shown = f"{shown[: _SHOWN // 3]} … {shown[-2 * _SHOWN // 3 :]}"
    return f"timed out after {timeout:g} s waiting for {what}; last seen: {shown}"
