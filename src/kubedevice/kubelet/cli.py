"""``kubedevice kubelet``: run the simulator by hand or from a script.

Shows what the kubelet sees as it changes, and takes commands on stdin (``admit RES=N ...``,
``restart``, ``status``, ``quit``); SIGUSR1 restarts it. ``--admit`` and ``--restart-after``
do the same without a person at the keyboard.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import sys
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from ..api import DEFAULT_PLUGIN_DIR
from .model import AdmissionError, Container, Pod
from .simulator import KubeletSimulator

HELP = "commands: admit RES=N [RES=N ...] | restart | status | quit"


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
    """The running simulator plus what the command line needs around it."""

    sim: KubeletSimulator
    console: Console
    stop: asyncio.Event
    pods: itertools.count[int]
    tasks: set[asyncio.Task[None]]

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

    async def admit(self, requests: dict[str, int]) -> None:
        uid = f"cli-pod-{next(self.pods)}"
        try:
            result = await self.sim.admit(Pod(uid, uid, [Container("main", requests)]))
        except AdmissionError as err:
            self.say(f"rejected {uid}: {err.reason}: {err.message}")
            return
        ids = "; ".join(f"{r}=[{', '.join(d)}]" for r, d in result["main"].device_ids.items())
        self.say(f"admitted {uid}: {ids}")

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
                await self.admit(parse_requests(args))
            except ValueError as err:
                self.say(f"error: {err}")
        elif verb == "restart":
            await self.restart()
        elif verb == "status":
            self.say(self.status())
        elif verb in ("quit", "exit"):
            self.stop.set()
        else:
            self.say(HELP)


async def _show(session: _Session) -> None:
    """Print each simulator event and the resource line whenever it changes."""
    sim, last = session.sim, ""
    seen = [0]
    while True:
        await sim.wait_until(lambda: len(sim.events) > seen[0], timeout=3600)
        for event in sim.events[seen[0] :]:
            session.say(event)
        seen[0] = len(sim.events)
        if (line := session.status()) != last:
            session.say(line)
            last = line


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


async def _later(delay: float, work: Coroutine[object, object, None]) -> None:
    await asyncio.sleep(delay)
    await work


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


async def _run(opts: _Options) -> None:
    sim = KubeletSimulator(opts.plugin_dir, grace_period=opts.grace_period)
    session = _Session(sim, Console(highlight=False), asyncio.Event(), itertools.count(1), set())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, session.stop.set)
    loop.add_signal_handler(signal.SIGUSR1, lambda: session.spawn(session.restart()))
    await sim.start()
    session.spawn(_show(session))
    session.spawn(_commands(session))
    session.spawn(_scripted_admits(session, opts.admits, opts.admit_timeout))
    if opts.restart_after is not None:
        session.spawn(_later(opts.restart_after, session.restart()))
    if opts.exit_after is not None:
        session.spawn(_stop_later(opts.exit_after, session.stop))
    session.say(HELP)
    await session.stop.wait()
    for task in list(session.tasks):
        task.cancel()
    await asyncio.gather(*session.tasks, return_exceptions=True)
    await sim.stop()
    session.say("bye")


def kubelet(
    *,
    plugin_dir: Annotated[Path, typer.Option("--plugin-dir", help="Device plugin directory.")] = Path(
        DEFAULT_PLUGIN_DIR
    ),
    admit: Annotated[
        list[str] | None, typer.Option("--admit", help="RES=N[,RES=N]: admit one pod once it fits (repeatable).")
    ] = None,
    admit_timeout: Annotated[float, typer.Option(help="Seconds to wait for room before admitting anyway.")] = 30.0,
    restart_after: Annotated[float | None, typer.Option(help="Restart the kubelet after SECONDS.")] = None,
    exit_after: Annotated[float | None, typer.Option(help="Stop after SECONDS.")] = None,
    grace_period: Annotated[float, typer.Option(help="Seconds a stopped resource is kept.")] = 300.0,
) -> None:
    """Run a simulated kubelet device manager on PLUGIN_DIR/kubelet.sock."""
    try:
        admits = [parse_requests(spec.split(",")) for spec in admit or []]
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--admit") from None
    asyncio.run(_run(_Options(plugin_dir, grace_period, admits, admit_timeout, restart_after, exit_after)))
