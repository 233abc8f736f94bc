"""The device manager checkpoint, ``kubelet_internal_checkpoint``, byte-compatible with the kubelet's.

Layout as written by ``checkpoint.Data`` (pkg/kubelet/cm/devicemanager/checkpoint): ``Data``
holds ``PodDeviceEntries`` (device IDs per NUMA node, the marshalled
``ContainerAllocateResponse`` in base64) and ``RegisteredDevices`` (healthy IDs per resource),
next to a ``Checksum``. The checksum is the kubelet's (checkpointmanager/checksum,
util/hash.DeepHashObject): FNV-1a 32 over ``dump.ForHash(data)``, a go-spew ``%#v`` dump with
``SortKeys`` and ``DisableMethods``. Files are written as Go's ``json.Marshal`` writes them, so a
checkpoint moves both ways between the simulator and a real kubelet.

Go keeps ``nil`` and empty apart (``<nil>`` against ``[]`` or ``map[]`` in the dump), so reading
keeps JSON ``null`` and missing fields apart the way ``json.Unmarshal`` does into the device
manager's pre-made empty slice and map (``getCheckpoint``): ``None`` below stands for a Go ``nil``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import files
from ..errors import KubedeviceError

NO_TOPOLOGY = -1  # the kubelet's nodeWithoutTopology
_INT64 = re.compile(r"[+-]?[0-9]+")
_SURROGATE = re.compile("[\ud800-\udfff]")
# encoding/json escapes these on top of what Python's json does (HTML safety, JSONP).
_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})


class CheckpointError(KubedeviceError, ValueError):
    """The file exists but cannot be trusted (bad JSON, shape or checksum)."""


@dataclass(frozen=True, slots=True)
class Entry:
    pod_uid: str
    container: str
    resource: str
    device_ids: dict[int, list[str]]
    alloc_resp: bytes

    def ids(self) -> set[str]:
        return {d for devs in self.device_ids.values() for d in devs}


@dataclass(slots=True)
class CheckpointData:
    entries: list[Entry] = field(default_factory=list)
    registered: dict[str, list[str]] = field(default_factory=dict)


# The data as Go holds it after json.Unmarshal: None is a nil slice or map.
Strings = list[str] | None


@dataclass(frozen=True, slots=True)
class GoEntry:
    pod_uid: str
    container: str
    resource: str
    device_ids: dict[int, Strings] | None
    alloc_resp: bytes | None


@dataclass(frozen=True, slots=True)
class GoData:
    entries: list[GoEntry] | None
    registered: dict[str, Strings] | None


# ---- checksum: FNV-1a 32 over go-spew's %#v -------------------------------------------------


def _go_string(text: str) -> str:
    """A Go string holds UTF-8: a lone surrogate (only possible from a JSON escape) becomes U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def _spew_strings(ids: Strings) -> str:
    return "<nil>" if ids is None else "[" + " ".join(map(_go_string, ids)) + "]"


def _spew_entry(entry: GoEntry) -> str:
    """A slice element: its own type is not printed, its fields' types are."""
    if entry.device_ids is None:
        numa = "<nil>"
    else:  # SortKeys orders int64 keys numerically
        numa = "map[" + " ".join(f"{node}:{_spew_strings(ids)}" for node, ids in sorted(entry.device_ids.items())) + "]"
    resp = "<nil>" if entry.alloc_resp is None else "[" + " ".join(map(str, entry.alloc_resp)) + "]"
    return (
        f"{{PodUID:(string){_go_string(entry.pod_uid)} ContainerName:(string){_go_string(entry.container)} "
        f"ResourceName:(string){_go_string(entry.resource)} DeviceIDs:(checkpoint.DevicesPerNUMA){numa} "
        f"AllocResp:([]uint8){resp}}}"
    )


def spew_dump(data: GoData) -> str:
    """``dump.ForHash(checkpointData)``: what the kubelet hashes (string keys sort bytewise)."""
    entries = "<nil>" if data.entries is None else "[" + " ".join(map(_spew_entry, data.entries)) + "]"
    if data.registered is None:
        registered = "<nil>"
    else:
        pairs = sorted(data.registered.items(), key=lambda pair: pair[0])
        registered = "map[" + " ".join(f"{_go_string(name)}:{_spew_strings(ids)}" for name, ids in pairs) + "]"
    return (
        f"(checkpoint.checkpointData){{PodDeviceEntries:([]checkpoint.PodDevicesEntry){entries} "
        f"RegisteredDevices:(map[string][]string){registered}}}"
    )


def checksum(data: GoData) -> int:
    """``checksum.New``: FNV-1a 32 (``hash/fnv.New32a``) of the spew dump."""
    value = 0x811C9DC5
    for byte in spew_dump(data).encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


# ---- writing: Go's json.Marshal ---------------------------------------------------------------


def _json_string(text: str) -> str:
    return json.dumps(_go_string(text), ensure_ascii=False).translate(_GO_ESCAPES)


def _json_strings(ids: Strings) -> str:
    return "null" if ids is None else "[" + ",".join(map(_json_string, ids)) + "]"


def _json_map(items: dict[str, str]) -> str:
    """A Go map: keys sorted as strings (so NUMA node "-1" < "0" < "10" < "2")."""
    return "{" + ",".join(f"{_json_string(k)}:{v}" for k, v in sorted(items.items())) + "}"


def _json_entry(entry: GoEntry) -> str:
    numa = (
        "null"
        if entry.device_ids is None
        else _json_map({str(node): _json_strings(ids) for node, ids in entry.device_ids.items()})
    )
    resp = "null" if entry.alloc_resp is None else f'"{base64.b64encode(entry.alloc_resp).decode()}"'
    return (
        f'{{"PodUID":{_json_string(entry.pod_uid)},"ContainerName":{_json_string(entry.container)},'
        f'"ResourceName":{_json_string(entry.resource)},"DeviceIDs":{numa},"AllocResp":{resp}}}'
    )


