"""DRA's CEL environment (k8s.io/dynamic-resource-allocation/cel, compile.go): the `device`
variable and its object type, the fields each feature gate declares, ``includes()`` for
list-type attributes, the declared size limits the cost estimator walks, and the views
(``device.attributes["d"]``) the engine reads straight from a DeviceInput.

The generic engine (kubedevice.cel) knows none of this; it asks these declarations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...cel import engine
from ...cel.engine import CheckError, Closure, Compiled, Compiler, Declarations, View
from ...cel.library import INCLUDES, QTY
from ...cel.parser import Call, Ident, Lit, Node, Select
from ...cel.values import CelMap, Optional
from .device import attribute_domains, capacity_domains, domain_getter, memoised, value_getter

DEVICE = "kubernetes.DRADevice"
engine.OBJECT_TYPES.add(DEVICE)

# Declared limits of the DRA device type (k8s.io/api/resource/v1).
DRIVER_MAX, DOMAIN_MAX, ID_MAX, VALUE_MAX, ENTRIES_MAX = 63, 63, 32, 64, 32


@dataclass
class _Decl:
    """A node of the DRA declared-type tree the size estimator walks."""

    max_elements: int
    fields: dict[str, _Decl] | None = None
    key: _Decl | None = None
    elem: _Decl | None = None


def _device_decl() -> tuple[_Decl, _Decl]:
    attribute = _Decl(VALUE_MAX)
    inner = _Decl(ENTRIES_MAX, key=_Decl(ID_MAX), elem=attribute)
    capacity_inner = _Decl(ENTRIES_MAX, key=_Decl(ID_MAX), elem=_Decl(0))
    device = _Decl(
        0,
        fields={
            "driver": _Decl(DRIVER_MAX),
            "allowMultipleAllocations": _Decl(1),
            "attributes": _Decl(ENTRIES_MAX, key=_Decl(DOMAIN_MAX), elem=inner),
            "capacity": _Decl(ENTRIES_MAX, key=_Decl(DOMAIN_MAX), elem=capacity_inner),
        },
    )
    return device, attribute


_DEVICE, _ATTRIBUTE = _device_decl()

_DEVICE_GETTERS: dict[str, Callable[[Any], Any]] = {
    "attributes": memoised(attribute_domains),
    "capacity": memoised(capacity_domains),
    "allowMultipleAllocations": lambda d: bool(d.allow_multiple_allocations),
}


class DeviceEnvironment(Declarations):
    """What one DRA environment (stored or new expressions, per feature gates) declares."""

    def __init__(self, attribute_type: str, allow_multiple_allocations: bool, includes: bool) -> None:
        self.variables = {"device": DEVICE}
        self.attribute_type = attribute_type  # "any" before list-type attributes, "dyn" with them
        self.allow_multiple_allocations = allow_multiple_allocations
        self.overloads = {"includes": (INCLUDES,)} if includes else {}

    def select(self, compiler: Compiler, node: Select, operand: Compiled) -> Compiled:
        fields: dict[str, Any] = {
            "driver": "string",
            "attributes": ("map", "string", ("map", "string", self.attribute_type)),
            "capacity": ("map", "string", ("map", "string", QTY)),
        }
        if self.allow_multiple_allocations:
            fields["allowMultipleAllocations"] = "bool"
        if node.field not in fields:
            raise CheckError(f"undefined field '{node.field}'")
        name = node.field
        if node.test_only:
            return Compiled("bool", lambda _a: True, 0)
        if node.optional:  # every field of the device is set: optional.of(the field)
            plain = self.select(compiler, Select(node.start, node.end, node.operand, name), operand)
            pf = plain.fn
            return Compiled(("optional", plain.type), lambda a: Optional(True, pf(a)), plain.cost)
        if name == "driver":
            return Compiled(fields[name], lambda a: a["device"].driver, 1)
        getter = _DEVICE_GETTERS[name]
        return Compiled(fields[name], lambda a: getter(a["device"]), 1)

    def value(self, name: str) -> Closure:
        """The device as a whole (``dyn(device)``, ``device == device``): the map DeviceMatches
        hands cel-go (k8s.io/dynamic-resource-allocation/cel compile.go), whose four keys are
        there whatever the feature gates declare."""

        def whole(a: dict[str, Any]) -> CelMap:
            device = a[name]
            out = CelMap()
            out.put("driver", device.driver)
            out.put("allowMultipleAllocations", bool(device.allow_multiple_allocations))
            for field in ("attributes", "capacity"):
                out.put(field, _DEVICE_GETTERS[field](device))
            return out

        return whole

    def view(self, compiler: Compiler, node: Node) -> View | None:
        """(field, domain) when ``node`` is ``device.attributes["d"]`` or ``device.capacity.d``."""
        if isinstance(node, Call) and node.function == "_[_]" and node.target is None:
            container, key = node.args
            if not (isinstance(key, Lit) and key.kind == "string"):
                return None
        elif isinstance(node, Select) and not node.test_only and not node.optional:
            container, key = node.operand, Lit(0, 0, node.field, "string")
        else:
            return None
        if (
            isinstance(container, Select)
            and container.field in ("attributes", "capacity")
            and not container.test_only
            and not container.optional
            and isinstance(container.operand, Ident)
            and container.operand.name == "device"
            and not any("device" in scope for scope in compiler.scopes)
        ):
            return container.field, str(key.value)
        return None

    def read(self, view: View) -> Closure:
        field, domain = view
        get_domain = domain_getter(field, domain)
        return lambda a: get_domain(a["device"])

    def read_key(self, view: View, key: str) -> Closure:
        field, domain = view
        get = value_getter(field, domain, key)
        return lambda a: get(a["device"])

    def size(self, path: list[str]) -> tuple[int, int] | None:
        """The DRA sizeEstimator: walk the declared types along the access path."""
        if path[0] != "device":
            return None
        node = _DEVICE
        for name in path[1:]:
            if name in ("@items", "@values"):
                if node.elem is None:
                    return None
                node = node.elem
            elif name == "@keys":
                if node.key is None:
                    return None
                node = node.key
            elif node.fields is not None and name in node.fields:
                node = node.fields[name]
            elif node.elem is _ATTRIBUTE:
                node = _ATTRIBUTE
            else:
                return None
        return 0, node.max_elements
