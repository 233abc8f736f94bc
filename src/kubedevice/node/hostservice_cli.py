"""``kubedevice host-service install|uninstall|supervise``: the chart's ``hostService`` pod.

The init container installs the unit (:mod:`.hostservice`); the main container supervises it:
readiness is the unit's plugin sockets served, the host's config is kept equal to the
ConfigMap (and the unit reloaded on a change), and at SIGTERM, if ``helm uninstall`` deleted the
DaemonSet (:mod:`.owner`'s decision, the one that removes CDI specs), everything installed is
removed. A restart or rolling update of the pod leaves the unit running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from pathlib import Path
from typing import Annotated

import typer

from .. import __version__, early_signals
from ..cliparams import directory, output_file, positive_seconds
from ..config import Config, ConfigError, load_config
from ..errors import fail
from .hostservice import (
    DEFAULT_SYSTEMCTL,
    UNIT_NAME,
    HostServiceError,
    Layout,
    Paths,
    Systemctl,
    config_body,
    install,
    sockets_served,
    uninstall,
    write_marked,
)
from .owner import OwnerRef, OwnerWatch, remove_cdi_specs, uninstalled

log = logging.getLogger(__name__)

app = typer.Typer(
    rich_markup_mode=None,
    add_completion=False,
    no_args_is_help=True,
    help="The chart's hostService: kubedevice as a systemd unit on the node.",
)

HostRoot = Annotated[
    Path, typer.Option(metavar="DIR", callback=directory, help="Where the node's / is mounted (read-write).")
]
ConfigFile = Annotated[Path, typer.Option(metavar="FILE", dir_okay=False, help="The config (the ConfigMap's).")]
SystemctlOption = Annotated[str, typer.Option(metavar="COMMAND", help="The host's systemctl, as a command line.")]


def _load(config: Path) -> Config:
    try:
        return load_config(config)
    except ConfigError as err:
        fail(str(err))


def _paths(cfg: Config) -> Paths:
    return Paths(str(cfg.resolved_plugin_dir()), str(cfg.cdi_dir), str(cfg.host_root))


def _systemctl(command: str) -> Systemctl:
    try:
        return Systemctl(command)
    except HostServiceError as err:
        fail(str(err))


@app.command("install")
def install_command(
    host_root: HostRoot = Path("/host"),
    config: ConfigFile = Path("/etc/kubedevice/config.yaml"),
    image_root: Annotated[
        Path, typer.Option(metavar="DIR", callback=directory, help="The runtime to copy: this image's /.")
    ] = Path("/"),
    systemctl: SystemctlOption = DEFAULT_SYSTEMCTL,
) -> None:
    """Copy this image to the node, write the config and unit, enable and start it."""
    cfg = _load(config)
    if cfg.dra is not None:
        fail("hostService is for device plugins: a DRA driver needs its pod's API credentials")
    layout = Layout(host_root, __version__)
    try:
        written = install(image_root, layout, _paths(cfg), config.read_bytes(), _systemctl(systemctl))
    except HostServiceError as err:
        fail(str(err))
    typer.echo(f"installed {UNIT_NAME}: {', '.join(str(p) for p in written)}")


@app.command("uninstall")
def uninstall_command(host_root: HostRoot = Path("/host"), systemctl: SystemctlOption = DEFAULT_SYSTEMCTL) -> None:
    """Stop the unit and remove every file install wrote (files without our mark are kept)."""
    try:
        removed = uninstall(Layout(host_root, __version__), _systemctl(systemctl))
    except HostServiceError as err:
        fail(str(err))
    typer.echo(f"removed: {', '.join(str(p) for p in removed) or 'nothing of ours'}")


@app.command("supervise")
def supervise_command(  # noqa: PLR0917 - typer maps each parameter to an option
    host_root: HostRoot = Path("/host"),
    config: ConfigFile = Path("/etc/kubedevice/config.yaml"),
    systemctl: SystemctlOption = DEFAULT_SYSTEMCTL,
    owner_daemonset: Annotated[
        str | None, typer.Option(metavar="NAMESPACE/NAME", help="Uninstall the unit if this DaemonSet is deleted.")
    ] = None,
    ready_file: Annotated[
        Path,
        typer.Option(
            metavar="FILE",
            writable=True,
            callback=output_file,
            help="Exists while the unit's sockets are served.",
        ),
    ] = Path("/tmp/kubedevice-ready"),
    interval: Annotated[
        float, typer.Option(min=0.05, metavar="SECONDS", callback=positive_seconds, help="Seconds between checks.")
    ] = 2.0,
) -> None:
    """Keep the node's config equal to CONFIG, report readiness, and uninstall with the DaemonSet."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        owner = OwnerRef.parse(owner_daemonset) if owner_daemonset is not None else None
    except ValueError as err:
        fail(str(err))
    supervisor = Supervisor(Layout(host_root, __version__), config, _systemctl(systemctl), ready_file)
    asyncio.run(supervisor.run(owner, interval))


class Supervisor:
    def __init__(self, layout: Layout, config: Path, systemctl: Systemctl, ready_file: Path) -> None:
        self.layout, self.config, self.systemctl, self.ready_file = layout, config, systemctl, ready_file
        self.cfg = _load(config)

    def sync_config(self) -> None:
        """The ConfigMap's content on the host, and ``systemctl reload`` (SIGHUP) when it changed.
        A config the daemon would refuse is not written: the unit keeps serving the last good one."""
        body = self.config.read_bytes()
        if config_body(self.layout.config) == body:
            return
        try:
            self.cfg = load_config(self.config)
        except ConfigError as err:
            log.warning("not installing the changed config: %s", err)
            return
        write_marked(self.layout.config, body)
        self.systemctl("reload", UNIT_NAME, check=False)

    def report_ready(self) -> None:
        plugin_dir = self.layout.on_host(self.cfg.resolved_plugin_dir())
        if sockets_served(plugin_dir, [r.name for r in self.cfg.resources]):
            self.ready_file.touch()
        else:
            self.ready_file.unlink(missing_ok=True)

    async def run(self, owner: OwnerRef | None, interval: float) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        if early_signals.received() is not None:
            stop.set()
        watch = OwnerWatch(owner) if owner is not None else None
        watching = asyncio.create_task(watch.run()) if watch is not None else None
        try:
            while not stop.is_set():
                await asyncio.to_thread(self._check)
                with contextlib.suppress(TimeoutError):  # the next round
                    await asyncio.wait_for(stop.wait(), interval)
            if watch is not None:
                await self._uninstall_if_deleted(watch)
        finally:
            if watching is not None:
                watching.cancel()
            if watch is not None:
                await watch.close()

    def _check(self) -> None:
        try:
            self.sync_config()
            self.report_ready()
        except (OSError, HostServiceError) as err:  # the next round tries again
            log.warning("host service check failed: %s", err)
            self.ready_file.unlink(missing_ok=True)

    async def _uninstall_if_deleted(self, watch: OwnerWatch) -> None:
        await watch.check()
        if not uninstalled(watch.history):
            log.info("keeping the host service: DaemonSet %s was not seen uninstalled", watch.owner)
            return
        removed = await asyncio.to_thread(uninstall, self.layout, self.systemctl)
        specs = remove_cdi_specs(self.cfg, self.layout.on_host(self.cfg.cdi_dir))
        log.info(
            "DaemonSet %s uninstalled: removed %s and %d CDI spec(s)",
            watch.owner,
            ", ".join(map(str, removed)),
            len(specs),
        )
