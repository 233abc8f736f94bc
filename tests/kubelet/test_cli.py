"""``kubedevice kubelet`` run as a real process, driven on stdin and by signals, with a raw plugin."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
import typer

from kubedevice.kubelet.cli import kubelet, parse_requests

from .rawplugin import RawPlugin, run

SCRIPT = "import typer; from kubedevice.kubelet.cli import kubelet; typer.run(kubelet)"


class Process:
    """The CLI as a subprocess whose output is read line by line."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []

    @classmethod
    async def start(cls, *args: str) -> Process:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            SCRIPT,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "COLUMNS": "300"},
        )
        return cls(proc)

    async def expect(self, text: str, timeout: float = 15) -> str:
        assert self.proc.stdout is not None
        async with asyncio.timeout(timeout):
            while True:
                raw = await self.proc.stdout.readline()
                if not raw:
                    raise AssertionError(f"exited before {text!r}; output:\n" + "".join(self.lines))
                line = raw.decode()
                self.lines.append(line)
                if text in line:
                    return line

    async def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()


def test_parse_requests() -> None:
    assert parse_requests(["example.com/a=2", "example.com/b=0"]) == {"example.com/a": 2, "example.com/b": 0}
    for bad in ("example.com/a", "=2", "example.com/a=x", "example.com/a=-1"):
        with pytest.raises(ValueError, match="RESOURCE=COUNT"):
            parse_requests([bad])


def test_bad_admit_flag_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(typer.BadParameter):
        kubelet(plugin_dir=tmp_path, admit=["oops"])


def test_interactive_admit_restart_quit(tmp_path: Path) -> None:
    async def main() -> None:
        cli = await Process.start("--plugin-dir", str(tmp_path), "--admit", "example.com/null=1")
        plugin = RawPlugin(tmp_path)
        try:
            await cli.expect("commands:")
            await plugin.serve()
            await plugin.register()
            await cli.expect("example.com/null 4/4")
            await cli.expect("admitted cli-pod-1: example.com/null=[")
            await cli.send("admit example.com/null=2")
            await cli.expect("admitted cli-pod-2: example.com/null=[")
            await cli.send("restart")
            await cli.expect("kubelet restarted")
            assert not plugin.socket.exists()
            await cli.send("admit example.com/null=1")
            line = await cli.expect("rejected cli-pod-3")
            assert "UnexpectedAdmissionError: Allocate failed due to no healthy devices present" in line
            await plugin.stop()
            await plugin.serve()
            await plugin.register()
            await cli.expect("example.com/null 4/4")
            await cli.send("admit example.com/null=1")
            await cli.expect("admitted cli-pod-4")
            await cli.send("quit")
            await cli.expect("bye")
            assert await asyncio.wait_for(cli.proc.wait(), 10) == 0
        finally:
            if cli.proc.returncode is None:
                cli.proc.kill()
                await cli.proc.wait()
            await plugin.stop()

    run(main())


def test_signals_restart_and_terminate(tmp_path: Path) -> None:
    async def main() -> None:
        cli = await Process.start("--plugin-dir", str(tmp_path))
        try:
            await cli.expect("commands:")
            cli.proc.send_signal(signal.SIGUSR1)
            await cli.expect("kubelet restarted")
            cli.proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(cli.proc.wait(), 10) == 0
        finally:
            if cli.proc.returncode is None:
                cli.proc.kill()
                await cli.proc.wait()

    run(main())


def test_scripted_restart_and_exit(tmp_path: Path) -> None:
    async def main() -> None:
        cli = await Process.start("--plugin-dir", str(tmp_path), "--restart-after", "0.3", "--exit-after", "1.5")
        try:
            await cli.expect("kubelet restarted")
            await cli.expect("bye")
            assert await asyncio.wait_for(cli.proc.wait(), 10) == 0
        finally:
            if cli.proc.returncode is None:
                cli.proc.kill()
                await cli.proc.wait()

    run(main())
