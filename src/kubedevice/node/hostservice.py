"""The chart's ``hostService``: kubedevice installed on the node as a systemd unit from its own pod.

Why: a DaemonSet pod starts only after the kubelet has re-admitted the node's pods on a reboot,
so every pod using our devices fails with ``UnexpectedAdmissionError`` (kubernetes #128043);
a unit ordered ``Before=kubelet.service`` is serving by then (docs/deploy.md, "Host service").

What runs on the host needs nothing installed there but systemd: the image's whole root
filesystem (Debian, its python3 and the /opt/kubedevice virtualenv) is copied to
``/opt/kubedevice/<version>/rootfs`` and the unit runs in it with ``RootDirectory=``. A copied
virtualenv alone would not run: its interpreter is a link to the image's /usr/bin/python3 and
the C libraries it was built against.

Every file written carries our mark (a first comment line, a link to our unit, or the marker
file of /opt/kubedevice), and :func:`uninstall` removes only files that carry it, so a unit or
config installed by hand is refused at install and never deleted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import KubedeviceError
from ..names import endpoint_for
from ..unixsocket import is_live

log = logging.getLogger(__name__)

UNIT_NAME = "kubedevice.service"
MARK = "# kubedevice-host-service: written by 'kubedevice host-service install'; its uninstall removes it"
MARKER_FILE = ".kubedevice-host-service"  # in /opt/kubedevice: the directory is ours
COMPLETE = ".complete"  # in a version's directory: its copy finished
WANTED_BY = ("multi-user.target", "kubelet.service")
EXEC_START = (
    "/opt/kubedevice/bin/kubedevice serve --config /etc/kubedevice/config.yaml "
    "--metrics-address 127.0.0.1:9500 --log-format json"
)
DEFAULT_SYSTEMCTL = "nsenter -t 1 -m -u -i -n -p -- systemctl"


class HostServiceError(KubedeviceError):
    """Install or uninstall cannot go on: ``str()`` is the one line to print."""


@dataclass(frozen=True)
class Layout:
    """Where things go on the host. ``root`` is where the host's / is visible (``/host`` in the pod,
    a temp dir in tests); every other path is the host's own, as the unit names it."""

    root: Path
    version: str

    def on_host(self, path: str | Path) -> Path:
        return self.root / str(path).lstrip("/")

    @property
    def opt(self) -> Path:
        return self.on_host("/opt/kubedevice")

    @property
    def rootfs(self) -> str:
        return f"/opt/kubedevice/{self.version}/rootfs"

    @property
    def config(self) -> Path:
        return self.on_host("/etc/kubedevice/config.yaml")

    @property
    def unit(self) -> Path:
        return self.on_host(f"/etc/systemd/system/{UNIT_NAME}")

    def wants(self) -> list[Path]:
        return [self.on_host(f"/etc/systemd/system/{target}.wants/{UNIT_NAME}") for target in WANTED_BY]


@dataclass(frozen=True)
class Paths:
    """The config's paths, as the image's daemon sees them inside ``RootDirectory=``: the unit
    binds the host's directories there exactly where the pod mounts them, so one config serves both."""

    plugin_dir: str
    cdi_dir: str
    host_root: str


# systemd makes a unit's Runtime/State/ConfigurationDirectory= on the host before it sets up a
# command's namespace, and binds them into RootDirectory=: host path prefix -> (kind, mode).
EXEC_DIRECTORIES = {
    "/run/": ("Runtime", "0755"),
    "/var/run/": ("Runtime", "0755"),
    "/var/lib/": ("State", "0750"),
    "/etc/": ("Configuration", "0755"),
}


def directory_settings(*directories: str) -> str:
    """The lines that have systemd make ``directories`` on the host at every start, where it can.

    Why not ``ExecStartPre=+/bin/mkdir``: a real systemd applies ``RootDirectory=`` and every
    bind to ``+`` lines too, so a bind of a missing directory fails the ``mkdir`` line's own
    start (226/NAMESPACE), and ``RootDirectoryStartOnly=`` would have systemd make the binds'
    mount points (``/host/dev`` ...) in the host's own root. The CDI directory on ``/run`` (a
    tmpfs) is gone after every reboot; runtime directories are kept when the unit stops
    (``RuntimeDirectoryPreserve=``), as they hold every CDI driver's specs. A directory under no
    prefix systemd manages must exist (the kubelet makes its plugin directory).
    """
    kinds: dict[str, list[str]] = {}
    for directory in directories:
        for prefix, (kind, _) in EXEC_DIRECTORIES.items():
            if directory.startswith(prefix) and directory.strip("/") != prefix.strip("/"):
                kinds.setdefault(kind, []).append(directory.removeprefix(prefix).strip("/"))
                break
    modes = dict(EXEC_DIRECTORIES.values())
    lines = [
        line
        for kind, names in kinds.items()
        for line in (f"{kind}Directory={' '.join(names)}", f"{kind}DirectoryMode={modes[kind]}")
    ]
    if "Runtime" in kinds:
        lines.append("RuntimeDirectoryPreserve=yes")
    return "".join(f"{line}\n" for line in lines)


