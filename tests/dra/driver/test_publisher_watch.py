"""The publisher's watch-list read as a 1.37 API server writes it, over a real socket.

From 1.37 a client that accepts gzip gets a watch-list's response gzipped, one gzip member per
flush (k8s.io/apiserver pkg/endpoints/handlers/watch.go ``perFlushGzipWriter``, WatchListCompression
on by default): the initial events and their closing bookmark in the first member, each later
event in one of its own. The server below writes exactly that when the request accepts gzip, and
plain lines otherwise, as watch.go does; tests/e2e/test_dra_apiserver.py runs the same case
against a real 1.37 kube-apiserver.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
from collections.abc import AsyncIterator
from typing import Any

from lightkube import AsyncClient, KubeConfig

from kubedevice.dra.driver.publisher import INITIAL_EVENTS_END, SlicePublisher

NODE = "n1"
DRIVER = "gpu.example.com"


def line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def slice_object(name: str, version: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name, "resourceVersion": str(version)},
        "spec": {"driver": DRIVER, "nodeName": NODE, "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1}},
    }


END = {"kind": "ResourceSlice", "metadata": {"resourceVersion": "10", "annotations": {INITIAL_EVENTS_END: "true"}}}
FLUSHES = [line("ADDED", slice_object("s0", 9)) + line("BOOKMARK", END), line("DELETED", slice_object("s0", 11))]
"""What the server flushes: the snapshot and its closing bookmark, then a deletion (the kubelet's wipe)."""


class WatchServer:
    """An HTTP/1.1 server answering every request with :data:`FLUSHES` as a chunked watch stream,
    each flush one chunk: gzip members when the request accepts gzip, plain otherwise."""

    def __init__(self) -> None:
        self.encodings: list[str] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        headers = dict(h.split(": ", 1) for h in head.split("\r\n")[1:] if ": " in h)
        accepted = {k.lower(): v for k, v in headers.items()}.get("accept-encoding", "")
        self.encodings.append(accepted)
        compressed = "gzip" in accepted
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
            + (b"Content-Encoding: gzip\r\n" if compressed else b"")
            + b"\r\n"
        )
        for flush in FLUSHES:
            body = gzip.compress(flush) if compressed else flush
            writer.write(f"{len(body):x}\r\n".encode() + body + b"\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)
        with contextlib.suppress(ConnectionError):
            await reader.read()  # keep the watch open until the client ends it
        writer.close()


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[tuple[WatchServer, AsyncClient]]:
    server = WatchServer()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    config = {
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    client = AsyncClient(KubeConfig.from_dict(config))
    try:
        yield server, client
    finally:
        await client.close()
        listener.close()


async def test_a_change_after_a_gzipped_watch_lists_first_flush_is_seen() -> None:
    """The deletion after the snapshot reaches the cache; with gzip accepted, httpx would decode
    the first member only and the deletion (and every later change) would be lost."""
    async with serving() as (server, client):
        publisher = SlicePublisher(client, DRIVER, NODE, lambda: [], token_file=None)
        stream = asyncio.create_task(publisher._stream())
        try:
            async with asyncio.timeout(5):
                await publisher._listed.wait()
                assert set(publisher._cache) == {"s0"}
                while publisher._cache:
                    await asyncio.sleep(0.01)
        finally:
            stream.cancel()
            await asyncio.gather(stream, return_exceptions=True)
        assert publisher._version == "11"
        assert server.encodings == ["identity"]
