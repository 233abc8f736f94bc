"""``kubedevice kubelet``: run the simulator by hand or from a script.

On a terminal it keeps a live table of resources, devices (with health) and the pods holding
them, with each event printed above it; elsewhere (a pipe, a test) it prints one line per event
and a resources line whenever capacity changes. Commands come on stdin (see ``HELP``); SIGUSR1
restarts it. ``--admit`` and ``--restart-after`` do the same without a person at the keyboard.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.live import Live
from rich.markup import escape

from .. import eventloop
from ..api import DEFAULT_PLUGIN_DIR
from ..cliparams import directory, seconds
from ..errors import UsageError, fail
from ..plugin_dir import plugin_dir_from_env, resolve_plugin_dir
from .model import AdmissionError, Container, ContainerStartError, Pod
from .plugin_server import CannotServe
from .simulator import KubeletSimulator
from .view import state_view, unknown

DEFAULT_KUBELET_DIR = Path("/var/lib/kubelet")
HELP = "commands: admit RES=N [RES=N ...] | start POD [CONTAINER] | remove POD | restart | status | quit"
CONTAINER = "main"


def parse_requests(specs: list[str]) -> dict[str, int]:
    """``["example.com/null=2"]`` -> ``{"example.com/null": 2}``; raises ``ValueError`` with the bad item."""
    requests: dict[str, int] = {}
    for spec in specs:
        name, sep, count = spec.partition("=")
        if not sep or not name or not count.isdigit():
            raise ValueError(f"{spec!r} is not RESOURCE=COUNT")
        requests[name] = int(count)
    return requests


@dataclass
class _Session:
    """The running simulator plus what the command line needs around it.

    Outcomes (admitted, rejected, started) are the simulator's own events, printed once by
    :func:`_show`; the session prints only what no event covers.
    """

    sim: KubeletSimulator
    console: Console
    live: Live | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    pods: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def spawn(self, work: Coroutine[object, object, None]) -> None:
        task = asyncio.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def say(self, text: str) -> None:
        self.console.print(escape(text), soft_wrap=True)

    def status(self) -> str:
        capacity, allocatable = self.sim.capacity(), self.sim.allocatable()
        shown = ", ".join(f"{n} {capacity[n]}/{allocatable[n]}" for n in sorted(capacity)) or "none"
        return f"resources (capacity/allocatable): {shown}"

    def redraw(self) -> None:
        if self.live is not None:
            self.live.update(state_view(self.sim, HELP), refresh=True)

    async def admit(self, requests: dict[str, int]) -> None:
        uid = f"cli-pod-{next(self.pods)}"
        with contextlib.suppress(AdmissionError):  # the simulator's "rejected pod" event says why
            await self.sim.admit(Pod(uid, uid, [Container(CONTAINER, requests)]))

    async def start(self, pod: str, container: str) -> None:
        """Start a container as the kubelet would: PreStartContainer first where the plugin asked for it."""
        with contextlib.suppress(ContainerStartError):  # the simulator's "cannot start" event says why
            await self.sim.start_container(pod, container)

    async def restart(self) -> None:
        await self.sim.restart()
        self.say("kubelet restarted")

    async def command(self, line: str) -> None:
        words = line.split()
        if not words:
            return
        verb, args = words[0], words[1:]
        if verb == "admit" and args:
            try:
                requests = parse_requests(args)
            except ValueError as err:
                self.say(f"{err}; {HELP}")
                return
            await self.admit(requests)
        elif verb == "start" and 1 <= len(args) <= 2:
            await self.start(args[0], args[1] if len(args) == 2 else CONTAINER)
        elif verb == "remove" and len(args) == 1:
            if self.sim.remove_pod(args[0]):
                self.say(f"pod {args[0]} removed; its devices are freed at the next admission")
            else:
                self.say(f"no running pod {args[0]!r} (never admitted, rejected or removed)")
        elif verb == "restart":
            await self.restart()
        elif verb == "status":
            self.say(self.status())
        elif verb in ("quit", "exit"):
            self.stop.set()
        else:
            self.say(unknown(verb, args, HELP))


async def _show(session: _Session) -> None:
    """Print each simulator event; then redraw the live table, or print the resources line if it changed."""
    sim, last = session.sim, ""
    seen = 0
    while True:
        for event in sim.events[seen:]:
            session.say(event)
        seen = len(sim.events)
        if session.live is not None:
            session.redraw()
        elif (line := session.status()) != last:
            session.say(line)
            last = line
        await sim.wait_until(functools.partial(_more_events, sim, seen), timeout=3600)


def _more_events(sim: KubeletSimulator, seen: int) -> bool:
    return len(sim.events) > seen


def _read_stdin(loop: asyncio.AbstractEventLoop, lines: asyncio.Queue[str | None]) -> None:
    """Blocking reader on a daemon thread, so a pending read never holds up exit."""
    for line in sys.stdin:
        loop.call_soon_threadsafe(lines.put_nowait, line)
    loop.call_soon_threadsafe(lines.put_nowait, None)


async def _commands(session: _Session) -> None:
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    threading.Thread(target=_read_stdin, args=(asyncio.get_running_loop(), lines), daemon=True).start()
    while (line := await lines.get()) is not None:
        await session.command(line)


async def _scripted_admits(session: _Session, admits: list[dict[str, int]], timeout: float) -> None:
    """Admit each pod once its resources are allocatable, or after ``timeout`` to show the kubelet's error."""
    sim = session.sim
    for requests in admits:
        with_room = lambda r=requests: all(sim.allocatable().get(n, 0) >= c for n, c in r.items())  # noqa: E731
        try:
            await sim.wait_until(with_room, timeout)
        except TimeoutError:
            session.say(f"not enough allocatable devices after {timeout:g} s; admitting anyway")
        await session.admit(requests)


