"""``kubedevice check``: run the conformance suite and exit 1 if any check failed.

The lead's ``cli.py`` registers :func:`check` as a command; exit status 2 is for usage errors,
reported on one line without a traceback.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from .report import print_table, to_json
from .runner import CheckOptions, run_checks


def check(
    *,
    plugin_dir: Annotated[
        Path | None,
        typer.Option(help="serve a simulated kubelet.sock here and wait for the plugin to register"),
    ] = None,
    socket: Annotated[
        Path | None, typer.Option(help="probe an already running plugin socket (no registration, no restart)")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print the results as JSON")] = False,
    restart: Annotated[bool, typer.Option(help="restart the simulated kubelet and time re-registration")] = True,
    timeout: Annotated[float, typer.Option(help="seconds to wait for the plugin to register")] = 30.0,
    restart_timeout: Annotated[float, typer.Option(help="seconds to wait for re-registration")] = 15.0,
) -> None:
    """Check a device plugin against the kubelet's contract; exit 1 if any check fails."""
    options = CheckOptions(plugin_dir, socket, restart, timeout, restart_timeout)
    problem = usage_problem(options)
    if problem:
        typer.echo(f"kubedevice check: {problem}", err=True)
        raise typer.Exit(2)
    report = asyncio.run(run_checks(options))
    if json_output:
        typer.echo(to_json(report))
    else:
        print_table(report, Console())
    raise typer.Exit(1 if report.failed else 0)


def usage_problem(options: CheckOptions) -> str | None:
    if (options.plugin_dir is None) == (options.socket is None):
        return "give exactly one of --plugin-dir and --socket"
    if options.socket is not None and not options.socket.exists():
        return f"--socket {options.socket} does not exist"
    if options.plugin_dir is not None and options.plugin_dir.exists() and not options.plugin_dir.is_dir():
        return f"--plugin-dir {options.plugin_dir} is not a directory"
    if options.timeout <= 0 or options.restart_timeout <= 0:
        return "--timeout and --restart-timeout must be positive"
    return None
