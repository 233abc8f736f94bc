"""The Node's UID from the pod's service-account token, and the Node GET when there is none.

The tokens here are built with the claims k8s.io/kubernetes pkg/serviceaccount/claims.go writes
(``kubernetes.io.node`` of a pod-bound token); tests/e2e/test_dra_apiserver.py decodes one the
real kube-apiserver issued. The publisher's client points at a port nobody listens on, so any
request it sends fails with ConnectError: that is how "no request" and "a Node GET" are told apart.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lightkube import AsyncClient, KubeConfig

from kubedevice.dra.driver.nodeidentity import MAX_TOKEN_BYTES, node_claim, node_uid
from kubedevice.dra.driver.publisher import SlicePublisher

CONFIG = {
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "x",
}


def segment(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def jwt(payload: Any) -> str:
    return f"{segment({'alg': 'RS256', 'kid': 'k'})}.{segment(payload)}.c2lnbmF0dXJl"


def pod_token(node: str = "n1", uid: str = "8f0c7a52-uid") -> str:
    """A pod-bound token's claims as the API server writes them (node info since 1.30, GA 1.32)."""
    return jwt({
        "aud": ["https://kubernetes.default.svc"], "exp": 2000000000, "iss": "https://kubernetes.default.svc",
        "kubernetes.io": {
            "namespace": "kubedevice", "node": {"name": node, "uid": uid},
            "pod": {"name": "kubedevice-dra-x7k2p", "uid": "p-uid"},
            "serviceaccount": {"name": "kubedevice-dra", "uid": "sa-uid"},
        },
        "sub": "system:serviceaccount:kubedevice:kubedevice-dra",
    })  # fmt: skip


def test_a_pod_bound_token_names_its_node() -> None:
    assert node_claim(pod_token("worker-7", "c0ffee")) == ("worker-7", "c0ffee")
    assert node_claim(pod_token() + "\n") == ("n1", "8f0c7a52-uid")  # as the file ends


@pytest.mark.parametrize(
    "token",
    [
        jwt({"kubernetes.io": {"namespace": "a", "serviceaccount": {"name": "s", "uid": "u"}}}),  # not pod-bound
        jwt({"kubernetes.io": {"node": {"name": "n1"}}}),  # no uid
        jwt({"kubernetes.io": {"node": {"name": "n1", "uid": 7}}}),
        jwt({"kubernetes.io": {"node": "n1"}}),
        jwt(["kubernetes.io"]),
        "a.b",
        "a.%%%.c",
        f"a.{base64.urlsafe_b64encode(b'not json').decode()}.c",
        f"a.{base64.urlsafe_b64encode(bytes([0xFF, 0xFE])).decode()}.c",
        "",
    ],
)
def test_anything_else_is_no_hint(token: str) -> None:
    assert node_claim(token) is None


@given(st.text())
def test_no_text_makes_the_decoder_raise(token: str) -> None:
    node_claim(token)


def test_the_uid_only_for_this_node_from_a_readable_file(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(pod_token("n1", "u-1"))
    assert node_uid("n1", token) == "u-1"
    assert node_uid("n2", token) is None  # a token of another node (a copied file, another cluster)
    assert node_uid("n1", tmp_path / "missing") is None
    assert node_uid("n1", tmp_path) is None  # a directory
    token.write_bytes(pod_token("n1", "u-1").encode() + b" " * MAX_TOKEN_BYTES)
    assert node_uid("n1", token) is None  # too large to be a token


def publisher(token_file: Path | None) -> SlicePublisher:
    client = AsyncClient(KubeConfig.from_dict(CONFIG))
    return SlicePublisher(client, "example.com", "n1", lambda: [], token_file=token_file)


async def test_the_owner_comes_from_the_token_without_a_request_and_the_token_is_read_once(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(pod_token("n1", "u-1"))
    p = publisher(token)
    owner = await p._owner()
    assert owner == {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u-1", "controller": True}
    assert await p._owner() == owner
    p._owner_uid = None  # our slices deleted by someone else: the token may be stale now
    with pytest.raises(httpx2.ConnectError):
        await p._owner()  # a Node GET, not the token again


@pytest.mark.parametrize("content", [pod_token("n2", "u-2"), "not a token"])
async def test_without_a_token_for_this_node_the_node_is_read(tmp_path: Path, content: str) -> None:
    token = tmp_path / "token"
    token.write_text(content)
    with pytest.raises(httpx2.ConnectError):
        await publisher(token)._owner()
    with pytest.raises(httpx2.ConnectError):
        await publisher(None)._owner()