def unit_text(layout: Layout, paths: Paths) -> str:
    """The unit (its mark is added by :func:`write_marked`): deploy/systemd/kubedevice.service's
    ordering, readiness and confinement, run inside the copied image.

    Every command runs in the copy, ExecReload too: the image has no ``/bin/kill``, so the
    signal comes from its shell's builtin. Tested under a real systemd by
    tests/deploy/test_hostservice_systemd.py."""
    host = paths.host_root.rstrip("/")
    binds = f"/dev:{host}/dev /sys:{host}/sys -/run/udev:{host}/run/udev /etc/kubedevice:/etc/kubedevice"
    return f"""# The Helm chart's hostService (docs/deploy.md, "Host service from the chart").
[Unit]
Description=kubedevice device plugin daemon (installed by the kubedevice chart)
Before=kubelet.service
After=local-fs.target

[Service]
Type=notify
NotifyAccess=main
TimeoutStartSec=60s
{directory_settings(paths.plugin_dir, paths.cdi_dir)}RootDirectory={layout.rootfs}
MountAPIVFS=yes
BindReadOnlyPaths={binds}
BindPaths={paths.plugin_dir} {paths.cdi_dir}
ExecStart={EXEC_START}
ExecReload=/bin/sh -c 'kill -HUP "$$MAINPID"'
Restart=always
RestartSec=1s
Environment=PATH=/opt/kubedevice/bin:/usr/sbin:/usr/bin:/sbin:/bin PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
Environment=KUBEDEVICE_PCI_IDS=/usr/share/misc/pci.ids
CapabilityBoundingSet=
AmbientCapabilities=
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
ReadWritePaths={paths.plugin_dir} {paths.cdi_dir}
PrivateTmp=yes
MemoryMax=128M

[Install]
WantedBy={" ".join(WANTED_BY)}
"""


def marked(path: Path) -> bool:
    """Ours: a file whose first line is our mark (no symlink followed)."""
    if path.is_symlink() or not path.is_file():
        return False
    with path.open("rb") as file:
        return file.readline().rstrip(b"\n") == MARK.encode()


def config_body(path: Path) -> bytes | None:
    """The config we wrote without its mark line; None when the file is not ours or missing."""
    if not marked(path):
        return None
    return path.read_bytes().split(b"\n", 1)[1]


def _ours_or_absent(path: Path) -> None:
    if path.is_symlink():
        if os.readlink(path) != f"/etc/systemd/system/{UNIT_NAME}":
            raise HostServiceError(f"{path} links elsewhere: not ours, left alone")
    elif path.exists() and not marked(path):
        raise HostServiceError(
            f"{path} exists and was not written by kubedevice host-service "
            "(a host service installed by hand?): remove it or keep hostService off"
        )


def check_host(layout: Layout) -> None:
    """systemd running (sd_booted(3): /run/systemd/system) and no foreign file where ours go."""
    if not layout.on_host("/run/systemd/system").is_dir():
        raise HostServiceError(
            f"no systemd on this host ({layout.on_host('/run/systemd/system')} missing): "
            "hostService needs a systemd host"
        )
    for path in (layout.unit, layout.config, *layout.wants()):
        _ours_or_absent(path)
    if layout.opt.exists() and not (layout.opt / MARKER_FILE).is_file():
        raise HostServiceError(f"{layout.opt} exists and is not ours (no {MARKER_FILE}): left alone")


def copy_runtime(image_root: Path, layout: Layout, paths: Paths) -> bool:
    """The image's root filesystem to /opt/kubedevice/<version>/rootfs; False if already there.

    Only the image's own filesystem is copied (as ``cp -x``): /proc, /sys, /dev, the host's
    mount, the ConfigMap and the kubelet's /etc/hosts files are other mounts. The directories the
    unit binds are created empty. Copied beside and renamed, so a half copy is never used.
    """
    version_dir = layout.opt / layout.version
    if (version_dir / COMPLETE).is_file():
        return False
    layout.opt.mkdir(parents=True, exist_ok=True)
    (layout.opt / MARKER_FILE).write_text(MARK + "\n")
    partial = layout.opt / f".{layout.version}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    device = image_root.stat().st_dev
    layout_root = layout.root.resolve()

    def other_mounts(directory: str, names: list[str]) -> list[str]:
        here = Path(directory)
        return [n for n in names if _skip(here / n, device, layout_root)]

    shutil.copytree(image_root, partial / "rootfs", symlinks=True, ignore=other_mounts)
    mount_points = [
        "proc",
        "sys",
        "dev",
        "run",
        "tmp",
        "etc/kubedevice",
        paths.plugin_dir,
        paths.cdi_dir,
        *(f"{paths.host_root}/{d}" for d in ("dev", "sys", "run/udev")),
    ]
    for point in mount_points:
        _mount_point(partial / "rootfs", point)
    (partial / COMPLETE).write_text(MARK + "\n")
    shutil.rmtree(version_dir, ignore_errors=True)
    partial.rename(version_dir)
    return True


