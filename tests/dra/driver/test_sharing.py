"""``dra.sharing``: a resource with ``replicas: N`` published as one device per physical device with
a consumable capacity of N (``capacity``, KEP-5075), two claims prepared on one device; or as the
whole device and its replicas on one counter set of N (``counters``, KEP-4815)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubedevice.config import ConfigError, parse_config
from kubedevice.device import Health
from kubedevice.dra.cli import app
from kubedevice.dra.driver import DraDriver
from kubedevice.dra.driver.daemon import build_driver
from kubedevice.dra.models import dump
from kubedevice.dra.slices import REPLICAS_CAPACITY
from kubedevice.dra.validation import validate
from kubedevice.testing.dradriver import NODE, Node, claim_object, kubelet, running

DRIVER = "null.example.com"
CONFIG = (
    "resources:\n"
    "  - name: example.com/null\n"
    "    static: {count: 2, paths: [/dev/null]}\n"
    "    replicas: 3\n"
    "    env: {NULL_DEVICE: '{ids}'}\n"
    f"dra: {{driver: {DRIVER}, sharing: SHARING}}\n"
)


def driver_for(sharing: str) -> DraDriver:
    return build_driver(parse_config(CONFIG.replace("SHARING", sharing)), Path("/"))


def test_replicas_stay_n_devices_by_default() -> None:
    driver = driver_for("replicas")
    [slice_] = driver.slices(NODE)
    assert len(slice_.spec.devices) == 6
    assert not any(d.allow_multiple_allocations or d.capacity for d in slice_.spec.devices)


def test_capacity_publishes_one_shared_device_per_physical_device() -> None:
    driver = driver_for("capacity")
    [slice_] = driver.slices(NODE)
    assert validate(slice_) == []
    assert [d.name for d in slice_.spec.devices] == sorted(driver.offered()) == ["null-0", "null-1"]
    for device in slice_.spec.devices:
        assert device.allow_multiple_allocations is True
        capacity = device.capacity[REPLICAS_CAPACITY]
        assert (capacity.value, capacity.request_policy) == (
            "3",
            {"default": "1", "validRange": {"min": "1", "max": "3", "step": "1"}},
        )
        assert "replica" not in device.attributes
        assert device.attributes["id"].string == device.attributes["physicalDevice"].string
    # the device a claim on it is granted: the physical device's first replica
    assert {n: o.device.id for n, o in driver.offered().items()} == {"null-0": "null-0::0", "null-1": "null-1::0"}


def test_an_unhealthy_replica_taints_the_shared_device() -> None:
    driver = driver_for("capacity")
    plugin = driver.plugins[0]
    plugin.set_health("null-1::2", Health.UNHEALTHY)
    [slice_] = driver.slices(NODE)
    assert [(d.name, bool(d.taints)) for d in slice_.spec.devices] == [("null-0", False), ("null-1", True)]


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("sharing: halves", r"dra\.sharing: Input should be 'replicas', 'capacity' or 'counters'"),
        ("device_status: maybe", r"dra\.device_status: Input should be a valid boolean"),
    ],
)
def test_bad_values_name_the_field(section: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(CONFIG.replace("sharing: SHARING", section))


async def test_two_claims_share_one_device(node: Node) -> None:
    shares = ("3f9a6cb2-51c4-4a5e-9d0e-3c2b2d0e4a11", "0c1d9a7e-2b1f-4f6c-8a3e-5d4c3b2a1f00")
    refs = []
    for name, share in zip(("first", "second"), shares, strict=True):
        obj = claim_object(name, ["null-1"])
        obj["status"]["allocation"]["devices"]["results"][0]["shareID"] = share
        refs.append(node.add_claim(obj))
    async with running(node, driver_for("capacity")) as service, kubelet(service) as client:
        response = await client.prepare(refs)
        for ref, share in zip(refs, shares, strict=True):
            answer = response.claims[ref[2]]
            assert answer.error == ""
            [device] = answer.devices
            assert (device.device_name, device.share_id) == ("null-1", share)
        specs = node.cdi_specs()
        assert len(specs) == 2  # one spec per claim: neither overwrites the other's entry
        for ref in refs:
            [spec] = [s for name, s in specs.items() if ref[2] in name]
            [entry] = spec["devices"]
            assert entry["name"] == f"{ref[2]}-null-1"
            assert entry["containerEdits"]["env"] == ["NULL_DEVICE=null-1::0"]
            assert [n["hostPath"] for n in entry["containerEdits"]["deviceNodes"]] == ["/dev/null"]
        assert (await client.unprepare(refs[:1])).claims[refs[0][2]].error == ""
        assert set(service.state.prepared()) == {refs[1][2]}
        assert len(node.cdi_specs()) == 1


CLASS_AND_CLAIMS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: nulls}
spec: {selectors: [{cel: {expression: 'device.driver == "null.example.com"'}}]}
""" + "".join(
    f"""---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}, namespace: default}}
spec: {{devices: {{requests: [{{name: r, exactly: {{deviceClassName: nulls}}}}]}}}}
"""
    for name in ("a", "b", "c", "d")
)


