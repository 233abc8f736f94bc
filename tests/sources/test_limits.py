"""What the kubelet bounds is refused when ``discover`` and ``serve`` read the config (issue #27).

A 5 MB env value used to pass both; every Allocate then failed at the kubelet with
``ResourceExhausted ... larger than max (5000046 vs. 4194304)`` and the daemon logged nothing.
The sizes are measured on the real protobuf messages (``sources/limits.py``), and the figure
``discover`` names is the one the plugin server refuses over gRPC.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
import typer
from grpc import aio
from typer.testing import CliRunner

from kubedevice.config import ConfigError, parse_config
from kubedevice.sources.cli import discover
from kubedevice.sources.configured import ConfiguredPlugin

app = typer.Typer()
app.command()(discover)
runner = CliRunner()

from tests.plugin.conftest import TIMEOUT, allocate_request, client, running  # noqa: E402 - the plugin tests' client


def refusal(tmp_path: Path, resources: str) -> str:
    """``kubedevice discover`` on a config: one line on stderr, exit code 2, nothing on stdout."""
    (tmp_path / "root").mkdir(exist_ok=True)
    config = tmp_path / "config.yaml"
    config.write_text(f"host_root: {tmp_path / 'root'}\nresources:\n" + resources)
    result = runner.invoke(app, ["--config", str(config)])
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    return result.stderr.removeprefix(f"kubedevice: {config}:").strip()


def test_a_5_mb_env_value_is_refused_naming_the_entry_and_the_limit(tmp_path: Path) -> None:
    env = "".join(f"      V{i}: '{'x' * (120_000 if i == 0 else 100_000)}'\n" for i in range(50))
    line = refusal(tmp_path, f"  - name: example.com/x\n    static: {{count: 1}}\n    env:\n{env}")
    assert line.startswith("6:11: resources[0].env.V0: the Allocate answer for a container given its one device")
    assert "would be 5,020," in line and "over the 4,194,304 bytes (4 MiB) the kubelet accepts" in line


def test_the_figure_is_what_the_plugin_server_refuses_over_grpc(tmp_path: Path) -> None:
    """Two paths to one number: discover's worst case (every device in one container) and the
    RESOURCE_EXHAUSTED the plugin server answers a real Allocate of every device with."""
    resources = "  - name: example.com/x\n    static: {count: 3}\n    annotations:\n"
    resources += "".join(f"      a{i}: '{'z' * 131_000}'\n" for i in range(33))
    line = refusal(tmp_path, resources)
    figure = re.search(r"would be ([0-9,]+) bytes", line)
    assert figure, line
    plugin = ConfiguredPlugin(parse_config("resources:\n" + resources).resources[0], tmp_path / "root")

    async def main() -> str:
        async with running([plugin], tmp_path), client(tmp_path, "example.com/x") as stub:
            with pytest.raises(aio.AioRpcError) as refused:
                await stub.Allocate(allocate_request([d.id for d in plugin.devices()]), timeout=TIMEOUT)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            return str(refused.value.details())

    assert f"the Allocate answer would be {figure[1]} bytes" in asyncio.run(main())


def test_a_template_that_grows_with_the_devices_is_held_to_execve(tmp_path: Path) -> None:
    line = refusal(tmp_path, "  - name: example.com/x\n    static: {count: 30000}\n    env: {IDS: '{ids}'}\n")
    assert line.startswith("5:16: resources[0].env.IDS: rendered for all 30,000 devices, 'IDS=…' is ")
    assert "over the 131072 execve takes (Linux MAX_ARG_STRLEN)" in line


def test_a_device_list_past_4_mib_is_refused_at_the_source(tmp_path: Path) -> None:
    name = "example.com/" + "d" * 50
    line = refusal(tmp_path, f"  - name: {name}\n    static: {{count: 70000}}\n")
    assert line.startswith("4:13: resources[0].static: its 70,000 devices make a ListAndWatch answer of ")
    assert "over the 4,194,304 bytes (4 MiB) the kubelet accepts" in line


def test_too_many_devices_are_refused_before_any_is_made() -> None:
    assert parse_config("resources:\n  - name: example.com/x\n    static: {count: 1000}\n    replicas: 100\n")
    with pytest.raises(ConfigError) as refused:
        parse_config("resources:\n  - name: example.com/x\n    static: {count: 1001}\n    replicas: 100\n", "c.yaml")
    assert str(refused.value) == (
        "c.yaml:4:15: resources[0].replicas: static.count 1,001 × replicas 100 is 100,100 devices, "
        "over the 100,000 a resource may advertise"
    )


def test_serve_refuses_the_same_config_at_start_up(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    config = tmp_path / "config.yaml"
    env = "".join(f"      V{i}: '{'x' * (120_000 if i == 0 else 100_000)}'\n" for i in range(50))
    resource = "  - name: example.com/x\n    static: {count: 1}\n    env:\n"
    config.write_text(f"host_root: {tmp_path / 'root'}\nresources:\n{resource}{env}")
    result = subprocess.run(
        [sys.executable, "-m", "kubedevice", "serve", "-c", str(config), "--plugin-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"kubedevice: {config}:6:11: resources[0].env.V0: the Allocate answer")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
