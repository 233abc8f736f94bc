"""Every field of the config schema, fed hostile values of its type (issue #27).

The fields are not listed here: the test walks ``model_fields`` of every model reachable from
``Config`` (the ``dra:`` section and each health check type included), so a field added to the
schema tomorrow is fed the same values without editing this file; a new *model* needs one sample
below that uses it (the first test says which). Each field gets values of every hostile kind for
its type: negative, zero, huge, past int64 and uint64, a float or a string or a bool where a number
belongs, an empty and a far too long value, the wrong JSON type, ``null``. For every value:

- the config loads, or the error is one line ``c.yaml:LINE:COL: <field path>: ...`` whose place is
  inside the entry that was changed and whose field path starts with that entry's path;
- a value no config can mean is refused: numbers past their bounds (every number has bounds) and of
  the wrong type, infinite and NaN floats, strings where a number or bool belongs and the reverse,
  text longer than any bound;
- ``kubedevice discover`` on the refused file prints that line as ``kubedevice: ...`` and exits 2,
  with no traceback.
"""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
import typer
import yaml
from pydantic import BaseModel
from typer.testing import CliRunner

from kubedevice.config import Config, ConfigError, parse_config
from kubedevice.sources.cli import discover

Loc = tuple[int | str, ...]

# Valid configs that, together, use every model of the schema (and most fields).
SAMPLES: list[dict[str, Any]] = [
    {
        "plugin_dir": "/var/lib/kubelet/device-plugins",
        "host_root": "/",
        "cdi_dir": "/var/run/cdi",
        "resources": [
            {
                "name": "example.com/null",
                "static": {"count": 2, "paths": ["/dev/null"]},
                "permissions": "rw",
                "container_path": "/dev/null{index}",
                "mounts": [{"host_path": "/opt/fw", "container_path": "/fw", "read_only": True}],
                "env": {"IDS": "{ids}"},
                "annotations": {"example.com/a": "b"},
                "health": {
                    "checks": [
                        {"type": "present"},
                        {"type": "openable"},
                        {"type": "exec", "argv": ["/bin/true", "{id}"], "timeout_seconds": 5},
                        {"type": "sysfs", "attribute": "/sys/x", "equals": "1"},
                    ],
                    "interval_seconds": 10,
                    "failure_threshold": 3,
                    "recovery_threshold": 1,
                },
                "replicas": 2,
                "policy": "pack",
                "one_replica_per_device": False,
                "node_selector": {"example.com/gpu": "yes"},
            },
            {
                "name": "example.com/serial",
                "glob": {"paths": ["/dev/ttyS*"], "group": False, "group_by": "ttyS([0-9])"},
                "cdi": {"kind": "example.com/serial", "mode": "cri"},
                "device_ownership": {"uid": 1000, "gid": 1000, "mode": "0660"},
            },
            {
                "name": "example.com/usb",
                "usb": {"vendor": "10c4", "product": "ea60", "serial": "x", "nodes": ["bus", "tty"]},
            },
            {"name": "example.com/fpga", "pci": {"vendor": "10ee", "device": "5000", "class": "1200", "vfio": True}},
            {"name": "example.com/input", "udev": {"subsystem": "input", "match": {"ID_VENDOR_ID": "046d"}}},
        ],
    },
    {
        "dra": {
            "driver": "null.example.com",
            "publish": True,
            "rolling_update": False,
            "device_status": False,
            "sharing": "replicas",
            "unhealthy_taint": "NoSchedule",
        },
        "resources": [{"name": "example.com/null", "static": {"count": 1}}],
    },
]

# A change that a check across fields blames on another entry: (changed, blamed).
ELSEWHERE: dict[Loc, Loc] = {
    # cdi cannot express the sample's {index} in container_path
    ("resources", 0, "cdi"): ("resources", 0, "container_path"),
    # a container_path renames a device's one node: no paths, no node
    ("resources", 0, "static", "paths"): ("resources", 0, "container_path"),
}

HUGE = 10**30
LONG = "x" * 200_000  # over PATH_MAX, MAX_ARG_STRLEN and every name limit
NAN = float("nan")
# Per type, (value, refused whatever the field): a value with False may fit some field (a zero uid).
VALUES: dict[str, list[tuple[Any, bool]]] = {
    "int": [(-1, False), (0, False), (HUGE, True), (2**63, True), (-(2**63) - 1, True), (2**64, True),
            (1.5, True), (2.0, True), ("3", True), (True, True), (None, False), ([], True), ({}, True), ("", True)],
    "float": [(-1.0, False), (0, False), (1e308, True), (float("inf"), True), (float("-inf"), True), (NAN, True),
              ("1", True), (True, True), (None, False), ([], True), (HUGE, True)],
    "bool": [("true", True), ("yes", True), (1, True), (0, True), (None, False), ([], True), ("", True)],
    "str": [("", False), (LONG, True), ("a\0b", False), (5, True), (2.5, True), (True, True), (None, False),
            ([], True), ({}, True)],
    "list": [([], False), ([None], False), ([""], False), ([LONG], True), ("x", True), (5, True), (None, False),
             ({}, True)],
    "map": [({}, False), ({"": "v"}, False), ({"K": None}, False), ({"K": 5}, False), ({"K": LONG}, False),
            ({LONG: "v"}, True), ("x", True), (5, True), (None, False), ([], True)],
    "model": [(None, False), ({}, False), ([], True), ("x", True), (5, True)],
}  # fmt: skip


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """The type without ``None`` and ``Annotated``, and whether ``None`` is allowed."""
    optional = False
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            optional = optional or len(args) < len(typing.get_args(annotation))
            if len(args) != 1:
                return args, optional  # a discriminated union of models
            annotation = args[0]
        else:
            return annotation, optional


