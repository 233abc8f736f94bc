"""CEL's google.protobuf.Timestamp and Duration (standard library, every Kubernetes environment):
timestamp(), duration(), int()/string() of them, + and -, ordering, and the getters with and
without a time zone. Parsing follows Go's time.Parse(RFC3339) and time.ParseDuration; values
keep nanoseconds, and a timestamp keeps the UTC offset it was written with (for string()).
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any, ClassVar

from .engine import TYPE_DENOTATIONS
from .library import VALUE_TYPES, register
from .typevalues import TypeValue
from .values import INT_MAX, INT_MIN, TIME_OPS, TIME_TYPES, Err

TIMESTAMP = "google.protobuf.Timestamp"
DURATION = "google.protobuf.Duration"
NANOS = 1_000_000_000
MIN_UNIX, MAX_UNIX = -62135596800, 253402300799  # 0001-01-01T00:00:00Z, 9999-12-31T23:59:59Z


@dataclass(frozen=True, slots=True, order=True)
class Timestamp:
    """An instant: Unix seconds and nanoseconds; ``offset`` (seconds east of UTC) only affects string()."""

    CEL_TYPE: ClassVar[str] = TIMESTAMP
    seconds: int
    nanos: int = 0
    offset: int = field(default=0, compare=False)

    def local(self, offset: int | None = None, zone: dt.tzinfo | None = None) -> Civil:
        """Wall-clock fields in the timestamp's own offset, a given offset or a time zone (Go's
        time.In, which unlike datetime goes past year 9999)."""
        if zone is not None:
            clamped = min(max(self.seconds, MIN_UNIX + 86400), MAX_UNIX - 86400)
            shift = dt.datetime.fromtimestamp(clamped, tz=zone).utcoffset() or dt.timedelta()
            offset = int(shift.total_seconds())
        return civil(self.seconds + (self.offset if offset is None else offset))


@dataclass(frozen=True, slots=True)
class Civil:
    year: int
    month: int
    day: int
    hour: int
    minute: int
    second: int
    weekday: int  # Sunday is 0, as Go's Weekday
    yday: int  # 1-based


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def civil(seconds: int) -> Civil:
    days, rest = divmod(seconds, 86400)
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    return Civil(
        year,
        month,
        day,
        rest // 3600,
        rest // 60 % 60,
        rest % 60,
        (days + 4) % 7,
        days - _days_from_civil(year, 1, 1) + 1,
    )


@dataclass(frozen=True, slots=True, order=True)
class Duration:
    CEL_TYPE: ClassVar[str] = DURATION
    nanos: int


def _check_int64(value: int) -> int:
    if not INT_MIN <= value <= INT_MAX:
        raise Err("integer overflow")
    return value


# Parsing ---------------------------------------------------------------------------------------


def _digits(text: str, low: int, high: int) -> int:
    if not text.isascii() or not text.isdigit():
        raise ValueError(text)
    value = int(text)
    if not low <= value <= high:
        raise ValueError(text)
    return value


def _days_in(month: int, year: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


@lru_cache(maxsize=1024)
def parse_timestamp(text: str) -> Timestamp:
    """time.Parse(time.RFC3339, text), then cel-go's year 1..9999 range."""
    if len(text) > 12 and text[10] == "T" and text[11].isdigit() and text[12] == ":":
        text = text[:11] + "0" + text[11:]  # Go's layout parser takes a one-digit hour
    try:
        if len(text) < 20 or text[4] != "-" or text[7] != "-" or text[10] != "T" or text[13] != ":" or text[16] != ":":
            raise ValueError(text)
        year, month = _digits(text[0:4], 0, 9999), _digits(text[5:7], 1, 12)
        day = _digits(text[8:10], 1, _days_in(month, year))
        hour, minute, second = _digits(text[11:13], 0, 23), _digits(text[14:16], 0, 59), _digits(text[17:19], 0, 59)
        rest, nanos = text[19:], 0
        if len(rest) >= 2 and rest[0] in ".," and rest[1].isdigit():
            end = 1
            while end < len(rest) and rest[end].isascii() and rest[end].isdigit():
                end += 1
            nanos = int(rest[1:end][:9].ljust(9, "0"))
            rest = rest[end:]
        if rest == "Z":
            offset = 0
        elif len(rest) == 6 and rest[0] in "+-" and rest[3] == ":":
            offset = (_digits(rest[1:3], 0, 23) * 60 + _digits(rest[4:6], 0, 59)) * 60 * (-1 if rest[0] == "-" else 1)
        else:
            raise ValueError(text)
    except ValueError:
        raise Err(f"type conversion error from 'string' to '{TIMESTAMP}'") from None
    if year == 0:
        raise Err("timestamp overflow")
    days = _days_from_civil(year, month, day)
    seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset
    if not MIN_UNIX <= seconds <= MAX_UNIX:
        raise Err("timestamp overflow")
    return Timestamp(seconds, nanos, offset)


