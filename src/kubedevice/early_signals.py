"""Stop signals that arrive while ``serve`` is still starting, kept until its loop runs.

A DaemonSet pod can be told to stop while ``serve`` is still importing gRPC or reading its
config. Python's default for SIGTERM is to die (exit 143) with sockets left behind, so the
entry point calls :func:`catch` before any heavy import; the daemon's loop takes the signals
over later and asks :func:`received` whether one came in the meantime, to stop cleanly (exit 0)
at once. This module imports nothing of kubedevice, so the entry point and the commands both use
it without importing each other.
"""

from __future__ import annotations

import signal
from types import FrameType

_received: int | None = None


def _remember(signum: int, frame: FrameType | None) -> None:
    global _received  # noqa: PLW0603 - one process-wide fact, set from a signal handler
    _received = signum


def catch() -> None:
    """Remember SIGTERM and SIGINT instead of dying: the daemon acts on them once it runs."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _remember)


def received() -> int | None:
    """The stop signal caught before the daemon's loop took the signals over, if any."""
    return _received
