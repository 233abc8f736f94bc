"""CEL's type() function and type denotations (int, string, list, net.IP, ...) as values, from
the standard library that every Kubernetes environment has."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .engine import TYPE_DENOTATIONS
from .library import VALUE_TYPES, register
from .values import type_name

TYPE = "type"
# Names that denote a type when not shadowed by a variable (of the Kubernetes types, only the
# opaque net.IP and net.CIDR are resolvable by name in the DRA environment).
DENOTATIONS = frozenset(
    {
        "int",
        "uint",
        "double",
        "bool",
        "string",
        "bytes",
        "list",
        "map",
        "null_type",
        "type",
        "optional_type",
        "net.IP",
        "net.CIDR",
    }
)


@dataclass(frozen=True, slots=True)
class TypeValue:
    """The value of type(x): equal to another type value of the same name."""

    CEL_TYPE: ClassVar[str] = TYPE
    name: str


def type_of(value: object) -> TypeValue:
    return TypeValue(type_name(value))


VALUE_TYPES[TYPE] = (TypeValue,)
register("type", False, ("A",), TYPE, type_of)
TYPE_DENOTATIONS.update({name: TypeValue(name) for name in DENOTATIONS})