def test_the_allocator_puts_n_claims_on_a_device_of_capacity_n(tmp_path: Path) -> None:
    """``dra allocate`` (the scheduler's allocator) shares each device by its capacity: four
    one-replica claims fit two devices of three replicas, each result with a shareID."""
    slices = tmp_path / "slices.yaml"
    slices.write_text(dump(driver_for("capacity").slices(NODE), "yaml"))
    claims = tmp_path / "claims.yaml"
    claims.write_text(CLASS_AND_CLAIMS)
    result = CliRunner().invoke(app, ["allocate", str(slices), str(claims), "--node", NODE])
    assert result.exit_code == 0, result.output
    allocated = [d for d in yaml.safe_load_all(result.output) if d and d.get("kind") == "ResourceClaim"]
    results = [r for c in allocated for r in c["status"]["allocation"]["devices"]["results"]]
    assert len(results) == 4 and all(r["shareID"] for r in results)
    per_device = sorted(sum(r["device"] == name for r in results) for name in ("null-0", "null-1"))
    assert sum(per_device) == 4 and max(per_device) <= 3
    assert all(r["consumedCapacity"] == {REPLICAS_CAPACITY: "1"} for r in results)


def test_counters_publish_the_whole_device_and_its_replicas_on_one_counter_set() -> None:
    driver = driver_for("counters")
    device_slice, counter_slice = driver.slices(NODE)
    assert validate(device_slice) == [] and validate(counter_slice) == []
    assert [s.spec.pool.resource_slice_count for s in (device_slice, counter_slice)] == [2, 2]
    assert counter_slice.spec.devices == [] and device_slice.spec.shared_counters is None
    assert counter_slice.spec.shared_counters == [
        {"name": f"null-{i}", "counters": {"replicas": {"value": "3"}}} for i in range(2)
    ]
    consumed = {
        d.attributes["id"].string: (c["counterSet"], c["counters"]["replicas"]["value"])
        for d in device_slice.spec.devices
        for c in d.consumes_counters or []
    }
    assert consumed == {
        **{f"null-{i}": (f"null-{i}", "3") for i in range(2)},
        **{f"null-{i}::{r}": (f"null-{i}", "1") for i in range(2) for r in range(3)},
    }
    whole = {d.name: d for d in device_slice.spec.devices}["null-0"]
    assert "replica" not in whole.attributes and not whole.allow_multiple_allocations
    offered = driver.offered()
    assert set(offered) == {d.name for d in device_slice.spec.devices}
    assert offered["null-0"].device.id == "null-0::0"  # the whole device is granted as its first replica


def _claim(name: str, whole: bool) -> str:
    """A claim for the whole device (no ``replica`` attribute) or for one replica."""
    has_replica = '"replica" in device.attributes["null.example.com"]'
    selector = {"cel": {"expression": f"!({has_replica})" if whole else has_replica}}
    request = {"name": "r", "exactly": {"deviceClassName": "nulls", "selectors": [selector]}}
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [request]}},
    }
    return "---\n" + yaml.safe_dump(claim)


@pytest.mark.parametrize(
    ("claims", "devices"),
    [
        ([("whole", True)], 1),
        ([("a", False), ("b", False), ("c", False), ("d", False), ("e", False), ("f", False)], 6),
        ([("w0", True), ("w1", True)], 2),
        ([("w0", True), ("w1", True), ("a", False)], 0),  # both counter sets are used up by the wholes
    ],
)
def test_the_allocator_gives_the_whole_device_or_its_replicas_never_both(
    tmp_path: Path, claims: list[tuple[str, bool]], devices: int
) -> None:
    slices = tmp_path / "slices.yaml"
    slices.write_text(dump(driver_for("counters").slices(NODE), "yaml"))
    objects = tmp_path / "claims.yaml"
    objects.write_text(CLASS_AND_CLAIMS.split("---")[0] + "".join(_claim(n, w) for n, w in claims))
    result = CliRunner().invoke(app, ["allocate", str(slices), str(objects), "--node", NODE])
    if not devices:
        assert result.exit_code == 1 and "contended" in result.output
        return
    assert result.exit_code == 0, result.output
    allocated = [d for d in yaml.safe_load_all(result.output) if d and d.get("kind") == "ResourceClaim"]
    names = [r["device"] for c in allocated for r in c["status"]["allocation"]["devices"]["results"]]
    assert len(names) == len(set(names)) == devices


async def test_a_claim_on_the_whole_device_is_prepared_with_its_grant(node: Node) -> None:
    ref = node.add_claim(claim_object("whole", ["null-1"]))
    async with running(node, driver_for("counters")) as service, kubelet(service) as client:
        answer = (await client.prepare([ref])).claims[ref[2]]
        assert answer.error == "" and [d.device_name for d in answer.devices] == ["null-1"]
        [spec] = node.cdi_specs().values()
        assert [n["hostPath"] for n in spec["devices"][0]["containerEdits"]["deviceNodes"]] == ["/dev/null"]
