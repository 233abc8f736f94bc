"""The JSON fields of every ``resource.k8s.io`` Go type, release by release: what the API server
of a release decodes in each API version it has, and so what its strict decoding refuses as an
unknown field (``?fieldValidation=Strict``, what ``kubectl apply`` asks for).

``apifields.json`` lists each field of each kind as ``[kind, apiVersion, path, Go type, first
release, first release without it or null]``, the path in the version's own shape (JSON names,
list and map levels left out: ``spec.devices.basic.attributes.int``), the type marked
``,omitempty`` where its JSON tag says so (what Go's encoder leaves out when zero). It is read from k8s.io/api's
``resource/*/types.go`` of each release (v0.31.14 to v0.37.2); tests/dra/test_apifields.py checks
it against them. One table decides, for every release and version, which fields exist: the
decoder's unknown fields, the fields ``dra convert`` reports lost in a target version, and what
the validation differential must generate.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from importlib import resources
from typing import Any

from ..releases import minor

Tree = dict[str, str]
"""Path -> Go type, for one kind in one version of one release."""

_TYPE_META = ("apiVersion", "kind")
_SCALARS = frozenset(
    {
        "string",
        "bool",
        "int64",
        "types.UID",
        "FullyQualifiedName",
        "AllocationConfigSource",
        "DeviceAllocationMode",
        "DeviceTaintEffect",
        "DeviceTolerationOperator",
    }
)
"""Go types of a value that is not a pointer, a struct or a container: its zero value is its absence."""


@functools.cache
def _rows() -> list[list[str | None]]:
    text = resources.files(__package__).joinpath("apifields.json").read_text()
    rows: list[list[str | None]] = json.loads(text)
    return rows


@functools.cache
def _tagged(kind: str, version: str, release: str) -> Tree:
    at = minor(release)
    return {
        str(path): str(go_type)
        for row_kind, row_version, path, go_type, since, until in _rows()
        if row_kind == kind and row_version == version
        if minor(str(since)) <= at and (until is None or at < minor(until))
    }


@functools.cache
def tree(kind: str, version: str, release: str) -> Tree:
    """Every field of ``kind`` in ``version`` as the release's Go types have it (empty: no such kind there)."""
    return {path: go_type.removesuffix(",omitempty") for path, go_type in _tagged(kind, version, release).items()}


@functools.cache
def omitempty(kind: str, version: str, release: str) -> frozenset[str]:
    """The fields of :func:`tree` whose JSON tag says ``omitempty``."""
    tagged = _tagged(kind, version, release)
    return frozenset(path for path, go_type in tagged.items() if go_type.endswith(",omitempty"))


def kinds(version: str, release: str) -> tuple[str, ...]:
    """The kinds the release's Go types define in ``version`` (served or not: that is ``--runtime-config``'s)."""
    found = {str(row[0]) for row in _rows() if row[1] == version and tree(str(row[0]), version, release)}
    return tuple(sorted(found))


def element(go_type: str) -> str:
    """``[]*X``, ``map[K]X``, ``*X`` -> ``X``."""
    return re.sub(r"^(\*|\[\]|map\[[^\]]+\])+", "", go_type)


def children(fields: Tree, path: str) -> Iterator[str]:
    """The JSON names of the fields directly below ``path`` ("" for the top)."""
    prefix = f"{path}." if path else ""
    for name in fields:
        if name.startswith(prefix) and "." not in name[len(prefix) :]:
            yield name[len(prefix) :]


def drop_zero_scalars(document: dict[str, Any], kind: str, version: str, release: str) -> None:
    """Remove the zero values (``""``, ``false``, ``0``) of fields that are plain scalars in this
    version's Go type: Go cannot tell them from absent, and the conversion to the internal type
    makes them unset where that type has a pointer (``nodeName: ""`` and ``allNodes: false`` of a
    v1beta1 slice, ``adminAccess: false`` of 1.31's v1alpha3 request; pkg/apis/resource/*/conversion.go)."""
    _zeros(document, "", tree(kind, version, release))


def _zeros(node: Any, path: str, fields: Tree) -> None:
    if not isinstance(node, dict):
        return
    for key in list(node):
        child = f"{path}.{key}" if path else key
        go_type = fields.get(child)
        if go_type is None:
            continue
        value = node[key]
        if go_type in _SCALARS and _is_zero(value, go_type):
            del node[key]
        elif any(True for _ in children(fields, child)):
            for item in _items(value, go_type):
                _zeros(item, child, fields)


def _is_zero(value: Any, go_type: str) -> bool:
    if go_type == "bool":
        return value is False
    if go_type == "int64":
        return type(value) is int and value == 0
    return value == "" and isinstance(value, str)


def _items(value: Any, go_type: str) -> list[Any]:
    """The structs a field holds: itself, a list's items or a map's values."""
    shape = go_type.lstrip("*")
    if shape.startswith("[]"):
        return list(value) if isinstance(value, list) else []
    if shape.startswith("map["):
        return list(value.values()) if isinstance(value, dict) else []
    return [value]


