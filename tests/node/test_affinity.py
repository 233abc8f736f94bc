"""``serve`` keeps its threads on one CPU of those it may use (``node/affinity.py``), unless
``--all-cpus``: read from a real daemon's threads in /proc, grpc's among them."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubedevice.testing.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = os.sched_getaffinity(0)
many_cpus = pytest.mark.skipif(len(ALLOWED) < 2, reason="one CPU allowed here: nothing to choose")


def cpu_list(text: str) -> set[int]:
    """``0-2,5`` as ``{0, 1, 2, 5}``."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def thread_cpus(pid: int) -> dict[int, set[int]]:
    """Each thread's allowed CPUs, as the kernel has them."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines() if ":\t" in line)
        found[int(task.name)] = cpu_list(status["Cpus_allowed_list"].strip())
    return found


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kd-aff-", dir="/tmp"))  # short: socket paths live here
    yield path
    shutil.rmtree(path, ignore_errors=True)


def serving(directory: Path, dra: bool, *extra: str) -> subprocess.Popen[bytes]:
    """``kubedevice serve`` as a device plugin or a DRA driver (claims from files), once its first
    socket is served (its gRPC threads started)."""
    if dra:
        for made_by_the_kubelet in ("plugins", "plugins_registry", "claims"):
            (directory / made_by_the_kubelet).mkdir()
        args = [
            "--config",
            str(ROOT / "examples" / "dra-null.yaml"),
            "--node",
            "n1",
            "--kubelet-dir",
            str(directory),
            "--cdi-dir",
            str(directory / "cdi"),
            "--claims-dir",
            str(directory / "claims"),
        ]
        served = directory / "plugins_registry"
    else:
        args = ["--config", str(ROOT / "examples" / "null.yaml"), "--plugin-dir", str(directory)]
        served = directory
    daemon = subprocess.Popen(
        [sys.executable, "-m", "kubedevice", "serve", *args, *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip

    def serving() -> bool:
        assert daemon.poll() is None, f"serve exited with {daemon.returncode}"
        return any(served.glob("*.sock"))

    wait_for("serve's socket", serving, 60)
    return daemon


def stopped(daemon: subprocess.Popen[bytes]) -> str:
    daemon.send_signal(signal.SIGTERM)
    _, err = daemon.communicate(timeout=30)
    return err.decode()


@many_cpus
@pytest.mark.parametrize("dra", [False, True], ids=["device-plugin", "dra"])
def test_every_thread_of_serve_shares_one_cpu_it_may_use(plugin_dir: Path, dra: bool) -> None:
    daemon = serving(plugin_dir, dra)
    try:
        threads = thread_cpus(daemon.pid)
    finally:
        err = stopped(daemon)
    assert len(threads) > 1, "grpc's threads are there too"
    [cpu] = {frozenset(cpus) for cpus in threads.values()}
    assert len(cpu) == 1 and cpu <= ALLOWED, threads
    assert "Traceback" not in err, err


@pytest.mark.parametrize("dra", [False, True], ids=["device-plugin", "dra"])
def test_all_cpus_leaves_the_kernels_choice(plugin_dir: Path, dra: bool) -> None:
    daemon = serving(plugin_dir, dra, "--all-cpus")
    try:
        threads = thread_cpus(daemon.pid)
    finally:
        err = stopped(daemon)
    assert all(cpus == ALLOWED for cpus in threads.values()), threads
    assert "Traceback" not in err, err


def test_a_process_allowed_one_cpu_is_left_alone() -> None:
    """Nothing to choose: the affinity stays as it is, and the answer says so."""
    [cpu] = sorted(ALLOWED)[:1]
    probe = (
        f"import os; os.sched_setaffinity(0, {{{cpu}}}); from kubedevice.node.affinity import pin_to_one_cpu; "
        "print(pin_to_one_cpu(), sorted(os.sched_getaffinity(0)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(None, 1) == ["None", f"[{cpu}]\n"]
