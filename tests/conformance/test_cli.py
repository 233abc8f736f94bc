"""``kubedevice check`` end to end: our config-driven daemon as a subprocess, the CLI as a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest

from kubedevice.api import pb, pb_grpc
from kubedevice.conformance import CheckOptions, Status, run_checks
from kubedevice.conformance.checks import CATALOGUE
from kubedevice.conformance.model import Phase
from kubedevice.kubelet import KubeletSimulator
from kubedevice.names import endpoint_for

from .conftest import by_status, result, run

NULL_CONFIG = Path(__file__).parents[2] / "examples" / "null.yaml"
# The real command line, as a person runs it.
CHECK = [sys.executable, "-m", "kubedevice", "check"]
RESULT_KEYS = {"id", "phase", "title", "resource", "status", "detail", "value", "unit"}


@asynccontextmanager
async def daemon(plugin_dir: Path, config: Path = NULL_CONFIG) -> AsyncIterator[asyncio.subprocess.Process]:
    """``kubedevice serve`` on the bundled null config, stopped with SIGTERM as a DaemonSet would."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubedevice", "serve", "--config", str(config), "--plugin-dir", str(plugin_dir),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        yield proc
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 20)


async def check_cli(*args: str) -> tuple[int, str, str]:
    """The command with stdout a pipe, as in CI or ``| grep``; FORCE_COLOR must not turn the table back on."""
    proc = await asyncio.create_subprocess_exec(
        *CHECK, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "FORCE_COLOR": "1", "COLUMNS": "80"},
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def test_our_daemon_passes_every_check_and_reregisters(tmp_path: Path) -> None:
    """How fast it comes back is measured in benchmarks/ (tests/e2e/test_check_calibration.py against
    the real kubelet); here a loaded machine must not fail the run by chance."""

    async def scenario() -> None:
        async with daemon(tmp_path):
            options = CheckOptions(plugin_dir=tmp_path, timeout=20, restart_timeout=10, reregister_pass=5.0)
            report = await run_checks(options)
        assert by_status(report, Status.FAIL) == set(), report.to_json()
        assert by_status(report, Status.WARN) == set(), report.to_json()
        assert by_status(report, Status.SKIP) == {"prestart.call"}  # the null config has no PreStartContainer
        assert result(report, "restart.reregister").value <= 5.0
        assert report.resources() == ["example.com/null"]

    run(scenario(), timeout=90)


def test_json_report_of_our_daemon_exits_zero(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, str, str]:
        async with daemon(tmp_path):
            return await check_cli("--plugin-dir", str(tmp_path), "--json", "--no-restart", "--timeout", "20")

    code, out, _ = run(scenario(), timeout=90)
    report = json.loads(out)
    assert code == 0
    assert set(report) == {"target", "passed", "summary", "resources", "results"}
    assert report["passed"] is True and report["target"] == {"plugin_dir": str(tmp_path)}
    assert all(set(r) == RESULT_KEYS for r in report["results"])
    assert {r["id"] for r in report["results"]} == {c.id for c in CATALOGUE}
    assert sum(report["summary"].values()) == len(report["results"])
    restart = [r for r in report["results"] if r["phase"] == "restart"]
    assert {r["status"] for r in restart} == {"skip"}


def test_socket_mode_probes_a_running_plugin_and_skips_what_needs_registration(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, str, str]:
        sim = KubeletSimulator(tmp_path)
        await sim.start()
        try:
            async with daemon(tmp_path):
                await sim.wait_until(lambda: sim.allocatable().get("example.com/null") == 4, 20)
                return await check_cli("--socket", str(tmp_path / endpoint_for("example.com/null")), "--json")
        finally:
            await sim.stop()

    code, out, _ = run(scenario(), timeout=90)
    results = {r["id"]: r for r in json.loads(out)["results"]}
    assert code == 0
    assert {i for i, r in results.items() if r["status"] == "skip"} == {
        c.id for c in CATALOGUE if c.phase in ("registration", "restart")
    } | {"prestart.call"}
    assert results["devices.first_list"]["detail"].startswith("4 devices")


def test_a_failure_exits_one_and_the_report_says_so(tmp_path: Path) -> None:
    code, out, _ = run(check_cli("--plugin-dir", str(tmp_path), "--timeout", "0.5"))
    assert code == 1
    assert "FAIL  registration.register" in out and "FAILED" in out
    code, out, _ = run(check_cli("--plugin-dir", str(tmp_path), "--timeout", "0.5", "--json"))
    assert code == 1
    assert json.loads(out)["passed"] is False


TWO_RESOURCES = """
resources:
  - name: example.com/null
    static: {count: 2, paths: [/dev/null]}
  - name: example.com/zero
    static: {count: 3, paths: [/dev/zero]}
"""


