"""``kubedevice kubelet`` run as a real process, driven on stdin and by signals, with a raw plugin."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest

from kubedevice.api import DEFAULT_PLUGIN_DIR
from kubedevice.kubelet import KubeletSimulator
from kubedevice.kubelet.cli import parse_requests
from kubedevice.kubelet.dra.cli import HELP as DRA_HELP
from kubedevice.kubelet.view import unknown

from .rawplugin import RawPlugin, device, run

SCRIPT = "import typer; from kubedevice.kubelet.cli import kubelet; typer.run(kubelet)"


class Process:
    """The CLI as a subprocess whose output is read line by line."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []

    @classmethod
    async def start(cls, *args: str, env: dict[str, str] | None = None) -> Process:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            SCRIPT,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "COLUMNS": "300", **(env or {})},
        )
        return cls(proc)

    async def finish(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()

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
    result = cli_once("--plugin-dir", str(tmp_path), "--admit", "oops")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "kubedevice: --admit 'oops' is not RESOURCE=COUNT\n"


def test_interactive_admit_restart_quit(tmp_path: Path) -> None:
    async def main() -> None:
        cli = await Process.start("--plugin-dir", str(tmp_path), "--admit", "example.com/null=1")
        plugin = RawPlugin(tmp_path)
        try:
            await cli.expect("commands:")
            await plugin.serve()
            await plugin.register()
            await cli.expect("example.com/null 4/4")
            await cli.expect("admitted pod cli-pod-1: main example.com/null=[")
            await cli.send("admit example.com/null=2")
            await cli.expect("admitted pod cli-pod-2: main example.com/null=[")
            await cli.send("restart")
            await cli.expect("kubelet restarted")
            assert not plugin.socket.exists()
            await cli.send("admit example.com/null=1")
            line = await cli.expect("rejected pod cli-pod-3")
            assert "UnexpectedAdmissionError: Allocate failed due to no healthy devices present" in line
            await plugin.stop()
            await plugin.serve()
            await plugin.register()
            await cli.expect("example.com/null 4/4")
            await cli.send("admit example.com/null=1")
            await cli.expect("admitted pod cli-pod-4")
            await cli.send("quit")
            await cli.expect("bye")
            assert await asyncio.wait_for(cli.proc.wait(), 10) == 0
            for pod in ("cli-pod-1", "cli-pod-2", "cli-pod-3", "cli-pod-4"):  # each outcome is printed once
                outcomes = [line for line in cli.lines if pod in line and ("admitted" in line or "rejected" in line)]
                assert len(outcomes) == 1, cli.lines
        finally:
            if cli.proc.returncode is None:
                cli.proc.kill()
                await cli.proc.wait()
            await plugin.stop()

    run(main())


def test_stdin_refuses_what_the_kubelet_would_not_do(tmp_path: Path) -> None:
    """A removed pod's container is not started (its device may already be another pod's), a pod
    that never was is named as such, and a line that is no command says which word was wrong."""

    async def main() -> None:
        plugin = RawPlugin(tmp_path)
        async with quitting(plugin, "--plugin-dir", str(tmp_path)) as cli:
            await cli.expect("commands:")
            await plugin.serve()
            await plugin.register()
            await cli.expect("example.com/null 4/4")
            await cli.send("admit example.com/null=1")
            first = await cli.expect("admitted pod cli-pod-1: main example.com/null=[")
            await cli.send("remove cli-pod-1")
            await cli.expect("pod cli-pod-1 removed")
            await cli.send("start cli-pod-1")
            line = await cli.expect("container cli-pod-1/main cannot start")
            assert "no running pod 'cli-pod-1' (never admitted, rejected or removed)" in line
            await cli.send("admit example.com/null=1")  # the removed pod's device goes to the next pod
            second = await cli.expect("admitted pod cli-pod-2: main example.com/null=[")
            assert first.split("=[")[1] == second.split("=[")[1]
            await cli.send("start nosuch")
            line = await cli.expect("container nosuch/main cannot start")
            assert "no running pod 'nosuch'" in line and "no container" not in line
            await cli.send("remove nosuch")
            await cli.expect("no running pod 'nosuch' (never admitted, rejected or removed)")
            await cli.send("frobnicate now")
            line = await cli.expect("frobnicate")
            assert line.startswith("unknown command 'frobnicate'; commands: admit RES=N"), line
            await cli.send("admit")
            line = await cli.expect("wrong arguments")
            assert line.startswith("wrong arguments for 'admit': (none); commands: admit RES=N"), line
        assert not [line for line in cli.lines if "cli-pod-1/main started" in line], cli.lines

    run(main())


def test_the_docs_transcript_is_what_it_prints(tmp_path: Path) -> None:
    """docs/kubelet-simulator.md quotes a run; the same command here prints exactly that."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "kubelet-simulator.md").read_text()
    block = re.search(r"^```\n\$ (kubedevice kubelet [^\n]*) < /dev/null\n(.*?)^```", doc, re.MULTILINE | re.DOTALL)
    assert block is not None, "the transcript is gone from the doc"
    command, printed = block.group(1).split(), block.group(2)
    directory = str(tmp_path / "dp")
    args = [directory if word == "/tmp/dp" else word for word in command[1:]]
    result = subprocess.run(
        [sys.executable, "-m", "kubedevice", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == printed.replace("/tmp/dp", directory)


def test_the_dra_side_names_an_unknown_command_too() -> None:
    assert unknown("prepre", ["a/b"], DRA_HELP) == f"unknown command 'prepre'; {DRA_HELP}"
    assert unknown("prepare", [], DRA_HELP) == f"wrong arguments for 'prepare': (none); {DRA_HELP}"


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


@asynccontextmanager
async def quitting(plugin: RawPlugin, *args: str, env: dict[str, str] | None = None) -> AsyncIterator[Process]:
    """The CLI for the body of a ``with``; then ``quit`` must end it with 0. The plugin is stopped either way."""
    cli = await Process.start(*args, env=env)
    try:
        yield cli
        await cli.send("quit")
        assert await asyncio.wait_for(cli.proc.wait(), 10) == 0
    finally:
        await cli.finish()
        await plugin.stop()


def cli_once(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI to completion (stdin closed), without ``$KUBEDEVICE_PLUGIN_DIR`` unless given."""
    base = {k: v for k, v in os.environ.items() if k != "KUBEDEVICE_PLUGIN_DIR"}
    return subprocess.run(
        [sys.executable, "-m", "kubedevice", "kubelet", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
        env={**base, "COLUMNS": "300", **(env or {})},
    )


def test_the_plugin_dir_comes_from_the_environment_like_serve(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = RawPlugin(tmp_path)
        async with quitting(plugin, env={"KUBEDEVICE_PLUGIN_DIR": str(tmp_path)}) as cli:
            await cli.expect(f"serving {tmp_path / 'kubelet.sock'}")
            await plugin.serve()
            await plugin.register()
            await cli.expect("example.com/null 4/4")

    run(main())


def test_a_flag_wins_over_the_environment(tmp_path: Path) -> None:
    env = {"KUBEDEVICE_PLUGIN_DIR": "/x"}
    result = cli_once("--plugin-dir", str(tmp_path / "flag"), "--exit-after", "0.2", env=env)
    assert result.returncode == 0, result.stderr
    assert f"serving {tmp_path / 'flag' / 'kubelet.sock'}" in result.stdout


def test_a_missing_directory_is_created_and_said(tmp_path: Path) -> None:
    target = tmp_path / "a" / "dp"
    result = cli_once("--plugin-dir", str(target), "--exit-after", "0.2")
    assert result.returncode == 0, result.stderr
    assert f"created plugin directory {target}\n" in result.stdout and target.is_dir()


@pytest.mark.skipif(Path(DEFAULT_PLUGIN_DIR).exists(), reason="a kubelet's directory exists on this machine")
def test_the_real_kubelets_directory_is_never_created() -> None:
    result = cli_once("--exit-after", "0.2")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"kubedevice: {DEFAULT_PLUGIN_DIR} does not exist (no kubelet on this machine); to simulate one, "
        "give --plugin-dir DIR or set KUBEDEVICE_PLUGIN_DIR (a missing DIR is created)\n"
    )
    assert not Path(DEFAULT_PLUGIN_DIR).exists() and not Path(DEFAULT_PLUGIN_DIR).parent.exists()


def test_a_live_kubelet_socket_is_refused_and_left_alone(tmp_path: Path) -> None:
    async def main() -> None:
        sim = KubeletSimulator(tmp_path)
        await sim.start()
        plugin = RawPlugin(tmp_path)
        try:
            inode = sim.kubelet_sock.stat().st_ino
            result = await asyncio.to_thread(cli_once, "--plugin-dir", str(tmp_path), "--exit-after", "5")
            assert result.returncode == 2 and result.stdout == ""
            assert result.stderr.startswith(f"kubedevice: {sim.kubelet_sock} is served by a running kubelet")
            assert result.stderr.count("\n") == 1
            assert sim.kubelet_sock.stat().st_ino == inode
            await plugin.serve()
            await plugin.register()  # the original simulator still answers on its socket
            await sim.wait_until(lambda: sim.allocatable().get("example.com/null") == 4, 10)
        finally:
            await plugin.stop()
            await sim.stop()

    run(main())


def test_a_stale_socket_is_replaced_but_a_plain_file_is_not(tmp_path: Path) -> None:
    stale = tmp_path / "kubelet.sock"
    with socket.socket(socket.AF_UNIX) as leftover:
        leftover.bind(str(stale))  # bound, never listening: what a killed kubelet leaves behind
    result = cli_once("--plugin-dir", str(tmp_path), "--exit-after", "0.2")
    assert result.returncode == 0 and f"serving {stale}" in result.stdout, result.stderr
    stale.write_text("not a socket")
    result = cli_once("--plugin-dir", str(tmp_path), "--exit-after", "0.2")
    assert result.returncode == 2
    assert result.stderr == f"kubedevice: {stale} exists and is not a socket; not replacing it\n"
    assert stale.read_text() == "not a socket"


def test_start_triggers_pre_start_container(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = RawPlugin(tmp_path, pre_start_required=True)
        async with quitting(plugin, "--plugin-dir", str(tmp_path)) as cli:
            await cli.expect("commands:")
            await plugin.serve()
            await plugin.register()
            await cli.expect("example.com/null 4/4")
            await cli.send("admit example.com/null=2")
            line = await cli.expect("admitted pod cli-pod-1")
            ids = line.split("=[", 1)[1].split("]", 1)[0]
            await cli.send("start cli-pod-1")
            await cli.expect(f"PreStartContainer example.com/null [{ids}]: ok")
            await cli.expect("container cli-pod-1/main started")
            assert [list(r.devices_ids) for r in plugin.requests["PreStartContainer"]] == [ids.split(", ")]
            plugin.fail["PreStartContainer"] = grpc.StatusCode.UNAVAILABLE
            await cli.send("start cli-pod-1")
            line = await cli.expect("container cli-pod-1/main cannot start")
            assert "rpc error: code = Unavailable desc = PreStartContainer refused by test" in line
            await cli.send("start nobody")
            await cli.expect("container nobody/main cannot start: no running pod 'nobody' (never admitted")

    run(main())


def test_on_a_terminal_a_live_table_shows_devices_health_and_holders(tmp_path: Path) -> None:
    """The CLI on a pseudo-terminal, as a person runs it: the table names who holds which device."""

    async def main() -> None:
        primary, secondary = pty.openpty()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", SCRIPT, "--plugin-dir", str(tmp_path),
            stdin=secondary, stdout=secondary, stderr=secondary,
            env={**os.environ, "COLUMNS": "160", "LINES": "60", "TERM": "xterm"},
        )  # fmt: skip
        os.close(secondary)
        screen = Screen(primary)
        plugin = RawPlugin(tmp_path, devices=[device("dev-0"), device("dev-1", "Unhealthy", numa=[1])])
        try:
            await screen.expect("no plugin registered yet")
            await plugin.serve()
            await plugin.register()
            await screen.expect("dev-1")
            os.write(primary, b"admit example.com/null=1\n")
            await screen.expect("cli-pod-1/main")
            text = screen.text
            row = next(line for line in text.splitlines()[::-1] if "dev-0" in line and "Healthy" in line)
            assert "cli-pod-1/main" in row
            assert any("dev-1" in line and "Unhealthy" in line and " 1 " in line for line in text.splitlines())
            assert "connected" in text and "example.com_null.sock" in text
            os.write(primary, b"quit\n")
            assert await asyncio.wait_for(proc.wait(), 10) == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            os.close(primary)
            await plugin.stop()

    run(main())


class Screen:
    """What a terminal would have received, with the escape sequences taken out."""

    ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.raw = b""

    @property
    def text(self) -> str:
        return self.ANSI.sub("", self.raw.decode(errors="replace"))

    async def expect(self, fragment: str, timeout: float = 15) -> None:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout):
            while fragment not in self.text:
                try:
                    chunk = await loop.run_in_executor(None, os.read, self.fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"terminal closed before {fragment!r}:\n{self.text}")
                self.raw += chunk


def test_a_directory_that_cannot_be_used_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    result = cli_once("--plugin-dir", str(tmp_path / "file" / "dp"), "--exit-after", "0.2")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (  # refused as the command line is read, as every directory option is
        f"kubedevice: invalid value for '--plugin-dir': {tmp_path / 'file' / 'dp'} can never be a directory: "
        f"{tmp_path / 'file'} is not one (see 'kubedevice kubelet --help')\n"
    )
    deep = tmp_path / ("d" * 120)
    result = cli_once("--plugin-dir", str(deep), "--exit-after", "0.2")
    assert result.returncode == 2 and not deep.exists()
    assert result.stderr == f"kubedevice: {deep / 'kubelet.sock'}: longer than a unix socket path may be (107 bytes)\n"
