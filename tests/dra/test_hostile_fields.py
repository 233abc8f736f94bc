"""Every field of every DRA kind the tools read, fed hostile values of its type (issue #27).

The fields are not listed here: the test walks the models of DeviceClass, ResourceSlice,
ResourceClaim, ResourceClaimTemplate, DeviceTaintRule and the Pod as the tools read it
(``model_fields``, and the type hints of the small structs kept as TypedDicts), so a field added to
a model tomorrow is fed the same values without editing this file; a new struct needs a sample that
uses it (the first test says which). The samples are validgen's valid objects, the ones the
validation differential posts to real API servers, plus a few shapes validgen draws only sometimes.

Each field gets, per its type: negative, zero, past int64 (both ways) and uint64, huge, a float, a
string and a bool for an integer; a number, a bool, a list and a map for a string; the wrong JSON
type for lists, maps and structs; empty values and ``null``. For every value:

- ``dra validate`` exits 0 or 1 (never a traceback) and places every problem as ``file:line:col:``;
  what Go's decoder cannot store in the Go type (a number past int64, a fraction or a string for an
  ``int64``, a number for a string, ...) is refused;
- ``dra allocate`` (and ``dra available``, for the kinds it reads) judge the object as ``validate``
  does: refused exactly when ``validate`` refuses it, with ``validate``'s first line, exit 2;
- a Pod, which only ``allocate`` and ``explain --pod`` read and nothing validates, is read or refused
  with one line placed inside the changed entry, exit 2.
"""

from __future__ import annotations

import copy
import random
import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from pydantic import BaseModel
from typer.testing import CliRunner
from typing_extensions import is_typeddict

from kubedevice.dra import models
from kubedevice.dra.cli import app
from tests.dra import validgen

Loc = tuple[int | str, ...]
RELEASE = "1.37"  # the tools' default

KINDS: dict[str, type[BaseModel]] = {
    "DeviceClass": models.DeviceClass,
    "ResourceSlice": models.ResourceSlice,
    "ResourceClaim": models.ResourceClaim,
    "ResourceClaimTemplate": models.ResourceClaimTemplate,
    "DeviceTaintRule": models.DeviceTaintRule,
    "Pod": models.Pod,
}
_SELECTOR = {
    "nodeSelectorTerms": [
        {
            "matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}],
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node"]}],
        }
    ]
}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "default", "uid": "u"},
    "spec": {
        "nodeName": "",
        "containers": [
            {"name": "c", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}, "restartPolicy": "Always"}
        ],
        "initContainers": [{"name": "i"}],
        "resourceClaims": [
            {"name": "gpu", "resourceClaimName": "pair"},
            {"name": "t", "resourceClaimTemplateName": "tpl"},
        ],
    },
    "status": {"resourceClaimStatuses": [{"name": "t", "resourceClaimName": "p-t"}]},
}


