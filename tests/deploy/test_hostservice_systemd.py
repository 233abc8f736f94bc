"""The chart's host service under a real systemd: PID 1 of a container booted on a node root.

test_hostservice_unit.py and the cluster e2e start the unit as systemd would; here systemd
itself does (:mod:`systemdkit`: ``systemd-nspawn --boot`` on a directory, this machine's
``/usr`` and systemd). ``kubedevice host-service install`` runs as the chart's init container
does, with the node's ``/`` (``/proc/<leader>/root``) and the chart's ``nsenter`` systemctl, and
systemd must start the unit it wrote: ``Type=notify`` READY, its sandbox on the process, the
plugin socket served. A stand-in ``kubelet.service`` (kubedevice's kubelet simulator, from the
image bound read-only at ``/opt/kubelet``, ordered by nothing but its defaults) refuses to start
unless kubedevice's socket already accepts connections; after a reboot systemd's own
dependency engine must have started kubedevice (READY) before it. Uninstall must then leave
systemd without the unit and the node's ``/etc`` and ``/opt`` as they were, foreign files kept.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kubedevice import __version__
from kubedevice.names import endpoint_for
from kubedevice.node.hostservice import sockets_served
from kubedevice.testing.waiting import wait_for

from . import systemdkit, unitkit
from .imagekit import Image
from .systemdkit import Container

pytestmark = pytest.mark.image

UNIT = "kubedevice.service"
RESOURCE = "example.com/null"
PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
CONFIG = {
    "plugin_dir": PLUGIN_DIR,
    "host_root": "/host",
    "cdi_dir": "/var/run/cdi",
    "resources": [{"name": RESOURCE, "static": {"count": 3, "paths": ["/dev/null"]}}],
}
ROOTFS = f"opt/kubedevice/{__version__}/rootfs"
MEMORY_MAX = 128 * 1024 * 1024
# Files the node has where ours go, which install and uninstall must leave alone.
FOREIGN = {
    "etc/systemd/system/other.service": "[Service]\nExecStart=/bin/true\n",
    "etc/kubedevice/notes.txt": "the admin's\n",
    "opt/other/tool": "#!/bin/sh\n",
}
KUBELET = f"""[Unit]
Description=stand-in kubelet: kubedevice's kubelet simulator, from the test's image at /opt/kubelet

[Service]
RootDirectory=/opt/kubelet
MountAPIVFS=yes
BindPaths={PLUGIN_DIR}:/mnt
Environment=PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
ExecStartPre=/usr/bin/python3 -c "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])" \\
  /mnt/{endpoint_for(RESOURCE)}
ExecStart=/opt/kubedevice/bin/kubedevice kubelet --plugin-dir /mnt --plain --admit {RESOURCE}=2

[Install]
WantedBy=multi-user.target
"""
KUBELET_FILES = {
    "etc/systemd/system/kubelet.service": KUBELET,
    "etc/systemd/system/multi-user.target.wants/kubelet.service": "->/etc/systemd/system/kubelet.service",
}
SHOWN = (
    "ActiveState",
    "SubState",
    "Type",
    "MainPID",
    "NRestarts",
    "Result",
    "InactiveExitTimestampMonotonic",
    "ExecMainStartTimestampMonotonic",
    "ActiveEnterTimestampMonotonic",
)


def record(key: str, value: object) -> None:
    print(f"systemd: {key} = {value}")


@pytest.fixture(scope="session")
def real_systemd() -> None:
    """Checked before the session's image is built: skip (fail in CI) where nothing can boot."""
    systemdkit.require()


