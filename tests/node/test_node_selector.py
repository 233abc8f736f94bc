"""``node_selector``: the matching rule, the config's validation, the start-up refusals, and a label
change applied to running plugins like a config reload (real gRPC under the kubelet simulator;
only the labels' source, the API server, is left to tests/e2e/test_node_selector.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from grpc import aio

from kubedevice.api import pb, pb_grpc
from kubedevice.apimachinery import content
from kubedevice.config import ConfigError, parse_config
from kubedevice.kubelet import KubeletSimulator
from kubedevice.names import endpoint_for
from kubedevice.node.daemon import build_plugins
from kubedevice.node.labels import Labels, connect, describe_change, matches, select, selection, selector_keys
from kubedevice.node.reload import Reloader
from kubedevice.plugin.manager import Manager

TIMEOUT = 60.0  # a bound on a hang: a `kubedevice serve` took 12 s to import at a load of 20 on 2 cores
GPU, FPGA, NULL = "example.com/gpu", "example.com/fpga", "example.com/null"
FLEET = f"""
resources:
  - name: {GPU}
    static: {{count: 2, paths: [/dev/null]}}
    node_selector: {{example.com/accelerator: gpu, zone: a}}
  - name: {FPGA}
    static: {{count: 3, paths: [/dev/null]}}
    node_selector: {{example.com/accelerator: fpga}}
  - name: {NULL}
    static: {{count: 4, paths: [/dev/null]}}
