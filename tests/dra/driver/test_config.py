"""The ``dra:`` config section, ``kubedevice serve`` with it, and the library example."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubedevice.config import ConfigError, load_config, parse_config
from kubedevice.dra.driver.daemon import build_driver
from kubedevice.dra.slices import slices_for
from kubedevice.examples import dra_null_driver
from kubedevice.testing.dradriver import Node, claim_object, kubelet, running

REPO = Path(__file__).resolve().parents[3]
NULL = "resources: [{name: example.com/null, static: {count: 2, paths: [/dev/null]}}]\n"


@pytest.fixture
def node() -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))
    yield Node(root)
    shutil.rmtree(root)


def test_the_example_config_is_a_dra_driver_of_four_null_devices() -> None:
    config = load_config(REPO / "examples" / "dra-null.yaml")
    assert config.dra is not None and config.dra.driver == "null.example.com"
    driver = build_driver(config, Path("/"))
    assert sorted(driver.offered()) == ["null-0", "null-1", "null-2", "null-3"]


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("dra: {driver: Null_Example}", "dra.driver: 'Null_Example' is not a valid DRA driver name: a lowercase"),
        ("dra: {driver: null.example.com, drvier: x}", "dra: unknown key 'drvier' \\(did you mean 'driver'\\?\\)"),
        ("dra: {}", "dra.driver: Field required"),
    ],
)
def test_bad_dra_sections_name_the_field(section: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(NULL + section)


def test_slice_device_names_are_the_names_the_driver_prepares() -> None:
    config = parse_config(
        "resources:\n"
        "  - {name: example.com/null, static: {count: 2, paths: [/dev/null]}}\n"
        "  - {name: example.com/other, static: {count: 2, paths: [/dev/zero]}}\n"
        "dra: {driver: two.example.com}"
    )
    driver = build_driver(config, Path("/"))
    published = {d.name for s in slices_for(driver.name, "n", driver.resources()) for d in s.spec.devices}
    assert published == set(driver.offered()) == {"null-null-0", "null-null-1", "other-other-0", "other-other-1"}


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubedevice", "serve", "--config", str(REPO / "examples" / "dra-null.yaml"), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "NODE_NAME"},
    )


def test_serve_with_dra_needs_a_node_name() -> None:
    result = _serve()
    assert result.returncode == 2
    assert result.stderr == "kubedevice: serve: a config with 'dra' needs --node (or $NODE_NAME)\n"


def test_serve_with_dra_reports_missing_api_credentials_in_one_line(node: Node) -> None:
    result = _serve(
        "--node", "n1", "--kubelet-dir", str(node.kubelet_dir), "--cdi-dir", str(node.cdi_dir),
        "--kubeconfig", str(node.root / "missing.kubeconfig"),
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"kubedevice: invalid value for '--kubeconfig': file '{node.root / 'missing.kubeconfig'}' does not exist "
        "(see 'kubedevice serve --help')\n"
    )
    assert not (node.kubelet_dir / "plugins_registry").exists() or not any(
        (node.kubelet_dir / "plugins_registry").iterdir()
    )


async def test_the_library_example_prepares_a_claim(node: Node) -> None:
    ref = node.add_claim(claim_object("lib", ["null3"], driver="null.example.com"))
    driver = dra_null_driver.driver()
    [published] = driver.slices("node-a")
    assert [d.attributes["index"].int_ for d in published.spec.devices] == [0, 1, 2, 3]
    async with running(node, driver) as service, kubelet(service) as client:
        answer = (await client.prepare([ref])).claims[ref[2]]
        assert answer.error == ""
        spec = json.loads(next(node.cdi_dir.glob("*.json")).read_text())
        assert spec["devices"][0]["containerEdits"]["env"] == ["NULL_DEVICE=null3"]


def test_rolling_update_needs_the_pod_uid(tmp_path: Path) -> None:
    config = tmp_path / "dra.yaml"
    config.write_text(NULL + "dra: {driver: null.example.com, rolling_update: true}\n")
    result = subprocess.run(
        [sys.executable, "-m", "kubedevice", "serve", "--config", str(config), "--node", "n1"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "POD_UID"},
    )
    assert result.returncode == 2
    assert result.stderr == "kubedevice: dra.rolling_update needs $POD_UID (the downward API's metadata.uid)\n"


def test_sigterm_while_loading_a_dra_config_is_a_clean_stop() -> None:
    """The command line catches SIGTERM before the DRA loop exists; the driver must still stop on it."""
    with tempfile.TemporaryDirectory(prefix="kd-") as short:  # socket paths stay under 108 bytes
        _sigterm_while_loading(Path(short))


def _sigterm_while_loading(tmp_path: Path) -> None:
    fifo, kubelet_dir = tmp_path / "config.yaml", tmp_path / "kubelet"
    os.mkfifo(fifo)
    kubelet_dir.mkdir()
    kubeconfig = tmp_path / "kubeconfig"  # loadable credentials; nothing listens there, and nothing is sent
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\n"
    )
    args = [
        sys.executable,
        "-m",
        "kubedevice",
        "serve",
        "--config",
        str(fifo),
        "--node",
        "n1",
        "--kubelet-dir",
        str(kubelet_dir),
        "--cdi-dir",
        str(tmp_path / "cdi"),
        "--kubeconfig",
        str(kubeconfig),
    ]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    with fifo.open("w") as writer:  # returns once serve has opened the FIFO to read its config
        proc.send_signal(signal.SIGTERM)
        writer.write(
            "dra: {driver: null.example.com, publish: false}\n"
            "resources:\n  - name: example.com/null\n    static: {count: 1, paths: [/dev/null]}\n"
        )
    try:
        _, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert not [p for p in kubelet_dir.rglob("*") if p.is_socket()], "no socket of ours is left"