async def _later(delay: float, work: Callable[[], Coroutine[object, object, None]]) -> None:
    """``work()`` after ``delay``: made only then, so a stop before it comes leaves no coroutine unawaited."""
    await asyncio.sleep(delay)
    await work()


async def _stop_later(delay: float, stop: asyncio.Event) -> None:
    await asyncio.sleep(delay)
    stop.set()


@dataclass(frozen=True)
class _Options:
    plugin_dir: Path
    grace_period: float
    admits: list[dict[str, int]]
    admit_timeout: float
    restart_after: float | None
    exit_after: float | None
    live: bool


async def _start(sim: KubeletSimulator) -> None:
    """Start serving, or a :class:`UsageError` naming the directory (a live kubelet there, no permission)."""
    try:
        await sim.start()
    except CannotServe as err:
        raise UsageError(str(err)) from None


async def _run(opts: _Options, console: Console) -> None:
    sim = KubeletSimulator(opts.plugin_dir, grace_period=opts.grace_period)
    session = _Session(sim, console)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, session.stop.set)
    loop.add_signal_handler(signal.SIGUSR1, lambda: session.spawn(session.restart()))
    await _start(sim)
    view = Live(state_view(sim, HELP), console=console, auto_refresh=False) if opts.live else None
    with view or contextlib.nullcontext() as live:
        session.live = live
        if live is None:
            session.say(HELP)
        await _serve(session, opts)
    await sim.stop()
    session.say("bye")


async def _serve(session: _Session, opts: _Options) -> None:
    """Run until quit, a signal or ``--exit-after``; then cancel the session's tasks."""
    session.spawn(_show(session))
    session.spawn(_commands(session))
    session.spawn(_scripted_admits(session, opts.admits, opts.admit_timeout))
    if opts.restart_after is not None:
        session.spawn(_later(opts.restart_after, session.restart))
    if opts.exit_after is not None:
        session.spawn(_stop_later(opts.exit_after, session.stop))
    await session.stop.wait()
    for task in list(session.tasks):
        task.cancel()
    await asyncio.gather(*session.tasks, return_exceptions=True)


def _plugin_dir(flag: Path | None) -> Path:
    """Flag, ``$KUBEDEVICE_PLUGIN_DIR``, default, as ``serve`` resolves it.

    The default is the real kubelet's directory: if it is missing there is no kubelet here, and
    the simulator will not create ``/var/lib/kubelet`` unasked. A directory given by flag or env
    is created if missing (the simulator says so).
    """
    directory = resolve_plugin_dir(flag)
    if flag is None and plugin_dir_from_env() is None and not directory.is_dir():
        fail(
            f"{directory} does not exist (no kubelet on this machine); to simulate one, "
            "give --plugin-dir DIR or set KUBEDEVICE_PLUGIN_DIR (a missing DIR is created)"
        )
    return directory


def _kubelet_dir(flag: Path | None) -> Path:
    """The flag, or the real kubelet's root if it exists (a live kubelet there is refused later)."""
    if flag is not None:
        return flag
    if not DEFAULT_KUBELET_DIR.is_dir():
        fail(
            f"{DEFAULT_KUBELET_DIR} does not exist (no kubelet on this machine); to simulate one, "
            "give --kubelet-dir DIR (a missing DIR is created)"
        )
    return DEFAULT_KUBELET_DIR


