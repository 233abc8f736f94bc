"""Refuse requests whose bytes do not decode with INVALID_ARGUMENT, not grpcio's UNKNOWN.

grpc.aio decodes a request before calling the handler, and a decoding error (invalid UTF-8 in
a string field, a truncated varint) escapes as ``UNKNOWN: Unexpected DecodeError``. This
interceptor wraps each method's decoder so a bad request reaches a small handler that answers
INVALID_ARGUMENT with the decoder's reason; wrapped handlers are built once per method.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeAlias

import grpc
from google.protobuf.message import DecodeError
from grpc import aio


class _Malformed:
    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"


class RefuseMalformed(aio.ServerInterceptor):  # type: ignore[type-arg]  # not generic at run time
    def __init__(self) -> None:
        self._wrapped: dict[str, Handler] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        details: grpc.HandlerCallDetails,
    ) -> Handler:
        method: str = details.method
        if method not in self._wrapped:
            self._wrapped[method] = _wrap(await continuation(details))
        return self._wrapped[method]


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
