"""``kubedevice discover``: the four documented configs over a fake node, and bad input."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path

import typer
from typer.testing import CliRunner

from kubedevice.device import Device
from kubedevice.kubelet import Container, KubeletSimulator, Pod
from kubedevice.plugin.base import Plugin
from kubedevice.plugin.manager import Manager
from kubedevice.sources import discover_resources
from kubedevice.sources.cli import discover
from kubedevice.testing import FakeHost

from .conftest import FOUR_CONFIGS, populate

app = typer.Typer()
app.command()(discover)
runner = CliRunner()


def write_config(tmp_path: Path, text: str = FOUR_CONFIGS) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_json_lists_every_resource_of_the_four_configs(host: FakeHost, tmp_path: Path) -> None:
    populate(host)
    result = runner.invoke(app, ["--config", str(write_config(tmp_path)), "--host-root", str(host.root), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    by_name = {r["name"]: r["devices"] for r in document["resources"]}
    assert list(by_name) == ["example.com/null", "example.com/serial", "example.com/coral", "example.com/fpga"]
    assert [d["id"] for d in by_name["example.com/null"]] == ["null-0", "null-1", "null-2", "null-3"]
    assert by_name["example.com/serial"] == [
        {
            "id": "ttyUSB0",
            "health": "Healthy",
            "numaNodes": [],
            "hostPaths": ["/dev/ttyUSB0"],
            "containerPaths": ["/dev/ttyUSB0"],
        },
        {
            "id": "ttyUSB1",
            "health": "Healthy",
            "numaNodes": [],
            "hostPaths": ["/dev/ttyUSB1"],
            "containerPaths": ["/dev/ttyUSB1"],
        },
    ]
    assert by_name["example.com/coral"] == [
        {
            "id": "usb-1-2",
            "health": "Healthy",
            "numaNodes": [],
            "hostPaths": ["/dev/bus/usb/001/004"],
            "containerPaths": ["/dev/bus/usb/001/004"],
            "nodes": [{"kind": "bus", "path": "/dev/bus/usb/001/004"}],
        }
    ]
    vfio = ["/dev/vfio/41", "/dev/vfio/vfio"]
    assert by_name["example.com/fpga"] == [
        {
            "id": "0000:3b:00.0",
            "health": "Healthy",
            "numaNodes": [1],
            "hostPaths": vfio,
            "containerPaths": vfio,
            "pciAddresses": ["0000:3b:00.0"],
            "iommuGroup": 41,
        }
    ]


def test_host_root_from_the_config_and_a_human_table(host: FakeHost, tmp_path: Path) -> None:
    populate(host)
    config = write_config(tmp_path, f"host_root: {host.root}\n" + FOUR_CONFIGS)
    result = runner.invoke(app, ["--config", str(config)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "0000:3b:00.0" in result.stdout and "/dev/bus/usb/001/004" in result.stdout
    assert "container paths" in result.stdout


def test_absent_hardware_is_an_empty_list_not_a_failure(host: FakeHost, tmp_path: Path) -> None:
    host.device_node("/dev/null")
    result = runner.invoke(app, ["--config", str(write_config(tmp_path)), "--host-root", str(host.root), "--json"])
    assert result.exit_code == 0, result.output
    counts = {r["name"]: len(r["devices"]) for r in json.loads(result.stdout)["resources"]}
    assert counts == {"example.com/null": 4, "example.com/serial": 0, "example.com/coral": 0, "example.com/fpga": 0}


def one_line_failure(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr


def test_bad_input_is_one_line_and_exit_2(host: FakeHost, tmp_path: Path) -> None:
    assert "does not exist" in one_line_failure(
        ["--config", str(write_config(tmp_path)), "--host-root", str(tmp_path / "nope")]
    )
    duplicate = FOUR_CONFIGS + "  - name: example.com/null\n    static: {count: 1}\n"
    assert "configured twice" in one_line_failure(["--config", str(write_config(tmp_path, duplicate))])
    bad_vendor = FOUR_CONFIGS.replace('"1a6e"', '"1a6"')
    assert "usb.vendor" in one_line_failure(["--config", str(write_config(tmp_path, bad_vendor))])
    relative = FOUR_CONFIGS.replace("[/dev/null]", "[dev/null]")
    assert "must be absolute" in one_line_failure(["--config", str(write_config(tmp_path, relative))])


def test_discover_resources_gives_dra_attributes_per_device(host: FakeHost, tmp_path: Path) -> None:
    from kubedevice.config import load_config

    populate(host)
    resources = discover_resources(load_config(write_config(tmp_path)), host.root)
    fpga = next(r for r in resources if r[0] == "example.com/fpga")
    assert [d.id for d in fpga[1]] == ["0000:3b:00.0"]
    assert fpga[2]["0000:3b:00.0"]["vendor"] == {"string": "10ee"}
    assert fpga[2]["0000:3b:00.0"]["numaNode"] == {"int": 1}


def test_pods_shows_the_containers_holding_each_device(host: FakeHost, tmp_path: Path) -> None:
    """The kubelet (simulated, with a plugin advertising the same IDs) says which pod holds what."""
    host.device_node("/dev/null")
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))  # unix socket paths end at 107 bytes
    plugin_dir = root / "device-plugins"
    plugin_dir.mkdir()
    config = write_config(tmp_path, f"plugin_dir: {plugin_dir}\n" + FOUR_CONFIGS)
    args = ["--config", str(config), "--host-root", str(host.root)]

    async def scenario() -> None:
        sim = KubeletSimulator(plugin_dir)
        manager = Manager([Plugin("example.com/null", [Device(f"null-{i}") for i in range(4)])], plugin_dir)
        await sim.start()
        try:
            await manager.start()
            await sim.wait_until(lambda: sim.allocatable().get("example.com/null") == 4, 10)
            [granted] = (await sim.admit(Pod("u1", "app", [Container("main", {"example.com/null": 2})], "ml"))).values()
            result = await asyncio.to_thread(runner.invoke, app, [*args, "--pods", "--json"])
            assert result.exit_code == 0, result.output
            nulls = json.loads(result.stdout)["resources"][0]["devices"]
            held = {"namespace": "ml", "pod": "app", "container": "main"}
            assert {d["id"]: d["heldBy"] for d in nulls} == {
                f"null-{i}": [held] if f"null-{i}" in granted.device_ids["example.com/null"] else [] for i in range(4)
            }
            table = await asyncio.to_thread(
                runner.invoke, app, [*args, "--pod-resources", str(root / "pod-resources" / "kubelet.sock")],
                env={"COLUMNS": "250"},
            )  # fmt: skip
            assert table.exit_code == 0, table.output
            assert "held by" in table.stdout and table.stdout.count("ml/app/main") == 2
        finally:
            await manager.stop()
            await sim.stop()

    try:
        asyncio.run(asyncio.wait_for(scenario(), 60))
        result = runner.invoke(app, [*args, "--pods"])  # the kubelet is gone: one line, exit 1
        assert result.exit_code == 1, result.output
        assert result.stderr == f"kubedevice: --pods: {root}/pod-resources/kubelet.sock: no such file or directory\n"
    finally:
        shutil.rmtree(root)
