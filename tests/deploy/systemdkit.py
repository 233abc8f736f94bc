"""A real systemd booted as PID 1 of a container (``systemd-nspawn``) on a node root directory.

The node root is a plain directory, so what the host service writes persists across a reboot
(stop the container, boot it again on the same directory). It holds the merged-/usr links of
this machine (``bin`` -> ``usr/bin`` ...), a few files of ``/etc`` (os-release, passwd, group,
a fixed machine-id: not a first boot, so no preset enables this machine's services) and an
empty ``usr`` over which the container binds this machine's ``/usr`` read-only: the node's
systemd is this machine's. The container has no network but loopback (``--private-network``),
is not registered with machined and makes no scope (``--register=no --keep-unit``), so it
needs neither a systemd nor a D-Bus on this machine.

From outside, ``/proc/<leader>/root`` is the node's ``/`` as its systemd sees it (its ``/run``
included, a tmpfs only in the container), which is what a pod's ``hostPath: /`` mount shows;
``nsenter -t <leader> -m -u -i -n -p -- systemctl`` is the chart's way to the node's systemctl.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from kubedevice.testing.waiting import wait_for

CI = os.environ.get("CI", "").lower() not in ("", "0", "false")
TOOLS = ("systemd-nspawn", "nsenter")
SYSTEMD = Path("/usr/lib/systemd/systemd")
MERGED = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
NSPAWN_REBOOT = 133  # systemd-nspawn's exit status when the container asked for a reboot


def unavailable(reason: str) -> None:
    """Skip on a developer machine, fail in CI, so CI never passes without a real systemd."""
    if CI:
        pytest.fail(f"the real-systemd test cannot run here: {reason}", pytrace=False)
    pytest.skip(reason)


def require() -> None:
    """Root, systemd-nspawn and nsenter, this machine's systemd, and a merged /usr to share."""
    if os.geteuid() != 0:
        unavailable("needs root (systemd-nspawn)")
    missing = [tool for tool in TOOLS if not shutil.which(tool)]
    if missing:
        unavailable(f"missing {', '.join(missing)}: bash scripts/system-deps.sh as root installs them")
    if not SYSTEMD.is_file():
        unavailable(f"no {SYSTEMD} to boot (apt-get install systemd)")
    if not Path("/bin").is_symlink():
        unavailable("this machine's / is not merged-/usr: its /usr alone is not a whole system to boot")


def make_root(root: Path) -> None:
    """An empty node: this machine's merged-/usr links and the /etc systemd needs to boot quietly."""
    for name in ("usr", "etc/systemd/system", "opt", "var/lib", "var/tmp", "proc", "sys", "dev", "run", "tmp"):
        (root / name).mkdir(parents=True, exist_ok=True)
    for name in MERGED:
        if Path("/", name).is_symlink():
            (root / name).symlink_to(os.readlink(Path("/", name)))
    (root / "var/run").symlink_to("/run")
    release = Path("/etc/os-release") if Path("/etc/os-release").is_file() else Path("/usr/lib/os-release")
    shutil.copyfile(release, root / "etc/os-release")
    for name in ("passwd", "group"):  # the system users of this machine's units (messagebus, ...)
        shutil.copyfile(Path("/etc", name), root / "etc" / name)
    (root / "etc/machine-id").write_text(uuid.uuid4().hex + "\n")


