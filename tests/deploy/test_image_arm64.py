"""The arm64 image, ``scripts/image.sh --arch arm64``: every binary in it is aarch64, its wheels are
pip's aarch64 builds of exactly the locked pins, and it runs (under qemu-user through binfmt_misc).

The amd64 image's own checks (layers, config, no pip, byte code, the non-root read-only sandbox,
``--version`` and the demo) are imported from :mod:`test_image` and run here again on this image:
the ``image`` fixture below stands for the arm64 one in this module.
"""

from __future__ import annotations

import platform
import re
import struct
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.utils import canonicalize_name

from . import imagekit
from .helmkit import REPO
from .imagekit import Image
from .test_image import (
    SITE,
    VENV,
    test_archive_is_named_for_containerd_and_for_oci_tools,
    test_demo_runs_in_the_image,
    test_image_config_matches_the_dockerfile,
    test_no_pip_no_compiler_no_cache,
    test_package_data_ships,
    test_the_sandbox_is_non_root_and_read_only,
    test_the_virtualenv_is_byte_compiled_for_a_read_only_root,
    test_two_layers_the_base_then_only_the_virtualenv,
    test_version_and_help_run_in_the_image,
)

pytestmark = pytest.mark.image

__all__ = [  # run again on the arm64 image (pytest collects them from this module's namespace)
    "test_archive_is_named_for_containerd_and_for_oci_tools",
    "test_demo_runs_in_the_image",
    "test_image_config_matches_the_dockerfile",
    "test_no_pip_no_compiler_no_cache",
    "test_package_data_ships",
    "test_the_sandbox_is_non_root_and_read_only",
    "test_the_virtualenv_is_byte_compiled_for_a_read_only_root",
    "test_two_layers_the_base_then_only_the_virtualenv",
    "test_version_and_help_run_in_the_image",
]

EM_X86_64, EM_AARCH64 = 62, 183  # e_machine, from the ELF specification's list
HOST_MACHINES = {"x86_64": EM_X86_64, "aarch64": EM_AARCH64}
COMPILED = {"grpcio", "google-re2", "msgspec", "protobuf", "pydantic-core", "pyyaml"}  # the pins that ship C extensions


@pytest.fixture(scope="module")
def image_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return imagekit.build(tmp_path_factory.mktemp("dist-arm64"), arch="arm64")


