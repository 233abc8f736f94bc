"""Run ``kubedevice`` command lines fast and isolated: each one a fork of a process that has them loaded.

A fresh ``python -m kubedevice`` costs about a second of CPU before it reads its arguments (the
imports), which for hundreds of command lines is minutes on 2 cores. Running them in the test
process instead is fast but unsafe: ``serve`` pins its threads to one CPU, freezes the heap and
installs signal handlers, and a command that starts serving never returns. So this module runs a
*zygote*: a process that imports every kubedevice command once (and nothing that starts a
thread), then forks one child per command line. The child is the ``kubedevice`` process as a
user runs it (``kubedevice.cli.main`` with that ``argv``; stdin ``/dev/null``; its own working
directory, environment, stdout and stderr; the interpreter's normal exit, so finalizers and
"Exception ignored" lines show as they would), at the cost of a fork (milliseconds).

Every child has a deadline: a command still running then (a daemon that started) gets SIGTERM,
as a user or the kubelet would stop it, then SIGKILL. :class:`Outcome` says which happened.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

GRACE = 15.0
"""Seconds a command has to stop after SIGTERM before it is killed."""


@dataclass(frozen=True)
class Outcome:
    args: tuple[str, ...]
    code: int
    """The exit code, or minus the signal that ended the process."""
    stdout: str
    stderr: str
    stopped: bool
    """Still running at its deadline: stopped with SIGTERM (a daemon that started)."""
    seconds: float

    @property
    def stderr_lines(self) -> list[str]:
        return self.stderr.strip().splitlines()


class Zygote:
    """The forking process; :meth:`run` is one command line."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self._workdir = workdir
        self._count = 0
        self._process = subprocess.Popen(
            [sys.executable, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=workdir,
        )
        ready = self._read()
        if ready.get("ready") is not True:
            raise RuntimeError(f"the zygote did not start: {ready}")

    def _read(self) -> dict[str, Any]:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the zygote exited ({self._process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def run(
        self, args: list[str], deadline: float, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> Outcome:
        """Run ``kubedevice ARGS``; SIGTERM after ``deadline`` seconds if it is still running."""
        self._count += 1
        out, err = self._workdir / f"{self._count}.out", self._workdir / f"{self._count}.err"
        job = {
            "args": args,
            "deadline": deadline,
            "cwd": str(cwd or self._workdir),
            "env": env or {},
            "stdout": str(out),
            "stderr": str(err),
        }
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(job) + "\n")
        self._process.stdin.flush()
        result = self._read()
        outcome = Outcome(
            tuple(args),
            result["code"],
            out.read_text(errors="replace"),
            err.read_text(errors="replace"),
            result["stopped"],
            result["seconds"],
        )
        out.unlink()
        err.unlink()
        return outcome

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=30)


# --- the zygote itself ---------------------------------------------------------------------


def _preload() -> None:
    """Every command's modules, so a child starts with them loaded; nothing here may start a thread."""
    import importlib

    from kubedevice.commands import LAZY

    for lazy in LAZY.values():
        importlib.import_module(lazy.module)
    for module in ("kubedevice.cli", "kubedevice.node.daemon", "kubedevice.dra.driver.daemon", "kubedevice.demo"):
        importlib.import_module(module)
    threads = os.listdir("/proc/self/task")
    if len(threads) != 1:  # a fork would copy a process whose other threads are gone
        raise RuntimeError(f"loading the commands started threads: {threads}")
    # Frozen, the loaded modules are neither walked by a child's collections nor copied page by
    # page when it touches their reference counts; what a child makes is collected as usual.
    gc.freeze()


def _wait(pid: int, deadline: float) -> tuple[int, bool]:
    """The child's exit code (or -signal), and whether it had to be stopped."""
    stopped = False
    limit = time.monotonic() + deadline
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), stopped
        now = time.monotonic()
        if now >= limit:
            if stopped:  # SIGTERM did not stop it within GRACE
                os.kill(pid, signal.SIGKILL)
                return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), stopped
            os.kill(pid, signal.SIGTERM)
            stopped, limit = True, now + GRACE
        time.sleep(0.005)


def _serve(protocol_in: IO[str], protocol_out: IO[str]) -> dict[str, Any] | None:
    """Fork a child per job; the child returns its job, the zygote returns None at the end of input."""
    protocol_out.write(json.dumps({"ready": True}) + "\n")
    protocol_out.flush()
    while line := protocol_in.readline():
        job: dict[str, Any] = json.loads(line)
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            return job
        code, stopped = _wait(pid, job["deadline"])
        answer = {"code": code, "stopped": stopped, "seconds": round(time.monotonic() - started, 3)}
        protocol_out.write(json.dumps(answer) + "\n")
        protocol_out.flush()
    return None


def _become(job: dict[str, Any]) -> None:
    """The child: the job's directory, environment and files in place of the zygote's pipes."""
    os.chdir(job["cwd"])
    for name, value in job["env"].items():
        os.environ[name] = value
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(job["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(job["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for source, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(source, target)
        os.close(source)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's stdin for as long as it lives
    sys.argv = ["kubedevice", *job["args"]]


def _exit_code(exit: SystemExit) -> int:
    """What the interpreter makes of ``SystemExit``: None is 0, a message is printed and 1."""
    if exit.code is None or isinstance(exit.code, int):
        return exit.code or 0
    print(exit.code, file=sys.stderr)
    return 1


def _run_child() -> None:
    """``kubedevice.cli.main()``, then the interpreter's exit as it matters here.

    A normal interpreter exit would tear down every module the zygote loaded (a second of
    CPU); instead the steps whose effects a user sees are taken: an uncaught exception's
    traceback, non-daemon threads joined, atexit handlers, a collection of what the command left
    (a ``__del__`` complaining, a coroutine never awaited), the streams flushed.
    """
    from kubedevice.cli import main

    try:
        main()
        code = 0
    except SystemExit as exit:
        code = _exit_code(exit)
    except BaseException:
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's own wait for non-daemon threads
    atexit._run_exitfuncs()
    gc.collect()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    protocol_in, protocol_out = sys.stdin, sys.stdout
    _preload()
    child_job = _serve(protocol_in, protocol_out)
    if child_job is not None:
        _become(child_job)
        _run_child()
