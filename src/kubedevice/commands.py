"""The ``kubedevice`` commands: ``serve`` and ``demo`` here, the tools loaded only when named.

``kubedevice --help`` lists every command from the table below without importing any of
them, and running one imports that one alone: ``serve`` on a small node does not pay (in
start-up time or RSS) for the DRA tools, the simulator or the checker.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple, NoReturn

import typer
from typer.core import TyperGroup

from . import __version__, early_signals
from .cliparams import directory, node_name, output_file
from .errors import DependencyError, UsageError, fail

if TYPE_CHECKING:
    from .config import Config
    from .node.owner import OwnerRef


def _click_error(name: str) -> Any:
    """click's ``UsageError`` or ``ClickException``, reached through a name every typer exports.

    typer >= 0.2x runs on a private copy of click and exports neither (older typer ran on click
    itself), but every typer exports click's ``BadParameter``, which click documents as a
    ``UsageError``, itself a ``ClickException``: its ancestry holds both, whichever click it is.
    """
    return next(cls for cls in typer.BadParameter.__mro__ if cls.__name__ == name)


USAGE_ERROR = _click_error("UsageError")
CLICK_ERROR = _click_error("ClickException")


class LazyCommand(NamedTuple):
    module: str
    attribute: str  # a typer.Typer (a group) or a command function
    help: str


LAZY = {
    "discover": LazyCommand(
        "kubedevice.sources.cli", "discover", "Dry run: what each configured resource would advertise."
    ),
    "kubelet": LazyCommand(
        "kubedevice.kubelet.cli", "kubelet", "Run the kubelet simulator: live capacity, admit pods, restart."
    ),
    "check": LazyCommand(
        "kubedevice.conformance.cli", "check", "Check a device plugin against the kubelet's contract."
    ),
    "host-service": LazyCommand(
        "kubedevice.node.hostservice_cli", "app", "The chart's hostService: install, supervise, remove the unit."
    ),
    "dra": LazyCommand(
        "kubedevice.dra.cli", "app", "Dynamic Resource Allocation: validate, explain and allocate like the API server."
    ),
}


class BareHelpGroup(TyperGroup):
    """A group that, named without a command, prints its help on stderr and exits 2 (:func:`_bare`)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help:
            _bare(ctx)
        return super().parse_args(ctx, args)


class LazyGroup(BareHelpGroup):
    """A group whose tool commands are imported when invoked, and listed in help without import."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *LAZY]

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        if not rest and command is not None and command.no_args_is_help:  # ``kubedevice dra``
            _bare(typer.Context(command, info_name=name, parent=ctx))
        return name, command, rest

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in LAZY:
            return _load(cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(name, command.get_short_help_str(limit=200)) for name, command in self.commands.items()]
        rows += [(name, lazy.help) for name, lazy in LAZY.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _bare(ctx: Any) -> NoReturn:
    """A group named without a command: its help on stderr and exit 2.

    Done here rather than left to click, whose answer changed across versions (help on stdout
    and exit 0 before click 8.2, an error to catch since), so every typer behaves alike.
    """
    typer.echo(ctx.get_help(), err=True)
    raise typer.Exit(2)


def _load(name: str) -> Any:
    lazy = LAZY[name]
    target = getattr(importlib.import_module(lazy.module), lazy.attribute)
    if not isinstance(target, typer.Typer):
        single = typer.Typer(rich_markup_mode=None, add_completion=False)
        single.command(name=name, help=lazy.help)(target)
        target = single
    command = typer.main.get_command(target)
    command.name = name
    return command


app = typer.Typer(
    name="kubedevice",
    cls=LazyGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click help: no markup to leak, no rich import for --help
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kubedevice {__version__}")
        raise typer.Exit


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", is_eager=True, callback=_version)
    ] = False,
) -> None:
    """Kubernetes device plugins: serve devices, simulate the kubelet, check plugins, DRA tools."""


ConfigOption = Annotated[Path, typer.Option("--config", "-c", help="YAML config file.", dir_okay=False, metavar="FILE")]
PluginDirOption = Annotated[
    Path | None,
    typer.Option(
        metavar="DIR",
        callback=directory,
        help="The kubelet's device plugin directory (env KUBEDEVICE_PLUGIN_DIR, then the config, "
        "then /var/lib/kubelet/device-plugins). Never created: serve waits for it.",
    ),
]
HostRootOption = Annotated[
    Path | None,
    typer.Option(metavar="DIR", callback=directory, help="Where the host's / is mounted (e.g. /host in a pod)."),
]
LogLevel = Literal["debug", "info", "warning", "error", "critical"]
LogFormat = Literal["text", "json"]


def load(config: Path) -> Config:
    from .config import ConfigError, load_config  # noqa: PLC0415 - pydantic only for the commands that read a config

    try:
        return load_config(config)
    except ConfigError as err:
        fail(str(err))


# Each mode's own flags, and why the other mode has no use for them.
_DEVICE_PLUGIN_ONLY = {
    "--plugin-dir": "a DRA driver registers in --kubelet-dir's plugins_registry",
    "--owner-daemonset": "a DRA claim's CDI spec goes when the kubelet unprepares it",
    "--features-file": "a DRA driver publishes its devices in ResourceSlices",
}
_DRA_ONLY = {
    "--kubelet-dir": "device plugins register in --plugin-dir",
    "--claims-dir": "device plugins get no ResourceClaims",
}


def _refuse_flags_of_the_other_mode(*, dra: bool, given: dict[str, object]) -> None:
    """A flag the config's mode never reads is a mistake to report, not a value to ignore."""
    wrong = _DEVICE_PLUGIN_ONLY if dra else _DRA_ONLY
    for flag, why in wrong.items():
        if given.get(flag) is not None:
            mode = "device plugins" if dra else "a config with a 'dra' section"
            fail(f"serve: {flag} is for {mode}: {why}")


