"""``kubedevice check``: run the conformance suite and exit 1 if any check failed.

The top-level ``cli.py`` registers :func:`check` as a command; exit status 2 is for usage
errors (a live kubelet already serving the directory among them), reported on one line in the
format of :mod:`kubedevice.errors`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from .. import eventloop
from ..cliparams import directory, existing_socket, positive_seconds
from ..errors import fail, os_reason
from ..kubelet import CannotServe
from .model import Report
from .report import print_report, to_json
from .runner import CheckOptions, run_checks


def check(
    *,
    plugin_dir: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            callback=directory,
            help="Serve a simulated kubelet.sock in DIR (created if missing) and wait for the plugin.",
        ),
    ] = None,
    socket: Annotated[
        Path | None,
        typer.Option(
            metavar="PATH",
            callback=existing_socket,
            help="Probe a plugin socket that is already served (no registration, no restart).",
        ),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", metavar="", help="Print the results as JSON.")] = False,
    restart: Annotated[
        bool, typer.Option(metavar="", help="Restart the simulated kubelet at the end and time re-registration.")
    ] = True,
    timeout: Annotated[
        float,
        typer.Option(metavar="SECONDS", callback=positive_seconds, help="How long to wait for the plugin to register."),
    ] = 30.0,
    restart_timeout: Annotated[
        float,
        typer.Option(metavar="SECONDS", callback=positive_seconds, help="How long to wait for re-registration."),
    ] = 15.0,
    dra: Annotated[
        bool,
        typer.Option(
            "--dra", metavar="", help="Check a DRA kubelet plugin instead (with --kubelet-dir, --driver, --claims)."
        ),
    ] = False,
    kubelet_dir: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR", callback=directory, help="DRA: the kubelet root whose plugins_registry the driver uses."
        ),
    ] = None,
    driver: Annotated[str | None, typer.Option(metavar="NAME", help="DRA: the driver name to check.")] = None,
    claims: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR", callback=directory, help="DRA: ResourceClaim files; the driver must see the same claims."
        ),
    ] = None,
    cdi_dir: Annotated[
        Path | None,
        typer.Option(metavar="DIR", callback=directory, help="DRA: where the driver writes CDI specs (checks them)."),
    ] = None,
) -> None:
    """Check a device plugin (or with --dra a DRA driver) against the kubelet's contract; exit 1 if any check fails."""
    if dra:
        if plugin_dir is not None or socket is not None:
            fail("--plugin-dir and --socket are for device plugins: with --dra the driver registers in --kubelet-dir")
        _check_dra(kubelet_dir, driver, claims, cdi_dir, timeout=timeout, as_json=json_output)
    if any(flag is not None for flag in (kubelet_dir, driver, claims, cdi_dir)):
        fail("--kubelet-dir, --driver, --claims and --cdi-dir need --dra")
    options = CheckOptions(plugin_dir, socket, restart, timeout, restart_timeout)
    problem = usage_problem(options)
    if problem:
        fail(problem)
    try:
        report = eventloop.run(run_checks(options))
    except CannotServe as err:
        fail(str(err))
    _show(report, json_output)


def _check_dra(
    kubelet_dir: Path | None,
    driver: str | None,
    claims: Path | None,
    cdi_dir: Path | None,
    *,
    timeout: float,
    as_json: bool,
) -> NoReturn:
    from .dra.runner import DraCheckOptions, run_dra_checks  # noqa: PLC0415 - the DRA checker only when asked for

    if kubelet_dir is None or not driver or claims is None:
        fail("--dra needs --kubelet-dir, --driver and --claims")
    if not claims.is_dir():
        fail(f"--claims {claims} is not a directory")
    try:
        report = eventloop.run(run_dra_checks(DraCheckOptions(kubelet_dir, driver, claims, cdi_dir, timeout)))
    except (CannotServe, ValueError) as err:
        fail(str(err))
    except OSError as err:
        fail(f"{getattr(err, 'filename', None) or kubelet_dir}: {os_reason(err)}")
    _show(report, as_json)


def _show(report: Report, as_json: bool) -> NoReturn:
    if as_json:
        typer.echo(to_json(report))
    else:
        print_report(report, Console())
    raise typer.Exit(1 if report.failed else 0)


def usage_problem(options: CheckOptions) -> str | None:
    if (options.plugin_dir is None) == (options.socket is None):
        return "give exactly one of --plugin-dir and --socket"
    if options.socket is not None and not options.socket.exists():
        return f"--socket {options.socket} does not exist"
    return None