class Container:
    """``systemd-nspawn --boot`` on ``root``: boot, reach its systemd, reboot, power off."""

    def __init__(self, root: Path, log: Path, binds: Sequence[tuple[Path, str]] = ()) -> None:
        self.root, self.log = root, log
        self.name = f"kd-{uuid.uuid4().hex[:10]}"
        self.binds = [f"--bind-ro={source}:{target}" for source, target in binds]
        self.nspawn: subprocess.Popen[bytes] | None = None
        self.leader = 0
        self.booted_at = 0.0  # time.monotonic() when systemd-nspawn was started

    def boot(self, timeout: float = 90) -> None:
        """Start the container and return once its systemd finished starting up (its boot jobs done)."""
        argv = [
            "systemd-nspawn",
            "--quiet",
            "-D",
            str(self.root),
            "-M",
            self.name,
            "--boot",
            "--register=no",
            "--keep-unit",
            "--private-network",
            "--console=pipe",
            "--resolv-conf=off",
            "--timezone=off",
            "--link-journal=no",
            "--bind-ro=/usr",
            *self.binds,
        ]
        self.booted_at = time.monotonic()
        with self.log.open("ab") as out:
            out.write(f"--- {' '.join(argv)}\n".encode())
            out.flush()
            self.nspawn = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        self.leader = self._wait_for_leader(timeout)
        state = {"said": ""}

        def booted() -> bool:
            done = self.systemctl("is-system-running", "--wait", check=False, timeout=timeout)
            state["said"] = done.stdout + done.stderr
            if self.nspawn is None or self.nspawn.poll() is not None:
                raise AssertionError(f"the container stopped while booting: {state['said']}\n{self.tail()}")
            return done.stdout.strip() in ("running", "degraded")

        wait_for("the container booted", booted, timeout, 0.2, seen=lambda: f"{state['said']}\n{self.tail()}")

    def _wait_for_leader(self, timeout: float) -> int:
        """The container's PID 1 as this machine numbers it, once it runs systemd."""
        assert self.nspawn is not None
        nspawn = self.nspawn

        def leader() -> int | None:
            if nspawn.poll() is not None:
                raise AssertionError(f"systemd-nspawn exited with {nspawn.returncode}\n{self.tail()}")
            found = (p for p in _descendants(nspawn.pid) if _in_own_pid_namespace_as_1(p) and _comm(p) == "systemd")
            return next(found, None)

        return wait_for("systemd as the container's PID 1", leader, timeout, seen=self.tail)

    @property
    def systemctl_command(self) -> str:
        """The chart's default ``hostService.systemctl`` with the container's leader for PID 1."""
        return f"nsenter -t {self.leader} -m -u -i -n -p -- systemctl"

    @property
    def view(self) -> Path:
        """The node's / as its systemd sees it, mounts included."""
        return Path(f"/proc/{self.leader}/root")

    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``argv`` in the container's namespaces."""
        done = subprocess.run(
            ["nsenter", "-t", str(self.leader), "-m", "-u", "-i", "-n", "-p", "--", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}): {done.stdout}{done.stderr}")
        return done

    def systemctl(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return self.run("systemctl", "--no-pager", *args, check=check, timeout=timeout)

    def show(self, unit: str, *properties: str) -> dict[str, str]:
        """``systemctl show`` of ``unit`` (the manager's own with ``unit`` empty)."""
        done = self.systemctl("show", *([unit] if unit else []), *(f"--property={p}" for p in properties))
        return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)

    def journal(self, unit: str) -> str:
        return self.run("journalctl", "--no-pager", "-o", "cat", "-b", "-u", unit, check=False).stdout

    def reboot(self, timeout: float = 90) -> None:
        """``systemctl reboot`` inside; systemd-nspawn then exits with 133 and is started again,
        on the same node root, as ``systemd-nspawn@.service`` restarts it on a machine."""
        assert self.nspawn is not None
        self.systemctl("reboot")
        assert self.nspawn.wait(timeout) == NSPAWN_REBOOT, self.tail()
        self.boot(timeout)

    def stop(self) -> None:
        """Power off: SIGTERM asks systemd-nspawn to halt the container; SIGKILL to its PID 1 ends it
        and every process in it if that does not happen in time. Safe to call more than once."""
        if self.nspawn is None:
            return
        if self.nspawn.poll() is None:
            self.nspawn.send_signal(signal.SIGTERM)
            try:
                self.nspawn.wait(60)
            except subprocess.TimeoutExpired:
                if self.leader and _comm(self.leader) == "systemd":
                    os.kill(self.leader, signal.SIGKILL)
                self.nspawn.kill()
                self.nspawn.wait()
        self.nspawn = None
        # systemd-nspawn's (empty) directory for `machinectl bind`: it removes it only from a tmpfs /run
        with contextlib.suppress(OSError):
            Path("/run/systemd/nspawn/propagate", self.name).rmdir()

    def tail(self, size: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-size:] if self.log.exists() else ""


def _descendants(pid: int) -> list[int]:
    """``pid``'s processes, children first (systemd-nspawn's container PID 1 is its child in
    systemd 252; another version may fork once more)."""
    found, queue = [], [pid]
    while queue:
        for task in Path(f"/proc/{queue.pop(0)}/task").glob("*"):
            try:
                children = [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            queue += children
    return found


def _in_own_pid_namespace_as_1(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    nspid = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [])
    return len(nspid) > 1 and nspid[-1] == "1"


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def host_pid(leader: int, pid: int) -> int:
    """This machine's number for the container's process ``pid`` (its NSpid's last entry)."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        nspid = next((line.split()[1:] for line in text.splitlines() if line.startswith("NSpid:")), [])
        if len(nspid) > 1 and nspid[-1] == str(pid) and _shares_pid_namespace(int(nspid[0]), leader):
            return int(nspid[0])
    raise AssertionError(f"no process {pid} in the container of {leader}")


def _shares_pid_namespace(pid: int, leader: int) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid") == os.readlink(f"/proc/{leader}/ns/pid")
    except OSError:
        return False
