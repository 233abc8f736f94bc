"""CEL timestamps and durations (the standard library's google.protobuf.Timestamp/Duration), each
expected outcome as Kubernetes v0.37.2 gives it (observed with the Go program of tests/interop/cel):
Go's RFC 3339 and duration parsing, ranges, offsets kept for string(), time zones in getters."""

from __future__ import annotations

import pytest

from kubedevice.dra.cel import CELError, DeviceInput, compile_general, compile_selector

DEVICE = DeviceInput("gpu.example.com")
CASES = [
    ('timestamp("2024-01-02T03:04:05Z") < timestamp("2024-01-02T03:04:06Z")', "true"),
    ('timestamp("2024-01-02T03:04:05.123456789Z").getMilliseconds() == 123', "true"),
    ('timestamp("2024-01-02T03:04:05+01:00").getHours() == 2', "true"),
    ('string(timestamp("2024-01-02T03:04:05+01:00")) == "2024-01-02T03:04:05+01:00"', "true"),
    ('string(timestamp("2024-01-02T03:04:05.500Z")) == "2024-01-02T03:04:05.5Z"', "true"),
    ('string(timestamp(0)) == "1970-01-01T00:00:00Z"', "true"),
    ('int(timestamp("1969-12-31T23:59:59.5Z")) == -1', "true"),
    ('timestamp("2024-02-30T00:00:00Z") == timestamp(0)', "compile"),
    ('timestamp("2024-01-02 03:04:05Z") == timestamp(0)', "compile"),
    ('timestamp("2024-01-02T3:04:05Z") == timestamp(0)', "false"),
    ('timestamp("2024-01-02T03:04:05,5Z").getMilliseconds() == 500', "true"),
    ('timestamp("10000-01-01T00:00:00Z") == timestamp(0)', "compile"),
    ('timestamp("0001-01-01T00:00:00Z").getFullYear() == 1', "true"),
    # additions leaving years 1..9999 are errors (addTimeDurationChecked), found by the differential run
    ('timestamp("9999-12-31T23:59:59Z") + duration("1h30m") > timestamp("2024-01-02T03:04:05Z")', "runtime"),
    ('timestamp("0001-01-01T00:00:00Z") - duration("1s") < timestamp("2024-01-02T03:04:05Z")', "runtime"),
    ('timestamp("9999-12-31T23:59:59.999999999Z").getFullYear() == 9999', "true"),
    ('timestamp("2024-01-01T00:00:00Z").getDayOfWeek() == 1', "true"),
    ('timestamp("2024-03-01T00:00:00Z").getDayOfYear() == 60', "true"),
    (
        'cel.bind(t, timestamp("2024-03-01T00:00:00Z"), '
        "t.getMonth() == 2 && t.getDate() == 1 && t.getDayOfMonth() == 0)",
        "true",
    ),
    ('timestamp("2024-03-01T00:30:00Z").getHours("America/New_York") == 19', "true"),
    ('timestamp("2024-03-01T00:30:00Z").getHours("-05:30") == 19', "true"),
    ('timestamp("2024-03-01T00:30:00Z").getMinutes("+05:30") == 0', "true"),
    ('timestamp("2024-03-01T00:30:00Z").getHours("Mars/Olympus") == 1', "runtime"),
    ('timestamp("2024-03-01T00:30:00Z").getHours("+05:99") == 1', "false"),
    ('duration("1h30m").getMinutes() == 90', "true"),
    ('duration("-1.5h").getHours() == -1', "true"),
    ('duration("1.5s").getMilliseconds() == 1500', "true"),
    ('string(duration("1h")) == "3600s"', "true"),
    ('string(duration("1.5s")) == "1.5s"', "true"),
    ('string(duration("100ns")) == "0.0000001s"', "true"),
    ('string(duration("-2m3.25s")) == "-123.25s"', "true"),
    ('duration("1µs") == duration("1000ns")', "true"),
    ('duration("0") == duration("0s")', "true"),
    ('duration("1") == duration("0s")', "compile"),
    ('duration("1d") == duration("0s")', "compile"),
    ('duration(".5s") == duration("500ms")', "true"),
    ('duration("5.s") == duration("5s")', "true"),
    ('duration("9223372036854775807ns") > duration("0s")', "true"),
    ('duration("9223372036854775808ns") > duration("0s")', "compile"),
    ('duration("2562047h") > duration("0s")', "true"),
    ('duration("2562048h") > duration("0s")', "compile"),
    ('int(duration("1s")) == 1000000000', "true"),
    ('timestamp("2024-01-01T00:00:00Z") + duration("1h") == timestamp("2024-01-01T01:00:00Z")', "true"),
    ('duration("1h") + timestamp("2024-01-01T00:00:00Z") == timestamp("2024-01-01T01:00:00Z")', "true"),
    ('timestamp("2024-01-01T01:00:00Z") - timestamp("2024-01-01T00:00:00Z") == duration("1h")', "true"),
    ('timestamp("2024-01-01T01:00:00Z") - duration("1h") == timestamp("2024-01-01T00:00:00Z")', "true"),
    ('duration("1h") - duration("30m") == duration("30m")', "true"),
    ('-duration("1h") < duration("0s")', "compile"),
    ('timestamp("9999-12-31T23:59:59Z") - timestamp("0001-01-01T00:00:00Z") > duration("0s")', "runtime"),
    ('timestamp("2024-01-01T00:00:00Z") == timestamp("2024-01-01T01:00:00+01:00")', "true"),
    ('string(timestamp("2024-01-01T01:00:00+01:00") + duration("1h")) == "2024-01-01T02:00:00+01:00"', "true"),
    ('type(timestamp(0)) == google.protobuf.Timestamp && type(duration("1s")) == google.protobuf.Duration', "true"),
    ("[timestamp(5), timestamp(1)].sort() == [timestamp(1), timestamp(5)]", "true"),
    ('[duration("2s"), duration("1s")].min() == duration("1s")', "true"),
    ("dyn(timestamp(0)) == 0", "false"),
    ("timestamp(0) + 1 == timestamp(1)", "compile"),
    ("timestamp(device.driver) == timestamp(0)", "runtime"),
    ('duration(device.driver) == duration("0s")', "runtime"),
    ("timestamp(253402300800) == timestamp(0)", "compile"),
    ("timestamp(-62135596800).getFullYear() == 1", "true"),
    ('timestamp("2024-01-01T00:00:00Z").getFullYear(device.driver) == 1', "runtime"),
    ('-dyn(duration("1h")) < duration("0s")', "true"),
    ('timestamp("2024-03-01T00:30:00Z").getHours("+05:99") == 1', "false"),
    ('timestamp("2024-01-02T3:04:05Z").getHours() == 3', "true"),
]


def outcome(compile_fn: object, expression: str) -> str:
    try:
        return "true" if compile_fn(expression).matches(DEVICE) else "false"  # type: ignore[operator]
    except CELError as error:
        return error.kind


@pytest.mark.parametrize("compile_fn", [compile_selector, compile_general])
@pytest.mark.parametrize(("expression", "expected"), CASES)
def test_like_kubernetes(compile_fn: object, expression: str, expected: str) -> None:
    assert outcome(compile_fn, expression) == expected
