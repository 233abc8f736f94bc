"""The image scripts/image.sh builds: what it holds, that it matches the Dockerfile, and that
its entrypoint runs as the image's non-root user on a read-only root filesystem."""

from __future__ import annotations

import re
import subprocess

import pytest

from . import imagekit
from .imagekit import Image
from .test_dockerfile import exec_form, stages

pytestmark = pytest.mark.image

VENV = "opt/kubedevice"
SITE = f"{VENV}/lib/python3.11/site-packages"


def test_archive_is_named_for_containerd_and_for_oci_tools(image: Image) -> None:
    assert (image.layout / "oci-layout").read_text().strip() == '{"imageLayoutVersion":"1.0.0"}'
    (entry,) = image.index["manifests"]
    version = imagekit.version()
    assert entry["annotations"] == {
        "io.containerd.image.name": f"docker.io/{imagekit.NAME}:{version}",
        "org.opencontainers.image.ref.name": version,
    }
    assert image.config["os"] == "linux"


def test_the_default_is_linux_amd64(image: Image) -> None:
    """The default build (no ``--arch``) is the amd64 image, and its config says so; the arm64 one's
    says arm64 (test_image_arm64)."""
    assert (image.config["os"], image.config["architecture"]) == ("linux", "amd64")


def test_two_layers_the_base_then_only_the_virtualenv(image: Image) -> None:
    base, venv = image.manifest["layers"]
    listing = subprocess.run(
        ["tar", "-tzf", str(image.blob(venv["digest"]))], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert listing and all(re.fullmatch(rf"(opt/|{VENV}(/.*)?)", path.removeprefix("./")) for path in listing)
    base_listing = subprocess.run(
        ["tar", "-tzf", str(image.blob(base["digest"]))], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert "usr/bin/python3.11" in {path.removeprefix("./") for path in base_listing}


def test_image_config_matches_the_dockerfile(image: Image) -> None:
    final = stages()[1][-1]
    config = image.config["config"]
    (user,) = final.all("USER")
    assert config["User"] == user
    assert config["Entrypoint"] == exec_form(final.all("ENTRYPOINT")[0])
    assert config["Cmd"] == exec_form(final.all("CMD")[0])
    assert set(config["ExposedPorts"]) == {f"{port}/tcp" for port in final.all("EXPOSE")}
    dockerfile_env = dict(re.findall(r"(\w+)=(\S+)", " ".join(final.all("ENV"))))
    assert dict(item.split("=", 1) for item in config["Env"]) == dockerfile_env
    dockerfile_labels = dict(re.findall(r'([\w.]+)="([^"]*)"', " ".join(final.all("LABEL"))))
    assert dockerfile_labels.items() <= config["Labels"].items()


def test_the_same_debian_packages_as_the_dockerfile() -> None:
    script = imagekit.IMAGE_SH.read_text()
    _, found = stages()
    installs = {
        stage.name: re.findall(r"--no-install-recommends ([\w.+-]+(?: [\w.+-]+)*)", " ".join(stage.all("RUN")))
        for stage in found
    }
    assert installs["base"] == [v.strip("'") for v in re.findall(r"^BASE_PACKAGES=(.*)$", script, re.M)]
    assert installs["build"] == [v.strip("'") for v in re.findall(r"^BUILD_PACKAGES=(.*)$", script, re.M)]
    (suite,) = re.findall(r"^SUITE=(\w+)$", script, re.M)
    assert stages()[0]["BASE_IMAGE"] == f"debian:{suite}-slim"


def test_no_pip_no_compiler_no_cache(image: Image) -> None:
    root = image.rootfs
    assert not list((root / VENV / "bin").glob("pip*"))
    assert not list((root / SITE).glob("pip*")) and not list((root / SITE).glob("setuptools*"))
    assert not (root / "usr/lib/python3/dist-packages/pip").exists()
    assert not (root / "usr/share/python-wheels").exists(), "python3-venv's bundled wheels are build-only"
    for tool in ("gcc", "cc", "c++", "make", "ld", "as", "x86_64-linux-gnu-gcc-12"):
        assert not (root / "usr/bin" / tool).exists(), tool
    assert not (root / "root/.cache").exists() and not (root / "var/cache/pip").exists()
    assert not list((root / "var/cache/apt").glob("**/*.deb"))
    assert not list((root / "var/lib/apt/lists").iterdir())
    assert not list((root / "dev").iterdir()), "the container runtime provides /dev"


def test_the_virtualenv_is_byte_compiled_for_a_read_only_root(image: Image) -> None:
    sources = list((image.rootfs / SITE).rglob("*.py"))
    assert len(sources) > 500
    missing = [src for src in sources if not list((src.parent / "__pycache__").glob(f"{src.stem}.cpython-311*.pyc"))]
    assert not missing, missing[:5]


def test_package_data_ships(image: Image) -> None:
    """The demo's bundled config and the DRA examples are data files, easy to leave out of a wheel."""
    examples = image.rootfs / SITE / "kubedevice" / "examples"
    assert (examples / "null.yaml").is_file()
    assert (examples / "dra" / "class.yaml").is_file()
    assert (image.rootfs / SITE / "kubedevice" / "api" / "api.proto").is_file()


def test_a_host_without_a_pci_ids_gets_names_from_the_image_copy(image: Image) -> None:
    """Minimal host OSes have no PCI ID database: the image's own (Debian's pci.ids package),
    named by ``$KUBEDEVICE_PCI_IDS``, gives ``{model}`` then."""
    env = image.runtime_spec()["process"]["env"]
    assert "KUBEDEVICE_PCI_IDS=/usr/share/misc/pci.ids" in env
    script = (
        "import os; os.mkdir('/tmp/host'); from kubedevice.sources.hostroot import HostRoot; "
        "from kubedevice.sources.facts import pci_names; print(pci_names(HostRoot('/tmp/host'), '10de', '20b0'))"
    )
    result = imagekit.sandboxed(image, "env", "-i", *env, f"/{VENV}/bin/python", "-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "('NVIDIA Corporation', 'GA100 [A100 SXM4 40GB]')"


def test_the_sandbox_is_non_root_and_read_only(image: Image) -> None:
    """What the next tests rely on: the image's user, and no write outside /tmp."""
    result = imagekit.sandboxed(image, "/bin/sh", "-c", "id -u; id -g; touch /probe || echo read-only; touch /tmp/ok")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["65532", "65532", "read-only"]
    assert "Read-only file system" in result.stderr


def test_version_and_help_run_in_the_image(image: Image) -> None:
    result = imagekit.run(image, "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["kubedevice", imagekit.version()]
    result = imagekit.run(image, "--help")
    assert result.returncode == 0, result.stderr
    assert "serve" in result.stdout and "demo" in result.stdout


def test_demo_runs_in_the_image(image: Image) -> None:
    result = imagekit.run(image, "demo", timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for step in ("plugins registered", "re-registered", "demo finished"):
        assert step in result.stdout, result.stdout[-3000:]
