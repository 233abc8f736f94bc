"""`explain`: per device and selector, the verdict and the first failing clause of a miss."""

from __future__ import annotations

from typing import Any

from kubedevice.dra.explain import explain, render
from kubedevice.dra.models import DeviceClass, ResourceClaim, ResourceSlice, from_document

DRIVER = "gpu.example.com"


def make(doc: dict[str, Any]) -> Any:
    return from_document({"apiVersion": "resource.k8s.io/v1", **doc})


CLASS: DeviceClass = make(
    {
        "kind": "DeviceClass",
        "metadata": {"name": "big-gpu"},
        "spec": {
            "selectors": [
                {"cel": {"expression": f'device.driver == "{DRIVER}"'}},
                {
                    "cel": {
                        "expression": f'device.attributes["{DRIVER}"].model == "a100" && '
                        f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'
                    }
                },
            ]
        },
    }
)
SLICE: ResourceSlice = make(
    {
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "n",
            "pool": {"name": "n", "resourceSliceCount": 1},
            "devices": [
                {
                    "name": "gpu-0",
                    "attributes": {"model": {"string": "a100"}},
                    "capacity": {"memory": {"value": "80Gi"}},
                },
                {"name": "gpu-1", "attributes": {"model": {"string": "t4"}}, "capacity": {"memory": {"value": "16Gi"}}},
                {
                    "name": "gpu-2",
                    "attributes": {"model": {"string": "a100"}},
                    "capacity": {"memory": {"value": "20Gi"}},
                },
                {"name": "gpu-3", "capacity": {"memory": {"value": "80Gi"}}},
            ],
        },
    }
)


def test_verdicts_name_the_first_failing_clause() -> None:
    verdicts = {v.device: v for v in explain(CLASS, [SLICE])}
    assert [d for d, v in verdicts.items() if v.matched] == ["gpu-0"]
    t4 = verdicts["gpu-1"].selectors
    assert [s.matched for s in t4] == [True, False]
    assert t4[1].clause == f'device.attributes["{DRIVER}"].model == "a100"'
    small = verdicts["gpu-2"].selectors[1]
    assert small.clause == f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'
    assert small.error is None


def test_a_runtime_error_is_a_miss_that_carries_the_error() -> None:
    no_model = next(v for v in explain(CLASS, [SLICE]) if v.device == "gpu-3").selectors[1]
    assert not no_model.matched
    assert no_model.error is not None and no_model.error.startswith("CEL runtime error: ")
    assert "model" in no_model.error
    assert no_model.clause == f'device.attributes["{DRIVER}"].model == "a100"'


def test_claim_request_selectors_are_explained_too() -> None:
    claim: ResourceClaim = make(
        {
            "kind": "ResourceClaim",
            "metadata": {"name": "c"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "big-gpu",
                                "selectors": [
                                    {
                                        "cel": {
                                            "expression": f'device.capacity["{DRIVER}"].memory'
                                            '.isGreaterThan(quantity("64Gi"))'
                                        }
                                    }
                                ],
                            },
                        },
                        {
                            "name": "other",
                            "exactly": {"deviceClassName": "other", "selectors": [{"cel": {"expression": "false"}}]},
                        },
                    ]
                }
            },
        }
    )
    verdicts = explain(CLASS, [SLICE], claim)
    origins = [s.origin for s in verdicts[0].selectors]
    assert origins == ["class big-gpu selector #0", "class big-gpu selector #1", "request gpu selector #0"]
    assert [v.device for v in verdicts if v.matched] == ["gpu-0"]


def test_render_is_readable_text() -> None:
    text = render(explain(CLASS, [SLICE]))
    assert f"{DRIVER}/n/gpu-0: matches" in text
    assert f"{DRIVER}/n/gpu-1: does not match" in text
    assert "    first failing clause: " in text
    assert text.endswith("1 of 4 devices match\n")


def test_an_expression_over_the_runtime_cost_limit_is_an_error_not_a_hang() -> None:
    nested = "true"
    for var in "abcd":
        nested = f'device.attributes["{DRIVER}"].all({var}, {nested})'
    expensive: DeviceClass = make(
        {"kind": "DeviceClass", "metadata": {"name": "x"}, "spec": {"selectors": [{"cel": {"expression": nested}}]}}
    )
    many: ResourceSlice = make(
        {
            "kind": "ResourceSlice",
            "metadata": {"name": "s"},
            "spec": {
                "driver": DRIVER,
                "nodeName": "n",
                "pool": {"name": "n", "resourceSliceCount": 1},
                "devices": [{"name": "d", "attributes": {f"a{i}": {"int": i} for i in range(32)}}],
            },
        }
    )
    [verdict] = explain(expensive, [many])
    assert not verdict.matched
    error = verdict.selectors[0].error
    assert error is not None and "cost limit" in error
