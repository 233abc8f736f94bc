"""Opaque config from the class and the claim, and ``adminAccess``, through a real prepare: the
kubelet side over the DRA socket, claims as files, CDI specs read back from disk."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from kubedevice.config import load_config
from kubedevice.device import ContainerAllocation, Device, Mount
from kubedevice.dra.cli import app
from kubedevice.dra.driver import ConfigHandler, DraDriver
from kubedevice.dra.driver.daemon import build_driver
from kubedevice.dra.models import dump
from kubedevice.plugin.base import Plugin
from kubedevice.testing.dradriver import DRIVER, Node, claim_object, kubelet, null_plugin, running

KIND = f"k8s.{DRIVER}/device"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def config(source: str, parameters: Any, requests: Sequence[str] = (), driver: str = DRIVER) -> dict[str, Any]:
    entry: dict[str, Any] = {"source": source, "opaque": {"driver": driver, "parameters": parameters}}
    if requests:
        entry["requests"] = list(requests)
    return entry


def with_config(obj: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
    obj["status"]["allocation"]["devices"]["config"] = entries
    return obj


def env_of(node: Node, uid: str) -> dict[str, list[str]]:
    [spec] = [s for name, s in node.cdi_specs().items() if uid in name]
    return {d["name"].removeprefix(f"{uid}-"): d["containerEdits"].get("env", []) for d in spec["devices"]}


async def test_class_then_claim_later_wins_only_ours_and_requests_with_subrequests(node: Node) -> None:
    obj = claim_object("cfg", [("gpu", "null0"), ("big/large", "null1")])
    with_config(
        obj,
        [
            config("FromClaim", {"env": {"A": "claim", "LAST": "first-claim"}}),  # listed first, still after the class
            config("FromClass", {"env": {"A": "class", "B": "class"}}),
            config("FromClaim", {"env": {"C": "big"}}, ["big"]),  # a main request covers its subrequests
            config("FromClaim", {"env": {"D": "other"}}, ["gpu"], driver="other.example.com"),
            config("FromClaim", {"env": {"E": "small"}}, ["big/small"]),  # another subrequest
            config("FromClaim", {"env": {"LAST": "second-claim"}}, ["gpu", "big/large"]),
        ],
    )
    ref = node.add_claim(obj)
    async with running(node, DraDriver(DRIVER, [null_plugin()])) as service, kubelet(service) as client:
        answer = (await client.prepare([ref])).claims[ref[2]]
        assert answer.error == ""
        assert env_of(node, ref[2]) == {
            "null0": ["A=claim", "B=class", "LAST=second-claim", "NULL_DEVICE=null0"],
            "null1": ["A=claim", "B=class", "C=big", "LAST=second-claim", "NULL_DEVICE=null1"],
        }


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        (["not", "an", "object"], "config 0: parameters must be a JSON object, not an array"),
        ({"envs": {"A": "1"}}, "config 0: unknown field parameters.envs (known: apiVersion, env, kind)"),
        ({"env": {"A": 1}}, "config 0: parameters.env.A: must be a string, not a number"),
        ({"env": {"1A": "x"}}, "config 0: parameters.env.1A: not a valid environment variable name"),
        ({"env": "A=1"}, "config 0: parameters.env must be an object of names to strings"),
    ],
)
async def test_a_bad_config_fails_its_claim_only(node: Node, parameters: Any, message: str) -> None:
    bad = node.add_claim(with_config(claim_object("bad", ["null0"]), [config("FromClaim", parameters)]))
    good = node.add_claim(claim_object("good", ["null1"]))
    async with running(node, DraDriver(DRIVER, [null_plugin()])) as service, kubelet(service) as client:
        response = await client.prepare([bad, good])
        prefix = f"claim {bad[0]}/{bad[1]} ({bad[2]}): device null0 (request req)"
        assert response.claims[bad[2]].error == f"{prefix}: {message}"
        assert list(response.claims[bad[2]].devices) == []
        assert response.claims[good[2]].error == ""
        assert bad[2] not in service.state.prepared() and good[2] in service.state.prepared()
        assert not [name for name in node.cdi_specs() if bad[2] in name]  # nothing written for the refused claim


async def test_an_unknown_source_is_refused_as_upstream_does(node: Node) -> None:
    ref = node.add_claim(with_config(claim_object("src", ["null0"]), [config("FromSomewhere", {})]))
    async with running(node, DraDriver(DRIVER, [null_plugin()])) as service, kubelet(service) as client:
        answer = (await client.prepare([ref])).claims[ref[2]]
        assert answer.error.endswith("invalid config source: 'FromSomewhere'")


class ModePlugin(Plugin):
    """A library user's plugin: reads ``mode`` from the config, refuses unknown modes."""

    def __init__(self) -> None:
        super().__init__("example.com/null", [Device(f"null{i}", grant=ContainerAllocation()) for i in range(2)])
        self.calls: list[tuple[str, list[Any], bool]] = []

    def apply_config(self, device: Device, configs: Sequence[Any], admin_access: bool) -> ContainerAllocation:
        self.calls.append((device.id, list(configs), admin_access))
        mode = "default"
        for entry in configs:
            mode = entry.get("mode", mode)
        if mode not in ("default", "fast"):
            raise ValueError(f"mode {mode!r} is not one of default, fast")
        return ContainerAllocation({"MODE": mode}, mounts=[Mount(f"/run/{mode}", "/run/mode", read_only=True)])