def _owner(text: str | None) -> OwnerRef | None:
    """``--owner-daemonset``'s value as an ``OwnerRef`` (None when not given; given empty is an error)."""
    from .node.owner import OwnerRef  # noqa: PLC0415

    return OwnerRef.parse(text) if text is not None else None


def _check_kubeconfig(path: Path) -> None:
    """Load ``--kubeconfig`` now: a broken one is a usage error at start, not a failure at first use."""
    from .kubeclient import load_kubeconfig  # noqa: PLC0415 - lightkube only when a kubeconfig is given

    load_kubeconfig(path)


def _listen_address(value: str | None) -> str | None:
    """``--metrics-address``: HOST:PORT, checked before anything starts."""
    if value is None:
        return None
    from .metrics import parse_address  # noqa: PLC0415 - the metrics module only when the flag is given

    try:
        parse_address(value)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None
    return value


@app.command()
def serve(  # noqa: PLR0917 - typer maps each parameter to an option
    config: ConfigOption,
    plugin_dir: PluginDirOption = None,
    host_root: HostRootOption = None,
    cdi_dir: Annotated[
        Path | None,
        typer.Option(metavar="DIR", callback=directory, help="CDI spec directory (overrides the config)."),
    ] = None,
    metrics_address: Annotated[
        str | None,
        typer.Option(
            metavar="HOST:PORT",
            callback=_listen_address,
            help="Serve /metrics, /healthz and /readyz here (off by default).",
        ),
    ] = None,
    log_level: Annotated[LogLevel, typer.Option(case_sensitive=False, help="Log level.")] = "info",
    log_format: Annotated[LogFormat, typer.Option(case_sensitive=False, help="Log format.")] = "text",
    node: Annotated[
        str | None,
        typer.Option(
            envvar="NODE_NAME", metavar="NODE", callback=node_name, help="This node's name, for DRA and node_selector."
        ),
    ] = None,
    kubelet_dir: Annotated[
        Path | None,
        typer.Option(metavar="DIR", callback=directory, help="DRA: the kubelet's root [default /var/lib/kubelet]."),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            exists=True,
            dir_okay=False,
            help="API access [default in-cluster, then $KUBECONFIG].",
        ),
    ] = None,
    owner_daemonset: Annotated[
        str | None,
        typer.Option(
            metavar="NAMESPACE/NAME",
            help="The DaemonSet running this daemon: if it is gone or being deleted at SIGTERM, "
            "remove our CDI specs (uninstall); otherwise keep them (restart, update).",
        ),
    ] = None,
    claims_dir: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            callback=directory,
            help="DRA, testing only: read ResourceClaims from YAML/JSON files in DIR; "
            "no API server, no ResourceSlices published.",
        ),
    ] = None,
    features_file: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            dir_okay=False,
            writable=True,
            callback=output_file,
            help="Keep a Node Feature Discovery feature file here (in NFD's features.d): "
            "NAME.present and NAME.count labels, rewritten atomically on every change.",
        ),
    ] = None,
    all_cpus: Annotated[
        bool,
        typer.Option(
            "--all-cpus",
            help="Let the daemon's threads run on every CPU it may use. By default they share the one it "
            "starts on: each gRPC call then crosses threads without a cross-CPU wake-up.",
        ),
    ] = False,
) -> None:
    """Run the config-driven daemon: serve every configured resource and keep it registered.

    A config with a 'dra:' section is served through DRA instead (--node, --kubelet-dir,
    --kubeconfig); see docs/dra-driver.md.
    """
    from .node.daemon import DaemonOptions, run_daemon  # noqa: PLC0415

    cfg = load(config)
    try:
        owner = _owner(owner_daemonset)
    except ValueError as err:
        fail(str(err))
    if cfg.dra is not None and any(r.node_selector for r in cfg.resources):  # the config first: it picks the mode
        fail(
            "node_selector is for device plugins: a DRA driver publishes every device, and DeviceClass "
            "selectors or the node's ResourceSlice pick where claims go"
        )
    _refuse_flags_of_the_other_mode(
        dra=cfg.dra is not None,
        given={
            "--plugin-dir": plugin_dir,
            "--owner-daemonset": owner_daemonset,
            "--features-file": features_file,
            "--kubelet-dir": kubelet_dir,
            "--claims-dir": claims_dir,
        },
    )
    if kubeconfig is not None:  # judged now, though only some configs and flags use it
        _check_kubeconfig(kubeconfig)
    if cfg.dra is not None:
        from .dra.driver.daemon import DraOptions, serve_command  # noqa: PLC0415

        paths = (kubelet_dir, cdi_dir, kubeconfig, host_root)
        dra_options = DraOptions(node or "", *paths, metrics_address, log_level, log_format, claims_dir, all_cpus)
        serve_command(cfg, dra_options, early_signals.received)
    options = DaemonOptions(
        config,
        plugin_dir,
        host_root,
        cdi_dir,
        metrics_address,
        log_level,
        log_format,
        owner,
        kubeconfig,
        features_file,
        node,
        all_cpus,
    )
    try:
        code = run_daemon(cfg, options, early_signals.received)
    except ValueError as err:  # a resource the kubelet would refuse, a host root that is missing, ...
        fail(str(err))
    raise typer.Exit(code)


