"""Carry TCP connections between the host's 127.0.0.1 and the cluster's private network namespace.

The cluster has no route off the machine; the host reaches its ports through a pair of relays.
Unix sockets live in the filesystem, so they cross network namespaces: ``host`` listens on
127.0.0.1:PORT and forwards each connection to ``DIR/PORT.sock``; ``inside`` (run in the
namespace) listens there and connects to 127.0.0.1:PORT. No other address is ever dialled.

``--also-inside PORT...`` serves those ports the ``inside`` way in the same process: a further
node of the cluster runs one relay that dials the control plane's API server (``host`` side) and
serves its own kubelet's healthz (``inside`` side), one Python process instead of two.

Run by file path (``python3 relay.py host|inside DIR PORT... [--also-inside PORT...]``) so the
cluster's processes use this exact file whatever kubedevice the interpreter would import.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from pathlib import Path

Dial = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until EOF, then pass the half-close on (HTTP clients may shut down their write side)."""
    with contextlib.suppress(OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


async def _splice(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, dial: Dial) -> None:
    try:
        far_reader, far_writer = await dial()
    except OSError:
        writer.close()
        return
    await asyncio.gather(_pipe(reader, far_writer), _pipe(far_reader, writer))
    for end in (writer, far_writer):
        end.close()


def _socket(directory: Path, port: int) -> Path:
    return directory / f"{port}.sock"


def _handler(dial: Dial) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _splice(reader, writer, dial)

    return handle


async def serve(side: str, directory: Path, ports: list[int], also_inside: list[int] | None = None) -> None:
    """Listen for every port (``also_inside``: the ``inside`` way); run until killed."""
    servers = []
    listeners = [*((side, port) for port in ports), *(("inside", port) for port in also_inside or [])]
    for way, port in listeners:
        path = _socket(directory, port)
        if way == "host":
            dial: Dial = functools.partial(asyncio.open_unix_connection, str(path))
            servers.append(await asyncio.start_server(_handler(dial), "127.0.0.1", port))
        else:
            dial = functools.partial(asyncio.open_connection, "127.0.0.1", port)
            path.unlink(missing_ok=True)  # ours: left by a relay killed before (the directory is the cluster's)
            servers.append(await asyncio.start_unix_server(_handler(dial), str(path)))
    await asyncio.gather(*(server.serve_forever() for server in servers))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("side", choices=("host", "inside"))
    parser.add_argument("directory", type=Path)
    parser.add_argument("ports", type=int, nargs="+")
    parser.add_argument("--also-inside", type=int, nargs="+", default=[])
    args = parser.parse_args()
    args.directory.mkdir(parents=True, exist_ok=True)
    asyncio.run(serve(args.side, args.directory, args.ports, args.also_inside))


if __name__ == "__main__":
    main()