def marshal(data: GoData) -> bytes:
    """``Data.MarshalCheckpoint``: the file's bytes, checksum included."""
    entries = "null" if data.entries is None else "[" + ",".join(map(_json_entry, data.entries)) + "]"
    registered = (
        "null"
        if data.registered is None
        else _json_map({name: _json_strings(ids) for name, ids in data.registered.items()})
    )
    body = f'{{"PodDeviceEntries":{entries},"RegisteredDevices":{registered}}}'
    return f'{{"Data":{body},"Checksum":{checksum(data)}}}'.encode()


def _as_go(data: CheckpointData) -> GoData:
    """As the device manager builds it: no entries is a nil slice, every other value is non-nil."""
    entries = [GoEntry(e.pod_uid, e.container, e.resource, dict(e.device_ids), e.alloc_resp) for e in data.entries]
    return GoData(entries or None, dict(data.registered))


def write(path: Path, data: CheckpointData) -> None:
    """Write atomically (temp file, fsync, rename) as the kubelet's file store does, mode 0600.

    On any failure (a full disk) the temp file is removed and the old checkpoint stays whole.
    """
    files.write_atomically(path, marshal(_as_go(data)), 0o600)


# ---- reading: Go's json.Unmarshal -------------------------------------------------------------


def _str(raw: object, name: str) -> str:
    """JSON null leaves a Go string at its zero value."""
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise CheckpointError(f"{name} must be a string, not {raw!r}")
    return _go_string(raw)


def _strings(raw: object, name: str) -> Strings:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise CheckpointError(f"{name} must be a list of strings, not {raw!r}")
    return [_str(item, name) for item in raw]


def _obj(raw: object, name: str) -> dict[str, object] | None:
    if raw is None or isinstance(raw, dict):
        return raw
    raise CheckpointError(f"{name} must be an object, not {raw!r}")


def _numa(raw: object) -> dict[int, Strings] | None:
    ids = _obj(raw, "DeviceIDs")
    if ids is None:
        return None
    if not all(_INT64.fullmatch(node) and -(2**63) <= int(node) < 2**63 for node in ids):
        raise CheckpointError(f"DeviceIDs keys must be int64 NUMA nodes, not {list(ids)!r}")
    return {int(node): _strings(devs, "DeviceIDs") for node, devs in ids.items()}


def _bytes(raw: object) -> bytes | None:
    if raw is None:
        return None
    try:
        return base64.b64decode(_str(raw, "AllocResp").replace("\r", "").replace("\n", ""), validate=True)
    except binascii.Error as err:
        raise CheckpointError(f"AllocResp is not base64: {err}") from err


def _entry(raw: object) -> GoEntry:
    """Missing fields keep Go's zero values: "" and nil."""
    fields = _obj(raw, "PodDeviceEntries item") or {}  # a null item is a zero struct
    return GoEntry(
        pod_uid=_str(fields.get("PodUID", ""), "PodUID"),
        container=_str(fields.get("ContainerName", ""), "ContainerName"),
        resource=_str(fields.get("ResourceName", ""), "ResourceName"),
        device_ids=_numa(fields.get("DeviceIDs")),
        alloc_resp=_bytes(fields.get("AllocResp")),
    )


def _go_data(raw: object) -> GoData:
    """Missing top-level fields keep getCheckpoint's empty values; ``null`` makes them nil."""
    body = _obj(raw, "Data") or {}
    entries = body.get("PodDeviceEntries", [])
    if entries is not None and not isinstance(entries, list):
        raise CheckpointError(f"PodDeviceEntries must be a list, not {entries!r}")
    registered = _obj(body.get("RegisteredDevices", {}), "RegisteredDevices")
    return GoData(
        None if entries is None else [_entry(item) for item in entries],
        None if registered is None else {_go_string(k): _strings(v, k) for k, v in registered.items()},
    )


def _plain(data: GoData) -> CheckpointData:
    entries = [
        Entry(
            e.pod_uid,
            e.container,
            e.resource,
            {node: ids or [] for node, ids in (e.device_ids or {}).items()},
            e.alloc_resp or b"",
        )
        for e in data.entries or []
    ]
    return CheckpointData(entries, {name: ids or [] for name, ids in (data.registered or {}).items()})


def parse(blob: bytes) -> tuple[GoData, int]:
    """The data as Go decodes it and the stored checksum; CheckpointError where Go's decoding fails."""
    try:
        raw = json.loads(blob.decode(errors="replace"))
    except ValueError as err:
        raise CheckpointError(f"not JSON: {err}") from err
    top = _obj(raw, "checkpoint") or {}
    stored = top.get("Checksum")
    stored = 0 if stored is None else stored  # null leaves it 0 too
    if not isinstance(stored, int) or isinstance(stored, bool) or not 0 <= stored < 2**64:
        raise CheckpointError(f"Checksum must be a uint64, not {stored!r}")
    return _go_data(top.get("Data")), stored


def read(path: Path) -> CheckpointData | None:
    """The checkpoint at ``path``, ``None`` when there is none."""
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise CheckpointError(f"cannot read {path}: {err}") from err
    try:
        data, stored = parse(blob)
    except CheckpointError as err:
        raise CheckpointError(f"checkpoint {path} has an unexpected shape: {err}") from err
    actual = checksum(data)
    if stored != actual:
        raise CheckpointError(f"checkpoint {path} is corrupted: checksum mismatch (stored {stored}, computed {actual})")
    return _plain(data)
