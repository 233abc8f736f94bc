"""Device metadata in the container (KEP-5304), as ``kubeletplugin``'s ``EnableDeviceMetadata`` writes it.

What k8s.io/dynamic-resource-allocation v0.37.2 (``kubeletplugin/metadata.go``) writes, per
request of a prepared claim (the devices of a ``firstAvailable`` subrequest under its base request):

- ``<plugin dir>/dra-device-metadata/<namespace>_<claim>/<request>/metadata.json`` (0644, its
  directories 0755, replaced atomically): a JSON stream holding the same ``DeviceMetadata``
  once per API version, newest first (``metadata.resource.k8s.io/v1beta1``, then ``v1alpha1``
  for consumers built against 1.36), each object Go's indented JSON followed by a newline. It
  names the claim (name, namespace, UID, generation 1), the pod's name for a claim made from a
  template (``podClaimName``), and the request (``gpu/large`` for a subrequest) with each of
  its devices of this driver: driver, pool, name and the attributes its ResourceSlice entry has;
- ``<CDI dir>/<driver>_metadata_<claim UID>_<request>.json``: a CDI spec of kind
  ``<driver>/metadata`` with one device, ``<claim UID>_<request>``, that bind-mounts that file
  read-only at ``/var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/
  <driver>-metadata.json`` (``resourceclaimtemplates/<pod's claim name>/`` for a claim made from
  a template: its generated name is unknown when the pod is written);
- the spec's device ID, ``<driver>/metadata=<claim UID>_<request>``, added to the CDI IDs of the
  request's first device in the answer to the kubelet, which hands it to the runtime.

Unprepare removes the claim's directory and its specs. Where we differ from the helper, and why:
a file that cannot be written fails the claim's prepare (the helper logs it and answers without
the metadata ID, so the container starts without a file it may rely on); the checkpoint keeps
what was written, so a restart restores missing files and removes files of claims not prepared
(the helper does neither; the kubelet does not prepare a running pod's claims again); names
that would lead out of these directories are refused. ``tests/interop/test_dra_metadata_go.py``
compares our files byte for byte with the helper's for the same claims.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ... import files
from ...allocation.cdi import CdiError, device_name_error, spec_kind
from ..devicemetadata import GROUP, VERSIONS, container_path
from ..nodeclaims import AllocatedDevice, Claim, ClaimRef, PreparedDevice

HOST_DIR = "dra-device-metadata"
"""Under the driver's plugin directory (``kubeletplugin``'s plugin data directory)."""
HOST_FILE = "metadata.json"
GENERATION = 1
"""What the helper writes at prepare (``UpdateRequestMetadata`` counts up from it; we never update)."""

Attributes = Mapping[str, Mapping[str, Any]]
"""A device's attributes as its ResourceSlice entry has them: name → one-key value (``{"int": 3}``)."""
AttributeLookup = Callable[[str], Attributes]
Document = dict[str, Any]
"""A claim's metadata as the checkpoint keeps it: ``podClaimName`` (absent: not from a template)
and ``requests``, each ``{"name": ..., "devices": [...]}`` as the files' ``requests[0]``."""


def describe(claim: Claim, results: Sequence[AllocatedDevice], driver: str, attributes: AttributeLookup) -> Document:
    """The metadata of a claim's results of this driver: per request, its devices in the order the
    answer lists them (a device's first result; a device in several requests is under each), as
    the helper groups the devices of a ``PrepareResult``."""
    by_device: dict[str, dict[str, AllocatedDevice]] = {}
    for result in results:
        by_device.setdefault(result.device, {}).setdefault(result.request, result)
    requests: dict[str, list[dict[str, Any]]] = {}
    for name, named in by_device.items():
        described = attributes(name)
        for request, result in named.items():
            device: dict[str, Any] = {"driver": driver, "pool": result.pool, "name": name}
            if described:
                device["attributes"] = {key: dict(described[key]) for key in sorted(described)}
            requests.setdefault(request, []).append(device)
    document: Document = {"requests": [{"name": name, "devices": devices} for name, devices in requests.items()]}
    if claim.pod_claim_name is not None:
        document["podClaimName"] = claim.pod_claim_name
    return document


def add_device_ids(devices: Sequence[PreparedDevice], ids: Mapping[str, str]) -> list[PreparedDevice]:
    """Each request's metadata CDI ID after the CDI IDs of its first device, as the helper adds them."""
    pending = dict(ids)
    answer = []
    for device in devices:
        extra = [pending.pop(request) for request in device.request_names if request in pending]
        answer.append(replace(device, cdi_device_ids=(*device.cdi_device_ids, *extra)) if extra else device)
    return answer


