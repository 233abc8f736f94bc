"""Structured logging: the JSON and text forms carry the same fields, and setup is repeatable."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from kubedevice.logs import _timestamp, setup_logging

R = "example.com/null"


@pytest.fixture(autouse=True)
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_json_lines_carry_time_level_logger_msg_and_extra_fields() -> None:
    out = io.StringIO()
    setup_logging("info", "json", out)
    logging.getLogger("kubedevice.plugin").info("registered %s", "ok", extra={"resource": R, "devices": 4})
    (line,) = lines(out)
    entry = json.loads(line)
    assert list(entry)[:4] == ["time", "level", "logger", "msg"]
    assert entry["level"] == "info" and entry["logger"] == "kubedevice.plugin" and entry["msg"] == "registered ok"
    assert entry["resource"] == R and entry["devices"] == 4
    assert datetime.fromisoformat(entry["time"]).utcoffset() is not None


def test_json_keeps_unserialisable_extras_and_exceptions_on_one_line() -> None:
    out = io.StringIO()
    setup_logging("debug", "json", out)
    try:
        raise RuntimeError("kubelet said no")
    except RuntimeError:
        logging.getLogger("kubedevice").exception("rejected\nrequest", extra={"ids": {"b", "a"}, "resource": R})
    (line,) = lines(out)
    entry = json.loads(line)
    assert entry["msg"] == "rejected\nrequest"
    assert "RuntimeError: kubelet said no" in entry["error"]
    assert entry["ids"] in ("{'a', 'b'}", "{'b', 'a'}")


def test_an_extra_field_cannot_overwrite_the_core_fields() -> None:
    out = io.StringIO()
    setup_logging("info", "json", out)
    logging.getLogger("x").info("real", extra={"time": "fake", "level": "fake"})
    entry = json.loads(lines(out)[0])
    assert entry["time"] != "fake" and entry["level"] == "info"


def test_text_format_appends_logfmt_fields_quoting_only_when_needed() -> None:
    out = io.StringIO()
    setup_logging("info", "text", out)
    logging.getLogger("kubedevice.health").warning(
        "device unhealthy", extra={"resource": R, "device": "null-0", "reason": "not present", "empty": ""}
    )
    (line,) = lines(out)
    stamp, level, rest = line.split(maxsplit=2)
    assert stamp.endswith("Z") and level == "WARNING"
    assert rest == (
        'kubedevice.health: device unhealthy resource=example.com/null device=null-0 reason="not present" empty=""'
    )


def test_level_filters_and_is_case_insensitive() -> None:
    out = io.StringIO()
    setup_logging("WARNING", "text", out)
    log = logging.getLogger("kubedevice")
    log.info("hidden")
    log.debug("hidden")
    log.error("shown")
    assert [line.split(": ", 1)[1] for line in lines(out)] == ["shown"]


def test_setting_up_twice_replaces_the_handler_instead_of_doubling_lines() -> None:
    first, second = io.StringIO(), io.StringIO()
    setup_logging("info", "text", first)
    setup_logging("debug", "json", second)
    logging.getLogger("kubedevice").debug("once", extra={"resource": R})
    assert first.getvalue() == ""
    assert [json.loads(line)["msg"] for line in lines(second)] == ["once"]


def test_other_handlers_are_left_alone() -> None:
    theirs = logging.StreamHandler(io.StringIO())
    logging.getLogger().addHandler(theirs)
    setup_logging("info", "json", io.StringIO())
    setup_logging("info", "text", io.StringIO())
    assert theirs in logging.getLogger().handlers


@pytest.mark.parametrize(
    ("level", "fmt", "message"),
    [
        ("loud", "text", "log level 'loud'"),
        ("info", "xml", "log format 'xml'"),
    ],
)
def test_bad_level_or_format_is_a_clear_error(level: str, fmt: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        setup_logging(level, fmt, io.StringIO())  # type: ignore[arg-type]


def test_default_stream_is_stderr_so_stdout_stays_clean() -> None:
    code = (
        "import logging; from kubedevice.logs import setup_logging; setup_logging('info', 'json');"
        "logging.getLogger('kubedevice').info('hello', extra={'resource': 'r'})"
    )
    result = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert result.stdout == ""
    assert json.loads(result.stderr)["resource"] == "r"


@pytest.mark.parametrize(
    "created",
    [
        1_700_000_000.0,
        1_700_000_000.0004,
        1_700_000_000.9995,
        1_700_000_000.9999996,
        1_700_000_001.5,
        3_762_938_088.996,
    ],
)
def test_the_cached_second_formats_each_instant_as_datetime_does(created: float) -> None:
    """The time is the seconds of the last record (cached) and this record's milliseconds, rounded
    as ``datetime.fromtimestamp`` rounds: the same text as formatting each record whole."""
    record = logging.LogRecord("kubedevice.x", logging.INFO, __file__, 1, "m", None, None)
    for instant in (created - 1.0, created, created):  # another second first, then this one from the cache
        record.created = instant
        expected = datetime.fromtimestamp(instant, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        assert _timestamp(record) == expected
