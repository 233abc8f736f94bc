"""Identical parts of the listed ResourceSlices decoded once and shared.

A fleet's slices repeat themselves: every node of a kind publishes the same attribute values
(``model``, ``driverVersion``, the memory of its GPUs) and often the same devices. Decoding
makes one model per attribute, capacity and device, and making models was most of the time
``dra explain pod/NAME`` took on 1,000 nodes of 8 devices (``benchmarks/explain_offline.py``).
So before a slice is validated, each attribute and capacity that a plain value decides is
replaced by the model decoded for the first equal one, and then each device made of nothing
else by the first equal device; the slice's model takes those models as they are (pydantic
keeps an instance of the field's model without validating it again).

The models come out equal to those decoding each slice on its own gives, field for field
(the same input validated the same way; ``tests/dra/test_live.py``). What differs is that
equal parts are one object, so nothing may change a decoded model in place (nothing does:
:func:`~kubedevice.dra.strategy.drop_disabled_fields` copies) and whatever is worked out
from one of them (a device's CEL view, its selectors' verdicts) serves every slice that has it.
Anything else, or a part its model refuses, is left as it was, for the slice's validation to
judge and word as before.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from pydantic import BaseModel, ValidationError

from ..models import Device, DeviceAttribute, DeviceCapacity

_SCALARS = (str, int, bool)
_PLAIN_DEVICE = frozenset({"name", "attributes", "capacity"})
"""A device with only these fields is shared whole when its parts are."""


class Interner:
    """The models decoded so far, by the plain value that decided each; one per LIST decoded."""

    def __init__(self) -> None:
        self._known: dict[Hashable, BaseModel | None] = {}

    def slice_document(self, item: dict[str, Any]) -> dict[str, Any]:
        """The slice with its devices' shared parts in place (a new dict: ``item`` is kept as listed)."""
        spec = item.get("spec")
        if not isinstance(spec, dict) or not isinstance(spec.get("devices"), list):
            return item
        return {**item, "spec": {**spec, "devices": [self._device(d) for d in spec["devices"]]}}

    def _device(self, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw
        device = dict(raw)
        attributes, capacity = raw.get("attributes"), raw.get("capacity")
        if isinstance(attributes, dict):
            device["attributes"] = {name: self._attribute(value) for name, value in attributes.items()}
        if isinstance(capacity, dict):
            device["capacity"] = {name: self._capacity(value) for name, value in capacity.items()}
        return self._whole(device)

    def _attribute(self, raw: Any) -> Any:
        """``{"int": 5}`` and its kin: the key says which field, the value's type is in the key
        because ``True == 1`` and strict decoding tells them apart."""
        if not isinstance(raw, dict) or len(raw) != 1:
            return raw
        ((kind, value),) = raw.items()
        if type(value) not in _SCALARS:
            return raw
        return self._shared(("attribute", kind, type(value), value), DeviceAttribute, raw)

    def _capacity(self, raw: Any) -> Any:
        """``{"value": "16Gi"}`` (a capacity with a request policy is decoded in place)."""
        if not isinstance(raw, dict) or len(raw) != 1 or type(raw.get("value")) is not str:
            return raw
        return self._shared(("capacity", raw["value"]), DeviceCapacity, raw)

    def _whole(self, device: dict[str, Any]) -> Any:
        """The device itself, when it is a name and shared parts only; the key names the fields
        given, in order, since what was given is part of the model (``model_fields_set``)."""
        if not device.keys() <= _PLAIN_DEVICE or type(device.get("name")) is not str:
            return device
        parts = []
        for field, model in (("attributes", DeviceAttribute), ("capacity", DeviceCapacity)):
            values = device.get(field, {})
            if not isinstance(values, dict) or not all(type(v) is model for v in values.values()):
                return device
            parts.append(tuple((name, id(v)) for name, v in values.items()))  # shared: alive as long as self
        return self._shared(("device", device["name"], tuple(device), *parts), Device, device)

    def _shared(self, key: Hashable, model: type[BaseModel], raw: dict[str, Any]) -> Any:
        """The model decoded for ``key`` first, or ``raw`` as it was when its model refuses it."""
        if key in self._known:
            found = self._known[key]
        else:
            try:
                found = model.model_validate(raw, strict=True)
            except ValidationError:
                found = None
            self._known[key] = found
        return raw if found is None else found