def _kind(annotation: Any) -> str:
    tp, _ = _unwrap(annotation)
    origin = typing.get_origin(tp)
    if isinstance(tp, list):
        return "model"
    if origin is list:
        return "list"
    if origin is dict:
        return "map"
    if origin is Literal or tp in (str, Path):
        return "str"
    if tp is bool:
        return "bool"
    if tp is int:
        return "int"
    if tp is float:
        return "float"
    assert isinstance(tp, type) and issubclass(tp, BaseModel), f"a field type this test does not know: {tp}"
    return "model"


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    tp, _ = _unwrap(annotation)
    for member in tp if isinstance(tp, list) else [tp]:
        for arg in [member, *typing.get_args(member)]:
            inner, _ = _unwrap(arg)
            for candidate in inner if isinstance(inner, list) else [inner]:
                if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                    yield candidate


def reachable(model: type[BaseModel] = Config, seen: set[type[BaseModel]] | None = None) -> set[type[BaseModel]]:
    """Every model the schema can hold, found through the field annotations."""
    seen = set() if seen is None else seen
    seen.add(model)
    for field in model.model_fields.values():
        for inner in _models_in(field.annotation):
            if inner not in seen:
                reachable(inner, seen)
    return seen


def _instances(data: Any, model: type[BaseModel], loc: Loc) -> Iterator[tuple[type[BaseModel], Loc]]:
    """(model, place) of every model instance in a sample, following the schema."""
    yield model, loc
    for name, field in model.model_fields.items():
        key = field.alias or name
        if not isinstance(data, dict) or key not in data:
            continue
        value = data[key]
        candidates = list(_models_in(field.annotation))
        tp, _ = _unwrap(field.annotation)
        items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
        for index, item in items:
            where = (*loc, key) if index is None else (*loc, key, index)
            chosen = [
                m
                for m in candidates
                if "type" not in m.model_fields
                or m.model_fields["type"].default == (item.get("type") if isinstance(item, dict) else None)
            ]
            if typing.get_origin(tp) is dict or not chosen or not isinstance(item, dict):
                continue
            yield from _instances(item, chosen[0], where)


def instances() -> dict[type[BaseModel], tuple[int, Loc]]:
    """One place in a sample per model."""
    found: dict[type[BaseModel], tuple[int, Loc]] = {}
    for number, sample in enumerate(SAMPLES):
        for model, loc in _instances(sample, Config, ()):
            found.setdefault(model, (number, loc))
    return found


def _get(data: Any, loc: Loc) -> Any:
    for part in loc:
        data = data[part]
    return data


def cases() -> list[Any]:
    out = []
    for model, (number, loc) in sorted(instances().items(), key=lambda item: item[0].__name__):
        for name, field in model.model_fields.items():
            key = field.alias or name
            kind = _kind(field.annotation)
            for i, (value, refused) in enumerate(VALUES[kind]):
                case = (number, (*loc, key), value, refused)
                out.append(pytest.param(*case, id=f"{model.__name__}.{key}-{kind}{i}"))
    return out


def test_every_model_of_the_schema_has_a_sample() -> None:
    missing = sorted(m.__name__ for m in reachable() - set(instances()))
    assert not missing, f"add a sample using {missing} to SAMPLES"
    for sample in SAMPLES:
        parse_config(yaml.safe_dump(sample), "c.yaml")  # the samples themselves are valid


def _node(root: yaml.Node, loc: Loc) -> tuple[yaml.Node, yaml.Node]:
    """The key node and value node of the entry at ``loc``."""
    key_node, node = root, root
    for part in loc:
        if isinstance(part, int):
            key_node = node = node.value[part]
        else:
            key_node, node = next((k, v) for k, v in node.value if k.value == part)
    return key_node, node


def _inside(root: yaml.Node, loc: Loc, spot: tuple[int, int]) -> bool:
    """Whether a 0-based (line, column) is within the entry at ``loc``, from its key to its value's end."""
    key_node, value_node = _node(root, loc)
    start, end = key_node.start_mark, value_node.end_mark
    return (start.line, start.column) <= spot <= (end.line, end.column)


def _path_text(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _dump(data: Any) -> str:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(data, Dumper=dumper, width=1 << 30, allow_unicode=True)


runner = CliRunner()
app = typer.Typer()
app.command()(discover)


@pytest.mark.parametrize(("sample", "loc", "value", "refused"), cases())
def test_hostile_value(tmp_path: Path, sample: int, loc: Loc, value: Any, refused: bool) -> None:
    data = copy.deepcopy(SAMPLES[sample])
    _get(data, loc[:-1])[loc[-1]] = value
    text = _dump(data)
    try:
        parse_config(text, "c.yaml")
    except ConfigError as error:
        message = str(error)
    else:
        assert not refused, f"{_path_text(loc)}: {value!r:.60} was accepted"
        return
    assert "\n" not in message
    place, _, rest = message.partition(": ")
    _, line, column = place.rsplit(":", 2)
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    spot = (int(line) - 1, int(column) - 1)
    places = [loc, *([ELSEWHERE[loc]] if loc in ELSEWHERE else [])]  # the changed entry, or the one a check blames
    assert any(_inside(root, place, spot) and rest.startswith(_path_text(place)) for place in places), (
        f"{message:.300} not at {' or '.join(map(_path_text, places))}"
    )
    config = tmp_path / "c.yaml"
    config.write_text(text)
    result = runner.invoke(app, ["--config", str(config)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.stderr == f"kubedevice: {tmp_path}/{message}\n"
