"""``asyncio.run`` for the processes that serve gRPC: the loop ends only after grpc.aio's own
tasks for the calls it served have ended.

grpc.aio runs each call it accepts in a task named ``rpc_task`` (``_schedule_rpc_coro`` in
grpcio 1.85's ``aio/server.pyx.pxi``), which ends only when the event loop has seen the call's
last batch complete: the handler's final status, the peer's close. ``server.stop()`` returns
once the C core is done, and those completions may still be on their way to the loop. A loop
closed then (``asyncio.run`` returning right after the daemon's clean stop) cancels the task
where it awaits the handler, and grpc prints that ``CancelledError``'s traceback to stderr with
``traceback.print_exc()``: seen once under load in a fresh-clone CI run, as the last output of a
plugin that had stopped cleanly (tests/test_docs_snippets.py). So the process waits a moment for
them after its own work, whatever ended it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

GRPC_CALL_TASK = "rpc_task"
"""The name grpc.aio gives the task of each call its servers accept."""

SETTLE_SECONDS = 2.0
"""How long the end of the process waits for them: they end within a few loop turns once the
servers are stopped; the bound is for a grpc that would not end them."""


async def grpc_calls_settled(timeout: float = SETTLE_SECONDS) -> None:
    """Wait, at most ``timeout``, for grpc.aio's call tasks on this loop to end. Call it with
    every server stopped: a live server's streams would hold it for the whole ``timeout``."""
    pending = [task for task in asyncio.all_tasks() if task.get_name() == GRPC_CALL_TASK and not task.done()]
    if pending:
        await asyncio.wait(pending, timeout=timeout)


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, then :func:`grpc_calls_settled` before the loop closes."""

    async def settled() -> T:
        try:
            return await main
        finally:
            await grpc_calls_settled()

    return asyncio.run(settled())