class MetadataFiles:
    """The metadata files and their CDI specs of one driver, in its plugin directory and a CDI directory."""

    def __init__(self, driver: str, plugin_dir: Path, cdi_dir: Path) -> None:
        self.driver = driver
        self.kind = f"{driver}/metadata"
        self.root = Path(os.path.abspath(plugin_dir)) / HOST_DIR  # the CDI spec's hostPath must be absolute
        self.cdi_dir = Path(cdi_dir)
        self._spec_prefix = f"{driver}_metadata_"

    # -- names --------------------------------------------------------------------------------
    def device_id(self, claim_uid: str, request: str) -> str:
        return f"{self.kind}={claim_uid}_{request}"

    def claim_dir(self, namespace: str, name: str) -> Path:
        return self.root / f"{namespace}_{name}"

    def host_path(self, namespace: str, name: str, request: str) -> Path:
        return self.claim_dir(namespace, name) / request / HOST_FILE

    def spec_path(self, claim_uid: str, request: str) -> Path:
        return self.cdi_dir / f"{self._spec_prefix}{claim_uid}_{request}.json"

    # -- contents -----------------------------------------------------------------------------
    def contents(self, ref: ClaimRef, document: Document) -> dict[Path, bytes]:
        """Every file of a claim's metadata (the metadata files, then their CDI specs) and its bytes."""
        problem = _unsafe(ref, document)
        if problem:
            raise CdiError(f"claim {ref}: device metadata: {problem}")
        meta: dict[str, Any] = {"name": ref.name, "namespace": ref.namespace, "uid": ref.uid}
        meta = {key: value for key, value in meta.items() if value}  # omitempty
        head: dict[str, Any] = {"metadata": {**meta, "generation": GENERATION}}
        if "podClaimName" in document:
            head["podClaimName"] = document["podClaimName"]
        streams: dict[Path, bytes] = {}
        specs: dict[Path, bytes] = {}
        for request in document["requests"]:
            base = _base(request["name"])
            body = {**head, "requests": [request]}
            stream = "".join(
                _go_json({"kind": "DeviceMetadata", "apiVersion": f"{GROUP}/{version}", **body}) + "\n"
                for version in VERSIONS
            )
            host = self.host_path(ref.namespace, ref.name, base)
            streams[host] = stream.encode()
            specs[self.spec_path(ref.uid, base)] = self._spec(ref, document.get("podClaimName"), base, host).encode()
        return {**streams, **specs}

    def _spec(self, ref: ClaimRef, pod_claim_name: str | None, request: str, host: Path) -> str:
        """The CDI spec mounting one request's file: ``cdispec.MinimumRequiredVersion`` gives 0.5.0
        for a device name starting with a digit, 0.3.0 otherwise; the empty spec-wide edits stay."""
        name = f"{ref.uid}_{request}"
        mount = {
            "hostPath": str(host),
            "containerPath": container_path(self.driver, ref.name, pod_claim_name, request),
            "options": ["ro", "bind"],
        }
        device = {"name": name, "containerEdits": {"mounts": [mount]}}
        version = "0.5.0" if "0" <= name[0] <= "9" else "0.3.0"
        return _go_json({"cdiVersion": version, "kind": self.kind, "devices": [device], "containerEdits": {}})

    # -- files --------------------------------------------------------------------------------
    def write(self, ref: ClaimRef, document: Document) -> dict[str, str]:
        """Write (or restore) a claim's files; per base request its CDI device ID. On a failure
        nothing of the claim is left and the error names the claim.

        Renamed into place, never fsynced (the helper fsyncs each file and its directory): a
        reader never sees half a file, and only a crash of the machine could lose one, which is a
        reboot, after which no claim of before is prepared and the start removes every file of
        ours. An fsync of the file on the node's disk was 4-5 ms of each request's prepare on the
        benchmark machine."""
        contents = self.contents(ref, document)
        try:
            for path, data in contents.items():
                self._make_dirs(path.parent)
                files.write_atomically(path, data, 0o644, sync=False)
        except OSError as err:
            self.remove(ref.namespace, ref.name, ref.uid, document)
            raise CdiError(f"cannot write the device metadata of claim {ref}: {err.strerror or err}") from err
        return {_base(r["name"]): self.device_id(ref.uid, _base(r["name"])) for r in document["requests"]}

    def _make_dirs(self, directory: Path) -> None:
        """``os.MkdirAll(dir, 0755)``: every missing level 0755 (less the umask), as the helper's."""
        if directory.is_dir():
            return
        self._make_dirs(directory.parent)
        with contextlib.suppress(FileExistsError):
            directory.mkdir(0o755)

    def remove(self, namespace: str, name: str, uid: str, document: Document) -> str | None:
        """Remove a claim's directory and its specs; an error message, or None when all are gone.

        The files we wrote are removed by name, and their directories, as ``os.RemoveAll`` would;
        only a directory holding more than that is walked (``shutil.rmtree`` costs three times
        the system calls, each a wait on a busy disk)."""
        claim_dir = self.claim_dir(namespace, name)
        try:
            try:
                for request in document["requests"]:
                    host = self.host_path(namespace, name, _base(request["name"]))
                    with contextlib.suppress(FileNotFoundError):
                        host.unlink()
                    with contextlib.suppress(FileNotFoundError):
                        host.parent.rmdir()
                claim_dir.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                _remove_tree(claim_dir)  # something else in it (ENOTEMPTY), or not a directory
            for request in document["requests"]:
                with contextlib.suppress(FileNotFoundError):
                    self.spec_path(uid, _base(request["name"])).unlink()
        except OSError as err:
            return f"cannot remove the device metadata of claim {namespace}/{name} ({uid}): {err.strerror or err}"
        return None

    def remove_others(self, keep: Iterable[tuple[ClaimRef, Document]]) -> None:
        """After a restart: remove every metadata file and spec of ours that ``keep`` does not hold."""
        wanted: set[Path] = set()
        for ref, document in keep:
            wanted.update(self.contents(ref, document))
        kept_dirs = {p.parent for p in wanted} | {p.parent.parent for p in wanted}
        for claim_dir in _children(self.root):
            if claim_dir not in kept_dirs:
                _remove_tree(claim_dir)
                continue
            for request_dir in _children(claim_dir):
                if request_dir not in kept_dirs:
                    _remove_tree(request_dir)
        for spec in _children(self.cdi_dir):
            ours = spec.name.startswith(self._spec_prefix) and spec.name.endswith(".json")
            if ours and spec not in wanted and spec_kind(spec) == self.kind:
                spec.unlink()

    def remove_root_if_empty(self) -> None:
        with contextlib.suppress(OSError):
            self.root.rmdir()


