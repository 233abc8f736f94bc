"""The release artefacts work without the source tree.

The sdist and wheel are built as a release would build them (``python -m build``: the wheel is
made from the unpacked sdist, so a file the sdist forgets is missing from the wheel too), the
wheel is installed with the locked dependencies into a fresh virtual environment outside the
checkout, and the commands a user runs first are run from a directory that is not the
checkout, with nothing of it on ``sys.path``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import kubedevice

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements" / "run.txt"

# What a user of the wheel reaches through package data rather than code.
PACKAGE_DATA = [
    "kubedevice/py.typed",
    "kubedevice/api/api.proto",
    "kubedevice/api/dra_v1.proto",
    "kubedevice/api/dra_v1beta1.proto",
    "kubedevice/api/dra_health_v1.proto",
    "kubedevice/api/dra_health_v1alpha1.proto",
    "kubedevice/api/pluginregistration_v1.proto",
    "kubedevice/api/podresources_v1.proto",
    "kubedevice/api/api_pb2.pyi",
    "kubedevice/examples/null.yaml",
    "kubedevice/examples/dra-null.yaml",
    "kubedevice/examples/dra/class.yaml",
    "kubedevice/examples/dra/claim.yaml",
    "kubedevice/examples/dra/slices.yaml",
    "kubedevice/examples/dra/cel-input.jsonl",
]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)],
        check=True,
        capture_output=True,
        text=True,
    )
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel and the locked runtime dependencies only."""
    root = tmp_path_factory.mktemp("wheel-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "--require-hashes", "-r", str(LOCK)], check=True)
    (wheel,) = dist.glob("*.whl")
    subprocess.run([*pip, "--no-deps", str(wheel)], check=True)
    return root


def run(venv: Path, cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def test_sdist_and_wheel_carry_the_package_data(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    assert wheel.name == f"kubedevice-{kubedevice.__version__}-py3-none-any.whl"
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [name for name in PACKAGE_DATA if name not in names]
    assert not missing, f"not in the wheel: {missing}"
    assert not [n for n in names if n.endswith((".pyc", ".egg-info"))]
    with tarfile.open(sdist) as archive:
        members = {m.name.split("/", 1)[1] for m in archive.getmembers() if "/" in m.name}
    # The lock travels with the sources, so an image or a distro package can install exactly it.
    assert {"requirements/run.txt", "requirements/test.txt", "pyproject.toml"} <= members


def test_installed_wheel_runs_outside_the_checkout(venv: Path, tmp_path: Path) -> None:
    python = str(venv / "bin" / "python")
    where = run(venv, tmp_path, python, "-c", "import kubedevice; print(kubedevice.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout

    version = run(venv, tmp_path, "kubedevice", "--version")
    assert version.returncode == 0, version.stderr
    assert kubedevice.__version__ in version.stdout

    demo = run(venv, tmp_path, "kubedevice", "demo")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "demo finished" in demo.stdout


def test_installed_wheel_validates_its_bundled_examples(venv: Path, tmp_path: Path) -> None:
    python = str(venv / "bin" / "python")
    found = run(venv, tmp_path, python, "-c", "import kubedevice.examples as e, os; print(os.path.dirname(e.__file__))")
    examples = Path(found.stdout.strip())
    assert examples.is_relative_to(venv), found.stdout + found.stderr
    good = [examples / "dra" / name for name in ("class.yaml", "claim.yaml", "slices.yaml")]
    ok = run(venv, tmp_path, "kubedevice", "dra", "validate", *map(str, good))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = run(venv, tmp_path, "kubedevice", "dra", "validate", str(examples / "dra" / "invalid-class.yaml"))
    assert bad.returncode == 1, bad.stdout + bad.stderr


def readme_commands() -> list[str]:
    """The README's opening code block: the two commands, comments stripped."""
    text = (REPO / "README.md").read_text()
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("   #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_readme_opens_with_the_demo_and_the_test_command() -> None:
    assert (REPO / "README.md").read_text().startswith("# kubedevice\n\n```sh\n")
    demo, tests = readme_commands()
    assert demo.endswith("&& kubedevice demo") and "scripts/install.sh" in demo
    assert tests == "bash scripts/test.sh"  # .ci/run runs it, in a fresh ./.venv


def test_readme_demo_command_runs_in_a_fresh_checkout(tmp_path: Path) -> None:
    """The README's first command, as written, in a copy of the checkout with no venv active."""
    files = (
        subprocess.run(
            ["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "-z"], check=True, capture_output=True
        )
        .stdout.decode()
        .split("\0")
    )
    checkout = tmp_path / "kubedevice"
    for name in filter(None, files):
        source = REPO / name
        if source.is_file() and not source.is_symlink():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            (checkout / name).write_bytes(source.read_bytes())
        elif source.is_symlink():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            (checkout / name).symlink_to(os.readlink(source))
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(sys.prefix))
    demo, _ = readme_commands()
    done = subprocess.run(
        ["bash", "-c", demo], cwd=checkout, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "demo finished" in done.stdout
    assert (checkout / ".venv" / "bin" / "kubedevice").exists()
