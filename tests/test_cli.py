"""The top-level command line as a new user meets it: help, version, refusals, demo errors."""

from __future__ import annotations

import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kubedevice import __version__

ROOT = Path(__file__).resolve().parents[1]


def kubedevice(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubedevice", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def one_line(result: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The single ``kubedevice: ...`` line of a refused command."""
    assert result.returncode == code, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kubedevice: "), result.stderr
    return lines[0]


def test_version() -> None:
    result = kubedevice("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"kubedevice {__version__}"


def test_help_loads_no_tool_and_shows_no_markup() -> None:
    """``--help`` lists every command without importing the DRA tools, the simulator or the checker."""
    script = (
        "import sys; from kubedevice.cli import main; sys.argv = ['kubedevice', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(' '.join(m for m in sys.modules if m.startswith(('kubedevice.', 'grpc', 'pydantic', 'rich'))))"
    )
    for args in (["--help"], ["serve", "--help"], ["demo", "--help"]):
        result = subprocess.run(
            [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=60, check=True
        )
        *help_lines, loaded = result.stdout.strip().splitlines()
        modules = set(loaded.split())
        tools = ("kubedevice.dra", "kubedevice.kubelet", "kubedevice.conformance", "grpc", "rich")
        # serve and demo read a config (pydantic; typer also parses their options with it)
        heavy = {m for m in modules if m.startswith(tools if args != ["--help"] else (*tools, "pydantic"))}
        assert heavy == set(), (args, sorted(heavy))
        text = "\n".join(help_lines)
        assert "``" not in text and "<bool>" not in text and "[bold" not in text, text
    top = kubedevice("--help").stdout
    for command in ("serve", "demo", "discover", "kubelet", "check", "dra"):
        assert re.search(rf"^  {command}\s+\S", top, re.MULTILINE), top


def test_unknown_command_and_missing_option_are_one_line() -> None:
    assert "no such command 'srve'" in one_line(kubedevice("srve"))
    assert "missing option '--config'" in one_line(kubedevice("serve"))
    assert "no such option: --bogus (see 'kubedevice serve --help')" in one_line(kubedevice("serve", "--bogus"))


@pytest.mark.parametrize("command", [[], ["dra"]], ids=["kubedevice", "dra"])
def test_a_bare_group_prints_its_help_on_stderr(command: list[str]) -> None:
    """``kubedevice`` or ``kubedevice dra`` alone: the help, as a usage error (stderr, exit 2)."""
    result = kubedevice(*command)
    assert result.returncode == 2 and result.stdout == "", result
    assert result.stderr.startswith(" ".join(["Usage: kubedevice", *command, "[OPTIONS] COMMAND"])), result.stderr
    assert "Commands:" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [("--log-format", "xml", "'--log-format'"), ("--log-level", "loud", "'--log-level'")],
)
def test_bad_log_format_and_level_are_refused_alike(tmp_path: Path, option: str, value: str, named: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("resources:\n  - name: a.com/x\n    static: {count: 1, paths: [/dev/null]}\n")
    line = one_line(kubedevice("serve", "--config", str(config), "--plugin-dir", str(tmp_path), option, value))
    assert named in line and repr(value) in line
    assert not list(tmp_path.glob("*.sock"))


def test_help_and_operations_doc_agree_on_log_levels() -> None:
    levels = ["debug", "info", "warning", "error", "critical"]
    assert "|".join(levels) in kubedevice("serve", "--help").stdout  # <...> or [...], as typer's version has it
    doc = (ROOT / "docs" / "operations.md").read_text()
    assert "`--log-level` is " + ", ".join(f"`{level}`" for level in levels[:-1]) + f" or `{levels[-1]}`" in doc
    assert "`--log-format` is `text` (default) or `json`" in doc


def test_demo_config_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("resourcez: []\n")
    assert "bad.yaml" in one_line(kubedevice("demo", "--config", str(bad)))
    assert "missing.yaml: cannot read" in one_line(kubedevice("demo", "--config", str(tmp_path / "missing.yaml")))


def test_demo_with_no_devices_says_so_at_once(tmp_path: Path) -> None:
    none = tmp_path / "none.yaml"
    none.write_text('resources:\n  - name: a.com/x\n    glob: {paths: ["/dev/kubedevice-nothing*"]}\n')
    result = kubedevice("demo", "--config", str(none))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"kubedevice: {none}: no devices found for a.com/x under host root /; nothing to demo "
        "(try 'kubedevice discover --config ...')"
    )


def test_demo_of_a_glob_under_host_root_slash(tmp_path: Path) -> None:
    config = tmp_path / "tty.yaml"
    config.write_text('resources:\n  - name: a.com/null\n    glob: {paths: ["/dev/null"]}\n')
    result = kubedevice("demo", "--config", str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "demo finished" in result.stdout and "/dev/null" in result.stdout


def frame(kind: int, payload: bytes = b"") -> bytes:
    """One HTTP/2 frame on stream 0 (RFC 9113 section 4.1)."""
    return len(payload).to_bytes(3, "big") + bytes([kind, 0]) + bytes(4) + payload


def seen_headers(conn: socket.socket) -> None:
    """Read the client's connection preface and frames up to its first HEADERS frame (a call)."""
    buf = bytearray()

    def need(size: int) -> None:
        while len(buf) < size:
            chunk = conn.recv(65536)
            if not chunk:
                raise ConnectionError("grpc hung up before it started a call")
            buf.extend(chunk)

    need(24)  # PRI * HTTP/2.0 ...
    del buf[:24]
    while True:
        need(9)
        length, kind = int.from_bytes(buf[:3], "big"), buf[3]
        if kind == 0x1:
            return
        need(9 + length)
        del buf[: 9 + length]


def serve_told_goaway(tmp_path: Path, env: dict[str, str]) -> str:
    """Run ``kubedevice serve`` against a kubelet.sock that answers its Register with an HTTP/2
    GOAWAY (INTERNAL_ERROR), as a kubelet going away does; its stderr once it stopped on SIGTERM."""
    config = tmp_path / "c.yaml"
    config.write_text("resources:\n  - name: a.com/x\n    static: {count: 1, paths: [/dev/null]}\n")
    kubelet = socket.socket(socket.AF_UNIX)
    kubelet.bind(str(tmp_path / "kubelet.sock"))
    kubelet.listen()
    told = threading.Event()

    def refuse() -> None:
        conn, _ = kubelet.accept()
        with conn:
            # GOAWAY only once the Register call's HEADERS arrived (grpc starts it after our
            # SETTINGS): told earlier, grpc (dialling with wait_for_ready) takes a new connection for
            # the call, which nothing answers here, and the call ends in Deadline Exceeded instead
            # (seen on a loaded CI machine).
            conn.sendall(frame(0x4))
            seen_headers(conn)
            conn.sendall(frame(0x7, struct.pack(">II", 0, 0x2) + b"going away"))
            told.set()
            conn.recv(65536)  # until grpc hangs up

    threading.Thread(target=refuse, daemon=True).start()
    daemon = subprocess.Popen(
        [sys.executable, "-m", "kubedevice", "serve", "--config", str(config), "--plugin-dir", str(tmp_path)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    # A serve that never logs the GOAWAY fails, not hangs. Bounds on a hang only: importing
    # serve's modules alone took 12 s at a load average of 20 on 2 cores (docs/real-cluster.md).
    deadline = threading.Timer(240, daemon.kill)
    deadline.start()
    try:
        assert told.wait(120), "serve never dialled kubelet.sock"
        lines = []
        assert daemon.stderr is not None
        for line in daemon.stderr:  # grpc's C-core line, if any, comes before our own about the error
            lines.append(line)
            if "GOAWAY" in line:
                break
        daemon.send_signal(signal.SIGTERM)
        _, rest = daemon.communicate(timeout=120)
    finally:
        deadline.cancel()
        daemon.kill()
        kubelet.close()
    assert daemon.returncode == 0, "".join(lines) + rest
    return "".join(lines) + rest


def test_grpc_core_logs_stay_out_of_serve_stderr(tmp_path: Path) -> None:
    """grpc's C core prints a GOAWAY it receives (``chttp2_transport.cc:...] ... Got goaway``) raw
    on stderr unless GRPC_VERBOSITY says otherwise; kubedevice sets it, and a user's own value wins."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPC_")}
    (tmp_path / "quiet").mkdir()
    quiet = serve_told_goaway(tmp_path / "quiet", env)
    assert "GOAWAY received" in quiet, quiet  # told, and said so in our own format
    assert ".cc:" not in quiet and "absl::InitializeLog" not in quiet, quiet
    (tmp_path / "asked").mkdir()
    asked = serve_told_goaway(tmp_path / "asked", {**env, "GRPC_VERBOSITY": "INFO"})
    assert re.search(r"chttp2_transport\.cc:\d+\].*Got goaway", asked), asked


def test_the_demo_into_a_pipe_has_no_line_wider_than_its_tables() -> None:
    """Off a terminal the console is unbounded so that tables never fold; its rules were then drawn
    a million characters wide."""
    result = kubedevice("demo", timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].strip("─ ") == "kubedevice demo" and len(lines[0]) == 80, lines[0][:100]
    assert max(map(len, lines)) < 200, max(lines, key=len)[:100]