@pytest.fixture(scope="module")
def image(image_archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Image:
    return imagekit.unpack(image_archive, tmp_path_factory.mktemp("image-arm64"))


def elf_machine(head: bytes) -> int | None:
    """The ELF header's e_machine, or None for a file that is not ELF.

    e_machine is the 16-bit field at offset 18 in both ELF classes, in the byte order that
    e_ident[EI_DATA] (offset 5: 1 little-endian, 2 big-endian) names."""
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    (machine,) = struct.unpack_from("<H" if head[5] == 1 else ">H", head, 18)
    return int(machine)


def layer_elf_files(image: Image) -> Iterator[tuple[str, int]]:
    """(path, e_machine) of every ELF file in every layer blob of the archive, as a runtime unpacks them."""
    for layer in image.manifest["layers"]:
        with tarfile.open(image.blob(layer["digest"]), "r|gz") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                extracted = tar.extractfile(member)
                assert extracted is not None
                machine = elf_machine(extracted.read(20))
                if machine is not None:
                    yield member.name.removeprefix("./"), machine


def test_the_elf_reader_knows_this_hosts_own_interpreter() -> None:
    """What the checks below rest on: the reader tells this host's machine, and a non-ELF from an ELF."""
    expected = HOST_MACHINES.get(platform.machine())
    if expected is None:
        pytest.skip(f"no e_machine listed here for {platform.machine()}")
    assert elf_machine(Path(sys.executable).resolve().read_bytes()[:20]) == expected
    assert elf_machine(b"#!/bin/sh\n" + bytes(20)) is None


def test_the_config_says_linux_arm64(image: Image) -> None:
    assert (image.config["os"], image.config["architecture"]) == ("linux", "arm64")
    assert image.runtime_spec()["process"]["args"][0] == "kubedevice"


def test_every_elf_file_in_the_layers_is_aarch64(image: Image) -> None:
    found = dict(layer_elf_files(image))
    assert len(found) > 100, sorted(found)  # the base's libc, python3.11, coreutils, the venv's extensions
    assert found["usr/bin/python3.11"] == EM_AARCH64
    assert any(path.startswith(f"{SITE}/grpc/") for path in found)
    foreign = {path: machine for path, machine in found.items() if machine != EM_AARCH64}
    assert not foreign, foreign


def name_and_version(dist_info: Path) -> tuple[str, str]:
    """From the directory's name, ``{name}-{version}.dist-info`` (the wheel spec's escaped name)."""
    name, version = dist_info.name.removesuffix(".dist-info").rsplit("-", 1)
    return canonicalize_name(name), version


def wheel_tags(dist_info: Path) -> list[str]:
    return re.findall(r"^Tag: (\S+)$", (dist_info / "WHEEL").read_text(), re.M)


def test_compiled_extensions_are_pips_aarch64_wheels(image: Image) -> None:
    """Each distribution with a binary in it was installed from a manylinux aarch64 wheel (its WHEEL
    file's tags), its extensions are aarch64 ELF files with CPython's aarch64 suffix; the others are pure."""
    site = image.rootfs / SITE
    with_binaries: set[str] = set()
    for dist_info in site.glob("*.dist-info"):
        name, _ = name_and_version(dist_info)
        files = [site / line.split(",", 1)[0] for line in (dist_info / "RECORD").read_text().splitlines() if line]
        binaries = [path for path in files if path.is_file() and elf_machine(path.read_bytes()[:20]) is not None]
        tags = wheel_tags(dist_info)
        assert tags, dist_info
        if not binaries:
            assert all(tag.endswith("-any") for tag in tags), (name, tags)
            continue
        with_binaries.add(name)
        assert all(re.fullmatch(r"cp3\w*-\w+-manylinux\w*_aarch64", tag) for tag in tags), (name, tags)
        assert all(elf_machine(path.read_bytes()[:20]) == EM_AARCH64 for path in binaries), (name, binaries)
        for path in binaries:
            if ".cpython-" in path.name:
                assert path.name.endswith(".cpython-311-aarch64-linux-gnu.so"), path
    assert with_binaries >= COMPILED, with_binaries
    extensions = list(site.rglob("*.so"))
    assert extensions and all(elf_machine(path.read_bytes()[:20]) == EM_AARCH64 for path in extensions)


def locked_pins(python_version: str) -> dict[str, str]:
    """requirements/run.txt's pins whose markers hold on linux/aarch64 with the image's Python."""
    environment = {
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "aarch64",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "python_version": ".".join(python_version.split(".")[:2]),
        "python_full_version": python_version,
    }
    pins: dict[str, str] = {}
    for line in (REPO / "requirements" / "run.txt").read_text().splitlines():
        match = re.match(r"([A-Za-z0-9._-]+)==(\S+)(?: ; ([^\\]+))?", line)
        if match and (match[3] is None or Marker(match[3].strip()).evaluate(environment)):
            pins[canonicalize_name(match[1])] = match[2]
    return pins


def test_installed_versions_are_the_locked_pins(image: Image) -> None:
    """Exactly the pins (setuptools, pinned for the build, is removed with pip), and this checkout's kubedevice."""
    python = re.search(r"^version\s*=\s*(\S+)$", (image.rootfs / VENV / "pyvenv.cfg").read_text(), re.M)
    assert python and python[1].startswith("3.11."), "Debian bookworm's python3.11"
    installed = dict(name_and_version(path) for path in (image.rootfs / SITE).glob("*.dist-info"))
    assert installed.pop("kubedevice") == imagekit.version()
    expected = locked_pins(python[1])
    assert expected.pop("setuptools")
    assert installed == expected


def test_the_aarch64_interpreter_runs_the_extensions(image: Image) -> None:
    """Under qemu-user (binfmt_misc): the image's own python3.11, an aarch64 process, imports every
    compiled extension kubedevice uses."""
    code = (
        "import platform, grpc, msgspec, pydantic_core, re2, yaml, google.protobuf.message;"
        "print(platform.machine(), yaml.__with_libyaml__)"
    )
    result = imagekit.sandboxed(image, f"/{VENV}/bin/python", "-c", code, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["aarch64", "True"]


def test_an_unknown_arch_is_refused_in_one_line() -> None:
    result = subprocess.run(
        ["bash", str(imagekit.IMAGE_SH), "--arch", "riscv64"], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 2
    assert result.stderr == "image.sh: --arch: 'riscv64' is not one of amd64, arm64\n"
