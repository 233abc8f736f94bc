"""KeptGets against a real HTTP/1.1 server on a real socket: kept connections, bodies, retries, refusals.

The server is a small asyncio one that answers as Go's net/http does (Content-Length for small
bodies, chunked for streamed ones, idle connections closed at will). The claims path against
the real kube-apiserver is ``tests/e2e/test_dra_apiserver.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig

from kubedevice.dra.driver import apiget
from kubedevice.dra.driver.apiget import KeptGets, Target, Unanswered, target
from kubedevice.dra.driver.claims import ApiClaims
from kubedevice.dra.driver.state import ClaimError
from kubedevice.testing.dradriver import claim_object


@dataclass
class Server:
    """Answers any path (Content-Length), ``…/resourceclaims/c1`` (a claim), ``/chunked``, ``/missing``
    (a 404 Status); counts connections."""

    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    close_after_each: bool = False
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                self.requests.append(head)
                path = head.split(b" ")[1]
                if path.endswith(b"/chunked"):
                    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 b"5\r\n{\"a\":\r\n3;x=1\r\n 1}\r\n0\r\nTrailer: t\r\n\r\n")  # fmt: skip
                elif path.endswith(b"/silent"):
                    await asyncio.sleep(3600)
                elif path.endswith(b"/missing"):
                    body = b'{"kind":"Status","code":404,"message":"claim \\"missing\\" not found"}'
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                elif path.endswith(b"/resourceclaims/c1"):
                    body = json.dumps(claim_object("c1", ["null0"], uid="u-1")).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                else:
                    body = b'{"path":"%s"}' % path
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
                if self.close_after_each:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def serving(server: Server) -> AsyncIterator[KeptGets]:
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    gets = KeptGets(Target("127.0.0.1", port, "/prefix", None, "Bearer t0ken"), limit=4)
    try:
        yield gets
    finally:
        gets.close()
        listener.close()
        await listener.wait_closed()


async def test_sequential_gets_keep_one_connection() -> None:
    server = Server()
    async with serving(server) as gets:
        path = gets.object_path("resource.k8s.io/v1", "ns a", "resourceclaims", "c/1")
        for _ in range(5):
            assert await gets.get(path) == b'{"path":"%s"}' % path.encode()
    assert path == "/prefix/apis/resource.k8s.io/v1/namespaces/ns%20a/resourceclaims/c%2F1"
    assert server.connections == 1
    assert all(b"Authorization: Bearer t0ken\r\n" in r and b"Host: 127.0.0.1:" in r for r in server.requests)


async def test_concurrent_gets_use_at_most_the_limit() -> None:
    server = Server()
    async with serving(server) as gets:
        bodies = await asyncio.gather(*(gets.get(f"/x{i}") for i in range(32)))
    assert bodies == [b'{"path":"/x%d"}' % i for i in range(32)]
    assert server.connections <= 4


async def test_a_chunked_body_with_extensions_and_trailers() -> None:
    server = Server()
    async with serving(server) as gets:
        assert await gets.get("/chunked") == b'{"a": 1}'
        assert await gets.get("/ok") == b'{"path":"/ok"}'  # the connection is still in step
    assert server.connections == 1


async def test_a_connection_the_server_closed_while_idle_is_replaced() -> None:
    server = Server(close_after_each=True)
    async with serving(server) as gets:
        for _ in range(3):
            assert await gets.get("/ok") == b'{"path":"/ok"}'
    assert server.connections >= 3


async def test_anything_but_200_is_left_to_the_caller_with_its_status() -> None:
    server = Server()
    async with serving(server) as gets:
        with pytest.raises(Unanswered) as caught:
            await gets.get("/missing")
        assert caught.value.status == 404
        assert json.loads(caught.value.body) == {"kind": "Status", "code": 404, "message": 'claim "missing" not found'}
        assert await gets.get("/ok") == b'{"path":"/ok"}'  # the 404's body was read: still in step
    assert server.connections == 1


async def test_nothing_listening_is_unanswered_without_a_status() -> None:
    server = Server()
    async with serving(server) as gets:
        pass
    with pytest.raises(Unanswered) as caught:
        await gets.get("/ok")
    assert caught.value.status is None


def _config(user: dict[str, object], server: str = "https://api.example:6443/base") -> KubeConfig:
    return KubeConfig.from_dict({
        "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    })  # fmt: skip


def test_the_credentials_lightkube_would_send(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(variable, raising=False)
    where = target(_config({"token": "abc"}).get())
    assert where is not None
    assert (where.host, where.port, where.prefix, where.authorization) == ("api.example", 6443, "/base", "Bearer abc")
    basic = target(_config({"username": "a", "password": "b"}).get())
    assert basic is not None and basic.authorization == "Basic YTpi"
    assert target(_config({"exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1"}}).get()) is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    assert target(_config({"token": "abc"}).get()) is None


async def test_api_claims_ask_once_per_claim_and_word_errors_as_lightkube(monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim and an unknown claim through a real lightkube client's config: one request each."""
    for variable in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(variable, raising=False)
    server = Server()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    client = AsyncClient(_config({"token": "abc"}, f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"))
    claims = ApiClaims(client)
    try:
        claim = await claims.get("default", "c1")
        assert (claim.name, claim.uid, [r.device for r in claim.results]) == ("c1", "u-1", ["null0"])
        with pytest.raises(ClaimError, match=r'^cannot get claim ns/missing: claim "missing" not found$'):
            await claims.get("ns", "missing")
        assert len(server.requests) == 2  # the 404 was not asked again through lightkube
    finally:
        claims.close()
        await client.close()
        listener.close()
        await listener.wait_closed()


async def test_no_answer_in_time_is_final_and_not_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Asking again (or through lightkube) would only wait as long again, past the kubelet's deadline."""
    monkeypatch.setattr(apiget, "TIMEOUT", 0.2)
    for variable in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(variable, raising=False)
    server = Server()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    client = AsyncClient(_config({"token": "abc"}, f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"))
    claims = ApiClaims(client)
    try:
        await claims.get("default", "c1")  # a kept connection now exists: the retry path is armed
        with pytest.raises(ClaimError, match=r"^cannot get claim ns/silent: no answer within 0.2 s$"):
            await claims.get("ns", "silent")
        assert len(server.requests) == 2
    finally:
        claims.close()
        await client.close()
        listener.close()
        await asyncio.wait_for(listener.wait_closed(), 5)
