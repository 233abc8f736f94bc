"""The checks a config can ask for: path present, openable, an exec command, a sysfs value.

Blocking work (``open``, reading files) runs in a worker thread and commands run as asyncio
subprocesses with a timeout, so a hung device never stalls the event loop that serves gRPC.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..sources.hostroot import HostRoot
from ..sources.schema import ExecCheck, HealthCheck, OpenableCheck, PresentCheck, SysfsCheck

_MAX_PARALLEL_EXECS = 8


class CheckTarget(Protocol):
    """What a check needs to know about a device (``sources.base.Found`` fits)."""

    @property
    def key(self) -> str: ...
    @property
    def host_paths(self) -> tuple[str, ...]: ...
    @property
    def sysfs(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a device failed, and the type of check that said so (a bounded metrics label)."""

    check: str
    reason: str

    def __str__(self) -> str:
        return self.reason


class HealthChecker:
    """Runs a resource's checks on its devices; a result is ``None`` (pass) or a :class:`Failure`."""

    def __init__(self, checks: Sequence[HealthCheck], host: HostRoot) -> None:
        self._checks = list(checks)
        self._host = host
        self._exec_slots = asyncio.Semaphore(_MAX_PARALLEL_EXECS)

    async def run(self, targets: Sequence[CheckTarget]) -> dict[str, Failure | None]:
        """Check every target; file checks in one worker thread, commands concurrently."""
        file_results = await asyncio.to_thread(self._file_checks, targets)
        exec_results = await asyncio.gather(*(self._exec_checks(t) for t in targets))
        return {t.key: file_results[t.key] or exec_result for t, exec_result in zip(targets, exec_results, strict=True)}

    def _file_checks(self, targets: Sequence[CheckTarget]) -> dict[str, Failure | None]:
        return {t.key: self.file_check(t) for t in targets}

    def file_check(self, target: CheckTarget) -> Failure | None:
        """The synchronous checks (present, openable, sysfs); the first failure's reason."""
        for check in self._checks:
            reason: str | None = None
            if isinstance(check, PresentCheck):
                reason = _present(self._host, target)
            elif isinstance(check, OpenableCheck):
                reason = _openable(self._host, target)
            elif isinstance(check, SysfsCheck):
                reason = _sysfs(self._host, target, check)
            if reason:
                return Failure(check.type, reason)
        return None

    async def _exec_checks(self, target: CheckTarget) -> Failure | None:
        for check in self._checks:
            if isinstance(check, ExecCheck):
                async with self._exec_slots:
                    reason = await _exec(check, target)
                if reason:
                    return Failure(check.type, reason)
        return None


def _present(host: HostRoot, target: CheckTarget) -> str | None:
    missing = [p for p in target.host_paths if not host.exists(p)]
    return f"missing {', '.join(missing)}" if missing else None


def _openable(host: HostRoot, target: CheckTarget) -> str | None:
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    for path in target.host_paths:
        try:
            os.close(os.open(host.local(host.resolve(path)), flags))
        except OSError as exc:
            return f"cannot open {path}: {exc.strerror}"
    return None


def _sysfs(host: HostRoot, target: CheckTarget, check: SysfsCheck) -> str | None:
    if check.attribute.startswith("/"):
        path = check.attribute
    elif target.sysfs is not None:
        path = f"{target.sysfs}/{check.attribute}"
    else:
        return f"no sysfs directory for attribute {check.attribute}"
    try:
        value = host.read(path)
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror}"
    return None if value == check.equals else f"{path} is {value!r}, want {check.equals!r}"


# A check sees no variable of ours (no tokens, no proxies): only a fixed search path and locale.
EXEC_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}


async def _exec(check: ExecCheck, target: CheckTarget) -> str | None:
    """Run ``argv`` without a shell, in a clean environment and its own process group.

    At the timeout the whole group is killed, so a check that forked (a shell pipeline, a
    helper left in the background) cannot outlive it; the group is also killed after a normal
    exit, so no leftover keeps running until the next check.
    """
    fields = {
        "id": target.key,
        "path": target.host_paths[0] if target.host_paths else "",
        "paths": ",".join(target.host_paths),
        "sysfs": target.sysfs or "",
    }
    argv = [arg.format_map(fields) for arg in check.argv]
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            env=EXEC_ENV,
            start_new_session=True,
        )
    except OSError as exc:
        return f"cannot run {argv[0]}: {exc.strerror}"
    try:
        code = await asyncio.wait_for(process.wait(), check.timeout_seconds)
    except TimeoutError:
        _kill_group(process.pid)
        await process.wait()
        return f"{argv[0]} timed out after {check.timeout_seconds:g}s"
    finally:
        _kill_group(process.pid)
    return None if code == 0 else f"{argv[0]} exited with {code}"


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
