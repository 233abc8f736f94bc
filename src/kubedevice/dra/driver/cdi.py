"""CDI spec files for prepared claims: one file per claim, device names unique per claim.

The kubelet hands the runtime the CDI IDs we return from NodePrepareResources; the runtime
resolves them from ``<cdi_dir>/*.json``. Each claim gets its own file
(``kubedevice-dra-<driver>-<claimUID>.json``) holding one CDI device per allocated device,
named ``<claimUID>-<device>`` under the kind ``k8s.<driver>/device``, so two claims on the
same device never share or overwrite an entry. Files are written atomically (a runtime never
reads half a spec). A file is ours only if it has our prefix *and* our kind: driver ``a.b``'s
prefix also matches driver ``a.b-c``'s files, whose specs must survive ``a.b``'s clean-up.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ... import files
from ...allocation.cdi import CDI_VERSION, CdiError, Spec, device_name_error, spec_kind
from ...device import ContainerAllocation

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_ESCAPED = re.compile(r"[^A-Za-z0-9.-]")
_ESCAPE = re.compile(r"_([0-9a-f]+)_")
_SPEC_JSON = json.JSONEncoder(sort_keys=True)


@functools.lru_cache(maxsize=4096)
def _file_stem(claim_uid: str) -> str:
    """A file-name-safe form of a claim UID that maps distinct UIDs to distinct names.

    API server UIDs (hex and ``-``) stay as they are; anything else becomes ``_<hex code>_``,
    so ``a:b`` and ``a_b`` never share a file. Cached: a claim's unprepare asks again for the
    stem its prepare made, and computing it was 7% of a 32-claim unprepare in a profile.
    """
    return _ESCAPED.sub(lambda m: f"_{ord(m[0]):x}_", claim_uid)


def _claim_uid(stem: str) -> str:
    return _ESCAPE.sub(lambda m: chr(int(m[1], 16)), stem)


def edits_of(grant: ContainerAllocation) -> dict[str, Any]:
    """OCI container edits for a device-plugin style grant (env, device nodes, mounts)."""
    edits: dict[str, Any] = {}
    if grant.envs:
        edits["env"] = [f"{k}={v}" for k, v in sorted(grant.envs.items())]
    if grant.devices:
        edits["deviceNodes"] = [_node(d.container_path, d.host_path, d.permissions) for d in grant.devices]
    if grant.mounts:
        edits["mounts"] = [
            {
                "hostPath": m.host_path,
                "containerPath": m.container_path,
                "options": ["ro", "bind"] if m.read_only else ["rw", "bind"],
            }
            for m in grant.mounts
        ]
    return edits


def _node(path: str, host_path: str, permissions: str) -> dict[str, str]:
    node = {"path": path, "hostPath": host_path}
    if permissions:  # empty: the runtime's default
        node["permissions"] = permissions
    return node


class ClaimSpecs:
    """The per-claim CDI spec files of one driver in one CDI directory."""

    def __init__(self, directory: Path, driver: str) -> None:
        self.directory = Path(directory)
        self.kind = f"k8s.{driver}/device"
        self._prefix = f"kubedevice-dra-{_UNSAFE.sub('_', driver)}-"

    def device_id(self, claim_uid: str, device: str) -> str:
        """The fully qualified CDI device ID the kubelet passes on to the runtime."""
        return f"{self.kind}={claim_uid}-{device}"

    def spec(self, claim_uid: str, devices: Sequence[tuple[str, ContainerAllocation]]) -> Spec:
        """The spec document for a claim's devices (``(device name, grant)`` pairs)."""
        entries = []
        for device, grant in devices:
            name = f"{claim_uid}-{device}"
            error = device_name_error(name)
            if error:
                raise CdiError(error)
            entries.append({"name": name, "containerEdits": edits_of(grant)})
        return {"cdiVersion": CDI_VERSION, "kind": self.kind, "devices": entries}

    def path_for(self, claim_uid: str) -> Path:
        return self.directory / f"{self._prefix}{_file_stem(claim_uid)}.json"

    def write(self, claim_uid: str, spec: Spec) -> None:
        """Atomically, as every spec of ours. JSON from ``json``'s C encoder (no indent: with one,
        ``json`` encodes in Python, a third of a claim's prepare in a profile); the directory is
        made only when the write finds it missing (a ``mkdir`` per claim cost as much as the rename)."""
        data = (_SPEC_JSON.encode(spec) + "\n").encode()
        path = self.path_for(claim_uid)
        try:
            try:
                files.write_atomically(path, data, 0o644)
            except FileNotFoundError:
                self.directory.mkdir(parents=True, exist_ok=True)
                files.write_atomically(path, data, 0o644)
        except OSError as err:
            reason = err.strerror or err
            raise CdiError(f"cannot write CDI spec for claim {claim_uid} in {self.directory}: {reason}") from err

    def exists(self, claim_uid: str) -> bool:
        return self.path_for(claim_uid).is_file()

    def remove(self, claim_uid: str) -> None:
        error = self.remove_each([claim_uid]).get(claim_uid)
        if error is not None:
            raise CdiError(error)

    def remove_each(self, claim_uids: Iterable[str]) -> dict[str, str]:
        """Remove the spec files of these claims (missing ones are fine); the error per claim that failed.

        One ``unlink`` per claim on a path built as a string: as ``pathlib`` objects, the paths
        cost more than the unlinks (two thirds of a 32-claim NodeUnprepareResources in a
        profile). The Go test driver also removes one file per claim
        (``test/e2e/dra/test-driver/app/kubeletplugin.go``, ``nodeUnprepareResource``).
        """
        base = f"{os.fspath(self.directory)}/{self._prefix}"
        errors: dict[str, str] = {}
        for uid in claim_uids:
            try:
                os.unlink(f"{base}{_file_stem(uid)}.json")
            except FileNotFoundError:
                pass
            except OSError as err:
                errors[uid] = f"cannot remove CDI spec of claim {uid}: {err.strerror or err}"
        return errors

    def owned_claims(self) -> set[str]:
        """Claim UIDs that have a spec file of ours (from this run or an earlier one)."""
        if not self.directory.is_dir():
            return set()
        return {
            _claim_uid(p.name[len(self._prefix) : -len(".json")])
            for p in self.directory.glob(f"{self._prefix}*.json")
            if spec_kind(p) == self.kind
        }
