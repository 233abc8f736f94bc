"""The one answer every part of kubedevice gets about a unix socket: real sockets in a temp dir."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from kubedevice.errors import DependencyError
from kubedevice.paths import socket_problem
from kubedevice.unixsocket import (
    MAX_PATH_BYTES,
    CannotBind,
    SocketInUse,
    check_path,
    clear_stale,
    is_live,
    is_socket,
    listen,
)


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "live.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(1)
        yield path


def stale(path: Path) -> Path:
    """A socket file nobody listens on any more: what a crashed process leaves."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
    return path


def test_a_listener_is_live_a_leftover_and_nothing_are_not(listening: Path, tmp_path: Path) -> None:
    assert is_live(listening)
    assert not is_live(stale(tmp_path / "dead.sock"))
    assert not is_live(tmp_path / "absent.sock")
    (tmp_path / "file").write_text("")
    assert not is_live(tmp_path / "file")  # the kernel refuses a connect to a file that is no socket


def test_a_full_backlog_is_a_listener(tmp_path: Path) -> None:
    path = tmp_path / "busy.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(0)
        waiting = []
        try:
            while True:  # fill the backlog: the next connect is refused with EAGAIN, not ECONNREFUSED
                client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                waiting.append(client)
                client.setblocking(False)
                client.connect(str(path))
        except BlockingIOError:
            assert is_live(path)
        finally:
            for client in waiting:
                client.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to probe as another user")
def test_a_socket_we_may_not_reach_counts_as_owned(listening: Path) -> None:
    """EACCES cannot tell whether someone serves it: never treated as a leftover to remove."""
    listening.parent.chmod(0o700)
    child = os.fork()
    if child == 0:  # the probe as nobody, who may not enter the directory
        code = 2
        try:
            os.setuid(65534)
            code = 0 if is_live(listening) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_is_socket_looks_at_the_entry_itself(listening: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.sock"
    link.symlink_to(listening)
    assert is_socket(listening)
    assert not is_socket(link)  # the kubelet's plugin watcher skips symlinks
    assert not is_socket(tmp_path / "absent.sock")


def test_clear_stale_removes_only_a_dead_socket(listening: Path, tmp_path: Path) -> None:
    dead = stale(tmp_path / "dead.sock")
    clear_stale(dead)
    assert not dead.exists()
    clear_stale(tmp_path / "absent.sock")  # nothing there: nothing to do
    with pytest.raises(SocketInUse, match="another live process"):
        clear_stale(listening)
    assert is_live(listening)
    squatter = tmp_path / "file.sock"
    squatter.write_text("someone's")
    with pytest.raises(SocketInUse, match="not a socket"):
        clear_stale(squatter)
    assert squatter.read_text() == "someone's"
    assert issubclass(SocketInUse, DependencyError)  # exit 1: the machine, not the command


def test_check_path_counts_the_bytes_the_kernel_counts(tmp_path: Path) -> None:
    base = Path("/" + "d" * (MAX_PATH_BYTES - 3))
    check_path(base / "s")  # 107 bytes: binds
    with pytest.raises(ValueError, match=f"is {MAX_PATH_BYTES + 1} bytes, longer than {MAX_PATH_BYTES}"):
        check_path(base / "ss")
    with pytest.raises(ValueError, match="longer than"):  # two bytes per character in UTF-8
        check_path(Path("/" + "é" * 54))


def test_a_socket_to_read_is_said_wrong_at_once_in_each_way(listening: Path, tmp_path: Path) -> None:
    """``paths.socket_problem``, asked before a connection would only time out."""
    assert socket_problem(listening) is None
    (tmp_path / "link.sock").symlink_to(listening)
    assert socket_problem(tmp_path / "link.sock") is None  # followed, as the connection is
    (tmp_path / "dangling.sock").symlink_to(tmp_path / "gone")
    assert socket_problem(tmp_path / "dangling.sock") is None  # left to the connection, which says it
    assert socket_problem(tmp_path / "absent.sock") == f"{tmp_path}/absent.sock: no such file or directory"
    (tmp_path / "file").write_text("")
    assert socket_problem(tmp_path / "file") == f"{tmp_path}/file: not a unix socket"
    under_file = tmp_path / "file" / "pod-resources" / "kubelet.sock"
    assert socket_problem(under_file) == f"{under_file}: can never be a socket: {tmp_path}/file is not a directory"
    if os.geteuid() == 0:
        return  # root may look anywhere
    (tmp_path / "closed").mkdir(mode=0o000)
    assert socket_problem(tmp_path / "closed" / "s.sock") == f"{tmp_path}/closed/s.sock: permission denied"


def test_listen_says_why_grpc_cannot_bind_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """gRPC's own failure is "Failed to bind" with the reason only in its C log: the kernel's
    reason is found by a probe beside the path, a dot file the kubelet's plugin watcher ignores."""
    server = grpc.server(ThreadPoolExecutor(max_workers=1))
    for where, reason in ((tmp_path / "gone" / "x.sock", "no such file or directory"), (Path("/proc/x.sock"), "")):
        with pytest.raises(CannotBind, match=f"^{where}: cannot serve a unix socket there: {reason}"):
            listen(server, where)
    assert issubclass(CannotBind, DependencyError)  # exit 1, one line
    served = tmp_path / "ours.sock"
    listen(server, served)
    server.start()
    try:
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ours.sock"]  # the probe is gone
        assert is_live(served)
    finally:
        server.stop(None)


def test_listen_replaces_a_stale_socket_and_never_touches_a_file_at_the_probe(tmp_path: Path) -> None:
    path = stale(tmp_path / "dra.sock")
    probe_name = tmp_path / ".ra.sock"
    probe_name.write_text("someone's")
    server = grpc.server(ThreadPoolExecutor(max_workers=1))
    listen(server, path)  # the caller judged it stale (clear_stale): gRPC unlinks it and binds
    server.start()
    try:
        assert is_live(path)
        assert probe_name.read_text() == "someone's"
    finally:
        server.stop(None)