def samples() -> list[dict[str, Any]]:
    """Valid objects using every struct: validgen's (two seeds, which differ in slice shape), a slice
    selecting nodes per device, a taint rule, a claim with a status and derived attributes, a
    device with node-allocatable overhead, a slice of counter sets only, a Pod."""
    out = [validgen.BUILDERS[kind](random.Random(seed), RELEASE) for kind in KINDS if kind != "Pod" for seed in (0, 1)]
    per_device = validgen.resource_slice(random.Random(0), RELEASE)
    del per_device["spec"]["nodeName"]
    per_device["spec"]["perDeviceNodeSelection"] = True
    per_device["spec"]["devices"][0]["nodeSelector"] = copy.deepcopy(_SELECTOR)
    selected = validgen.resource_slice(random.Random(0), RELEASE)
    del selected["spec"]["nodeName"]
    selected["spec"]["nodeSelector"] = copy.deepcopy(_SELECTOR)
    rule = validgen.device_taint_rule(random.Random(0), RELEASE)
    condition = {"type": "EvictionInProgress", "status": "True", "observedGeneration": 1, "reason": "r", "message": "m"}
    rule["status"] = {"conditions": [{**condition, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    claim = validgen.resource_claim(random.Random(0), RELEASE)
    claim["status"] = validgen.claim_status(5)
    claim["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] = {"mem": "1Gi"}
    request = next(r for r in claim["spec"]["devices"]["requests"] if "exactly" in r)
    request["exactly"]["derivedAttributes"] = [{"name": "n", "expression": "device.driver"}]
    overhead = validgen.resource_slice(random.Random(0), RELEASE)
    overhead["spec"]["devices"][0]["nodeAllocatableResources"]["memory"]["overhead"] = {"perPod": "1"}
    pool = validgen.resource_slice(random.Random(0), RELEASE)
    del pool["spec"]["devices"]
    pool["spec"]["sharedCounters"] = [{"name": "cs", "counters": {"mem": {"value": "10Gi"}}}]
    return [*out, per_device, selected, rule, claim, overhead, pool, copy.deepcopy(POD)]


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    optional = False
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            optional = True
            if len(args) != 1:
                return tuple(args), optional
            annotation = args[0]
        else:
            return annotation, optional


def _struct(tp: Any) -> bool:
    return isinstance(tp, type) and (issubclass(tp, BaseModel) or is_typeddict(tp))


def fields(struct: Any) -> dict[str, Any]:
    """JSON key -> annotation, for a model or a TypedDict."""
    if is_typeddict(struct):
        return typing.get_type_hints(struct, include_extras=True)
    return {info.alias or name: info.annotation for name, info in struct.model_fields.items()}


def _element(annotation: Any) -> Any:
    """A list's item or a map's value type, the type itself otherwise."""
    tp, _ = _unwrap(annotation)
    while typing.get_origin(tp) in (list, dict):
        tp, _ = _unwrap(typing.get_args(tp)[-1])
    return tp


def reachable() -> set[Any]:
    seen: set[Any] = set()
    todo = list(KINDS.values())
    while todo:
        struct = todo.pop()
        if struct in seen:
            continue
        seen.add(struct)
        todo += [tp for tp in map(_element, fields(struct).values()) if _struct(tp)]
    return seen


def _instances(data: Any, struct: Any, loc: Loc) -> Iterator[tuple[Any, Loc]]:
    if not isinstance(data, dict):
        return
    yield struct, loc
    for key, annotation in fields(struct).items():
        inner = _element(annotation)
        if key not in data or not _struct(inner):
            continue
        value, tp = data[key], _unwrap(annotation)[0]
        if typing.get_origin(tp) is list and isinstance(value, list):
            for i, item in enumerate(value):
                yield from _instances(item, inner, (*loc, key, i))
        elif typing.get_origin(tp) is dict and isinstance(value, dict):
            for name, item in value.items():
                yield from _instances(item, inner, (*loc, key, name))
        else:
            yield from _instances(value, inner, (*loc, key))


def instances() -> dict[Any, tuple[int, Loc]]:
    found: dict[Any, tuple[int, Loc]] = {}
    for number, sample in enumerate(samples()):
        for struct, loc in _instances(sample, KINDS[sample["kind"]], ()):
            found.setdefault(struct, (number, loc))
    return found


HUGE = 10**30
LONG = "x" * 70_000
# Per type, (value, refused whatever the field).
VALUES: dict[str, list[tuple[Any, bool]]] = {
    "int": [(-1, False), (0, False), (2**63, True), (-(2**63) - 1, True), (2**64, True), (HUGE, True),
            (1.5, True), (2.0, True), ("3", True), (True, True), (None, False), ([], True), ({}, True)],
    "str": [("", False), (LONG, False), (5, True), (2.5, True), (True, True), (None, False), ([], True),
            ({}, True)],
    "bool": [("true", True), (1, True), (None, False), ([], True)],
    "list": [([], False), ([None], False), ("x", True), (5, True), (None, False), ({}, True)],
    "map": [({}, False), ({"": None}, False), ("x", True), (None, False), ([], True)],
    "struct": [(None, False), ({}, False), ([], True), ("x", True), (5, True)],
    "any": [(None, False), ([], False), ("x", False), (HUGE, False)],
    # resource.Quantity.UnmarshalJSON takes a JSON number too; what ParseQuantity cannot read is refused
    "quantity": [("1Gi", False), (5, False), (2.5, False), ("", True), ("lots", True), (LONG, True), (True, True),
                 ([], True), (None, False)],
}  # fmt: skip


def kind_of(annotation: Any) -> str:
    if models.Quantity in (annotation, *typing.get_args(annotation)):
        return "quantity"
    tp, _ = _unwrap(annotation)
    origin = typing.get_origin(tp)
    if origin is list:
        return "list"
    if origin is dict:
        return "map"
    if origin is Literal or tp is str:
        return "str"
    if tp is bool:
        return "bool"
    if tp is int:
        return "int"
    if _struct(tp):
        return "struct"
    if isinstance(tp, tuple):  # str | int (a quantity of a Pod's resources)
        return "any"
    assert tp is Any, f"a field type this test does not know: {tp}"
    return "any"


def cases() -> list[Any]:
    out = []
    for struct, (number, loc) in sorted(instances().items(), key=lambda item: (item[1], item[0].__name__)):
        for key, annotation in fields(struct).items():
            kind = kind_of(annotation)
            for i, (value, refused) in enumerate(VALUES[kind]):
                name = f"{KINDS_OF[number]}.{'.'.join(map(str, loc))}.{key}".replace("..", ".")
                out.append(pytest.param(number, (*loc, key), value, refused, id=f"{name}-{kind}{i}"))
    return out


KINDS_OF = [sample["kind"] for sample in samples()]
runner = CliRunner()


def test_every_struct_has_a_sample() -> None:
    missing = sorted(s.__name__ for s in reachable() - set(instances()))
    assert not missing, f"add a sample using {missing}"


def _set(data: Any, loc: Loc, value: Any) -> None:
    for part in loc[:-1]:
        data = data[part]
    data[loc[-1]] = value


def _dump(data: Any) -> str:
    return yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), width=1 << 30, allow_unicode=True)


COMPANIONS = [
    validgen.device_class(random.Random(5), RELEASE),
    validgen.resource_slice(random.Random(5), RELEASE),
    {**validgen.resource_claim(random.Random(5), RELEASE), "metadata": {"name": "pair", "namespace": "default"}},
]
PLACED = re.compile(r"^(?P<file>.*?):(?P<line>\d+):(?P<col>\d+): ")


def _node(root: yaml.Node, loc: Loc) -> tuple[yaml.Node, yaml.Node]:
    key_node, node = root, root
    for part in loc:
        if isinstance(node, yaml.SequenceNode):
            key_node = node = node.value[int(part)]
        else:
            key_node, node = next((k, v) for k, v in node.value if k.value == str(part))
    return key_node, node


def _inside(message: str, text: str, loc: Loc) -> bool:
    """Whether the ``file:line:col`` that starts ``message`` is inside the entry at ``loc``."""
    match = PLACED.match(message)
    assert match, message
    key_node, value_node = _node(yaml.compose(text, Loader=yaml.SafeLoader), loc)
    spot = (int(match["line"]) - 1, int(match["col"]) - 1)
    start, end = key_node.start_mark, value_node.end_mark
    return (start.line, start.column) <= spot <= (end.line, end.column)


@pytest.mark.parametrize(("sample", "loc", "value", "refused"), cases())
def test_hostile_value(tmp_path: Path, sample: int, loc: Loc, value: Any, refused: bool) -> None:
    data = samples()[sample]
    _set(data, loc, value)
    text = _dump(data)
    path = tmp_path / "object.yaml"
    path.write_text(text)
    others = tmp_path / "others.yaml"
    others.write_text(yaml.safe_dump_all(COMPANIONS))
    allocate = runner.invoke(app, ["allocate", str(path), str(others), "--node", "node"])
    assert allocate.exception is None or isinstance(allocate.exception, SystemExit), allocate.exception
    placed = allocate.stderr.startswith(f"kubedevice: {path}:")
    if data["kind"] == "Pod":  # read, not validated: refused with one line inside the changed entry, or read
        if placed:
            assert allocate.exit_code == 2 and allocate.stderr.count("\n") == 1, allocate.stderr
            assert _inside(allocate.stderr.removeprefix("kubedevice: "), text, loc), allocate.stderr
        return
    check = runner.invoke(app, ["validate", str(path)])
    assert check.exception is None or isinstance(check.exception, SystemExit), check.exception
    assert check.exit_code in (0, 1), check.output
    problems = [line for line in check.stdout.splitlines()[:-1] if not line.startswith(" | ")]
    assert all(line.startswith(f"{path}:") and PLACED.match(line) for line in problems), check.stdout
    if refused:
        assert check.exit_code == 1, f"{value!r:.60} at {loc} was accepted"
    tools = [allocate]
    if data["kind"] in ("ResourceSlice", "ResourceClaim"):
        tools.append(runner.invoke(app, ["available", str(path), str(others)]))
    for tool in tools:
        assert tool.exception is None or isinstance(tool.exception, SystemExit), tool.exception
        if check.exit_code == 1:  # refused by validate: refused by the tool, with validate's first line
            assert tool.exit_code == 2 and tool.stderr.count("\n") == 1, tool.stderr
            assert tool.stderr.startswith(f"kubedevice: {problems[0]}"), (tool.stderr, check.stdout)
        else:
            assert not tool.stderr.startswith(f"kubedevice: {path}:"), tool.stderr


def int64_fields(struct: Any, prefix: Loc = ()) -> set[Loc]:
    """Where a kind has integers (each an ``int64`` in Go): list items and map values by ``*``."""
    out: set[Loc] = set()
    for key, annotation in fields(struct).items():
        tp, inner = _unwrap(annotation)[0], _element(annotation)
        path = (*prefix, key, "*") if typing.get_origin(tp) is dict else (*prefix, key)
        if inner is int:
            out.add((*prefix, key))
        elif _struct(inner):
            out |= int64_fields(inner, path)
    return out


def past_int64(data: Any, struct: Any, prefix: Loc = ()) -> Iterator[Loc]:
    """Where ``data`` holds an integer Go's decoder cannot store in an ``int64``."""
    if not isinstance(data, dict):
        return
    for key, annotation in fields(struct).items():
        if key not in data:
            continue
        tp, inner = _unwrap(annotation)[0], _element(annotation)
        value = data[key]
        if typing.get_origin(tp) is dict and isinstance(value, dict):
            items, path = list(value.values()), (*prefix, key, "*")
        else:
            items, path = (value if isinstance(value, list) else [value]), (*prefix, key)
        for item in items:
            if inner is int and isinstance(item, int) and not isinstance(item, bool) and not -(2**63) <= item < 2**63:
                yield (*prefix, key)
            elif _struct(inner):
                yield from past_int64(item, inner, path)


def _v1_devices(doc: dict[str, Any]) -> dict[str, Any]:
    """A slice's devices in the v1 shape the models have: v1beta1's and v1alpha3's ``basic`` lifted
    (validgen writes each object in one of the versions its release has)."""
    spec = doc.get("spec")
    devices = spec.get("devices") if isinstance(spec, dict) else None
    if doc.get("kind") == "ResourceSlice" and isinstance(devices, list):
        for device in devices:
            if isinstance(device, dict) and isinstance(device.get("basic"), dict):
                device.update(device.pop("basic"))
    return doc


def test_validgen_puts_numbers_past_int64_in_every_integer_field() -> None:
    """The validation differential's generator reaches every integer of every kind with a number Go
    cannot decode, so the API server's answer to each is compared with ours (a field added to a
    model tomorrow fails this until validgen draws it)."""
    wanted: set[tuple[str, Loc]] = set()
    drawn: set[tuple[str, Loc]] = set()
    for kind in validgen.BUILDERS:
        model, release = getattr(models, kind), RELEASE if kind in KINDS else "1.31"  # 1.31's PodSchedulingContext
        wanted |= {(kind, loc) for loc in int64_fields(model)}
        for doc in validgen.generate(kind, 1500, seed=0, release=release):
            drawn |= {(kind, loc) for loc in past_int64(_v1_devices(doc), model)}
    assert wanted <= drawn, sorted(wanted - drawn)