@app.command()
def demo(
    config: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Config to serve (default: the bundled examples/null.yaml)."),
    ] = None,
) -> None:
    """No cluster, no root: a simulated kubelet and a plugin in a temp dir, end to end."""
    from .demo import run_demo  # noqa: PLC0415

    try:
        code = run_demo(config)
    except ValueError as err:
        fail(str(err))
    raise typer.Exit(code)


def run(args: list[str]) -> NoReturn:
    """Run the command line; every error becomes the one-line format (:mod:`kubedevice.errors`)."""
    raise SystemExit(invoke(app, args, "kubedevice"))


def invoke(typer_app: typer.Typer, args: list[str], prog: str) -> int:
    """Run ``typer_app`` on ``args``; its exit code.

    click's usage errors and :class:`UsageError` exit 2, :class:`DependencyError` (a port, a
    kubelet, an API server) exits 1: a command raises them from wherever it finds the problem,
    and each is the one line of every kubedevice command, naming ``prog``'s help.
    """
    command = typer.main.get_command(typer_app)
    try:
        code = command.main(args=args, prog_name=prog, standalone_mode=False)
    except USAGE_ERROR as err:
        where = err.ctx.command_path if err.ctx is not None else prog
        message = err.format_message().replace("Value error, ", "").rstrip(".")
        fail(f"{message[:1].lower()}{message[1:]} (see '{where} --help')")
    except CLICK_ERROR as err:
        fail(err.format_message(), err.exit_code)
    except typer.Abort:
        fail("aborted", 1)
    except UsageError as err:
        fail(str(err))
    except DependencyError as err:
        fail(str(err), 1)
    return code if isinstance(code, int) else 0
