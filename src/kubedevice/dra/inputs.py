"""How every ``kubedevice dra`` command reads its FILEs, and the one judgement of each object.

``validate`` reports every problem of every document; ``allocate``, ``explain`` and ``available``
read the same documents through the same :func:`judge` and refuse the first object the API server
would not store, with the line ``validate`` prints for it (one line, exit 2). Before, each read
files its own way: ``allocate`` allocated a claim with ``count: -1`` that ``validate`` refused, and
``available`` refused the Pods that ``allocate`` reads.

Which documents a command reads: every one of the ``resource.k8s.io`` group (and every document
without an ``apiVersion`` or ``kind``, which no command could tell apart) is judged; Pods and Nodes
(``v1``) are read by the commands that schedule pods; any other object (a ConfigMap, a Deployment
beside the claims in a manifest) is not DRA's to judge: every command ignores it, ``validate``
with a line saying so. A file without any document is a usage error, as ``kubectl apply`` says
"no objects passed to apply".

Every problem is placed at the line and column of the field it names (``file.yaml:12:16:``), found
in the YAML node tree: the ``v1`` paths of decoding and validation are followed through older
shapes (a v1beta1 request without ``exactly``, a device's fields under ``basic``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..boundedyaml import read_input
from ..errors import at, cannot_read, fail
from . import features, models
from .models import DecodeError, DRAObject, Loc, NodeObject, Pod
from .pods import PodInputError, decode_core
from .strategy import drop_disabled_fields
from .validation import validate

CORE_KINDS = ("Pod", "Node")


@dataclass(frozen=True)
class Document:
    """One document of a file (a ``List``'s item is one too), with its YAML node for places."""

    path: str
    node: yaml.Node
    data: Any

    @property
    def line(self) -> int:
        return int(self.node.start_mark.line) + 1

    def place(self, loc: Loc = ()) -> str:
        """``file:line:col`` of the deepest node along ``loc`` (the document's start for ``()``)."""
        found = _follow(self.node, loc)
        return at(self.path, found.start_mark.line + 1, found.start_mark.column + 1)


def documents(path: Path | str) -> list[Document]:
    """Every document of a file; exit 2 when it cannot be read or parsed, or holds none."""
    try:
        text = read_input(path)
    except (OSError, UnicodeDecodeError) as error:
        fail(cannot_read(path, error))
    try:
        found = [Document(str(path), node, data) for node, data in models.load_nodes(text, str(path))]
    except DecodeError as error:
        fail(error.first())
    if not found:
        fail(f"{path}: no objects in the file (it is empty, or holds only comments and empty documents)")
    return found


@dataclass(frozen=True)
class Verdict:
    """The object as decoded (None if it could not be) and every problem, each one line with its place."""

    obj: DRAObject | None
    problems: list[str] = field(default_factory=list)


def judge(
    document: Document, release: str, gates: Mapping[str, bool], api: features.APIConfig | None = None
) -> Verdict:
    """What the API server of ``release`` says of the document: decoding, whether it serves the kind at
    that version (``api``: ``--runtime-config``), validation; each problem placed at its field."""
    try:
        obj = models.from_document(document.data, "", release)
    except DecodeError as error:
        return Verdict(None, [f"{document.place(loc)}: {m}" for m, loc in zip(error.messages, error.locs, strict=True)])
    if unserved := features.not_served(obj.kind, obj.api_version, release, gates, api):
        return Verdict(None, [f"{document.place(('apiVersion',))}: {unserved}"])
    return Verdict(
        obj,
        [
            f"{document.place(field_loc(error.field))}: {describe(obj)} is invalid: {error}"
            for error in validate(obj, gates, release)
        ],
    )


def not_judged(document: Document) -> str:
    """``validate``'s line for an object of another API group, which no command judges."""
    data = document.data
    what = f"{data.get('apiVersion')} {data.get('kind')}"
    return f"{document.place(('apiVersion',))}: {what} is not a {models.GROUP} object: not checked"


def describe(obj: DRAObject) -> str:
    """``ResourceClaim "default/pair"``, as validation's messages name an object."""
    meta = obj.metadata
    name = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name or meta.generate_name
    return f'{obj.kind} "{name}"'


@dataclass(frozen=True)
class Inputs:
    """What the FILEs hold for a command, in input order: the DRA objects as the release's API server
    stores them (fields of disabled features dropped), each with its ``file:line``, Pods and Nodes."""

    placed: list[tuple[str, DRAObject]]
    pods: list[Pod]
    nodes: list[NodeObject]

    @property
    def objects(self) -> list[DRAObject]:
        return [obj for _, obj in self.placed]


def read(paths: Sequence[Path | str], release: str, gates: Mapping[str, bool], *, core: bool = False) -> Inputs:
    """Every document of ``paths`` judged as ``validate`` judges it; the first refused object, a Pod
    or Node that cannot be read (``core``: the command reads them), exits 2 with its line."""
    placed: list[tuple[str, DRAObject]] = []
    pods: list[Pod] = []
    nodes: list[NodeObject] = []
    for path in paths:
        for document in documents(path):
            kind = category(document.data)
            if kind == "dra":
                placed.append((f"{document.path}:{document.line}", _accepted(document, release, gates)))
            elif kind in CORE_KINDS and core:
                item = _core(document)
                (pods if isinstance(item, Pod) else nodes).append(item)  # type: ignore[arg-type]
    return Inputs([(where, drop_disabled_fields(obj, gates, release)) for where, obj in placed], pods, nodes)


def read_one(path: Path | str, release: str, gates: Mapping[str, bool]) -> list[DRAObject]:
    """The DRA objects of one file, judged and as stored (:func:`read`)."""
    return read([path], release, gates).objects


def category(data: Any) -> str:
    """``dra`` for a document :func:`judge` decides, the kind for a core Pod or Node, else ``other``."""
    if not isinstance(data, dict) or not data.get("apiVersion") or not data.get("kind"):
        return "dra"
    api_version, kind = data["apiVersion"], data["kind"]
    if not isinstance(api_version, str) or not isinstance(kind, str) or api_version.startswith(f"{models.GROUP}/"):
        return "dra"  # not an object of any API: refused as validate refuses it
    return kind if api_version == "v1" and kind in CORE_KINDS else "other"


def _accepted(document: Document, release: str, gates: Mapping[str, bool]) -> DRAObject:
    verdict = judge(document, release, gates)
    if verdict.problems:
        more = len(verdict.problems) - 1
        fail(verdict.problems[0] + (f" (and {more} more: kubedevice dra validate lists them)" if more else ""))
    assert verdict.obj is not None  # no problem: decoded
    return verdict.obj


def _core(document: Document) -> Pod | NodeObject:
    try:
        item = decode_core(document.data)
    except PodInputError as error:
        fail(f"{document.place(error.loc)}: {error}")
    assert item is not None  # category() picked a Pod or Node
    return item


_PART = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")


def field_loc(path: str) -> Loc:
    """``spec.devices[0].attributes[example.com/n]`` -> ``("spec", "devices", 0, "attributes", "example.com/n")``."""
    loc: list[int | str] = []
    for name, key in _PART.findall(path):
        loc.append(name if name else int(key) if key.isdigit() else key)
    return tuple(loc)


def _follow(node: yaml.Node, loc: Loc) -> yaml.Node:
    """The deepest node along a ``v1`` location: older shapes have no ``exactly`` and keep a device's
    fields under ``basic``; ``"[key]"`` after a key means the key's own node."""
    found = node
    for i, part in enumerate(loc):
        if part == "[key]":
            continue
        if isinstance(found, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(found.value):
                break
            found = found.value[part]
            continue
        if not isinstance(found, yaml.MappingNode):
            break
        pair = _pair(found, part)
        if pair is None and (basic := _pair(found, "basic")) is not None and isinstance(basic[1], yaml.MappingNode):
            pair = _pair(basic[1], part)
        if pair is None:
            if part == "exactly":
                continue
            break
        found = pair[0] if loc[i + 1 : i + 2] == ("[key]",) else pair[1]
    return found


def _pair(mapping: yaml.MappingNode, key: int | str) -> tuple[yaml.Node, yaml.Node] | None:
    return next(
        ((k, v) for k, v in mapping.value if isinstance(k, yaml.ScalarNode) and k.value == str(key)),
        None,
    )
