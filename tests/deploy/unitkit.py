"""Runs deploy/systemd/kubedevice.service without systemd, the way systemd would start it.

The "host" is a copy of the image's rootfs (Debian 12 with /opt/kubedevice, what the docs
install on a node). In private mount and network namespaces it gets ``ProtectSystem=strict``
(the root read-only), the ``ReadWritePaths`` as writable mounts (the plugin directory
bind-mounted from a test directory, so a kubelet outside can serve ``kubelet.sock`` there; made
if missing, as the unit's ``StateDirectory=``/``RuntimeDirectory=`` have systemd make them),
``PrivateTmp``, then ExecStart with ``CapabilityBoundingSet=`` (no capability),
``NoNewPrivileges`` and only the ``Environment=`` variables, as systemd sets them.
The other directives are checked by ``systemd-analyze verify``, not emulated; a real systemd
starts both units in tests/deploy/test_hostservice_systemd.py.
"""

from __future__ import annotations

import shlex
import subprocess
from collections import defaultdict
from collections.abc import Callable
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
    lines = [
        f"root={q(str(root))}",
        "ip link set lo up",  # a network namespace of its own: the metrics port is free
        'mount --bind "$root" "$root"',
        'mount -t proc proc "$root/proc"',
        'mount -t tmpfs -o mode=755,size=1m tmpfs "$root/dev"',
        'for n in null zero random urandom; do : >"$root/dev/$n"; mount --bind "/dev/$n" "$root/dev/$n"; done',
        'mount -t tmpfs -o mode=1777,size=16m tmpfs "$root/tmp"',
    ]
    for path in writable:
        source = f"--bind {q(str(plugin_dir))}" if path == PLUGIN_DIR else "-t tmpfs tmpfs"
        lines += [f'mkdir -p "$root"{q(path)}', f'mount {source} "$root"{q(path)}']
    # Every writable mount is in place: now make the rest read-only (a bind remount keeps them).
    lines.append('mount -o remount,bind,ro "$root"')
    assert "ExecStartPre" not in service, "not emulated: systemd runs it in the sandbox being set up"
    env = [f"PATH={SYSTEMD_PATH}", *(item for value in service.get("Environment", []) for item in shlex.split(value))]
    (start,) = service["ExecStart"]
    confine = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--no-new-privs"]
    lines.append(" ".join(["exec chroot", '"$root"', *confine, "env", "-i", *map(q, env), *map(q, shlex.split(start))]))
    return "\n".join(lines)


def start(host: Path, plugin_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    """Start the unit's ExecStart on ``host``; the returned process *is* the daemon (all exec)."""
    service = parse(UNIT.read_text())["Service"]
    script = _script(service, host, plugin_dir)
    with log.open("wb") as out:
        return subprocess.Popen(
            ["unshare", "--mount", "--net", "--propagation", "private", "sh", "-ec", script],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def installed_unit_script(node: Path, source: Callable[[str], str], notify_dir: Path) -> str:
    """The unit ``kubedevice host-service install`` wrote under ``node`` (the host's / as a
    directory), started as systemd starts it: ``RootDirectory=`` as the root of the (caller's
    private) mount namespace with the API file systems (``MountAPIVFS=``), every
    ``BindPaths=``/``BindReadOnlyPaths=`` entry bound from the host, and ExecStart there with no
    capability, only ``Environment=`` and ``NOTIFY_SOCKET`` (``notify_dir/sock``, bound at
    /run/notify). ``source`` maps a host path the unit names to where it is in this test (the
    node's own directories or a test's stand-in)."""
    service = parse((node / "etc/systemd/system/kubedevice.service").read_text())["Service"]
    assert service["MountAPIVFS"] == ["yes"] and service["CapabilityBoundingSet"] == [""]
    q = shlex.quote
    assert "ExecStartPre" not in service, "not emulated: systemd runs it in the sandbox being set up"
    lines = ["ip link set lo up"]  # a no-op on the node's network; needed in a fresh one
    root = str(node / service["RootDirectory"][0].lstrip("/"))
    lines += [
        f"root={q(root)}",
        'mount --bind "$root" "$root"',
        'mount -t proc proc "$root/proc"',
        'mount --rbind /sys "$root/sys"',
        'mount -t tmpfs -o mode=755,size=1m tmpfs "$root/dev"',
        'for n in null zero random urandom; do : >"$root/dev/$n"; mount --bind "/dev/$n" "$root/dev/$n"; done',
        'mount -t tmpfs -o mode=1777,size=16m tmpfs "$root/tmp"',
        'mount -t tmpfs -o mode=755,size=16m tmpfs "$root/run"',
        'mkdir "$root/run/notify"',
        f'mount --bind {q(str(notify_dir))} "$root/run/notify"',
    ]
    for key, options in (("BindPaths", "bind"), ("BindReadOnlyPaths", "bind,ro")):
        for entry in " ".join(service.get(key, [])).split():
            optional = entry.startswith("-")
            host, _, target = entry.lstrip("-").partition(":")
            target = target or host
            where = source(host)
            if optional and not Path(where).exists():
                continue
            # systemd creates a missing mount point (here: one under the tmpfs /run)
            lines += [f'mkdir -p "$root"{q(target)}', f'mount --rbind {q(where)} "$root"{q(target)}']
            if options.endswith("ro"):
                lines.append(f'mount -o remount,bind,ro "$root"{q(target)}')
    env = [
        "NOTIFY_SOCKET=/run/notify/sock",
        *(item for value in service.get("Environment", []) for item in shlex.split(value)),
    ]
    (start,) = service["ExecStart"]
    confine = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--no-new-privs"]
    lines.append(" ".join(["exec chroot", '"$root"', *confine, "env", "-i", *map(q, env), *map(q, shlex.split(start))]))
    return "\n".join(lines)
