"""This node's UID from the pod's service-account token: the owner of our ResourceSlices
without a Node GET.

A token bound to a Pod on a node carries the node's name and UID in its private claims
(``kubernetes.io.node.name``/``uid``, k8s.io/kubernetes pkg/serviceaccount/claims.go, under the
ServiceAccountTokenPodNodeInfo feature gate, GA and locked on since 1.32): the kubelet mounts
such a token into every pod, so a driver in a DaemonSet pod already holds its Node's UID.

The payload is decoded without checking the signature: the token is our own, read from our
own pod's volume, and the UID is only a hint. When it is wrong (a Node deleted and created
again since the token was issued), the garbage collector deletes the slices it owned and the
publisher reads the Node then (see ``publisher``). Anything unreadable or not about this node is
no hint at all, and the publisher reads the Node as before.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
"""Where the kubelet mounts a pod's projected service-account token."""
MAX_TOKEN_BYTES = 64 * 1024
"""A token is a few kilobytes; more is not a token and is not read."""


def node_claim(token: str) -> tuple[str, str] | None:
    """``(name, uid)`` of the ``kubernetes.io.node`` claim of a JWT, or None without one."""
    parts = token.strip().split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims: Any = json.loads(base64.urlsafe_b64decode(payload))
    except ValueError:  # binascii.Error, bad UTF-8 and bad JSON are all ValueErrors
        return None
    node = _get(_get(claims, "kubernetes.io"), "node")
    name, uid = _get(node, "name"), _get(node, "uid")
    if isinstance(name, str) and isinstance(uid, str) and name and uid:
        return name, uid
    return None


def node_uid(node: str, token_file: Path = SERVICE_ACCOUNT_TOKEN) -> str | None:
    """The UID of Node ``node`` from the token in ``token_file``; None when the file is
    missing, unreadable or too large, or its token names no node or another node."""
    try:
        with token_file.open("rb") as stream:
            data = stream.read(MAX_TOKEN_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_TOKEN_BYTES:
        return None
    claim = node_claim(data.decode("ascii", errors="replace"))
    return claim[1] if claim is not None and claim[0] == node else None


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None
