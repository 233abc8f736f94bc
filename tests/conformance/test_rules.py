"""The pure verdicts on plugin messages, case by case, and the latency thresholds."""

from __future__ import annotations

import pytest

from kubedevice.api import pb
from kubedevice.conformance import rules
from kubedevice.conformance.checks import REREGISTER, verdict
from kubedevice.conformance.model import Status
from kubedevice.conformance.runner import CheckOptions, _latency


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("nvidia.com/gpu=0", True),
        ("vendor.example.com/class-x=dev:1.a", True),
        ("nvidia.com/gpu=all", True),
        ("gpu0", False),  # bare device name
        ("nvidia.com=gpu0", False),  # no class
        ("nvidia.com/gpu/extra=0", False),
        ("nvidia.com/gpu=-0", False),  # device names start with a letter or digit
        ("1vendor.com/gpu=0", False),  # vendors start with a letter
        ("nvidia.com/gpu=", False),
    ],
)
def test_qualified_cdi_names(name: str, ok: bool) -> None:
    assert (rules.qualified_cdi_name_problems(name) == []) is ok


@pytest.mark.parametrize(
    ("endpoint", "ok"),
    [("dp.sock", True), ("sub/dp.sock", True), ("", False), ("/var/lib/kubelet/dp.sock", False), ("../dp.sock", False)],
)
def test_endpoint(endpoint: str, ok: bool) -> None:
    assert (rules.endpoint_problems(endpoint) == []) is ok


def test_ids_report_every_bad_id_and_each_duplicate_once() -> None:
    devices = [pb.Device(ID=i) for i in ("a", "", "x" * 64, "b", "b", "b")]
    problems = rules.id_problems(devices)
    assert problems[0] == "device ID is empty"
    assert "longer than 63" in problems[1]
    assert problems[2] == "duplicate device IDs: b"


def test_preferred_clauses_are_reported_separately() -> None:
    request = pb.ContainerPreferredAllocationRequest(
        available_deviceIDs=["a", "b", "c"], must_include_deviceIDs=["c"], allocation_size=2
    )
    assert rules.preferred_problems(request, ["c", "a"]) == {
        "available": [],
        "must_include": [],
        "size": [],
        "short": [],
    }
    found = rules.preferred_problems(request, ["a", "a", "z"])
    assert found["available"] == ["IDs not offered as available: z", "repeated IDs: a"]
    assert found["must_include"] == ["must_include IDs left out: c"]
    assert found["size"] == [] and found["short"] == []  # {"a", "z"}: two distinct IDs
    assert rules.preferred_problems(request, ["c"])["short"] == ["1 IDs for allocation_size 2"]
    assert rules.preferred_problems(request, ["a", "b", "c"])["size"] == ["3 IDs for allocation_size 2"]


def test_allocate_rules_name_the_offending_values() -> None:
    response = pb.ContainerAllocateResponse(
        envs={"OK_1": "x", "NOT-OK": "y"},
        devices=[pb.DeviceSpec(host_path="/dev/a", container_path="dev/a", permissions="rwz")],
        mounts=[pb.Mount(host_path="rel", container_path="/m")],
        annotations={"cdi.k8s.io/a": "v.com/c=ok,bad", "other": "bad"},
    )
    assert rules.env_problems([response]) == ["invalid environment variable names: NOT-OK"]
    assert rules.path_problems([response]) == [
        "device container path 'dev/a' is not absolute",
        "mount host path 'rel' is not absolute",
    ]
    assert rules.permission_problems([response]) == ["device '/dev/a' has permissions 'rwz', not letters from 'rwm'"]
    assert rules.cdi_problems([response]) == ["CDI name 'bad' is not fully qualified (vendor.com/class=name)"]


def test_health_and_topology() -> None:
    devices = [pb.Device(ID="a", health="Healthy"), pb.Device(ID="b", health="OK")]
    devices[1].topology.nodes.extend([pb.NUMANode(ID=1), pb.NUMANode(ID=1)])
    assert rules.health_problems(devices) == ["device 'b' has health 'OK', not one of Healthy, Unhealthy"]
    assert rules.topology_problems(devices) == ["device 'b' repeats a NUMA node in [1, 1]"]


LATENCIES = [(0.2, Status.PASS), (0.2, Status.PASS), (0.3, Status.FAIL), (6.0, Status.FAIL), (12.0, Status.FAIL)]


@pytest.mark.parametrize(("took", "status"), [*LATENCIES, (None, Status.FAIL)])
def test_restart_latency_thresholds(took: float | None, status: Status) -> None:
    result = _latency(REREGISTER, "r", None if took is None else 100.0 + took, 100.0, CheckOptions())
    assert result.status is status
    assert result.value == (None if took is None else pytest.approx(took))


def test_a_caller_judges_re_registration_against_its_own_bound() -> None:
    """What the project's tests of the other verdicts use, so that a loaded machine cannot fail them."""
    options = CheckOptions(reregister_pass=5.0)
    assert _latency(REREGISTER, "r", 101.0, 100.0, options).status is Status.PASS
    assert _latency(REREGISTER, "r", 106.0, 100.0, options).status is Status.FAIL
    assert "pass <= 5 s" in _latency(REREGISTER, "r", 101.0, 100.0, options).detail


def test_verdict_lists_a_few_problems_and_counts_the_rest() -> None:
    result = verdict(REREGISTER, [f"p{i}" for i in range(8)], "r", "fine")
    assert result.status is Status.FAIL
    assert result.detail == "p0; p1; p2; p3; p4 (and 3 more)"
    assert verdict(REREGISTER, [], "r", "fine").detail == "fine"