def test_off_a_terminal_every_result_is_one_line_and_json_is_pointed_to(tmp_path: Path) -> None:
    """Piped, rich drew an 80-column table whose folded details ran to hundreds of lines."""
    config = tmp_path / "two.yaml"  # a plain file: the checker's kubelet cleans up sockets only
    config.write_text(TWO_RESOURCES)
    plugin_dir = tmp_path  # a socket path has at most 107 bytes

    async def scenario() -> tuple[int, str, str]:
        async with daemon(plugin_dir, config):
            # --no-restart: the re-registration verdict is timed, and this test is about the lines
            return await check_cli("--plugin-dir", str(plugin_dir), "--timeout", "20", "--no-restart")

    code, out, err = run(scenario(), timeout=90)
    assert code == 0, out + err
    title, *lines, verdict, pointer = out.splitlines()
    resources = ["example.com/null", "example.com/zero"]
    assert title == f"kubedevice check: plugin_dir {plugin_dir}"
    timed = [c for c in CATALOGUE if c.phase is Phase.RESTART]  # skipped once each, for no resource
    assert len(lines) == len(resources) * (len(CATALOGUE) - len(timed)) + len(timed), out
    rows = [line.split(maxsplit=3) for line in lines]
    by_resource = [row for row in rows if row[1] not in {c.id for c in timed}]
    assert {(check_id, resource) for _, check_id, resource, _ in by_resource} == {
        (c.id, r) for c in CATALOGUE if c not in timed for r in resources
    }
    assert {status for status, *_ in rows} <= {"PASS", "SKIP"}
    unknown = next(line for line in lines if line.split()[1:3] == ["allocate.unknown", "example.com/null"])
    assert unknown.endswith("unknown devices for example.com/null: kubedevice-check-unknown-device"), unknown
    assert max(map(len, lines)) > 80  # nothing folded to the guessed width
    assert len({line.index(line.split()[2]) for line in lines}) == 1  # the resource column is aligned
    assert verdict.startswith("PASSED: ") and "--json" in pointer


def test_at_a_terminal_the_report_is_a_table(tmp_path: Path) -> None:
    """A real pseudo-terminal: there people read the report, and the table is kept."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*CHECK, "--plugin-dir", str(tmp_path), "--timeout", "0.5"],
            stdout=follower, stderr=subprocess.PIPE,
        )  # fmt: skip
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the command exited and closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(60) == 1
    finally:
        os.close(leader)
    out = b"".join(chunks).decode()
    assert "┏━" in out and "│ registration.register " in out, out
    assert "FAILED" in out and "--json" in out


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--plugin-dir", "/tmp", "--socket", "/tmp/x.sock"],
        ["--socket", "/nonexistent/plugin.sock"],
        ["--socket", "/etc/hostname"],  # a file, not a socket: said at once, not "no connection" after the timeout
        ["--plugin-dir", "/tmp", "--timeout", "0"],
    ],
)
def test_usage_errors_exit_two_with_one_line(args: list[str]) -> None:
    proc = subprocess.run([*CHECK, *args], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("kubedevice: ")


def test_a_live_kubelet_socket_is_refused_and_left_alone(tmp_path: Path) -> None:
    """A kubelet (here the simulator) already serves the directory: check must not take it over."""

    async def scenario() -> None:
        sim = KubeletSimulator(tmp_path)
        await sim.start()
        try:
            inode = sim.kubelet_sock.stat().st_ino
            code, out, err = await check_cli("--plugin-dir", str(tmp_path), "--timeout", "1")
            assert code == 2 and out == "", err
            assert err == (
                f"kubedevice: {sim.kubelet_sock} is served by a running kubelet or simulator; not taking it over "
                "(stop it, or use another --plugin-dir)\n"
            )
            assert sim.kubelet_sock.stat().st_ino == inode
            assert await sim_still_answers(sim)
        finally:
            await sim.stop()

    run(scenario())


def test_a_plugin_dir_that_cannot_be_used_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    proc = subprocess.run(
        [*CHECK, "--plugin-dir", str(tmp_path / "file" / "dp")], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (  # refused as the command line is read, as every directory option is
        f"kubedevice: invalid value for '--plugin-dir': {tmp_path / 'file' / 'dp'} can never be a directory: "
        f"{tmp_path / 'file'} is not one (see 'kubedevice check --help')\n"
    )


async def sim_still_answers(sim: KubeletSimulator) -> bool:
    """Register a made-up plugin on the original kubelet.sock and see the simulator record it."""
    async with grpc.aio.insecure_channel(f"unix://{sim.kubelet_sock}") as channel:
        request = pb.RegisterRequest(version="v1", endpoint="x.sock", resource_name="example.com/x")
        with contextlib.suppress(grpc.aio.AioRpcError):  # refused for its version: what matters is who answers
            await pb_grpc.RegistrationStub(channel).Register(request, timeout=10)
    return any(r.resource_name == "example.com/x" for r in sim.registrations)
