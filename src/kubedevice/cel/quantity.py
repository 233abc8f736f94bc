"""Exact port of Kubernetes' resource.Quantity as far as CEL can observe it.

Kubernetes keeps a quantity either as an int64 with a decimal scale or as an arbitrary
precision decimal, and some answers (``isInteger``, ``asInteger``) depend on which one a
value happens to use, so both representations are modelled, not just the numeric value.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from ..errors import KubedeviceError

_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)
_NANO = -9
_MAX_INT64_FACTORS = 18
_DEC_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BIN_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DIGITS = "0123456789"


# resource.ErrFormatWrong, word for word
FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


class QuantityError(KubedeviceError, ValueError):
    """The string is not a Kubernetes quantity."""


@dataclass(frozen=True, slots=True)
class Quantity:
    """``unscaled * 10**-scale``; ``small`` marks Kubernetes' int64Amount representation."""

    unscaled: int
    scale: int
    small: bool

    @property
    def value(self) -> Fraction:
        """The exact numeric value."""
        return Fraction(self.unscaled) * Fraction(10) ** -self.scale

    def cmp(self, other: Quantity) -> int:
        if self.scale == other.scale:
            a, b = self.unscaled, other.unscaled
            return int(a > b) - int(a < b)
        scale = max(self.scale, other.scale)
        a = self.unscaled * 10 ** (scale - self.scale)
        b = other.unscaled * 10 ** (scale - other.scale)
        return int(a > b) - int(a < b)

    def sign(self) -> int:
        return (self.unscaled > 0) - (self.unscaled < 0)

    def as_int64(self) -> int | None:
        """Kubernetes' AsInt64: only int64Amount with a non-negative scale converts."""
        if not self.small or self.scale > 0:
            return None
        result = self.unscaled * 10 ** (-self.scale)
        return result if _INT64_MIN <= result <= _INT64_MAX else None

    def approximate_float(self) -> float:
        exponent = -self.scale
        base = float(self.unscaled)
        if exponent == 0:
            return base
        return base * _pow10(exponent)

    def add(self, other: Quantity) -> Quantity:
        if self.small and other.small:
            summed = _int64_add(self, other)
            if summed is not None:
                return summed
        scale = max(self.scale, other.scale)
        total = self.unscaled * 10 ** (scale - self.scale) + other.unscaled * 10 ** (scale - other.scale)
        return Quantity(total, scale, False)

    def sub(self, other: Quantity) -> Quantity:
        """Quantity.Sub: the int64 path negates with Go's wrap-around, then adds."""
        if self.small and other.small:
            negated = -other.unscaled if other.unscaled != _INT64_MIN else _INT64_MIN
            summed = _int64_add(self, Quantity(negated, other.scale, True))
            if summed is not None:
                return summed
        return self.add(Quantity(-other.unscaled, other.scale, False))


def _pow10(exponent: int) -> float:
    if exponent > 308:
        return float("inf")
    if exponent < -323:
        return 0.0
    return float(f"1e{exponent}")


def _fits(value: int) -> bool:
    return _INT64_MIN <= value <= _INT64_MAX


def _int64_add(a: Quantity, b: Quantity) -> Quantity | None:
    """int64Amount.Add; None when Kubernetes would fall back to the decimal form."""
    if b.unscaled == 0:
        return a
    if a.unscaled == 0:
        return b
    # Quantity scale here is inf.Dec style (positive = fraction digits); Kubernetes' int64Amount
    # scale is its negation, so the larger exponent is the smaller scale.
    if a.scale == b.scale:
        total, scale = a.unscaled + b.unscaled, a.scale
    elif a.scale < b.scale:
        shifted = a.unscaled * 10 ** (b.scale - a.scale)
        if not _fits(shifted):
            return None
        total, scale = shifted + b.unscaled, b.scale
    else:
        shifted = b.unscaled * 10 ** (a.scale - b.scale)
        if not _fits(shifted):
            return None
        total, scale = a.unscaled + shifted, a.scale
    return Quantity(total, scale, True) if _fits(total) else None


def from_int(value: int) -> Quantity:
    """resource.NewQuantity(value, ...)."""
    return Quantity(value, 0, True)


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """parseQuantityString: sign, value, integer digits, fraction digits, suffix."""
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        dstart = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[dstart:pos]
    if pos >= end:
        return positive, text, num, denom, ""
    value = text[:pos]
    return positive, value, num, denom, _suffix(text, pos)


