"""Exec health checks: no shell, a clean environment, and nothing outlives the check."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from kubedevice.health import HealthChecker
from kubedevice.health.checks import EXEC_ENV
from kubedevice.sources.base import Found
from kubedevice.sources.hostroot import HostRoot
from kubedevice.sources.schema import HealthConfig
from kubedevice.testing.waiting import wait_for

TARGET = Found(key="dev-0", host_paths=("/dev/null",))


def check(tmp_path: Path, argv: list[str], timeout: float = 5.0) -> str | None:
    config: dict[str, Any] = {"checks": [{"type": "exec", "argv": argv, "timeout_seconds": timeout}]}
    checker = HealthChecker(HealthConfig.model_validate(config).checks, HostRoot(tmp_path))
    failure = asyncio.run(checker.run([TARGET]))[TARGET.key]
    return None if failure is None else str(failure)


def gone(pid: int) -> bool:
    """Dead: no such process, or a zombie waiting for its (new) parent to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_gone(pidfile: Path) -> None:
    """Until the process whose PID the check wrote to ``pidfile`` is gone (killed with the check's
    process group; reaped by whoever inherits it, later on a busy machine)."""
    text = pidfile.read_text() if pidfile.exists() else ""
    assert text.endswith("\n"), f"the check never wrote its child's PID whole: {text!r}"
    pid = int(text)
    wait_for(f"process {pid} gone", lambda: gone(pid), 30, 0.02)


def test_hanging_check_that_forked_is_killed_with_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    started = time.monotonic()
    # 2 s: long enough for the shell to fork and write the PID on a loaded machine; the PID goes
    # to a temp file renamed over pidfile, so the file is whole whenever it exists
    script = f"sleep 300 & echo $! > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}; sleep 300"
    reason = check(tmp_path, ["sh", "-c", script], timeout=2)
    assert reason is not None and "timed out after 2s" in reason
    assert time.monotonic() - started < 60  # the check's timeout, not the 300 s it asked for
    wait_gone(pidfile)


def test_child_left_behind_by_a_passing_check_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    assert check(tmp_path, ["sh", "-c", f"sleep 300 & echo $! > {pidfile}; exit 0"]) is None
    wait_gone(pidfile)


def test_check_sees_only_the_fixed_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBEDEVICE_SECRET_TOKEN", "hunter2")
    dump = tmp_path / "env"
    assert check(tmp_path, ["sh", "-c", f"env > {dump}"]) is None
    seen = dict(line.split("=", 1) for line in dump.read_text().splitlines())
    assert "KUBEDEVICE_SECRET_TOKEN" not in seen
    assert seen["PATH"] == EXEC_ENV["PATH"]
    assert set(seen) - set(EXEC_ENV) <= {"PWD", "SHLVL", "_", "OLDPWD"}  # what sh itself sets


def test_argv_is_never_given_to_a_shell(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    reason = check(tmp_path, [f"true; touch {marker}"])
    assert reason is not None and "cannot run" in reason
    assert not marker.exists()


def test_check_runs_in_its_own_session(tmp_path: Path) -> None:
    out = tmp_path / "sid"
    assert check(tmp_path, ["sh", "-c", f"ps -o sid= -p $$ > {out}"]) is None
    assert int(out.read_text()) != os.getsid(0)