"""


# --- the rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({}, None, True),  # no selector: every node, even before its labels are known
        ({}, {"a": "1"}, True),
        ({"a": "1"}, None, False),  # labels not read yet: no selected resource is served
        ({"a": "1"}, {}, False),
        ({"a": "1"}, {"a": "1", "b": "2"}, True),  # extra labels do not matter
        ({"a": "1", "b": "2"}, {"a": "1"}, False),  # every pair must hold
        ({"a": "1"}, {"a": "2"}, False),
        ({"a": ""}, {"a": ""}, True),  # an empty value is a value, as in Kubernetes
        ({"a": ""}, {}, False),  # and not the same as no label
        ({"A": "x"}, {"a": "x"}, False),  # keys and values are case-sensitive
    ],
)
def test_matching_is_a_pods_node_selector(selector: Labels, labels: Labels | None, expected: bool) -> None:
    assert matches(selector, labels) is expected


def test_select_keeps_the_config_order_and_the_unselected_resources() -> None:
    config = parse_config(FLEET)
    assert [r.name for r in select(config, None).resources] == [NULL]
    assert [r.name for r in select(config, {"example.com/accelerator": "gpu"}).resources] == [NULL]
    both = {"example.com/accelerator": "gpu", "zone": "a"}
    assert [r.name for r in select(config, both).resources] == [GPU, NULL]
    assert [r.name for r in select(config, {"example.com/accelerator": "fpga"}).resources] == [FPGA, NULL]
    assert select(config, both).cdi_dir == config.cdi_dir
    assert selector_keys(config) == {"example.com/accelerator", "zone"}


def test_a_change_is_described_by_the_labels_a_selector_reads_only() -> None:
    keys = {"gpu", "zone"}
    assert describe_change({"gpu": "a", "other": "1"}, {"gpu": "a", "other": "2"}, keys) is None
    assert describe_change({"gpu": "a"}, {"gpu": "b"}, keys) == "gpu=b (was 'a')"
    assert describe_change({"gpu": "a"}, {"zone": "z"}, keys) == "gpu unset (was 'a'), zone=z (was unset)"
    assert describe_change(None, {"gpu": "a"}, keys) == "first read: gpu=a, zone unset"


def test_without_a_label_source_a_selector_is_refused_and_a_plain_config_passes() -> None:
    choose = selection(None)
    plain = parse_config(f"resources:\n  - name: {NULL}\n    static: {{count: 1}}\n")
    assert choose(plain) == plain
    with pytest.raises(ValueError, match=r"resources\[0\]\.node_selector: this daemon started without"):
        choose(parse_config(FLEET))


# --- the config -------------------------------------------------------------------------------


def selector_config(selector: str) -> str:
    return f"resources:\n  - name: {NULL}\n    static: {{count: 1}}\n    node_selector: {selector}\n"


@pytest.mark.parametrize(
    "selector",
    [
        "{kubernetes.io/arch: arm64}",
        '{"feature.node.kubernetes.io/pci-10de.present": "true"}',
        '{a: ""}',
        '{A-b_c.d: "V-1_2.3"}',
        "{" + "k" * 63 + ": " + "v" * 63 + "}",
        "{}",
    ],
)
def test_valid_selectors_are_accepted_as_written(selector: str) -> None:
    parsed = parse_config(selector_config(selector)).resources[0].node_selector
    assert all(isinstance(v, str) for v in parsed.values())


@pytest.mark.parametrize(
    ("selector", "complaint"),
    [
        ("{gpu: true}", "node_selector.gpu: True must be quoted: label values are strings, YAML read a bool"),
        ("{cores: 8}", "node_selector.cores: 8 must be quoted"),
        ('{"-gpu": x}', "label key '-gpu' is not a valid label key: name part must consist of alphanumeric"),
        ('{"Example.com/gpu": x}', "prefix part a lowercase RFC 1123 subdomain must consist of lower case"),
        ('{"a/b/c": x}', "a valid label key must consist of"),
        ('{"": x}', "name part must be non-empty"),
        ('{gpu: "-x"}', "label 'gpu': value '-x' is not a valid label value: a valid label must be an empty string"),
        ("{gpu: " + "v" * 64 + "}", "must be no more than 63 bytes"),
        ("{" + "k" * 64 + ": x}", "name part must be no more than 63 bytes"),
        ("[gpu]", "node_selector"),
    ],
)
def test_invalid_selectors_fail_in_one_line_naming_the_field(selector: str, complaint: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(selector_config(selector))
    message = str(caught.value)
    assert "\n" not in message and "resources[0].node_selector" in message and complaint in message, message


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("", True),
        ("a", True),
        ("a.b-c_d", True),
        ("-a", False),
        ("a-", False),
        ("a b", False),
        ("x" * 63, True),
        ("x" * 64, False),
    ],
)
def test_label_value_rule_is_kubernetes_is_valid_label_value(value: str, ok: bool) -> None:
    assert (not content.is_label_value(value)) is ok


# --- start-up refusals ------------------------------------------------------------------------


def serve(
    tmp_path: Path, config: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "config.yaml"
    path.write_text(config)
    # No credentials to find by accident: no in-cluster account here, no $KUBECONFIG, an empty home.
    clean = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NODE_NAME")}
    clean |= {"HOME": str(tmp_path), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "kubedevice", "serve", "--config", str(path), "--plugin-dir", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=clean,
    )


def test_a_selector_without_a_node_name_is_refused_in_one_line(tmp_path: Path) -> None:
    result = serve(tmp_path, FLEET)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "resources[0].node_selector needs this node's name" in line and "--node or $NODE_NAME" in line


def test_a_selector_without_credentials_is_refused_in_one_line(tmp_path: Path) -> None:
    result = serve(tmp_path, FLEET, env={"NODE_NAME": "n1"})
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "resources[0].node_selector needs the API server to read node n1's labels" in line, line
    result = serve(tmp_path, FLEET, "--kubeconfig", str(tmp_path / "missing"), env={"NODE_NAME": "n1"})
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()  # a --kubeconfig given is judged first, whatever reads it
    assert f"invalid value for '--kubeconfig': file '{tmp_path / 'missing'}' does not exist" in line, line


def test_a_selector_is_refused_in_dra_mode(tmp_path: Path) -> None:
    result = serve(tmp_path, "dra: {driver: null.example.com}\n" + FLEET, "--node", "n1")
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "node_selector is for device plugins" in line


def test_connect_is_not_needed_without_a_selector(tmp_path: Path) -> None:
    assert connect(parse_config(f"resources:\n  - name: {NULL}\n    static: {{count: 1}}\n"), None, None) is None


# --- a label change, applied -------------------------------------------------------------------


async def final_list(channel: aio.Channel) -> list[str]:
    """Follow a ListAndWatch stream to its end; the health of the last list sent."""
    stream = pb_grpc.DevicePluginStub(channel).ListAndWatch(pb.Empty())
    last: list[str] = []
    async for reply in stream:
        last = [d.health for d in reply.devices]
    return last


def test_a_label_change_starts_and_stops_resources_and_leaves_the_others_alone(tmp_path: Path) -> None:
    host, plugin_dir = tmp_path / "host", tmp_path / "plugins"
    (host / "dev").mkdir(parents=True)
    (host / "dev" / "null").touch()
    plugin_dir.mkdir()
    config = parse_config(FLEET)
    labels: dict[str, str] = {}

    async def main() -> None:
        choose = lambda c: select(c, labels)  # noqa: E731 - the API server's part, played by a dict
        sim = KubeletSimulator(plugin_dir, grace_period=1.0)
        await sim.start()
        manager = Manager(build_plugins(choose(config), host, tmp_path / "cdi"), plugin_dir)
        reloader = Reloader(
            tmp_path / "config.yaml", config, manager, lambda c: build_plugins(c, host, tmp_path / "cdi"), select=choose
        )
        await manager.start()
        try:
            await sim.wait_until(lambda: sim.allocatable() == {NULL: 4}, TIMEOUT)
            async with aio.insecure_channel(f"unix://{plugin_dir / endpoint_for(NULL)}") as untouched:
                stream = pb_grpc.DevicePluginStub(untouched).ListAndWatch(pb.Empty())
                assert len((await stream.read()).devices) == 4

                labels.update({"example.com/accelerator": "gpu", "zone": "a"})
                await reloader.reselect("test")
                await sim.wait_until(lambda: sim.allocatable() == {NULL: 4, GPU: 2}, TIMEOUT)
                assert [r.name for r in reloader.served.resources] == [GPU, NULL]

                async with aio.insecure_channel(f"unix://{plugin_dir / endpoint_for(GPU)}") as gpu:
                    ending = asyncio.create_task(final_list(gpu))
                    await asyncio.sleep(0.2)  # the stream is open before the selector stops matching
                    labels["example.com/accelerator"] = "fpga"
                    await reloader.reselect("test")
                    assert await asyncio.wait_for(ending, TIMEOUT) == ["Unhealthy", "Unhealthy"]
                await sim.wait_until(
                    lambda: sim.allocatable().get(FPGA) == 3 and not sim.allocatable().get(GPU), TIMEOUT
                )
                assert not (plugin_dir / endpoint_for(GPU)).exists()
                assert manager.registered(NULL) and not stream.done()  # same stream, same registration
                assert reloader.reloads == 0
        finally:
            await manager.stop()
            await sim.stop()

    asyncio.run(main())


def test_discover_says_a_selected_resource_depends_on_the_node(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(FLEET)
    env = {**os.environ, "COLUMNS": "250", "TERM": "dumb"}
    run = [sys.executable, "-m", "kubedevice", "discover", "--config", str(path), "--host-root", "/"]
    document = json.loads(subprocess.run([*run, "--json"], capture_output=True, text=True, check=True, env=env).stdout)
    selectors = {r["name"]: r.get("nodeSelector") for r in document["resources"]}
    assert selectors == {
        GPU: {"example.com/accelerator": "gpu", "zone": "a"},
        FPGA: {"example.com/accelerator": "fpga"},
        NULL: None,
    }
    table = subprocess.run(run, capture_output=True, text=True, check=True, env=env).stdout
    assert "only on nodes labelled example.com/accelerator=fpga" in table and table.count("(node-dependent)") == 2
