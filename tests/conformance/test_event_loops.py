"""``run_checks()`` any number of times, each from a fresh event loop, in one process.

grpc.aio shuts its engine down whenever the last aio object is collected and joins its poller
thread, which waits for every operation still pending. A connectivity watch without a deadline
on a channel grpc cannot use (a unix path over 107 bytes) never ends, so that join hung the
process. Each run is a child process with a hard timeout, so a hang fails the test instead of
stalling the suite; ``gc.collect()`` between loops forces the engine shutdown at a known point.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def _unusable_socket(tmp_path: Path) -> Path:
    path = tmp_path / ("x" * 120) / "plugin.sock"
    assert len(bytes(path)) > 107
    return path


def test_checks_on_an_unusable_socket_from_many_loops(tmp_path: Path) -> None:
    out = _run(
        """
        import asyncio, gc, sys
        from pathlib import Path
        from kubedevice.conformance import CheckOptions, Status, run_checks
        for _ in range(3):
            report = asyncio.run(run_checks(CheckOptions(socket=Path(sys.argv[1]), rpc_timeout=0.3)))
            assert any(r.status is Status.FAIL for r in report.results)
            gc.collect()
        print("done")
        """,
        str(_unusable_socket(tmp_path)),
    )
    assert out.strip() == "done"


def test_simulator_dial_of_an_unusable_endpoint_from_many_loops(tmp_path: Path) -> None:
    out = _run(
        """
        import asyncio, gc, sys
        from pathlib import Path
        from kubedevice.kubelet.endpoint import DialError, Endpoint
        async def dial():
            try:
                await Endpoint.dial("example.com/r", "r.sock", Path(sys.argv[1]), 0.3)
            except DialError as err:
                return str(err)
        for _ in range(3):
            print(asyncio.run(dial()))
            gc.collect()
        """,
        str(_unusable_socket(tmp_path)),
    )
    assert out.splitlines() == ["failed to dial device plugin: context deadline exceeded"] * 3


def test_full_checks_with_an_absolute_endpoint_from_many_loops(tmp_path: Path) -> None:
    """The conformance case that first hung: the kubelet and the checker both dial a too-long path."""
    out = _run(
        """
        import asyncio, gc, sys
        from pathlib import Path
        from tests.conformance.conftest import check_plugin, scripted, by_status
        from kubedevice.conformance import Status
        for n in range(3):
            plugin = scripted(Path(sys.argv[1]) / str(n))
            plugin.register_endpoint = str(plugin.socket)
            report = asyncio.run(asyncio.wait_for(check_plugin(plugin, rpc_timeout=0.5), 60))
            print(sorted(by_status(report, Status.FAIL)))
            gc.collect()
        """,
        str(tmp_path),
    )
    expected = "['devices.options', 'registration.accepted', 'registration.endpoint']"
    assert out.splitlines() == [expected] * 3
