"""Device metadata (KEP-5304) as a driver's containers get it, for ``check --dra``.

A driver that writes it (``kubeletplugin``'s ``EnableDeviceMetadata``, or ours with
``dra.device_metadata``) answers, per request of a claim, a CDI ID of kind ``<driver>/metadata``.
For each: the spec defining it has one device, ``<claim UID>_<request>``, that bind-mounts one
file read-only at the path a container looks at (``/var/run/kubernetes.io/dra-device-attributes/
resourceclaims/<claim>/<request>/<driver>-metadata.json``, under ``resourceclaimtemplates/<pod's
name for the claim>/`` for a claim made from a template); the ID is on a device of that request;
the file is a stream of ``DeviceMetadata`` objects holding ``metadata.resource.k8s.io/v1beta1``
(the helper refuses to write without it), each naming the claim and one request (the request or
its subrequest) whose devices are the answer's devices of that request, all of this driver; and
every request of the driver's results has its ID. After unprepare the files are gone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...dra.devicemetadata import GROUP, container_path, read_stream
from ...dra.nodeclaims import Claim

if TYPE_CHECKING:
    from .checks import Device

LATEST = f"{GROUP}/v1beta1"


def metadata_ids(driver: str, answers: Mapping[str, Sequence[Device]]) -> list[str]:
    kind = f"{driver}/metadata="
    return sorted({i for devices in answers.values() for d in devices for i in d[3] if i.startswith(kind)})


def problems(
    driver: str, claims: Sequence[Claim], answers: Mapping[str, Sequence[Device]], defined: Mapping[str, Path]
) -> tuple[list[str], list[Path]]:
    """What is wrong with the metadata of the answers, and the files their specs mount."""
    found: list[str] = []
    files: list[Path] = []
    for claim in claims:
        devices = answers.get(claim.uid, ())
        ids = [i for d in devices for i in d[3] if i.startswith(f"{driver}/metadata=")]
        if not ids:
            continue
        requests = {r.base_request for r in claim.results if r.driver == driver}
        named = {i.partition("=")[2].removeprefix(f"{claim.uid}_") for i in ids}
        found += [f"{_claim(claim)}: request {r} has no {driver}/metadata CDI ID" for r in sorted(requests - named)]
        for cdi_id in sorted(set(ids)):
            where = defined.get(cdi_id)
            if where is None:
                continue  # dra.prepare.cdi_specs names it
            trouble, host = _one(driver, claim, devices, cdi_id, where)
            found += [f"{_claim(claim)}: {cdi_id}: {t}" for t in trouble]
            files += [host] if host is not None else []
    return found, files


def left(files: Iterable[Path]) -> list[str]:
    return [f"still there: {path}" for path in sorted(set(files)) if path.exists()]


def _claim(claim: Claim) -> str:
    return f"{claim.namespace}/{claim.name}"


def _one(
    driver: str, claim: Claim, devices: Sequence[Device], cdi_id: str, spec: Path
) -> tuple[list[str], Path | None]:
    name = cdi_id.partition("=")[2]
    if not name.startswith(f"{claim.uid}_"):
        return [f"the CDI device is not named <claim UID>_<request> ({claim.uid}_...)"], None
    request = name.removeprefix(f"{claim.uid}_")
    found = (
        [] if any(cdi_id in d[3] and request in d[0] for d in devices) else [f"not on a device of request {request}"]
    )
    mount = _mount(spec, name)
    if isinstance(mount, str):
        return [*found, mount], None
    want = container_path(driver, claim.name, claim.pod_claim_name, request)
    if mount.get("containerPath") != want:
        found.append(f"mounted at {mount.get('containerPath')!r}, not {want}")
    if not {"ro", "bind"} <= set(mount.get("options") or ()):
        found.append(f"mount options {mount.get('options')} lack ro and bind")
    host = Path(str(mount.get("hostPath", "")))
    expected = {(pool, device) for names, pool, device, _ in devices if request in names}
    return [*found, *_file(host, driver, claim, request, expected)], host


def _mount(spec: Path, name: str) -> dict[str, Any] | str:
    """The one mount of the spec's device ``name``, or what is wrong."""
    try:
        document = json.loads(spec.read_text())
        [device] = [d for d in document["devices"] if d.get("name") == name]
        [mount] = device["containerEdits"]["mounts"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return f"{spec} does not define it as one device with one mount"
    return mount if isinstance(mount, dict) else f"{spec}: the mount is not an object"


def _file(host: Path, driver: str, claim: Claim, request: str, expected: set[tuple[str, str]]) -> list[str]:
    try:
        objects = read_stream(host.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        return [f"the mounted file {host} is not a JSON stream: {getattr(err, 'strerror', None) or err}"]
    versions = [o.get("apiVersion") if isinstance(o, dict) else None for o in objects]
    if LATEST not in versions:
        return [f"{host} holds {versions}, not {LATEST}"]
    found: list[str] = []
    for obj in objects:
        found += [f"{host} ({obj.get('apiVersion')}): {p}" for p in _object(obj, driver, claim, request, expected)]
    return found


def _object(obj: dict[str, Any], driver: str, claim: Claim, request: str, expected: set[tuple[str, str]]) -> list[str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    found = [] if obj.get("kind") == "DeviceMetadata" else [f"kind {obj.get('kind')!r}"]
    named = (meta.get("namespace"), meta.get("name"), meta.get("uid"))
    if named != (claim.namespace, claim.name, claim.uid):
        found.append(f"names claim {named}, not {(claim.namespace, claim.name, claim.uid)}")
    requests = obj.get("requests")
    entry = requests[0] if isinstance(requests, list) and len(requests) == 1 else None
    if not isinstance(entry, dict) or str(entry.get("name", "")).partition("/")[0] != request:
        return [*found, f"requests {obj.get('requests')!r} are not the one request {request}"]
    devices = [d for d in entry.get("devices") or [] if isinstance(d, dict)]
    found += [f"device {d.get('name')} of driver {d.get('driver')!r}" for d in devices if d.get("driver") != driver]
    listed = {(str(d.get("pool")), str(d.get("name"))) for d in devices}
    if listed != expected:
        found.append(f"lists {sorted(listed)}, the answer {sorted(expected)}")
    return found
