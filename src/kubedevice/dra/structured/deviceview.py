"""A ResourceSlice device as CEL sees it (``device.driver/attributes/capacity``), as
``selectorsMatch`` builds it, made for the search to read little of it.

Most selectors read none or one attribute (a class's ``device.driver == "..."``; a constraint
reads its one), yet building every attribute's one-key form (``{"int": 5}``) for every device
the search met, and then checking each converts, was about a tenth of the instructions of
``benchmarks/allocate_vs_go.py``'s ``matchAttribute`` row (callgrind). So the view's attributes
are a mapping over the decoded models that converts an attribute when it is read, and the check
``DeviceMatches`` makes before any selector (every attribute converts, else each selector fails)
is answered from the models without making the dicts (``tests/dra/test_deviceview.py`` holds it
to the view converted up front).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .. import cel
from ..cel.device import SAFE_KINDS, converted, version_converts
from ..models import VALUE_KEYS, Device, DeviceAttribute


class Attributes(Mapping[str, Mapping[str, Any]]):
    """A device's attributes in the one-key form, each converted on first read and kept."""

    __slots__ = ("_models", "_values")

    def __init__(self, models: Mapping[str, DeviceAttribute]) -> None:
        self._models = models
        self._values: dict[str, Mapping[str, Any]] = {}

    def __getitem__(self, name: str) -> Mapping[str, Any]:
        value = self._values.get(name)
        if value is None:
            value = self._values[name] = self._models[name].as_value()
        return value

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self._models else default

    def __contains__(self, name: object) -> bool:
        return name in self._models

    def __iter__(self) -> Iterator[str]:
        return iter(self._models)

    def __len__(self) -> int:
        return len(self._models)


def device_input(driver: str, device: Device) -> cel.DeviceInput:
    """The CEL view of a ResourceSlice device; its attributes are read only as selectors need them."""
    view = cel.DeviceInput(
        driver=driver,
        attributes=Attributes(device.attributes),
        capacity={name: capacity.value for name, capacity in device.capacity.items()},
        allow_multiple_allocations=device.allow_multiple_allocations,
    )
    if all_convert(device.attributes):
        converted(view)
    return view


_SAFE_FIELDS = frozenset(name for name, key in VALUE_KEYS.items() if key in SAFE_KINDS)


def all_convert(attributes: Mapping[str, DeviceAttribute]) -> bool:
    """Every attribute sets one value and it converts (as :func:`..cel.device.all_convert`
    judges the one-key forms), read from the models' fields without making those forms: it runs
    for every device the search meets, and was half the cost of the view (callgrind). False for
    an attribute with no value or several: the CEL engine's own check then finds the error."""
    for attribute in attributes.values():
        given = attribute.__pydantic_fields_set__
        if len(given) != 1:
            return False
        for name in given:
            value = attribute.__dict__[name]
        if value is None:
            return False
        if name not in _SAFE_FIELDS and (name != "version" or not version_converts(value)):
            return False
    return True