def _base(request: str) -> str:
    """``resourceclaim.BaseRequestRef``: ``gpu/large`` → ``gpu``."""
    return request.partition("/")[0]


def _unsafe(ref: ClaimRef, document: Document) -> str | None:
    """Names that would not stay one path segment (the API server's names always do), or a CDI
    device name the runtime would refuse."""
    segments = [ref.namespace, ref.name, ref.uid, *(_base(r["name"]) for r in document["requests"])]
    for segment in segments:
        if segment in ("", ".", "..") or "/" in segment or "\0" in segment:
            return f"{segment!r} cannot name a file"
    for request in document["requests"]:
        error = device_name_error(f"{ref.uid}_{_base(request['name'])}")
        if error:
            return error
    return None


_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})
_SURROGATE = re.compile("[\ud800-\udfff]")


def _go_json(value: Any) -> str:
    """``json.MarshalIndent(value, "", "  ")`` of Go's ``encoding/json``: keys in the order given,
    ``<``, ``>``, ``&``, U+2028 and U+2029 escaped (Go's HTML-safe default), other non-ASCII as
    is, control characters escaped alike (``\\n``, ``\\b``, ``\\u001f``); a lone surrogate, which
    Go cannot hold, becomes U+FFFD as Go's decoder makes it."""
    return _SURROGATE.sub("\ufffd", json.dumps(value, indent=2, ensure_ascii=False).translate(_GO_ESCAPES))


def _children(directory: Path) -> list[Path]:
    try:
        return [Path(entry.path) for entry in os.scandir(directory)]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _remove_tree(path: Path) -> None:
    """``os.RemoveAll``: a directory with what it holds, or a file or link itself; missing is fine."""
    try:
        shutil.rmtree(path)
    except NotADirectoryError:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError:
        if not path.is_symlink():
            raise
        path.unlink()  # rmtree refuses a link: remove the link, never what it leads to