def _suffix(text: str, pos: int) -> str:
    start, end = pos, len(text)
    while pos < end and text[pos] in "eEinumkKMGTP":
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(FORMAT_WRONG)
    return text[start:]


def _interpret(suffix: str) -> tuple[int, int, str]:
    if suffix in _DEC_SUFFIXES:
        return 10, _DEC_SUFFIXES[suffix], "dec"
    if suffix in _BIN_SUFFIXES:
        return 2, _BIN_SUFFIXES[suffix], "bin"
    if len(suffix) > 1 and suffix[0] in "eE":
        body = suffix[1:]
        digits = body[1:] if body[0] in "+-" else body
        if not digits or any(c not in _DIGITS for c in digits):
            raise QuantityError("unable to parse quantity's suffix")
        exponent = int(body)
        if not _fits(exponent):
            raise QuantityError("unable to parse quantity's suffix")
        exponent = (exponent + (1 << 31)) % (1 << 32) - (1 << 31)  # Go's int32() conversion
        return 10, exponent, "exp"
    raise QuantityError("unable to parse quantity's suffix")


@lru_cache(maxsize=4096)
def parse_quantity(text: str) -> Quantity:
    """resource.ParseQuantity, including its int64 fast path and nano round-up."""
    if not text:
        raise QuantityError(FORMAT_WRONG)
    if text == "0":
        return Quantity(0, 0, True)
    positive, value, num, denom, suffix = _split(text)
    base, exponent, fmt = _interpret(suffix)
    fast = _fast_path(positive, num, denom, (exponent, fmt))
    return fast if fast is not None else _slow_path(value, base, exponent, fmt)


def _fast_path(positive: bool, num: str, denom: str, suffix: tuple[int, str]) -> Quantity | None:
    """The int64Amount branch of ParseQuantity; None where Kubernetes falls back to inf.Dec."""
    exponent, fmt = suffix
    mantissa, scale = 1, 0
    if fmt != "bin":
        scale = exponent
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
    elif exponent >= 0 and not denom:
        mantissa = 1 << exponent
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
    else:
        precision = -1
    if precision < 0:
        return None
    scale -= len(denom)
    if scale < _NANO:
        return None
    digits = int(num + denom)
    if not _fits(digits) or not _fits(digits * mantissa):
        if not _fits(digits):
            raise QuantityError("unable to parse quantity's numeric part")
        return None
    result = digits * mantissa
    return Quantity(result if positive else -result, -scale, True)


def _slow_path(value: str, base: int, exponent: int, fmt: str) -> Quantity:
    try:
        amount = Fraction(value) if value not in ("", "+", "-") else Fraction(0)
    except ValueError as exc:
        raise QuantityError("unable to parse quantity's numeric part") from exc
    amount *= Fraction(10) ** exponent if base == 10 else Fraction(2) ** exponent
    negative = amount < 0
    amount = abs(amount)
    nanos = amount * 10**9
    rounded = -(-nanos.numerator // nanos.denominator)
    unscaled, scale = rounded, 9
    if amount == 0:
        unscaled, scale = 0, 0
    if fmt == "bin" and Fraction(unscaled, 10**scale) > _INT64_MAX:
        unscaled, scale = _INT64_MAX, 0
    return Quantity(-unscaled if negative else unscaled, scale, False)


@dataclass(frozen=True, slots=True)
class ComputedQuantity(Quantity):
    """The result of add()/sub(): Kubernetes returns a *Quantity there, and Quantity.Equal only
    accepts a Quantity value on its right, so ``x == q.add(r)`` is a runtime error upstream."""


def computed(q: Quantity) -> ComputedQuantity:
    return ComputedQuantity(q.unscaled, q.scale, q.small)


_FORMATS = {"dec": "DecimalSI", "bin": "BinarySI", "exp": "DecimalExponent"}


def format_of(text: str) -> tuple[str, bool]:
    """The ``Format`` ParseQuantity gives ``text``, and whether the quantity keeps ``text`` as its
    ``String()`` (ParseQuantity's "if the number is in canonical form, reuse the string"; any other
    quantity prints canonically). ``text`` must parse."""
    if text == "0":
        return "DecimalSI", True
    positive, _, num, denom, suffix = _split(text)
    _, exponent, fmt = _interpret(suffix)
    kept = _fast_path(positive, num, denom, (exponent, fmt)) is not None
    shifted = num + denom
    if fmt == "bin":
        kept = kept and exponent % 10 == 0 and int(shifted) & 7 != 0
    else:
        kept = kept and (exponent - len(denom)) % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
    return _FORMATS[fmt], kept