def _skip(path: Path, device: int, host: Path) -> bool:
    """Another filesystem (a mount) or the host's own root seen from the image."""
    try:
        stat = path.lstat()
    except OSError:
        return True
    if path.is_symlink():
        return False
    return stat.st_dev != device or path.resolve() == host


def _mount_point(rootfs: Path, point: str) -> None:
    """Make ``point`` inside ``rootfs`` unless a symbolic link on its way would lead out of it.

    The image's ``/var/run`` is a link to ``/run``, absolute: followed here it would make the
    directory in the init container's own /run, not in the copy. systemd resolves such links
    inside ``RootDirectory=`` and makes the mount point itself, so those are left to it.
    """
    path = rootfs
    for part in Path(point.lstrip("/")).parts:
        path = path / part
        if path.is_symlink():
            return
        if not path.exists():
            break
    (rootfs / point.lstrip("/")).mkdir(parents=True, exist_ok=True)


def write_marked(path: Path, body: bytes) -> bool:
    """Write atomically with our mark first; False when the content was already that."""
    content = MARK.encode() + b"\n" + body
    if marked(path) and path.read_bytes() == content:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.kubedevice-tmp")
    temporary.write_bytes(content)
    temporary.chmod(0o644)
    temporary.replace(path)
    return True


def enable(layout: Layout) -> None:
    """The links ``systemctl enable`` makes for our ``WantedBy=`` (no systemctl needed)."""
    for link in layout.wants():
        if not link.is_symlink():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(f"/etc/systemd/system/{UNIT_NAME}")


class Systemctl:
    """The host's systemctl, reached through PID 1's namespaces (the pod runs with hostPID)."""

    def __init__(self, command: str = DEFAULT_SYSTEMCTL) -> None:
        self.argv = shlex.split(command)
        if not self.argv:
            raise HostServiceError("--systemctl must name a command")

    def __call__(self, *args: str, check: bool = True) -> None:
        log.info("systemctl %s", " ".join(args))
        try:
            done = subprocess.run([*self.argv, *args], capture_output=True, text=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise HostServiceError(f"systemctl {' '.join(args)}: {err}") from err
        if check and done.returncode != 0:
            raise HostServiceError(
                f"systemctl {' '.join(args)} failed ({done.returncode}): {' '.join(done.stderr.split())[-300:]}"
            )


def install(image_root: Path, layout: Layout, paths: Paths, config: bytes, systemctl: Systemctl) -> list[Path]:
    """Install, enable and start (or restart, if the unit changed) the host service; the files written."""
    check_host(layout)
    copied = copy_runtime(image_root, layout, paths)
    changed_unit = write_marked(layout.unit, unit_text(layout, paths).encode())
    write_marked(layout.config, config)
    enable(layout)
    systemctl("daemon-reload")
    systemctl("restart" if changed_unit or copied else "start", UNIT_NAME)
    _remove_other_versions(layout)
    return owned_files(layout)


def _remove_other_versions(layout: Layout) -> None:
    """An upgrade's old copies, once the new unit runs (only version directories we completed)."""
    for entry in layout.opt.iterdir():
        if entry.name != layout.version and (entry / COMPLETE).is_file():
            shutil.rmtree(entry)


def owned_files(layout: Layout) -> list[Path]:
    """Every file of ours on the host, top paths only (/opt/kubedevice stands for its tree)."""
    found = [p for p in (layout.unit, layout.config) if marked(p)]
    found += [p for p in layout.wants() if p.is_symlink() and os.readlink(p).endswith(f"/{UNIT_NAME}")]
    if (layout.opt / MARKER_FILE).is_file():
        found.append(layout.opt)
    return sorted(found)


def uninstall(layout: Layout, systemctl: Systemctl) -> list[Path]:
    """Stop, disable and remove what :func:`install` wrote, and nothing else; the paths removed."""
    if layout.on_host("/run/systemd/system").is_dir() and marked(layout.unit):
        systemctl("stop", UNIT_NAME, check=False)  # already stopped or unknown: go on removing
    removed = owned_files(layout)
    for path in removed:
        if path == layout.opt:
            shutil.rmtree(path)
        else:
            path.unlink()
    for directory in (layout.config.parent, *(link.parent for link in layout.wants())):
        _remove_if_empty(directory)
    if removed and layout.on_host("/run/systemd/system").is_dir():
        systemctl("daemon-reload", check=False)
    return removed


def _remove_if_empty(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not empty (someone else's files) or already gone: leave it
        directory.rmdir()


def sockets_served(plugin_dir: Path, resources: Sequence[str]) -> bool:
    """Readiness of the unit as the kubelet sees it: every resource's socket accepts a connection."""
    return all(is_live(plugin_dir / endpoint_for(name)) for name in resources)
