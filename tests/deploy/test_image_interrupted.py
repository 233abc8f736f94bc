"""scripts/image.sh stopped during its debootstrap leaves nothing behind.

debootstrap mounts /proc and /sys inside the rootfs it makes. A build stopped there once left a
mounted, half-made rootfs in the cache, and removing such a directory with ``rm -rf`` would reach
through the mounts into the host's. The script runs debootstrap in a private mount namespace and
removes the half-made rootfs on exit; these tests stop it (Ctrl-C, and a debootstrap that fails)
while a stand-in debootstrap holds a mount in its target, then look at the host's mounts and the
cache. The stand-in is the only thing not real: it is what image.sh calls, not the code under test.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubedevice.testing.cluster.files import mounts_below

pytestmark = pytest.mark.image

REPO = Path(__file__).resolve().parents[2]

# The target is its only absolute argument. It mounts a tmpfs on the target's proc, as debootstrap
# mounts proc there, says so, then waits (or fails).
STAND_IN = """#!/bin/sh
for arg; do case $arg in /*) target=$arg ;; esac; done
mkdir -p "$target/proc" "$target/usr/bin"
mount -t tmpfs stand-in-proc "$target/proc"
touch "$target/usr/bin/python3" "$STAND_IN_MARK"
[ "$STAND_IN_MODE" = fail ] && { echo "E: stand-in failure" >&2; exit 1; }
exec sleep 60
"""


@pytest.fixture
def stand_in(tmp_path: Path) -> Iterator[dict[str, str]]:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("image.sh needs root and unshare")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "debootstrap").write_text(STAND_IN)
    (bin_dir / "debootstrap").chmod(0o755)
    for tool in ("umoci",):  # only looked for before the debootstrap step
        if not shutil.which(tool):
            (bin_dir / tool).write_text("#!/bin/sh\nexit 1\n")
            (bin_dir / tool).chmod(0o755)
    (tmp_path / "tmp").mkdir()
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout
    yield {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "KUBEDEVICE_CACHE": str(tmp_path / "cache"),
        "KUBEDEVICE_DIST": str(tmp_path / "dist"),
        "TMPDIR": str(tmp_path / "tmp"),
        "STAND_IN_MARK": str(tmp_path / "started"),
        "ARCH": arch.strip(),
    }
    for mount in reversed(mounts_below(tmp_path)):  # what a failing image.sh left: not on the host
        subprocess.run(["umount", "--lazy", mount], check=False)


def _default_signals() -> None:
    """In the child, before exec: SIGINT and SIGTERM as a terminal's shell leaves them. A
    background job of a non-interactive shell (the test lanes of scripts/test.sh) starts with
    SIGINT ignored, and a signal ignored at entry cannot be trapped: Ctrl-C would never reach it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _start(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["bash", str(REPO / "scripts/image.sh"), "--arch", env["ARCH"]],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, to signal as a terminal (Ctrl-C) or kill does
        preexec_fn=_default_signals,  # noqa: PLW1509 - a signal disposition, no lock taken
    )


def _assert_nothing_left(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert mounts_below(tmp_path) == []
    assert sorted(p.name for p in cache.iterdir()) == []  # no half-made rootfs, no cached one
    assert list((tmp_path / "tmp").iterdir()) == []  # the work directory went too


@pytest.mark.parametrize(("sent", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "kill"])
def test_stopped_during_debootstrap_it_leaves_no_mount_and_no_rootfs(
    stand_in: dict[str, str], tmp_path: Path, sent: signal.Signals, code: int
) -> None:
    proc = _start(stand_in)
    try:
        deadline = time.monotonic() + 30
        while not Path(stand_in["STAND_IN_MARK"]).exists():
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the stand-in debootstrap never started"
            time.sleep(0.05)
        half_made = [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".image-rootfs-")]
        assert half_made and (half_made[0] / "usr/bin/python3").exists()
        assert mounts_below(tmp_path) == []  # the stand-in's mount is in its own namespace
        os.killpg(proc.pid, sent)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == code, out
    _assert_nothing_left(tmp_path)


def test_a_failed_debootstrap_says_so_and_leaves_nothing(stand_in: dict[str, str], tmp_path: Path) -> None:
    proc = subprocess.run(
        ["bash", str(REPO / "scripts/image.sh"), "--arch", stand_in["ARCH"]],
        env={**stand_in, "STAND_IN_MODE": "fail"},
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "E: stand-in failure" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "image.sh: debootstrap failed"
    _assert_nothing_left(tmp_path)
