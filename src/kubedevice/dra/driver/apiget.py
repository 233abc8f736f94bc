"""GETs of single API objects over kept-alive HTTP/1.1 TLS connections: the driver's hot path.

NodePrepareResources fetches every claim it is asked for, and the kubelet waits for the answer.
Through lightkube each GET cost 1.9–3.0 ms of CPU in httpx/httpcore/anyio (their connection
pool checks every connection on every request, and a batch of 32 opened a dozen new TLS
connections), more than the rest of preparing a claim. Here a GET is one write and a read of
the status line, headers and body on a connection kept open (asyncio's own TLS), at most
``limit`` of them at once, as client-go keeps its connection to the API server.

Only what is cheap to get exactly right is done here: a GET and its answer, with the
kubeconfig's credentials as lightkube builds them (CA, client certificate, bearer token or
token file, basic auth). Any other status comes back as :class:`Unanswered` with its body; a
broken connection, exec credentials or a proxy are left to the caller's lightkube client;
see :class:`kubedevice.dra.driver.claims.ApiClaims`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

import httpx2
from lightkube.config.client_adapter import BearerAuth, BearerTokenFileAuth, user_auth, verify_cluster
from lightkube.config.kubeconfig import SingleConfig

TIMEOUT = 10.0
"""Seconds for one GET, lightkube's default timeout."""
LIMIT = 16
"""Connections kept at most: enough for the API server to answer a batch in parallel."""
MAX_HEADERS = 64 * 1024
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


class Unanswered(Exception):
    """The fast path did not get a 200; the caller asks lightkube instead."""

    def __init__(self, reason: str, status: int | None = None, body: bytes = b"", *, final: bool = False) -> None:
        super().__init__(reason)
        self.status = status
        self.body = body
        self.final = final
        """No answer in time: asking again (here or through lightkube) would only wait as long again."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where and as whom: the parts of a kubeconfig this client can honour."""

    host: str
    port: int
    prefix: str
    ssl: ssl.SSLContext | None
    authorization: str | None


def target(config: SingleConfig) -> Target | None:
    """The fast path's view of ``config``; None when only lightkube can honour it (exec
    credentials, a proxy in the environment, a scheme other than http/https)."""
    if any(os.environ.get(v) for v in PROXY_VARIABLES) or config.user is None:
        return None
    url = urlsplit(config.cluster.server)
    if url.scheme not in ("http", "https") or url.hostname is None:
        return None
    auth = user_auth(config.user)
    if auth is not None and not isinstance(auth, BearerAuth | BearerTokenFileAuth | httpx2.BasicAuth):
        return None
    context = verify_cluster(config.cluster, config.user, config.abs_file) if url.scheme == "https" else None
    port = url.port or (443 if url.scheme == "https" else 80)
    return Target(url.hostname, port, url.path.rstrip("/"), context, _authorization(auth))


def _authorization(auth: httpx2.Auth | None) -> str | None:
    """The header lightkube's auth object would set (run once; a 401 makes the caller build it again)."""
    if auth is None:
        return None
    request = httpx2.Request("GET", "https://localhost/")
    return next(auth.sync_auth_flow(request)).headers.get("Authorization")


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class KeptGets:
    """``GET path`` → body of a 200 answer, over at most ``limit`` kept connections."""

    def __init__(self, where: Target, limit: int = LIMIT) -> None:
        self.where = where
        """Replaceable: new credentials after a 401 (a rotated token file)."""
        self._idle: list[Connection] = []
        self._slots = asyncio.Semaphore(limit)
        self._host_header = where.host if where.port in (80, 443) else f"{where.host}:{where.port}"

    def object_path(self, group_version: str, namespace: str, plural: str, name: str) -> str:
        return (
            f"{self.where.prefix}/apis/{group_version}/namespaces/{quote(namespace, safe='')}"
            f"/{plural}/{quote(name, safe='')}"
        )

    async def get(self, path: str) -> bytes:
        """The body of a 200 answer; :class:`Unanswered` for anything else."""
        async with self._slots:
            reused = bool(self._idle)
            try:
                async with asyncio.timeout(TIMEOUT):
                    return await self._exchange(path)
            except TimeoutError:  # an OSError too: caught first
                raise Unanswered(f"no answer within {TIMEOUT:g} s", final=True) from None
            except (OSError, ssl.SSLError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as err:
                if not reused:
                    raise Unanswered(str(err)) from None
            # A kept connection the server closed while idle: once more on a new one (a GET repeats safely).
            try:
                async with asyncio.timeout(TIMEOUT):
                    return await self._exchange(path, fresh=True)
            except TimeoutError:
                raise Unanswered(f"no answer within {TIMEOUT:g} s", final=True) from None
            except (OSError, ssl.SSLError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as err:
                raise Unanswered(str(err)) from None

    async def _exchange(self, path: str, fresh: bool = False) -> bytes:
        connection = self._idle.pop() if self._idle and not fresh else await self._open()
        reader, writer = connection
        keep = False
        try:
            writer.write(self._request(path))
            status, length, chunked, keep = _head(await reader.readuntil(b"\r\n\r\n"))
            body = await _body(reader, length, chunked)
            if length is None and not chunked:
                keep = False  # the body ran to the end of the connection
            if status != 200:
                raise Unanswered(f"status {status}", status, body)
            return body
        finally:
            if keep:
                self._idle.append(connection)
            else:
                _close(writer)

    def _request(self, path: str) -> bytes:
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: {self._host_header}",
            "Accept: application/json",
            "User-Agent: kubedevice",
        ]
        if self.where.authorization:
            lines.append(f"Authorization: {self.where.authorization}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _open(self) -> Connection:
        where = self.where
        reader, writer = await asyncio.open_connection(
            where.host,
            where.port,
            ssl=where.ssl,
            server_hostname=where.host if where.ssl else None,
            limit=MAX_HEADERS,
        )
        return reader, writer

    def close(self) -> None:
        """Close the kept connections (new ones open on the next GET)."""
        while self._idle:
            _close(self._idle.pop()[1])


def _head(raw: bytes) -> tuple[int, int | None, bool, bool]:
    """(status, Content-Length, chunked, keep-alive) of an HTTP/1.1 response head."""
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1 response: {lines[0][:80]!r}")
    status = int(rest[:3])
    length: int | None = None
    chunked = False
    keep = version == "HTTP/1.1"
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "transfer-encoding":
            chunked = value.endswith("chunked")
        elif name == "connection":
            keep = value != "close"
    return status, length, chunked, keep


async def _body(reader: asyncio.StreamReader, length: int | None, chunked: bool) -> bytes:
    if chunked:
        parts = []
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
            pass
        return b"".join(parts)
    if length is not None:
        return await reader.readexactly(length)
    return await reader.read()


def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()
