"""The image that ``scripts/image.sh`` builds, opened and run the way a container runtime would.

No Docker engine here: the archive is unpacked with umoci and its entrypoint run chrooted in a
private mount and PID namespace, as the image's numeric user, on the image's root filesystem
bind-mounted read-only, with a tmpfs ``/tmp`` (the DaemonSet's emptyDir) and a minimal ``/dev``.
``KUBEDEVICE_IMAGE_ARCHIVE`` names an archive to use instead of building one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .helmkit import REPO

IMAGE_SH = REPO / "scripts" / "image.sh"
NAME = "kubedevice/kubedevice"
BUILD_TIMEOUT = 1200  # cold (debootstrap, pip downloads) about 80 s here; generous for slow mirrors


def version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def require_tools() -> None:
    if os.geteuid() != 0:
        pytest.fail("the image tests need root (chroot, mount namespaces)")
    missing = [tool for tool in ("debootstrap", "umoci", "unshare", "chroot") if not shutil.which(tool)]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: apt-get install debootstrap umoci")


def build(dist: Path, arch: str = "amd64") -> Path:
    """Run scripts/image.sh for ``arch`` into ``dist`` and return the archive it wrote.

    ``KUBEDEVICE_IMAGE_ARCHIVE`` stands for the default (amd64) build only: an archive of another
    architecture is always built, so what its tests check is what this checkout makes."""
    override = os.environ.get("KUBEDEVICE_IMAGE_ARCHIVE")
    if override and arch == "amd64":
        return Path(override)
    require_tools()
    # amd64 is built as users build it, with no --arch: what the default does is what is tested.
    argv = ["bash", str(IMAGE_SH)] if arch == "amd64" else ["bash", str(IMAGE_SH), "--arch", arch]
    result = subprocess.run(
        argv,
        env={**os.environ, "KUBEDEVICE_DIST": str(dist)},
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    suffix = "" if arch == "amd64" else f"-{arch}"
    archive = dist / f"kubedevice-{version()}{suffix}.oci.tar"
    assert archive.is_file(), result.stderr[-2000:]
    return archive


@dataclass(frozen=True)
class Image:
    """An unpacked image: its OCI layout, its image config and its rootfs with umoci's runtime spec."""

    layout: Path
    index: dict[str, Any]
    manifest: dict[str, Any]
    config: dict[str, Any]
    bundle: Path

    @property
    def rootfs(self) -> Path:
        return self.bundle / "rootfs"

    def blob(self, digest: str) -> Path:
        algorithm, _, hexdigest = digest.partition(":")
        return self.layout / "blobs" / algorithm / hexdigest

    def runtime_spec(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((self.bundle / "config.json").read_text())
        return loaded


def unpack(archive: Path, dest: Path) -> Image:
    layout, bundle = dest / "layout", dest / "bundle"
    layout.mkdir(parents=True)
    subprocess.run(["tar", "-C", str(layout), "-xf", str(archive)], check=True, timeout=120)
    index = json.loads((layout / "index.json").read_text())
    (entry,) = index["manifests"]
    tag = entry["annotations"]["org.opencontainers.image.ref.name"]
    subprocess.run(
        ["umoci", "unpack", "--image", f"{layout}:{tag}", str(bundle)], check=True, capture_output=True, timeout=300
    )

    def blob(digest: str) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((layout / "blobs" / digest.replace(":", "/")).read_text())
        return loaded

    manifest = blob(entry["digest"])
    return Image(layout, index, manifest, blob(manifest["config"]["digest"]), bundle)


# Mount the rootfs read-only, give it /proc, a tmpfs /tmp and a /dev with the usual four
# character devices, then chroot as the spec's user with exactly the spec's environment.
SANDBOX = r"""
root=$1 user=$2; shift 2
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
mount -t proc proc "$root/proc"
mount -t tmpfs -o mode=1777,size=16m tmpfs "$root/tmp"
mount -t tmpfs -o mode=755,size=1m tmpfs "$root/dev"
for node in null zero random urandom; do : >"$root/dev/$node"; mount --bind "/dev/$node" "$root/dev/$node"; done
exec chroot --userspec="$user" "$root" "$@"
"""


def sandboxed(image: Image, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``argv`` in the sandbox, as the user of umoci's runtime spec (the image's USER)."""
    user = image.runtime_spec()["process"]["user"]
    return subprocess.run(
        [
            "unshare",
            "--mount",
            "--pid",
            "--fork",
            "--propagation",
            "private",
            "sh",
            "-ec",
            SANDBOX,
            "sandbox",
            str(image.rootfs),
            f"{user['uid']}:{user['gid']}",
            *argv,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run(image: Image, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The image's entrypoint with ``args`` in place of its CMD, with exactly the spec's environment."""
    env = image.runtime_spec()["process"]["env"]
    return sandboxed(image, "env", "-i", *env, *image.config["config"]["Entrypoint"], *args, timeout=timeout)
