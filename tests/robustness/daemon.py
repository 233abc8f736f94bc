"""A real ``kubedevice serve`` process over a fake host root, and what /proc says about it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from kubedevice.names import endpoint_for
from kubedevice.testing.waiting import wait_for

STATIC = "example.com/null"
SERIAL = "example.com/serial"
START_TIMEOUT = 60.0  # a bound on a hang: a `kubedevice serve` took 12 s to import at a load of 20 on 2 cores
CONFIG = f"""\
resources:
  - name: {STATIC}
    static: {{count: 8, paths: [/dev/null]}}
  - name: {SERIAL}
    glob: {{paths: ["/dev/ttyUSB*"]}}
"""


class Daemon:
    """``kubedevice serve`` on ``tmp``: plugin dir, host root with /dev/null and one ttyUSB, CDI dir."""

    def __init__(self, tmp: Path, config: str = CONFIG) -> None:
        self.plugin_dir = tmp / "plugins"
        self.host = tmp / "host"
        self.cdi = tmp / "cdi"
        (self.host / "dev").mkdir(parents=True)
        (self.host / "dev" / "null").touch()
        (self.host / "dev" / "ttyUSB0").touch()
        self.plugin_dir.mkdir()
        self.config = tmp / "config.yaml"
        self.config.write_text(config)
        self.log = tmp / "daemon.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def socket(self, resource: str = STATIC) -> Path:
        return self.plugin_dir / endpoint_for(resource)

    def start(self, wait: bool = True) -> None:
        args = [sys.executable, "-m", "kubedevice", "serve", "--config", str(self.config)]
        args += ["--plugin-dir", str(self.plugin_dir), "--host-root", str(self.host), "--cdi-dir", str(self.cdi)]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        if wait:
            names = re.findall(r"- name: (\S+)", self.config.read_text())
            wait_for("daemon sockets", lambda: all(self.socket(n).is_socket() for n in names), START_TIMEOUT)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 15.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def rss_kib(self) -> int:
        return proc_status(self.pid, "VmRSS")

    def threads(self) -> int:
        return proc_status(self.pid, "Threads")

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))


def proc_status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise KeyError(field)
