"""``explain`` names what keeps a matching device from a request: taints, capacity, gates.

Per device, beside the selector verdicts, as the allocator checks it on its own; and
``allocate``'s reason counts devices ruled out by counters, capacity and taints.
"""

from __future__ import annotations

import pytest

from kubedevice.dra.explain import explain, render
from kubedevice.dra.structured import DeviceID, Unallocatable, allocate

from .allocator_builders import (
    DRIVER_A,
    NODE_1,
    POOL_1,
    claim,
    consumes,
    counter_set,
    device,
    request,
    resource_class,
    resource_slice,
)

CLASS_A = resource_class()
TAINT = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}
SLICE = resource_slice(
    "slice-1",
    [
        device("plain"),
        device("tainted", taints=[TAINT]),
        device("small", capacity={"memory": {"value": "1Gi"}}),
        device("bound", bindingConditions=["Ready"]),
    ],
)


def test_explain_names_taints_and_capacity_per_request() -> None:
    c = claim(request("gpu", capacity={"requests": {"memory": "2Gi"}}))
    verdicts = {v.device: v for v in explain(CLASS_A, [SLICE], c)}
    assert verdicts["tainted"].ruled_out == (
        "request gpu: asks for capacity memory, which the device does not have",
        "request gpu: taint maintenance=true:NoSchedule is not tolerated",
    )
    assert verdicts["small"].ruled_out == (
        "request gpu: asks for more capacity than the device has or its requestPolicy allows",
    )
    text = render(list(verdicts.values()))
    assert "  ruled out for request gpu: taint maintenance=true:NoSchedule is not tolerated\n" in text
    assert text.endswith("4 of 4 devices match\n")


def test_a_toleration_or_a_gate_clears_the_taint() -> None:
    tolerated = claim(request("gpu", tolerations=[{"key": "maintenance", "operator": "Exists"}]))
    assert all(v.ruled_out == () for v in explain(CLASS_A, [SLICE], tolerated) if v.device == "tainted")
    plain = claim(request("gpu"))
    [tainted] = [v for v in explain(CLASS_A, [SLICE], plain, {"DRADeviceTaints": False}) if v.device == "tainted"]
    assert tainted.ruled_out == ()


def test_gates_that_are_off_are_named() -> None:
    off = {"DRADeviceBindingConditions": False}
    [bound] = [v for v in explain(CLASS_A, [SLICE], claim(request("gpu")), off) if v.device == "bound"]
    assert bound.ruled_out == ("request gpu: has binding conditions, but DRADeviceBindingConditions is off",)


def test_without_a_claim_only_selectors_count() -> None:
    assert all(v.ruled_out == () for v in explain(CLASS_A, [SLICE]))


def test_allocate_counts_each_check_that_rules_devices_out() -> None:
    slices = [
        resource_slice(
            "slice-1",
            [
                device("tainted", taints=[TAINT]),
                device("small", capacity={"memory": {"value": "1Gi"}}),
                device("counted", consumesCounters=[consumes("set-1", memory="4Gi")]),
                device("held", consumesCounters=[consumes("set-1", memory="4Gi")]),
            ],
            count=2,
        ),
        resource_slice("slice-2", None, count=2, counters=[counter_set("set-1", memory="4Gi")]),
    ]
    c = claim(request("gpu", capacity={"requests": {"memory": "2Gi"}}))
    held = [DeviceID(DRIVER_A, POOL_1, "held")]
    expected = r"\(ruled out: 1 in use; 3 by capacity\)"  # capacity is checked first, as upstream
    with pytest.raises(Unallocatable, match=expected):
        allocate([c], [CLASS_A], slices, NODE_1, held)
    roomy = claim(request("gpu"))
    with pytest.raises(Unallocatable, match=r"\(ruled out: 1 in use; 1 by counters; 1 by taints\)"):
        allocate([claim(request("gpu", count=2))], [CLASS_A], slices, NODE_1, held)
    [result] = allocate([roomy], [CLASS_A], slices, NODE_1, held)
    assert result.results[0].id.device == "small"