@pytest.fixture
def workdir() -> Iterator[Path]:
    """Short (unix socket paths), removed after the container is gone (fixtures end in reverse)."""
    path = Path(tempfile.mkdtemp(prefix="kd-sd-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def container(workdir: Path, image: Image) -> Iterator[Container]:
    """A node with foreign files where ours go and the image for the stand-in kubelet, not booted."""
    root = workdir / "node"
    systemdkit.make_root(root)
    for path, text in FOREIGN.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    (root / "etc/systemd/system/multi-user.target.wants").mkdir()
    (root / "etc/systemd/system/multi-user.target.wants/other.service").symlink_to("/etc/systemd/system/other.service")
    (root / "opt/kubelet").mkdir()
    machine = Container(root, workdir / "nspawn.log", binds=[(image.rootfs, "/opt/kubelet")])
    try:
        yield machine
    finally:
        machine.stop()


def tree(root: Path) -> dict[str, str]:
    """The node's /etc and /opt as plain files on its disk: each path's kind and content (a file's
    hash, a link's target), so that a foreign file changed or replaced shows."""
    found: dict[str, str] = {}
    for top in ("etc", "opt"):
        for path in (root / top).rglob("*"):
            key = str(path.relative_to(root))
            if path.is_symlink():
                found[key] = f"->{os.readlink(path)}"
            elif path.is_dir():
                found[key] = "dir"
            elif key.startswith("opt/kubedevice/"):
                found[key] = "file"  # ours: 200 MiB of image, present is what matters
            else:
                found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def host_service(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubedevice", "host-service", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def mounts(pid: int) -> dict[str, tuple[str, str, str, str]]:
    """The process's mounts: mount point -> (options, device, root in its file system, fs type)."""
    found = {}
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        found[fields[4]] = (fields[5], fields[2], fields[3], fstype)
    return found


def memory_limit(machine: Container, cgroup: str) -> str | None:
    """The limit in the unit's own memory cgroup (v2, then v1), None if it has none: systemd makes
    one only where the container was given a memory controller to manage."""
    for path in (
        machine.view / f"sys/fs/cgroup{cgroup}/memory.max",
        machine.view / f"sys/fs/cgroup/memory{cgroup}/memory.limit_in_bytes",
    ):
        if path.is_file():
            return path.read_text().strip()
    return None


def test_a_real_systemd_starts_the_unit_before_the_kubelet_and_uninstall_leaves_the_node(
    real_systemd: None, container: Container, image: Image, workdir: Path
) -> None:
    started = time.monotonic()
    root = container.root
    config = workdir / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    container.boot()
    record("first_boot_s", round(time.monotonic() - container.booted_at, 2))
    before = tree(root)

    # 1. The init container's install, through the chart's nsenter systemctl: systemd starts it.
    done = host_service(
        "install",
        "--host-root",
        str(container.view),
        "--image-root",
        str(image.rootfs),
        "--config",
        str(config),
        "--systemctl",
        container.systemctl_command,
    )
    assert done.returncode == 0, done.stderr + container.journal(UNIT)[-3000:]
    installed = tree(root)
    assert {k for k in installed if k not in before and "/rootfs/" not in k} == {
        "etc/kubedevice/config.yaml",
        "etc/systemd/system/kubedevice.service",
        "etc/systemd/system/kubelet.service.wants",
        "etc/systemd/system/kubelet.service.wants/kubedevice.service",
        "etc/systemd/system/multi-user.target.wants/kubedevice.service",
        "opt/kubedevice",
        "opt/kubedevice/.kubedevice-host-service",
        f"opt/kubedevice/{__version__}",
        f"opt/kubedevice/{__version__}/.complete",
        ROOTFS,
    }
    first = check_running(container)
    check_sandbox(container, first)
    assert sockets_served(container.view / PLUGIN_DIR.lstrip("/"), [RESOURCE])
    # systemctl reload: ExecReload signals the daemon from inside the copy (which has no /bin/kill).
    container.systemctl("reload", UNIT)
    assert container.show(UNIT, "MainPID", "ActiveState") == {"MainPID": first["MainPID"], "ActiveState": "active"}

    # 2. A kubelet on the node that needs our socket served when it starts; then a reboot.
    (root / "etc/systemd/system/kubelet.service").write_text(KUBELET)
    (root / "etc/systemd/system/multi-user.target.wants/kubelet.service").symlink_to(
        "/etc/systemd/system/kubelet.service"
    )
    rebooted = time.monotonic()
    container.reboot()
    record("reboot_s", round(time.monotonic() - rebooted, 2))
    ours = check_running(container)
    assert int(ours["ExecMainStartTimestampMonotonic"]) > rebooted * 1e6, "started in the new boot"
    kubelet = container.show("kubelet.service", *SHOWN)
    assert (kubelet["ActiveState"], kubelet["SubState"], kubelet["NRestarts"]) == ("active", "running", "0"), (
        kubelet,
        container.journal("kubelet.service")[-3000:],
    )
    manager = container.show("", "UserspaceTimestampMonotonic")
    ready, kubelet_start = int(ours["ActiveEnterTimestampMonotonic"]), int(kubelet["InactiveExitTimestampMonotonic"])
    assert 0 < ready <= kubelet_start, (ours, kubelet)
    record("boot_to_kubedevice_ready_s", round(ready / 1e6 - container.booted_at, 3))
    record("systemd_start_to_kubedevice_ready_s", round((ready - int(manager["UserspaceTimestampMonotonic"])) / 1e6, 3))
    record("kubedevice_exec_to_ready_s", round((ready - int(ours["ExecMainStartTimestampMonotonic"])) / 1e6, 3))
    record("kubedevice_ready_to_kubelet_start_ms", round((kubelet_start - ready) / 1e3, 1))
    admitted = wait_for_journal(container, "kubelet.service", "admitted pod")
    assert f"Register {RESOURCE}" in admitted, admitted[-2000:]

    # 3. Uninstall: stopped, unknown to systemd, the node as before but for the kubelet's files.
    done = host_service("uninstall", "--host-root", str(container.view), "--systemctl", container.systemctl_command)
    assert done.returncode == 0, done.stderr
    assert container.systemctl("is-active", UNIT, check=False).stdout.strip() == "inactive"
    assert container.show(UNIT, "LoadState") == {"LoadState": "not-found"}
    assert container.systemctl("cat", UNIT, check=False).returncode != 0
    assert UNIT not in container.systemctl("list-unit-files", check=False).stdout
    assert not (container.view / PLUGIN_DIR.lstrip("/") / endpoint_for(RESOURCE)).exists(), "its socket removed"
    after = tree(root)
    expected = {
        **before,
        **{k: v if v.startswith("->") else hashlib.sha256(v.encode()).hexdigest() for k, v in KUBELET_FILES.items()},
    }
    assert after == expected, sorted(set(after.items()) ^ set(expected.items()))[:20]
    assert container.show("kubelet.service", "ActiveState") == {"ActiveState": "active"}, "the kubelet left alone"
    record("test_s", round(time.monotonic() - started, 1))


@pytest.fixture
def hand_node(workdir: Path, image: Image) -> Iterator[Container]:
    """A node as docs/deploy.md's "Host service" installs it by hand: ``/opt/kubedevice`` is the
    image's virtualenv (made with ``python3 -m venv /opt/kubedevice`` on the image's Debian 12,
    whose /usr/bin/python3 is this machine's), bound read-only; no kubelet directory, no /run/cdi."""
    root = workdir / "node"
    systemdkit.make_root(root)
    for mount_point in ("opt/kubedevice", "opt/kubelet"):
        (root / mount_point).mkdir()
    (root / "etc/kubedevice").mkdir()
    (root / "etc/kubedevice/config.yaml").write_text(
        yaml.safe_dump({"resources": [{"name": RESOURCE, "static": {"count": 3, "paths": ["/dev/null"]}}]})
    )
    shutil.copyfile(unitkit.UNIT, root / "etc/systemd/system" / UNIT)
    machine = Container(
        root,
        workdir / "nspawn.log",
        binds=[(image.rootfs / "opt/kubedevice", "/opt/kubedevice"), (image.rootfs, "/opt/kubelet")],
    )
    try:
        yield machine
    finally:
        machine.stop()


def test_the_hand_installed_unit_makes_its_directories_and_starts_before_the_kubelet_on_every_boot(
    real_systemd: None, hand_node: Container
) -> None:
    """deploy/systemd/kubedevice.service with neither of its writable directories present, as on
    a first boot and (for /run/cdi, on a tmpfs) after every reboot: systemd must make them before
    it sets up the sandbox that names them (an ``ExecStartPre=+mkdir`` failed there, 226/NAMESPACE,
    and the unit never started)."""
    root = hand_node.root
    hand_node.boot()
    assert not (hand_node.view / "run/cdi").exists() and not (root / "var/lib/kubelet").exists()
    hand_node.systemctl("enable", "--now", UNIT)  # the docs' command
    shown = check_running(hand_node)
    assert sockets_served(hand_node.view / PLUGIN_DIR.lstrip("/"), [RESOURCE])
    pid = systemdkit.host_pid(hand_node.leader, int(shown["MainPID"]))
    node_disk = f"{os.major(root.stat().st_dev)}:{os.minor(root.stat().st_dev)}"
    writable = {
        point
        for point, (options, device, *_) in mounts(pid).items()  # /run/host: nspawn's own
        if options.startswith("rw")
        and (device == node_disk or point == "/run/cdi")
        and not point.startswith("/run/host/")
    }
    assert {PLUGIN_DIR, "/run/cdi"} <= writable <= {PLUGIN_DIR, "/run/cdi", "/tmp", "/var/tmp"}, writable
    assert (root / PLUGIN_DIR.lstrip("/")).stat().st_mode & 0o777 == 0o750

    (root / "etc/systemd/system/kubelet.service").write_text(KUBELET)
    (root / "etc/systemd/system/multi-user.target.wants/kubelet.service").symlink_to(
        "/etc/systemd/system/kubelet.service"
    )
    for _ in range(2):  # /run/cdi gone again at each boot
        hand_node.reboot()
        ours = check_running(hand_node)
        kubelet = hand_node.show("kubelet.service", *SHOWN)
        assert (kubelet["ActiveState"], kubelet["NRestarts"]) == ("active", "0"), hand_node.journal("kubelet.service")
        assert 0 < int(ours["ActiveEnterTimestampMonotonic"]) <= int(kubelet["InactiveExitTimestampMonotonic"])
        assert (hand_node.view / "run/cdi").is_dir()
        wait_for_journal(hand_node, "kubelet.service", "admitted pod")


def check_running(machine: Container) -> dict[str, str]:
    """Active means READY=1 for Type=notify: systemd waited for it after exec'ing the daemon."""
    shown = machine.show(UNIT, *SHOWN)
    assert (shown["Type"], shown["ActiveState"], shown["SubState"]) == ("notify", "active", "running"), (
        shown,
        machine.journal(UNIT)[-3000:],
    )
    assert shown["NRestarts"] == "0", machine.journal(UNIT)[-3000:]
    assert int(shown["ExecMainStartTimestampMonotonic"]) < int(shown["ActiveEnterTimestampMonotonic"])
    assert "told systemd we are ready" in machine.journal(UNIT)
    return shown


def check_sandbox(machine: Container, shown: dict[str, str]) -> None:
    """The unit's confinement as systemd reports it and as the daemon's process has it."""
    props = machine.show(
        UNIT,
        "MemoryMax",
        "MemoryCurrent",
        "ProtectSystem",
        "ProtectHome",
        "PrivateTmp",
        "NoNewPrivileges",
        "CapabilityBoundingSet",
        "RootDirectory",
        "ControlGroup",
    )
    assert props["MemoryMax"] == str(MEMORY_MAX)
    assert (props["ProtectSystem"], props["ProtectHome"], props["PrivateTmp"], props["NoNewPrivileges"]) == (
        "strict",
        "yes",
        "yes",
        "yes",
    )
    assert props["CapabilityBoundingSet"] == "" and props["RootDirectory"] == f"/{ROOTFS}"
    limit = memory_limit(machine, props["ControlGroup"])
    if limit is None:  # no memory controller of the container's own: systemd accounts nothing either
        assert props["MemoryCurrent"] == "[not set]", props
    else:
        assert limit == str(MEMORY_MAX), limit
    record("memory_max_enforced", limit is not None)

    pid = systemdkit.host_pid(machine.leader, int(shown["MainPID"]))
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    assert (status["CapEff"].strip(), status["CapBnd"].strip(), status["NoNewPrivs"].strip()) == (
        "0000000000000000",
        "0000000000000000",
        "1",
    )
    copy, seen = (machine.root / ROOTFS).stat(), Path(f"/proc/{pid}/root").stat()
    assert (seen.st_dev, seen.st_ino) == (copy.st_dev, copy.st_ino), "its / is the copied image"
    mounted = mounts(pid)
    assert mounted["/"][0].startswith("ro,"), mounted["/"]
    node_disk = f"{os.major(copy.st_dev)}:{os.minor(copy.st_dev)}"
    writable = {
        point for point, (options, device, _, _) in mounted.items() if device == node_disk and options.startswith("rw")
    }
    assert PLUGIN_DIR in writable and writable <= {PLUGIN_DIR, "/tmp", "/var/tmp"}, writable
    probe = subprocess.run(
        ["nsenter", "-t", str(pid), "-m", "-r", "--", "/bin/sh", "-c", ": >/usr/kd-probe"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert probe.returncode != 0 and "Read-only file system" in probe.stderr, probe
    # PrivateTmp: its /tmp is its own, not the node's.
    assert "systemd-private-" in mounted["/tmp"][2] and "-kubedevice.service-" in mounted["/tmp"][2]
    (machine.view / "tmp/kd-node-tmp").write_text("the node's\n")
    assert not Path(f"/proc/{pid}/root/tmp/kd-node-tmp").exists()


def wait_for_journal(machine: Container, unit: str, text: str, timeout: float = 60) -> str:
    """``unit``'s journal of this boot, once it holds ``text``."""
    return wait_for(
        f"{text!r} from {unit}",
        lambda: journal if text in (journal := machine.journal(unit)) else None,
        timeout,
        0.2,
        seen=lambda: machine.journal(unit)[-3000:],
    )
