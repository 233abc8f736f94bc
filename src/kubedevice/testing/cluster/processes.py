"""The cluster's processes: found, waited for, stopped in order, proven gone.

Every wait goes through :func:`kubedevice.testing.waiting.wait_for`; what a wait needs is the
whole result (a socket that accepts, not one whose file exists: the file appears at bind(),
before listen()).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from ..waiting import wait_for
from .state import ClusterError

STOP_ORDER = ("kube-scheduler", "kube-controller-manager", "kubelet", "containerd", "kube-apiserver", "etcd")
"""The API server before etcd: with etcd gone first its shutdown hangs for more than 90 s."""


def child_of(pid: int, timeout: float = 30.0) -> int:
    """The host PID of the process nsenter forked into the namespace."""

    def child() -> int | None:
        with contextlib.suppress(OSError):
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            return int(children[0]) if children else None
        return None

    try:
        return wait_for(f"the command of nsenter (pid {pid})", child, timeout, 0.01)
    except AssertionError:
        raise ClusterError(f"nsenter (pid {pid}) did not start its command") from None


def alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def terminate(pid: int, timeout: float) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; returns once the process is gone."""
    if not alive(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    try:
        wait_for(f"process {pid} to stop", lambda: not alive(pid), timeout)
    except AssertionError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        try:
            wait_for(f"process {pid} killed", lambda: not alive(pid), 60.0)
        except AssertionError:
            raise ClusterError(f"process {pid} still alive 60 s after SIGKILL") from None


def descendants(roots: list[int]) -> set[int]:
    """``roots`` and every live process below them."""
    parents: dict[int, list[int]] = {}
    for pid in _all_pids():
        with contextlib.suppress(OSError, IndexError, ValueError):
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = [pid for pid in roots if alive(pid)]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(parents.get(pid, []))
    return found


def stop_namespace(pids: dict[str, int], namespace_pid: int, init_pid: int) -> None:
    """Stop one namespace's processes in order (plugins started with spawn() and relays first), then
    its init.

    When the namespace's init exits, the kernel kills every process of the PID namespace (container
    processes in nested namespaces too); unshare(1) then exits. unshare blocks SIGTERM while it
    waits, so it is only the fallback: --kill-child SIGKILLs the init.
    """
    members = descendants([init_pid, *pids.values()])
    extra = [name for name in pids if name not in STOP_ORDER]
    for name in [*extra, *STOP_ORDER]:
        pid = pids.get(name, 0)
        if pid:
            terminate(pid, timeout=20.0)
    terminate(namespace_pid, timeout=5.0)
    terminate(init_pid, timeout=5.0)
    _wait_gone(members | descendants([init_pid, *pids.values()]))


def _wait_gone(pids: set[int], timeout: float = 20.0) -> None:
    """Until none of ``pids`` is alive (the kernel kills a PID namespace's processes after its init)."""

    def left() -> list[int]:
        return sorted(pid for pid in pids if alive(pid))

    try:
        wait_for("the cluster's processes gone", lambda: not left(), timeout)
    except AssertionError:
        raise ClusterError(f"processes of the cluster still alive after stop: {left()}") from None


def _all_pids() -> Iterator[int]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def accepts(path: Path) -> bool:
    """Whether the unix socket at ``path`` takes a connection. Its file appears at bind(), before
    listen(): a client that dials as soon as the file exists may be refused."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(str(path)) == 0


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def wait_ready(what: str, timeout: float, ready: Callable[[], bool], log: Path, pid: int | None) -> None:
    """Poll ``ready``; ClusterError with the log's tail if the process dies or time runs out."""

    def check() -> bool:
        if ready():
            return True
        if pid is not None and not alive(pid):
            raise ClusterError(f"{what}: the process exited", log, tail(log))
        return False

    try:
        wait_for(what, check, timeout, 0.1)
    except AssertionError:
        raise ClusterError(f"{what}: not ready after {timeout:.0f} s", log, tail(log)) from None


def tail(log: Path, size: int = 3000) -> str:
    try:
        return log.read_text(errors="replace")[-size:]
    except OSError:
        return "(no log)"
