"""``kubedevice kubelet --dra``: the kubelet's DRA side by hand or from a script, claims from files.

Like the device-plugin simulator's command line: on a terminal a live table (drivers, prepared
claims with devices and CDI IDs, device health) with each event printed above it; elsewhere one
line per event. Commands come on stdin (see ``HELP``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.markup import escape

from ...errors import UsageError
from ..model import Container, Pod
from ..plugin_server import CannotServe
from ..view import unknown
from .claims import ClaimFileError, drivers_of
from .simulator import DraKubelet
from .view import dra_view

HELP = (
    "commands: claims | prepare NS/NAME | unprepare NS/NAME | admit NS/POD CLAIM [CLAIM ...] | remove NS/POD "
    "| status | quit"
)


@dataclass
class DraSession:
    kubelet: DraKubelet
    console: Console
    live: Live | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    pods: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def say(self, text: str) -> None:
        self.console.print(escape(text), soft_wrap=True)

    def redraw(self) -> None:
        if self.live is not None:
            self.live.update(dra_view(self.kubelet, HELP), refresh=True)

    def list_claims(self) -> None:
        try:
            claims = self.kubelet.claims()
        except ClaimFileError as err:
            self.say(str(err))
            return
        for claim in claims:
            state = "prepared" if f"{claim.namespace}/{claim.name}" in self.kubelet.prepared else "not prepared"
            drivers = ", ".join(drivers_of(claim)) or ("no devices" if claim.allocated else "not allocated")
            self.say(f"claim {claim.namespace}/{claim.name} ({claim.uid}): {drivers}; {state}")
        if not claims:
            self.say(f"no ResourceClaim in {self.kubelet.claims_dir}")

    async def admit(self, ref: str, claims: list[str]) -> None:
        """A pod whose one container, ``main``, uses ``claims`` (in the pod's namespace); the
        kubelet's events say what was prepared, and PodResources lists the pod."""
        namespace, name = _split(ref)
        uid = f"cli-pod-{next(self.pods)}"
        await self.kubelet.admit(Pod(uid, name, [Container("main", claims=tuple(claims))], namespace))

    async def remove(self, ref: str) -> None:
        namespace, name = _split(ref)
        uids = [uid for uid, pod in self.kubelet.pods.items() if (pod.namespace, pod.name) == (namespace, name)]
        if not uids:
            self.say(f"no pod {namespace}/{name} on this node")
        for uid in uids:
            await self.kubelet.remove_pod(uid)

    def status(self) -> str:
        drivers = ", ".join(sorted(self.kubelet.drivers)) or "none"
        prepared = ", ".join(sorted(self.kubelet.prepared)) or "none"
        return f"drivers: {drivers}; prepared claims: {prepared}"

    async def command(self, line: str) -> None:
        words = line.split()
        if not words:
            return
        verb, args = words[0], words[1:]
        if verb == "prepare" and len(args) == 1:
            await self.kubelet.prepare(args[0])
        elif verb == "unprepare" and len(args) == 1:
            await self.kubelet.unprepare(args[0])
        elif verb == "admit" and len(args) >= 2:
            await self.admit(args[0], args[1:])
        elif verb == "remove" and len(args) == 1:
            await self.remove(args[0])
        elif verb == "claims" and not args:
            self.list_claims()
        elif verb == "status" and not args:
            self.say(self.status())
        elif verb in ("quit", "exit"):
            self.stop.set()
        else:
            self.say(unknown(verb, args, HELP))


async def _show(session: DraSession) -> None:
    """Print each event; then redraw the live table, or print the status line if it changed."""
    kubelet, seen, last = session.kubelet, 0, ""
    while True:
        for event in kubelet.events[seen:]:
            session.say(event)
        seen = len(kubelet.events)
        if session.live is not None:
            session.redraw()
        elif (line := session.status()) != last:
            session.say(line)
            last = line
        with contextlib.suppress(TimeoutError):
            await kubelet.wait_until(functools.partial(_more_events, kubelet, seen), timeout=3600)


def _split(ref: str) -> tuple[str, str]:
    """``NS/NAME``, or ``NAME`` in ``default``, as claims are named."""
    namespace, _, name = ref.rpartition("/")
    return namespace or "default", name


def _more_events(kubelet: DraKubelet, seen: int) -> bool:
    return len(kubelet.events) > seen


def _read_stdin(loop: asyncio.AbstractEventLoop, lines: asyncio.Queue[str | None]) -> None:
    import sys  # noqa: PLC0415

    for line in sys.stdin:
        loop.call_soon_threadsafe(lines.put_nowait, line)
    loop.call_soon_threadsafe(lines.put_nowait, None)


async def _commands(session: DraSession) -> None:
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    threading.Thread(target=_read_stdin, args=(asyncio.get_running_loop(), lines), daemon=True).start()
    while (line := await lines.get()) is not None:
        await session.command(line)


async def _stop_later(delay: float, stop: asyncio.Event) -> None:
    await asyncio.sleep(delay)
    stop.set()


async def run_dra(kubelet_dir: Path, claims_dir: Path, console: Console, live: bool, exit_after: float | None) -> None:
    """Serve until quit, a signal or ``exit_after``; a :class:`UsageError` if the directory cannot be used."""
    kubelet = DraKubelet(kubelet_dir, claims_dir)
    session = DraSession(kubelet, console)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, session.stop.set)
    try:
        await kubelet.start()
    except CannotServe as err:
        raise UsageError(str(err)) from None
    tasks: list[asyncio.Task[None]] = []
    view = Live(dra_view(kubelet, HELP), console=console, auto_refresh=False) if live else None
    try:
        with view or contextlib.nullcontext() as shown:
            session.live = shown
            if shown is None:
                session.say(HELP)
            tasks += [asyncio.create_task(_show(session)), asyncio.create_task(_commands(session))]
            if exit_after is not None:
                tasks.append(asyncio.create_task(_stop_later(exit_after, session.stop)))
            await session.stop.wait()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await kubelet.stop()
    session.say("bye")