async def test_the_library_hook_gets_the_configs_in_order_and_its_edits_reach_cdi(node: Node) -> None:
    plugin = ModePlugin()
    assert isinstance(plugin, ConfigHandler)
    entries = [config("FromClaim", {"mode": "fast"}), config("FromClass", {"mode": "default", "x": 1})]
    ok = node.add_claim(with_config(claim_object("ok", ["null0"]), entries))
    refused = node.add_claim(with_config(claim_object("no", ["null1"]), [config("FromClaim", {"mode": "turbo"})]))
    async with running(node, DraDriver(DRIVER, [plugin])) as service, kubelet(service) as client:
        response = await client.prepare([ok, refused])
        assert response.claims[ok[2]].error == ""
        assert response.claims[refused[2]].error.endswith("mode 'turbo' is not one of default, fast")
        assert plugin.calls == [
            ("null0", [{"mode": "default", "x": 1}, {"mode": "fast"}], False),
            ("null1", [{"mode": "turbo"}], False),
        ]
        [spec] = [s for name, s in node.cdi_specs().items() if ok[2] in name]
        assert spec["devices"][0]["containerEdits"] == {
            "env": ["MODE=fast"],
            "mounts": [{"hostPath": "/run/fast", "containerPath": "/run/mode", "options": ["ro", "bind"]}],
        }


async def test_admin_access_prepares_a_device_another_claim_holds(node: Node) -> None:
    owner = node.add_claim(claim_object("owner", ["null0"]))
    admin = claim_object("admin", ["null0"])
    admin["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    monitor = node.add_claim(admin)
    async with running(node, DraDriver(DRIVER, [null_plugin()])) as service, kubelet(service) as client:
        assert (await client.prepare([owner])).claims[owner[2]].error == ""
        answer = (await client.prepare([monitor])).claims[monitor[2]]
        assert answer.error == ""
        assert [(d.device_name, list(d.cdi_device_ids)) for d in answer.devices] == [
            ("null0", [f"{KIND}={monitor[2]}-null0"])
        ]
        assert env_of(node, monitor[2]) == {"null0": ["DRA_ADMIN_ACCESS=true", "NULL_DEVICE=null0"]}
        assert env_of(node, owner[2]) == {"null0": ["NULL_DEVICE=null0"]}
        assert set(service.state.prepared()) == {owner[2], monitor[2]}
        assert (await client.unprepare([monitor])).claims[monitor[2]].error == ""
        assert set(service.state.prepared()) == {owner[2]}  # the owner's preparation is untouched


async def test_the_example_claim_config_reaches_the_container(node: Node) -> None:
    """examples/dra-null-config-claim.yaml, allocated by ``dra allocate`` against the slices of
    examples/dra-null.yaml, then prepared by that config's driver: its env is in the CDI spec."""
    driver = build_driver(load_config(EXAMPLES / "dra-null.yaml"), Path("/"))
    slices = node.root / "slices.yaml"
    slices.write_text(dump(driver.slices("node-a"), "yaml"))
    files = [str(slices), str(EXAMPLES / "dra-null-class.yaml"), str(EXAMPLES / "dra-null-config-claim.yaml")]
    result = CliRunner().invoke(app, ["allocate", *files, "--node", "node-a"])
    assert result.exit_code == 0, result.output
    [claim] = [d for d in yaml.safe_load_all(result.output) if d and d.get("kind") == "ResourceClaim"]
    claim["metadata"]["uid"] = "0e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"  # as the API server would have set it
    ref = node.add_claim(claim)
    async with running(node, driver) as service, kubelet(service) as client:
        answer = (await client.prepare([ref])).claims[ref[2]]
        assert answer.error == ""
        [device] = answer.devices
        assert "NULL_MODE=quiet" in env_of(node, ref[2])[device.device_name]
