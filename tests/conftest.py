"""Session-wide test set-up."""

from __future__ import annotations

from grpc import aio


def pytest_sessionstart() -> None:
    """Keep grpc.aio's engine up for the whole test process.

    Each test runs its own event loop. Without an extra reference, grpc tears its engine down
    whenever the last aio object of a test is collected, joining its poller thread from inside
    the garbage collector, then builds it again for the next test; with a call still in flight
    on a closed loop that join never returns. The reference is never released: the poller is a
    daemon thread and ends with the process. (A daemon has one loop for its whole life.)
    """
    aio.init_grpc_aio()
