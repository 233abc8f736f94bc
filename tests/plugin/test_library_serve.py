"""The library's ``serve()`` as a plugin script runs it: its own process, real sockets, our simulator.

What a library user sees on stderr matters here: registration and kubelet restarts are logged
without any logging set up, a logging set-up of the application is left alone, and the
missing-directory warning names what a library user can change (not the daemon's flag).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from kubedevice.plugin.manager import library_plugin_dir
from kubedevice.plugin_dir import PLUGIN_DIR_ENV

from .conftest import kubelet, registered

ROOT = Path(__file__).resolve().parents[2]
WAIT = 20.0  # generous: a cold interpreter importing grpc on 2 shared cores
PLUGIN = """
from kubedevice import ContainerAllocation, Device, DeviceSpec, Plugin
from kubedevice.plugin.manager import serve

grant = ContainerAllocation(devices=[DeviceSpec("/dev/null")])
plugin = Plugin("example.com/null", [Device(f"null-{i}", grant=grant) for i in range(4)])
raise SystemExit(serve(plugin, ARGUMENTS))
"""


def plugin_source(arguments: str = "") -> str:
    """The README's library example, with ``arguments`` added to its ``serve()`` call."""
    return PLUGIN.replace(", ARGUMENTS", arguments)


class Script:
    """A running Python script whose stderr lines are collected as they come."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._new = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            self.lines.append(raw.decode().rstrip("\n"))
            self._new.set()
        self._new.set()

    async def wait_for_line(self, predicate: Callable[[str], bool], count: int = 1) -> str:
        """The ``count``-th line that matches, once it has been written."""
        async with asyncio.timeout(WAIT):
            while True:
                found = [line for line in self.lines if predicate(line)]
                if len(found) >= count:
                    return found[count - 1]
                assert not self._reader.done(), "\n".join(self.lines)
                self._new.clear()
                await self._new.wait()

    async def stop(self) -> int:
        """SIGTERM, as a node would send it; the exit code once stderr is drained."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(self.proc.wait(), WAIT)
        await asyncio.wait_for(self._reader, WAIT)
        return code


@asynccontextmanager
async def script(source: str, env: dict[str, str], *args: str) -> AsyncIterator[Script]:
    """``python -c source`` (or ``python -m`` with ``args``) with ``env`` added to ours."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *(args or ("-c", source)), env={**os.environ, **env},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    running = Script(proc)
    try:
        yield running
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_registration_and_a_kubelet_restart_are_logged_without_any_logging_set_up(tmp_path: Path) -> None:
    async def main() -> tuple[int, list[str]]:
        async with kubelet(tmp_path) as sim, script(plugin_source(), {PLUGIN_DIR_ENV: str(tmp_path)}) as p:
            await p.wait_for_line(lambda line: "registered example.com/null with the kubelet" in line)
            await sim.restart()
            await p.wait_for_line(lambda line: "registered example.com/null with the kubelet" in line, count=2)
            return await p.stop(), p.lines

    code, lines = asyncio.run(main())
    assert code == 0, lines
    registrations = [i for i, line in enumerate(lines) if "registered example.com/null with the kubelet" in line]
    [restart] = [i for i, line in enumerate(lines) if "kubelet restarted: re-registering" in line]
    assert len(registrations) == 2 and registrations[0] < restart < registrations[1], lines
    assert all(" INFO " in lines[i] and "kubedevice.plugin.manager" in lines[i] for i in registrations)
    assert any("received SIGTERM: stopping" in line for line in lines), lines


USER_LOGGING = """
import logging
logging.basicConfig(level=logging.{level}, format="app %(levelname)s %(name)s %(message)s")
"""


@pytest.mark.parametrize("level", ["WARNING", "INFO"])
def test_the_applications_logging_set_up_is_left_alone(tmp_path: Path, level: str) -> None:
    source = USER_LOGGING.format(level=level) + plugin_source(f", plugin_dir={str(tmp_path)!r}")

    async def main() -> tuple[int, list[str]]:
        async with kubelet(tmp_path) as sim, script(source, {}) as p:
            await registered(sim)
            if level == "INFO":
                await p.wait_for_line(lambda line: "registered example.com/null" in line)
            return await p.stop(), p.lines

    code, lines = asyncio.run(main())
    assert code == 0, lines
    if level == "WARNING":
        assert lines == []  # their level: nothing went wrong, so nothing is said
    else:
        assert all(line.startswith("app INFO kubedevice.") for line in lines), lines  # their format, not doubled
        assert len([line for line in lines if "registered example.com/null" in line]) == 1, lines


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_a_missing_directory_names_what_a_library_user_can_change(tmp_path: Path, how: str) -> None:
    plugin_dir = tmp_path / "dp"
    argument = f", plugin_dir={str(plugin_dir)!r}" if how == "argument" else ""
    env = {} if how == "argument" else {PLUGIN_DIR_ENV: str(plugin_dir)}

    async def main() -> tuple[str, int, list[str]]:
        async with script(plugin_source(argument), env) as p:
            warning = await p.wait_for_line(lambda line: "does not exist" in line)
            async with kubelet(plugin_dir) as sim:  # creates the directory, as a kubelet's first start
                await registered(sim)
                await p.wait_for_line(lambda line: "registered example.com/null" in line)
                return warning, await p.stop(), p.lines

    warning, code, lines = asyncio.run(main())
    assert code == 0, lines
    expected = "plugin_dir= argument of serve()" if how == "argument" else f"${PLUGIN_DIR_ENV}"
    assert f"plugin directory {plugin_dir} does not exist: no kubelet on this node yet, or a wrong {expected};" in (
        warning
    )
    assert not any("--plugin-dir" in line for line in lines), lines
    assert any(f"plugin directory {plugin_dir} appeared" in line for line in lines), lines


def test_the_library_plugin_directory_and_its_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(PLUGIN_DIR_ENV, raising=False)
    directory, hint = library_plugin_dir(None)
    assert directory == Path("/var/lib/kubelet/device-plugins")
    assert "plugin_dir=" in hint and f"${PLUGIN_DIR_ENV}" in hint and "--" not in hint
    monkeypatch.setenv(PLUGIN_DIR_ENV, str(tmp_path))
    assert library_plugin_dir(None) == (tmp_path, f"${PLUGIN_DIR_ENV}")
    assert library_plugin_dir(tmp_path / "x") == (tmp_path / "x", "plugin_dir= argument of serve()")


def test_the_daemon_still_names_its_flag(tmp_path: Path) -> None:
    plugin_dir = tmp_path / "typo"
    serve = ["-m", "kubedevice", "serve", "--config", str(ROOT / "examples" / "null.yaml"), "--plugin-dir"]

    async def main() -> tuple[str, int]:
        async with script("", {}, *serve, str(plugin_dir)) as p:
            warning = await p.wait_for_line(lambda line: "does not exist" in line)
            return warning, await p.stop()

    warning, code = asyncio.run(main())
    assert code == 0
    assert "or a wrong --plugin-dir;" in warning and not plugin_dir.exists()
