"""Structured logging: human text or JSON lines, with the ``extra`` fields kept.

Log collectors in a cluster parse JSON lines; people reading ``kubectl logs`` prefer text.
Both carry the same fields, so ``logger.info("registered", extra={"resource": name})``
becomes ``resource=example.com/null`` in text and ``"resource": "example.com/null"`` in JSON.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}
# Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra={...}`` fields a caller attached, in the order given."""
    fields = vars(record)
    if fields.keys() <= _STANDARD:  # most records: one set comparison instead of a look at each attribute
        return {}
    return {key: value for key, value in fields.items() if key not in _STANDARD and not key.startswith("_")}


_second: tuple[int, str] = (-1, "")
"""The last whole second formatted, and its text: ``strftime`` was a tenth of a log line's cost
(the DRA driver writes one line per claim it unprepares)."""


def _timestamp(record: logging.LogRecord) -> str:
    """RFC 3339 in UTC with milliseconds: sorts as text and needs no timezone guessing."""
    global _second  # noqa: PLW0603 - a one-entry cache; a race only formats a second twice
    whole = int(record.created)
    micro = round((record.created - whole) * 1e6)  # rounded as datetime.fromtimestamp rounds
    if micro >= 1_000_000:
        whole, micro = whole + 1, micro - 1_000_000
    if _second[0] != whole:
        _second = (whole, datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{_second[1]}.{micro // 1000:03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, msg, then the extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in extra_fields(record).items():
            entry.setdefault(key, value)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = record.stack_info
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``TIME LEVEL logger: msg key=value ...``: logfmt-style fields that grep and people both read."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname:<7} {record.name}: {record.getMessage()}"
        fields = " ".join(f"{key}={_logfmt(value)}" for key, value in extra_fields(record).items())
        if fields:
            line = f"{line} {fields}"
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        if record.stack_info:
            line = f"{line}\n{record.stack_info}"
        return line


def _logfmt(value: Any) -> str:
    """Quote a field value only when it would otherwise split or mislead."""
    text = str(value)
    if not text or any(ch in text for ch in ' "=\n\t'):
        return json.dumps(text, ensure_ascii=False)
    return text


class _KubedeviceHandler(logging.StreamHandler[Any]):
    """Marks the handler we installed, so a second setup replaces it instead of doubling lines."""


def parse_level(level: str) -> int:
    try:
        return LEVELS[level.strip().lower()]
    except KeyError:
        raise ValueError(f"log level {level!r}: expected one of debug, info, warning, error, critical") from None


def setup_logging(level: str = "info", fmt: Literal["text", "json"] = "text", stream: TextIO | None = None) -> None:
    """Send every log record of the process to ``stream`` (stderr) in ``fmt`` at ``level``.

    Installed on the root logger so gRPC's and asyncio's records come out in the same
    format; calling it again (a config reload) swaps the handler rather than adding one.
    """
    if fmt not in ("text", "json"):
        raise ValueError(f"log format {fmt!r}: expected text or json")
    root = logging.getLogger()
    numeric = parse_level(level)
    for handler in [h for h in root.handlers if isinstance(h, _KubedeviceHandler)]:
        root.removeHandler(handler)
    handler = _KubedeviceHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(numeric)


@contextlib.contextmanager
def fallback_logging(level: str = "info") -> Iterator[None]:
    """Within the block, kubedevice's records at ``level`` go to stderr as text, unless the
    application has configured logging: a handler on the root or the ``kubedevice`` logger.

    For the library's ``serve()``: a plugin script that sets up no logging would otherwise show
    only warnings (Python's last-resort handler), so registrations and kubelet restarts would be
    invisible. Only the ``kubedevice`` logger is touched, never the root, so the application's own
    records and levels stay as they were; both the handler and the level are undone on exit.
    """
    logger = logging.getLogger("kubedevice")
    if logger.hasHandlers():
        yield
        return
    handler = _KubedeviceHandler(sys.stderr)
    handler.setFormatter(TextFormatter())
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(parse_level(level))
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