_UNITS = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 1_000_000, "s": NANOS, "m": 60 * NANOS, "h": 3600 * NANOS}


@lru_cache(maxsize=1024)
def parse_duration(text: str) -> Duration:
    """time.ParseDuration: [-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+, or "0"."""
    bad = Err(f"type conversion error from 'string' to '{DURATION}'")
    s, negative = text, False
    if s and s[0] in "+-":
        negative, s = s[0] == "-", s[1:]
    if s == "0":
        return Duration(0)
    if not s:
        raise bad
    total = 0
    while s:
        if not (s[0] == "." or "0" <= s[0] <= "9"):
            raise bad
        i = 0
        while i < len(s) and "0" <= s[i] <= "9":
            i += 1
        whole, s = int(s[:i] or "0"), s[i:]
        if whole >= 1 << 63:
            raise bad
        fraction, scale, has_fraction = 0, 1.0, False
        if s.startswith("."):
            j = 1
            while j < len(s) and "0" <= s[j] <= "9":
                if fraction <= ((1 << 63) - 1) // 10:  # leadingFraction stops adding on overflow
                    fraction, scale = fraction * 10 + int(s[j]), scale * 10
                j += 1
            has_fraction, s = j > 1, s[j:]
        if i == 0 and not has_fraction:
            raise bad
        k = 0
        while k < len(s) and not (s[k] == "." or "0" <= s[k] <= "9"):
            k += 1
        unit = _UNITS.get(s[:k])
        if unit is None:
            raise bad
        s = s[k:]
        if whole > (1 << 63) // unit:
            raise bad
        value = whole * unit
        if fraction > 0:
            value += int(float(fraction) * (float(unit) / scale))
            if value > 1 << 63:
                raise bad
        total += value
        if total > 1 << 63:
            raise bad
    if negative:
        return Duration(-total)
    if total > INT_MAX:
        raise bad
    return Duration(total)


# Conversions and arithmetic ---------------------------------------------------------------------


def to_timestamp(value: Any) -> Timestamp:
    if type(value) is Timestamp:
        return value
    if type(value) is str:
        return parse_timestamp(value)
    if not MIN_UNIX <= value <= MAX_UNIX:
        raise Err("timestamp overflow")
    return Timestamp(value, 0)


def to_duration(value: Any) -> Duration:
    return value if type(value) is Duration else parse_duration(value)


def _format_fraction(nanos: int) -> str:
    return ("." + f"{nanos:09d}".rstrip("0")) if nanos else ""


def timestamp_string(t: Timestamp) -> str:
    """Format(time.RFC3339Nano) in the timestamp's own offset."""
    local = t.local()
    sign, offset = "-" if t.offset < 0 else "+", abs(t.offset)
    zone = "Z" if t.offset == 0 else f"{sign}{offset // 3600:02d}:{offset // 60 % 60:02d}"
    return (
        f"{local.year:04d}-{local.month:02d}-{local.day:02d}T{local.hour:02d}:{local.minute:02d}:"
        f"{local.second:02d}{_format_fraction(t.nanos)}{zone}"
    )