def encode(document: dict[str, Any], kind: str, version: str, release: str) -> None:
    """Make ``document`` what Go's ``encoding/json`` writes for the release's type, in place: a zero
    ``omitempty`` field left out (a nil pointer, an empty list or map, ``""``, ``0``, ``false``),
    a missing field without ``omitempty`` written as its zero (``""``, ``0``, ``false``, ``null``
    for a nil list, map or pointer, ``{}`` filled in for a struct). What the API server answers
    a GET with, so ``dra convert`` writes the same."""
    encoder = _Encoder(tree(kind, version, release), omitempty(kind, version, release), release)
    encoder.struct(document, "", top=True)


class _Encoder:
    def __init__(self, fields: Tree, omitted: frozenset[str], release: str) -> None:
        self.fields, self.omitted, self.release = fields, omitted, release

    def struct(self, node: Any, path: str, top: bool = False) -> None:
        if not isinstance(node, dict):
            return
        for name in children(self.fields, path):
            child = f"{path}.{name}" if path else name
            if top and name in ("metadata", "status"):
                continue  # ObjectMeta is written as the server fills it; a status is not converted
            go_type = self.fields[child]
            if name not in node:
                if child not in self.omitted:
                    node[name] = self.zero(go_type, child)
                continue
            if child in self.omitted and _empty(node[name], go_type):
                del node[name]
                continue
            if go_type == "metav1.ObjectMeta" and minor(self.release) < _OMITZERO_TIME and isinstance(node[name], dict):
                node[name].setdefault("creationTimestamp", None)  # a zero Time, before ``omitzero``
            for item in _items(node[name], go_type):
                self.struct(item, child)

    def zero(self, go_type: str, path: str) -> Any:
        if go_type.startswith(("*", "[]", "map[")) or go_type in _NULL_ZEROS:
            return None
        if go_type == "bool":
            return False
        if go_type in ("int64", "int32", "int"):
            return 0
        if go_type == "resource.Quantity":
            return "0"
        if any(True for _ in children(self.fields, path)):  # a struct: its own zero fields
            value: dict[str, Any] = {}
            self.struct(value, path)
            return value
        return ""


_OMITZERO_TIME = 34
"""From apimachinery v0.34 ObjectMeta's ``creationTimestamp`` is ``omitzero``: a template's
embedded metadata is written without it; before, as ``null``."""
_NULL_ZEROS = frozenset({"runtime.RawExtension", "metav1.Time"})
"""Value types whose zero Go writes as ``null`` (RawExtension's and Time's own MarshalJSON)."""


def _empty(value: Any, go_type: str) -> bool:
    """``omitempty``'s zero: nil for a pointer, no items for a list or map, the scalar zero."""
    if value is None:
        return True
    if go_type.startswith("*"):
        return False
    if go_type.startswith(("[]", "map[")):
        return not value
    if go_type == "bool":
        return value is False
    if go_type in ("int64", "int32", "int"):
        return type(value) is int and value == 0
    return value == "" and isinstance(value, str)


def strip_unknown(document: dict[str, Any], kind: str, version: str, release: str) -> list[tuple[str, Place]]:
    """Remove from ``document`` (in its own version's shape) every field the release's Go type
    lacks, and name each as strict decoding does: ``spec.devices[0].basic.x`` (map keys after a
    dot, as ``sigs.k8s.io/json``'s strict field stack writes them), in document order, with
    where it is (its keys and indexes, ``"[key]"`` last: the key itself is what is wrong).

    A value of the wrong JSON type is left for the type check, which names it.
    """
    walker = _Unknown(tree(kind, version, release))
    walker.walk(document, "", "", (), top=True)
    return walker.problems


Place = tuple[int | str, ...]
"""Keys and indexes into a document, as :data:`kubedevice.dra.models.Loc`."""


class _Unknown:
    """One walk of a document against a release's fields, collecting the unknown ones."""

    def __init__(self, fields: Tree) -> None:
        self.fields = fields
        self.problems: list[tuple[str, Place]] = []

    def walk(self, node: Any, path: str, where: str, place: Place, top: bool = False) -> None:
        if not isinstance(node, dict):
            return
        known = set(children(self.fields, path)) | (set(_TYPE_META) if top else set())
        for key in list(node):
            at = f"{where}.{key}" if where else key
            if key not in known:
                self.problems.append((at, (*place, key, "[key]")))
                del node[key]
                continue
            child = f"{path}.{key}" if path else key
            if any(True for _ in children(self.fields, child)):
                self.descend(node[key], child, at, (*place, key))

    def descend(self, value: Any, path: str, where: str, place: Place) -> None:
        """Into a struct, each item of a list of structs, or each value of a map of structs."""
        shape = self.fields[path].lstrip("*")
        if shape.startswith("[]") and isinstance(value, list):
            for i, item in enumerate(value):
                self.walk(item, path, f"{where}[{i}]", (*place, i))
        elif shape.startswith("map[") and isinstance(value, dict):
            for key, item in value.items():
                self.walk(item, path, f"{where}.{key}", (*place, key))
        elif not shape.startswith(("[]", "map[")):
            self.walk(value, path, where, place)
