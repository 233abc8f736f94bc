"""The ``kubedevice`` command line.

Each command imports what it needs when it runs, so ``kubedevice serve`` on a small node
does not pay (in start-up time or RSS) for the DRA tools or the simulator.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:
    from .config import Config

app = typer.Typer(
    name="kubedevice",
    help="Kubernetes device plugins: serve devices, simulate the kubelet, check plugins, DRA tools.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ConfigOption = Annotated[Path, typer.Option("--config", "-c", help="YAML config file", dir_okay=False)]
PluginDirOption = Annotated[
    Path | None,
    typer.Option(
        help="kubelet device plugin directory [env KUBEDEVICE_PLUGIN_DIR; default /var/lib/kubelet/device-plugins]"
    ),
]
HostRootOption = Annotated[Path | None, typer.Option(help="where the host's / is mounted (e.g. /host in a pod)")]


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr and an exit code: the only way a command reports bad input."""
    typer.echo(f"kubedevice: {message}", err=True)
    raise typer.Exit(code)


def load(config: Path) -> Config:
    from .config import ConfigError, load_config

    try:
        return load_config(config)
    except ConfigError as err:
        fail(str(err))


@app.command()
def serve(
    config: ConfigOption,
    plugin_dir: PluginDirOption = None,
    host_root: HostRootOption = None,
    cdi_dir: Annotated[Path | None, typer.Option(help="CDI spec directory (overrides the config)")] = None,
    metrics_address: Annotated[
        str | None, typer.Option(help="serve /metrics, /healthz, /readyz on HOST:PORT (off by default)")
    ] = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error")] = "info",
    log_format: Annotated[str, typer.Option(help="text or json")] = "text",
    node: Annotated[str | None, typer.Option(envvar="NODE_NAME", help="DRA: this node's name [env NODE_NAME]")] = None,
    kubelet_dir: Annotated[Path | None, typer.Option(help="DRA: kubelet root [default /var/lib/kubelet]")] = None,
    kubeconfig: Annotated[Path | None, typer.Option(help="DRA: API access [default in-cluster, $KUBECONFIG]")] = None,
) -> None:
    """Run the config-driven daemon: serve every configured resource and keep it registered."""
    from .daemon import DaemonOptions, run_daemon

    cfg = load(config)
    if cfg.dra is not None:
        from .dra.driver.daemon import DraOptions, serve_command

        paths = (kubelet_dir, cdi_dir, kubeconfig, host_root)
        serve_command(cfg, DraOptions(node or "", *paths, metrics_address, log_level, log_format))
    options = DaemonOptions(config, plugin_dir, host_root, cdi_dir, metrics_address, log_level, log_format)
    try:
        code = run_daemon(cfg, options)
    except ValueError as err:  # a resource the kubelet would refuse, a host root that is missing, ...
        fail(str(err))
    raise typer.Exit(code)


@app.command()
def demo(
    config: Annotated[
        Path | None, typer.Option(help="config to serve (default: the bundled examples/null.yaml)")
    ] = None,
) -> None:
    """No cluster, no root: a simulated kubelet and a plugin in a temp dir, end to end."""
    from .demo import run_demo

    raise typer.Exit(run_demo(config))


def _kubelet() -> None:
    from .kubelet.cli import kubelet

    app.command(help="Run the kubelet simulator: live capacity, admit pods, restart.")(kubelet)


def _dra() -> None:
    from .dra.cli import app as dra_app

    app.add_typer(dra_app, name="dra")


def _discover() -> None:
    from .sources.cli import discover

    app.command(help="Dry run: what each configured resource would advertise.")(discover)


def _check() -> None:
    from .conformance.cli import check

    app.command(help="Check a device plugin against the kubelet's contract.")(check)


# Registered only when named (or for help): importing every tool would cost `serve` ~1 s.
LAZY_COMMANDS = {"kubelet": _kubelet, "dra": _dra, "discover": _discover, "check": _check}


def main() -> None:
    # pydantic looks for plugins in every installed distribution's entry points at the first
    # model build (~150 ms here); the kubedevice process uses none.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    named = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), None)
    for name, register in LAZY_COMMANDS.items():
        if named in (None, name) or named not in {*LAZY_COMMANDS, "serve", "demo"}:
            register()
    app()
