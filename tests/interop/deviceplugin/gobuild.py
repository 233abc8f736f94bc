"""Build (once, cached) the Go programs of the device-plugin interop suite, and run them.

Builds go through :mod:`kubedevice.testing.gobuild`, so the tests and benchmarks/side_by_side.py
share the cached binaries. A cold build compiles the kubelet's device manager and its
dependencies: about 10 minutes on 2 cores; warm, a few seconds.

The kubelet's device manager and the Kubernetes sample plugin hard-code
/var/lib/kubelet/device-plugins. :func:`in_kubelet_dir` runs a program in a private mount
namespace where that path is a bind mount of a temporary directory, so the host is untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubedevice.testing import gobuild

MODULE = Path(__file__).resolve().parent
KUBELET_DIR = "/var/lib/kubelet/device-plugins"
SAMPLE_PLUGIN = "k8s.io/kubernetes/test/images/sample-device-plugin"
SAMPLE_RESOURCE = "example.com/resource"

# Bind the directory over the kubelet's; if the host has no such path, first put a private
# tmpfs over /var/lib (only this namespace sees it) to create the mount point.
_NAMESPACE_SCRIPT = f"""set -e
if [ ! -d {KUBELET_DIR} ]; then
  mount -t tmpfs -o size=1m,mode=0755 kubedevice-interop /var/lib
  mkdir -p {KUBELET_DIR}
fi
mount --bind "$1" {KUBELET_DIR}
shift
exec "$@"
"""


def harness() -> Path | None:
    return gobuild.build(MODULE, ".", "dpharness")


def sample_plugin() -> Path | None:
    return gobuild.build(MODULE, SAMPLE_PLUGIN, "sample-device-plugin")


def stub_plugin() -> Path | None:
    return gobuild.build(MODULE, "./cmd/stubplugin", "stubplugin")


def mount_namespace_error() -> str | None:
    """Why programs cannot run in a private mount namespace here, or None if they can."""
    if shutil.which("unshare") is None:
        return "unshare(1) is not installed"
    if os.geteuid() != 0:
        return "a private mount namespace with a bind mount needs root"
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "true"], capture_output=True, text=True, check=False
    )
    return None if probe.returncode == 0 else f"unshare --mount failed: {probe.stderr.strip()}"


def in_kubelet_dir(plugin_dir: Path, argv: list[str]) -> list[str]:
    """``argv`` run where /var/lib/kubelet/device-plugins is ``plugin_dir``."""
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        _NAMESPACE_SCRIPT,
        "sh",
        str(plugin_dir),
        *argv,
    ]


class GoEvents:
    """A running harness: its JSON event lines, read as they arrive."""

    def __init__(self, process: asyncio.subprocess.Process, log: Path) -> None:
        self.process = process
        self.log = log
        self.events: list[dict[str, Any]] = []

    @classmethod
    async def start(cls, argv: list[str], log: Path) -> GoEvents:
        with log.open("wb") as err:
            process = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=err)
        return cls(process, log)

    async def next(self, event: str, timeout: float = 30.0) -> dict[str, Any]:
        """The next line of kind ``event``; AssertionError with Go's stderr if it ends first."""
        assert self.process.stdout is not None
        async with asyncio.timeout(timeout):
            while True:
                line = await self.process.stdout.readline()
                if not line:
                    await self.process.wait()
                    raise AssertionError(
                        f"harness exited ({self.process.returncode}) before {event!r}: {self.stderr_tail()}"
                    )
                record: dict[str, Any] = json.loads(line)
                self.events.append(record)
                if record["event"] == event:
                    return record

    def stderr_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    async def stop(self) -> int:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.terminate()
        return await self.process.wait()


GoPlugin = Callable[[Path], contextlib.AbstractAsyncContextManager[asyncio.subprocess.Process]]
"""Fixture type: start a Go plugin against a plugin directory for an ``async with`` block."""
StartHarness = Callable[..., contextlib.AbstractAsyncContextManager[GoEvents]]
"""Fixture type: run ``dpharness COMMAND ARGS`` for an ``async with`` block."""
