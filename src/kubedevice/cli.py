"""The ``kubedevice`` entry point: catch stop signals first, then load the command line.

``serve`` catches SIGTERM and SIGINT here, before any heavy import (see
:mod:`kubedevice.early_signals`); other commands keep Python's default behaviour. grpc's C-core
log level is set by the package itself (``kubedevice/__init__.py``), which Python loads before
this module.
"""

from __future__ import annotations

import os
import sys

from . import early_signals


def command_named(args: list[str]) -> str | None:
    """The command the arguments name (the first word; the top level has no option values)."""
    return next((arg for arg in args if not arg.startswith("-")), None)


def main() -> None:
    args = sys.argv[1:]
    if command_named(args) == "serve":
        early_signals.catch()
    # pydantic looks for plugins in every installed distribution's entry points at the first
    # model build (~150 ms here); the kubedevice process uses none.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from .commands import run  # after the signal handlers, on purpose

    run(args)


def kubectl_dra() -> None:
    """The ``kubectl-dra`` entry point: ``kubectl dra ...`` is ``kubedevice dra ...`` with
    kubectl's spellings (:mod:`kubedevice.dra.live.kubectl`)."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")  # as main
    from .commands import run
    from .dra.live.kubectl import kubectl_args

    run(["dra", *kubectl_args(sys.argv[1:])])