def _dra_kubelet(
    claims: Path | None, kubelet_dir: Path | None, exit_after: float | None, plain: bool, scripted: bool
) -> None:
    if scripted:
        fail("--dra takes none of --plugin-dir, --admit and --restart-after")
    if claims is None:
        fail("--dra needs --claims DIR (ResourceClaim files)")
    if not claims.is_dir():
        fail(f"--claims {claims} is not a directory")
    from .dra.cli import run_dra  # noqa: PLC0415 - the DRA side only when asked for

    directory = _kubelet_dir(kubelet_dir)
    console = Console(highlight=False)
    try:
        eventloop.run(run_dra(directory, claims, console, console.is_terminal and not plain, exit_after))
    except UsageError as err:
        fail(str(err))


def kubelet(
    *,
    plugin_dir: Annotated[
        Path | None,
        typer.Option(
            "--plugin-dir",
            metavar="DIR",
            help=f"Device plugin directory (else $KUBEDEVICE_PLUGIN_DIR, else {DEFAULT_PLUGIN_DIR}, never created).",
            show_default=False,
            callback=directory,
        ),
    ] = None,
    admit: Annotated[
        list[str] | None,
        typer.Option("--admit", metavar="RES=N[,RES=N]", help="Admit one pod once it fits (repeatable)."),
    ] = None,
    admit_timeout: Annotated[
        float,
        typer.Option(
            metavar="SECONDS", callback=seconds, help="How long --admit waits for room before admitting anyway."
        ),
    ] = 30.0,
    restart_after: Annotated[
        float | None,
        typer.Option(metavar="SECONDS", callback=seconds, help="Restart the simulated kubelet after SECONDS."),
    ] = None,
    exit_after: Annotated[
        float | None, typer.Option(metavar="SECONDS", callback=seconds, help="Stop after SECONDS.")
    ] = None,
    grace_period: Annotated[
        float,
        typer.Option(metavar="SECONDS", callback=seconds, help="How long a resource whose plugin stopped is kept."),
    ] = 300.0,
    plain: Annotated[
        bool, typer.Option("--plain", metavar="", help="One line per event even on a terminal (no live table).")
    ] = False,
    dra: Annotated[
        bool,
        typer.Option("--dra", metavar="", help="Be the kubelet's DRA side instead: plugin watcher, prepare/unprepare."),
    ] = False,
    claims: Annotated[
        Path | None,
        typer.Option(metavar="DIR", callback=directory, help="DRA: ResourceClaim YAML/JSON files to prepare (needed)."),
    ] = None,
    kubelet_dir: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help=f"DRA: the kubelet's root, watched at DIR/plugins_registry (else {DEFAULT_KUBELET_DIR}, "
            "never created).",
            show_default=False,
            callback=directory,
        ),
    ] = None,
) -> None:
    """Run a simulated kubelet device manager on PLUGIN_DIR/kubelet.sock.

    Type commands on stdin: admit RES=N [RES=N ...] admits a one-container pod; start POD
    [CONTAINER] starts its container (PreStartContainer where the plugin asks for it); remove POD;
    restart; status; quit.

    With --dra it is the kubelet's DRA side: every socket in KUBELET_DIR/plugins_registry gets
    the plugin watcher's handshake, and claims from --claims DIR are prepared on their drivers:
    claims; prepare NS/NAME; unprepare NS/NAME; admit NS/POD CLAIM [CLAIM ...] (a pod using
    them); remove NS/POD; status; quit.

    Both serve the kubelet's PodResources API at ROOT/pod-resources/kubelet.sock, ROOT being
    KUBELET_DIR, or the parent of a PLUGIN_DIR named device-plugins.
    """
    if dra:
        scripted = admit or restart_after is not None or plugin_dir is not None
        _dra_kubelet(claims, kubelet_dir, exit_after, plain, bool(scripted))
        return
    if claims is not None or kubelet_dir is not None:
        fail("--claims and --kubelet-dir need --dra")
    try:
        admits = [parse_requests(spec.split(",")) for spec in admit or []]
    except ValueError as err:
        fail(f"--admit {err}")
    directory = _plugin_dir(plugin_dir)
    console = Console(highlight=False)
    live = console.is_terminal and not plain
    opts = _Options(directory, grace_period, admits, admit_timeout, restart_after, exit_after, live)
    try:
        eventloop.run(_run(opts, console))
    except UsageError as err:
        fail(str(err))
