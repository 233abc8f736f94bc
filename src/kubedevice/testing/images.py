"""An OCI image archive holding one static program, for a cluster without an image registry.

``ctr images import`` reads the archive; every tag names the same manifest (the program serves as
the pod sandbox and as the test container), and pods use ``imagePullPolicy: Never``.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def write_oci_archive(program: Path, tags: list[str], out: Path) -> None:
    """``out``: an OCI image layout tar whose image runs ``/<program name>`` as its entrypoint."""
    layer = _tar({program.name: (program.read_bytes(), 0o755)})
    config = _json(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Entrypoint": [f"/{program.name}"], "Env": ["PATH=/"]},
            "rootfs": {"type": "layers", "diff_ids": [_digest(layer)]},
        }
    )
    manifest = _json(
        {
            "schemaVersion": 2,
            "mediaType": _MANIFEST,
            "config": _descriptor("application/vnd.oci.image.config.v1+json", config),
            "layers": [_descriptor("application/vnd.oci.image.layer.v1.tar", layer)],
        }
    )
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                **_descriptor(_MANIFEST, manifest),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {"io.containerd.image.name": tag, "org.opencontainers.image.ref.name": tag},
            }
            for tag in tags
        ],
    }
    files: dict[str, tuple[bytes, int]] = {
        "oci-layout": (_json({"imageLayoutVersion": "1.0.0"}), 0o644),
        "index.json": (_json(index), 0o644),
    }
    for blob in (layer, config, manifest):
        files[f"blobs/sha256/{_digest(blob).split(':')[1]}"] = (blob, 0o644)
    out.write_bytes(_tar(files))


def _tar(files: dict[str, tuple[bytes, int]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _descriptor(media_type: str, data: bytes) -> dict[str, object]:
    return {"mediaType": media_type, "digest": _digest(data), "size": len(data)}