def duration_string(d: Duration) -> str:
    """strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"."""
    whole = _truncated(d.nanos, NANOS)
    rest = d.nanos - whole * NANOS
    seconds = float(whole) + float(rest) / 1e9
    text = format(Decimal(repr(seconds)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text}s"


def add(a: Any, b: Any) -> Any:
    if type(a) is Duration and type(b) is Duration:
        return Duration(_check_int64(a.nanos + b.nanos))
    t, d = (a, b) if type(a) is Timestamp else (b, a)
    total = t.seconds * NANOS + t.nanos + d.nanos
    if not MIN_UNIX <= total // NANOS <= MAX_UNIX:  # addTimeDurationChecked's range check
        raise Err("timestamp overflow")
    return Timestamp(total // NANOS, total % NANOS, t.offset)


def subtract(a: Any, b: Any) -> Any:
    if type(b) is Duration:
        if type(a) is Duration:
            return Duration(_check_int64(a.nanos - b.nanos))
        return add(a, Duration(-b.nanos))
    return Duration(_check_int64((a.seconds - b.seconds) * NANOS + a.nanos - b.nanos))


# Getters -----------------------------------------------------------------------------------------

_ATOI = re.compile(r"[+-]?[0-9]+")


@lru_cache(maxsize=256)
def _zone(name: str) -> dt.tzinfo:
    """cel-go's timeZone(): an IANA name, or an offset [+-]HH:MM."""
    if ":" not in name:
        if name in ("", "UTC"):
            return dt.UTC
        try:
            return zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise Err(f"unknown time zone {name}") from None
    hours_text, _, minutes_text = name.partition(":")
    if _ATOI.fullmatch(hours_text) is None or _ATOI.fullmatch(minutes_text) is None:  # strconv.Atoi
        raise Err(f"invalid time zone {name}")
    hours, minutes = int(hours_text), int(minutes_text)
    offset = hours * 60 - minutes if name.startswith("-") else hours * 60 + minutes
    return dt.timezone(dt.timedelta(minutes=offset))


_FIELDS: dict[str, Callable[[Civil, int], int]] = {
    "getFullYear": lambda t, n: t.year,
    "getMonth": lambda t, n: t.month - 1,
    "getDayOfYear": lambda t, n: t.yday - 1,
    "getDayOfMonth": lambda t, n: t.day - 1,
    "getDate": lambda t, n: t.day,
    "getDayOfWeek": lambda t, n: t.weekday,
    "getHours": lambda t, n: t.hour,
    "getMinutes": lambda t, n: t.minute,
    "getSeconds": lambda t, n: t.second,
    "getMilliseconds": lambda t, n: n // 1_000_000,
}
_DURATION_FIELDS = {
    "getHours": 3600 * NANOS,
    "getMinutes": 60 * NANOS,
    "getSeconds": NANOS,
    "getMilliseconds": 1_000_000,
}


def _getter(name: str) -> Any:
    get = _FIELDS[name]

    def utc(t: Timestamp) -> int:
        return get(t.local(0), t.nanos)

    def zoned(t: Timestamp, zone: str) -> int:
        return get(t.local(zone=_zone(zone)), t.nanos)

    return utc, zoned


def _duration_getter(unit: int) -> Any:
    return lambda d: _truncated(d.nanos, unit)


def _truncated(nanos: int, unit: int) -> int:
    """Go's integer division (toward zero)."""
    return nanos // unit if nanos >= 0 else -(-nanos // unit)


def _register() -> None:
    VALUE_TYPES[TIMESTAMP] = (Timestamp,)
    VALUE_TYPES[DURATION] = (Duration,)
    TIME_TYPES.update({Timestamp: "timestamp", Duration: "duration"})
    TIME_OPS.update({"+": add, "-": subtract, "negate": lambda d: Duration(_check_int64(-d.nanos))})
    TYPE_DENOTATIONS.update({name: TypeValue(name) for name in (TIMESTAMP, DURATION)})
    for source in ("string", "int", TIMESTAMP):
        register("timestamp", False, (source,), TIMESTAMP, to_timestamp)
    for source in ("string", DURATION):
        register("duration", False, (source,), DURATION, to_duration)
    register("int", False, (TIMESTAMP,), "int", lambda t: t.seconds)
    register("int", False, (DURATION,), "int", lambda d: d.nanos)
    register("string", False, (TIMESTAMP,), "string", timestamp_string)
    register("string", False, (DURATION,), "string", duration_string)
    for name in _FIELDS:
        utc, zoned = _getter(name)
        register(name, True, (TIMESTAMP,), "int", utc)
        register(name, True, (TIMESTAMP, "string"), "int", zoned)
    for name, unit in _DURATION_FIELDS.items():
        register(name, True, (DURATION,), "int", _duration_getter(unit))


_register()
