"""Runs deploy/systemd/kubedevice.service without systemd, the way systemd would start it.

The "host" is a copy of the image's rootfs (Debian 12 with /opt/kubedevice, what the docs
install on a node). In private mount and network namespaces it gets ``ProtectSystem=strict``
(the root read-only), the ``ReadWritePaths`` as writable mounts (the plugin directory
bind-mounted from a test directory, so a kubelet outside can serve ``kubelet.sock`` there),
``PrivateTmp``, then the ``+`` ExecStartPre lines unconfined and ExecStart with
``CapabilityBoundingSet=`` (no capability), ``NoNewPrivileges`` and only the ``Environment=``
variables, as systemd sets them.
The other directives are checked by ``systemd-analyze verify``, not emulated.
"""

from __future__ import annotations

import shlex
import subprocess
from collections import defaultdict
from pathlib import Path

from .helmkit import REPO

UNIT = REPO / "deploy" / "systemd" / "kubedevice.service"
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PLUGIN_DIR = "/var/lib/kubelet/device-plugins"

Unit = dict[str, dict[str, list[str]]]


def parse(text: str) -> Unit:
    """Sections of key -> every value in order (systemd keys such as ExecStartPre repeat)."""
    unit: Unit = {}
    section: dict[str, list[str]] = defaultdict(list)
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = unit.setdefault(line[1:-1], defaultdict(list))
            continue
        key, sep, value = line.partition("=")
        assert sep, f"not a key=value line: {raw!r}"
        section[key.strip()].append(value.strip())
    return unit


def _script(service: dict[str, list[str]], root: Path, plugin_dir: Path) -> str:
    """The shell script that sets up the namespace and ends by exec'ing ExecStart."""
    assert service["ProtectSystem"] == ["strict"] and service["CapabilityBoundingSet"] == [""]
    assert service["NoNewPrivileges"] == ["yes"] and service["PrivateTmp"] == ["yes"]
    writable = service["ReadWritePaths"][0].split()
    assert PLUGIN_DIR in writable, "the kubelet's plugin directory must stay writable"
    q = shlex.quote
    lines = [f"root={q(str(root))}",
             "ip link set lo up",  # a network namespace of its own: the metrics port is free
             'mount --bind "$root" "$root"',
             'mount -t proc proc "$root/proc"',
             'mount -t tmpfs -o mode=755,size=1m tmpfs "$root/dev"',
             'for n in null zero random urandom; do : >"$root/dev/$n"; mount --bind "/dev/$n" "$root/dev/$n"; done',
             'mount -t tmpfs -o mode=1777,size=16m tmpfs "$root/tmp"']
    for path in writable:
        source = f"--bind {q(str(plugin_dir))}" if path == PLUGIN_DIR else "-t tmpfs tmpfs"
        lines += [f'mkdir -p "$root"{q(path)}', f'mount {source} "$root"{q(path)}']
    # Every writable mount is in place: now make the rest read-only (a bind remount keeps them).
    lines.append('mount -o remount,bind,ro "$root"')
    for pre in service.get("ExecStartPre", []):
        assert pre.startswith("+"), "only privileged ('+') ExecStartPre lines are emulated"
        lines.append(f'chroot "$root" {" ".join(q(arg) for arg in shlex.split(pre[1:]))}')
    env = [f"PATH={SYSTEMD_PATH}", *(item for value in service.get("Environment", []) for item in shlex.split(value))]
    (start,) = service["ExecStart"]
    confine = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--no-new-privs"]
    lines.append(" ".join(["exec chroot", '"$root"', *confine, "env", "-i", *map(q, env),
                           *map(q, shlex.split(start))]))
    return "\n".join(lines)


def start(host: Path, plugin_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    """Start the unit's ExecStart on ``host``; the returned process *is* the daemon (all exec)."""
    service = parse(UNIT.read_text())["Service"]
    script = _script(service, host, plugin_dir)
    with log.open("wb") as out:
        return subprocess.Popen(["unshare", "--mount", "--net", "--propagation", "private", "sh", "-ec", script],
                                stdout=out, stderr=subprocess.STDOUT)
