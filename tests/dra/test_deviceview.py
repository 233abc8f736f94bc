"""The allocator's CEL view of a device (``structured.deviceview``), whose attributes are converted
when read and whose check that all convert is made from the models, must answer every selector
as the view with every attribute converted up front does: the same verdict, the same error."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from kubedevice.dra import cel
from kubedevice.dra.models import Device
from kubedevice.dra.structured.deviceview import device_input

DRIVER = "gpu.example.com"
ATTRIBUTES: dict[str, dict[str, Any]] = {
    "plain": {"model": {"string": "a100"}, "index": {"int": 3}, "healthy": {"bool": True}},
    "version": {"model": {"string": "a100"}, "driverVersion": {"version": "1.2.3"}},
    "bad version": {"model": {"string": "a100"}, "driverVersion": {"version": "1.2"}},
    "lists": {"model": {"string": "a100"}, "numa": {"ints": [0, 1]}, "versions": {"versions": ["1.0.0"]}},
    "bad versions": {"model": {"string": "a100"}, "versions": {"versions": ["1.0.0", "x"]}},
    "two values": {"model": {"string": "a100", "int": 1}},
    "no value": {"model": {}},
    "other domain": {"model": {"string": "a100"}, "other.example.com/model": {"string": "h100"}},
    "none": {},
}
SELECTORS = [
    f'device.driver == "{DRIVER}"',
    f'device.attributes["{DRIVER}"].model == "a100"',
    f'device.attributes["{DRIVER}"].index > 2',
    f'"driverVersion" in device.attributes["{DRIVER}"]',
    f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("1.0.0"))',
    f'device.attributes["{DRIVER}"].exists(name, name.startsWith("m"))',
    'device.attributes["other.example.com"].model == "h100"',
    f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0',
]


def verdict(selector: cel.Selector, view: cel.DeviceInput) -> bool | str:
    try:
        return selector.matches(view)
    except cel.EvalError as error:
        return f"error: {error.message}"


@pytest.mark.parametrize(("kind", "expression"), list(itertools.product(ATTRIBUTES, SELECTORS)))
def test_the_lazy_view_answers_as_the_converted_one(kind: str, expression: str) -> None:
    device = Device.model_validate(
        {"name": "gpu-0", "attributes": ATTRIBUTES[kind], "capacity": {"memory": {"value": "80Gi"}}}, strict=True
    )
    converted = cel.DeviceInput(
        driver=DRIVER,
        attributes={name: attribute.as_value() for name, attribute in device.attributes.items()},
        capacity={name: capacity.value for name, capacity in device.capacity.items()},
    )
    selector = cel.compile_selector(expression)
    assert verdict(selector, device_input(DRIVER, device)) == verdict(selector, converted)
