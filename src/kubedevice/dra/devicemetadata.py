"""The device metadata files' format (KEP-5304), as writer and reader must agree on it.

The node driver writes them (:mod:`kubedevice.dra.driver.metadata`) and the conformance
checker reads them back (``kubedevice check --dra``): both take the API group and versions,
where a container finds a request's file and how a file's JSON stream is read from here, so the
checker needs nothing of the driver.
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any

GROUP = "metadata.resource.k8s.io"
VERSIONS = ("v1beta1", "v1alpha1")
"""Written in this order (newest first); a consumer takes the first it knows."""
CONTAINER_DIR = "/var/run/kubernetes.io/dra-device-attributes"
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_CDI_VENDOR = re.compile(r"[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?\Z")


def kind_error(driver: str) -> str | None:
    """Why ``<driver>/metadata`` cannot be a CDI kind (the runtime's parser would refuse the spec), or None.

    A CDI vendor starts with a letter; a DRA driver name may start with a digit."""
    if _CDI_VENDOR.match(driver):
        return None
    return (
        f"device metadata needs a driver name that starts with a letter: {driver!r} is the CDI vendor of its spec kind"
    )


def container_path(driver: str, claim_name: str, pod_claim_name: str | None, request: str) -> str:
    """Where a container finds a request's file: ``metadata.ResourceClaimFilePath``, or
    ``ResourceClaimTemplateFilePath`` for a claim made from a template (Go's ``filepath.Join``)."""
    where = ("resourceclaimtemplates", pod_claim_name) if pod_claim_name else ("resourceclaims", claim_name)
    return go_join(CONTAINER_DIR, *where, request, f"{driver}-metadata.json")


def read_stream(text: str) -> list[Any]:
    """The JSON values of a metadata file in order, as a reader's ``json.Decoder`` takes them one by
    one (whitespace between them); ``ValueError`` if it is not such a stream."""
    decoder, values, position = json.JSONDecoder(), [], 0
    while (position := _JSON_SPACE.match(text, position).end()) < len(text):  # type: ignore[union-attr]
        value, position = decoder.raw_decode(text, position)
        values.append(value)
    return values


def go_join(*parts: str) -> str:
    """``filepath.Join``: the non-empty parts joined and cleaned (``path.Clean`` keeps no ``//`` root)."""
    joined = posixpath.normpath("/".join(p for p in parts if p))
    return joined[1:] if joined.startswith("//") else joined
