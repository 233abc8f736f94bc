"""Refuse requests whose bytes do not decode with INVALID_ARGUMENT, not grpcio's UNKNOWN.

grpc.aio decodes a request before calling the handler, and a decoding error (invalid UTF-8 in
a string field, a truncated varint) escapes as ``UNKNOWN: Unexpected DecodeError``.
:func:`add_refusing_malformed` wraps each method's decoder so a bad request reaches a small
handler that answers INVALID_ARGUMENT with the decoder's reason; the handlers are wrapped once,
at registration. Not an interceptor: grpc.aio runs one as two more coroutines on every call,
which neither the device-plugin server's Allocate (benchmarks/contention.py) nor the DRA
driver's NodeUnprepareResources (benchmarks/dra_prepare.py) should pay.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, NoReturn, TypeAlias

import grpc
from google.protobuf.message import DecodeError
from grpc import aio


class _Malformed:
    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"
Generic: TypeAlias = "grpc.GenericRpcHandler[Any, Any]"


def add_refusing_malformed(add_servicer: Callable[[Any, Any], None], servicer: object, server: aio.Server) -> None:
    """``add_servicer(servicer, server)`` (a generated ``add_*Servicer_to_server``), every handler made tolerant."""
    add_servicer(servicer, _Tolerant(server))


class _Tolerant:
    """The two calls a generated ``add_*Servicer_to_server`` makes, passed on with wrapped handlers."""

    def __init__(self, server: aio.Server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers: Sequence[Generic]) -> None:
        self._server.add_generic_rpc_handlers([_TolerantGeneric(h) for h in handlers])

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Handler]) -> None:
        wrapped = {name: _wrap(h) for name, h in handlers.items()}
        self._server.add_registered_method_handlers(service, wrapped)  # type: ignore[attr-defined]  # not in the stubs


class _TolerantGeneric(grpc.GenericRpcHandler):  # type: ignore[type-arg]  # not generic at run time
    def __init__(self, inner: Generic) -> None:
        self._inner = inner
        self._wrapped: dict[str, Handler] = {}  # only methods the service has: a peer's names are unbounded

    def service(self, details: grpc.HandlerCallDetails) -> Handler | None:
        wrapped = self._wrapped.get(details.method)
        if wrapped is None:
            handler = self._inner.service(details)
            if handler is None:
                return None
            wrapped = self._wrapped.setdefault(details.method, _wrap(handler))
        return wrapped


def _wrap(handler: Any) -> Any:
    if handler is None or handler.request_streaming or handler.request_deserializer is None:
        return handler  # our service has no client streams
    decode = handler.request_deserializer

    def tolerant(raw: bytes) -> object:
        try:
            return decode(raw)
        except DecodeError as err:
            return _Malformed(str(err))

    if handler.response_streaming:
        inner_stream = handler.unary_stream

        async def stream(request: object, context: aio.ServicerContext[Any, Any]) -> AsyncIterator[object]:
            if isinstance(request, _Malformed):
                await _refuse(context, request)
            async for reply in inner_stream(request, context):
                yield reply

        return handler._replace(request_deserializer=tolerant, unary_stream=stream)
    inner_unary = handler.unary_unary

    async def unary(request: object, context: aio.ServicerContext[Any, Any]) -> object:
        if isinstance(request, _Malformed):
            await _refuse(context, request)
        return await inner_unary(request, context)

    return handler._replace(request_deserializer=tolerant, unary_unary=unary)


async def _refuse(context: aio.ServicerContext[Any, Any], request: _Malformed) -> NoReturn:
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed request: {request.reason}")
    raise AssertionError("context.abort returned")  # pragma: no cover - abort always raises
