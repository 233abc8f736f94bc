"""The ``kubedevice`` entry point: catch stop signals first, then load the command line.

A DaemonSet pod can be told to stop while ``serve`` is still importing gRPC or reading its
config. Python's default for SIGTERM is to die (exit 143) with sockets left behind, so
``serve`` catches SIGTERM and SIGINT here, before any heavy import, and the daemon stops
cleanly (exit 0) as soon as its loop runs. Other commands keep the default behaviour.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

_received: int | None = None


def _remember(signum: int, frame: FrameType | None) -> None:
    global _received  # noqa: PLW0603 - one process-wide fact, set from a signal handler
    _received = signum


def early_signal() -> int | None:
    """The stop signal caught before the daemon's loop took the signals over, if any."""
    return _received


def command_named(args: list[str]) -> str | None:
    """The command the arguments name (the first word; the top level has no option values)."""
    return next((arg for arg in args if not arg.startswith("-")), None)


def main() -> None:
    args = sys.argv[1:]
    if command_named(args) == "serve":
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _remember)
    # pydantic looks for plugins in every installed distribution's entry points at the first
    # model build (~150 ms here); the kubedevice process uses none.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from .commands import run  # after the signal handlers, on purpose

    run(args)
