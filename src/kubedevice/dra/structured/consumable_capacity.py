"""Consumable capacity as the scheduler computes it: how much of a device one allocation takes.

``internal/incubating/consumable_capacity.go`` of ``k8s.io/dynamic-resource-allocation`` v0.37.2
(the variant the scheduler runs with the 1.36 and 1.37 default features), and :class:`Amount`,
the one quantity type of the allocator and ``kubedevice dra available``:

- a request names some of the device's capacities; one the device lacks rules the device out;
- each capacity of the device is consumed: the request's amount rounded up by the capacity's
  ``requestPolicy`` (``validRange``: to ``min``, then to ``min`` plus a multiple of ``step``;
  ``validValues``: to the first value at least as large), or, without a request, the policy's
  ``default`` or else the whole capacity;
- the device fits when no consumed amount violates the policy and each capacity, with what the
  allocated claims and the claims being allocated consume of it, stays within its value.

``FractionalCapacityRange`` (milli-value rounding of fractional ranges) is not a gate of 1.36 or
1.37 and the scheduler passes it off, so ranges round as ``Quantity.Value()`` does: each of the
request, ``min`` and ``step`` rounded up to an integer first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from ...cel.quantity import Quantity, QuantityError, format_of, from_int, parse_quantity
from ...errors import KubedeviceError

_MAX_INT64 = (1 << 63) - 1

Exact = int | Fraction
"""An exact value: an ``int`` where it is whole, which the counter and capacity checks compare many
times faster than a ``Fraction`` (benchmarks/allocate_vs_go.py)."""


class CapacityError(KubedeviceError):
    """A request the allocator must refuse outright (``errCapacityRequestNotRepresentable``, ...),
    or a quantity that does not parse; the message names where."""


@dataclass(frozen=True, slots=True)
class Amount:
    """``resource.Quantity``: its value, its ``Format``, and the string Kubernetes writes for it.

    ``kept`` is the text it was parsed from where ``ParseQuantity`` keeps that text as the
    quantity's ``String()`` (text already in canonical form); any other quantity, and every one
    computed (``NewQuantity``, ``Add``, ``Sub``), prints in the canonical form of its format.
    """

    quantity: Quantity
    fmt: str  # "BinarySI", "DecimalSI" or "DecimalExponent", as resource.Format
    kept: str | None = None
    value: Exact = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        exact = self.quantity.value
        object.__setattr__(self, "value", exact.numerator if exact.denominator == 1 else exact)

    def __str__(self) -> str:
        return self.kept if self.kept is not None else canonical(self.value, self.fmt)

    def plus(self, other: Amount) -> Amount:
        """``Quantity.Add``: the sum keeps the receiver's format."""
        return Amount(self.quantity.add(other.quantity), self.fmt)

    def minus(self, other: Amount) -> Amount:
        """``Quantity.Sub``: the difference keeps the receiver's format."""
        return Amount(self.quantity.sub(other.quantity), self.fmt)


def parse(text: Any, where: str) -> Amount:
    """A quantity as ``resource.ParseQuantity`` reads it; a bad one raises :class:`CapacityError` naming ``where``."""
    try:
        return _parse(str(text))
    except QuantityError as error:
        raise CapacityError(f'{where}: Invalid value: "{text}": {error}') from None


@lru_cache(maxsize=4096)
def _parse(text: str) -> Amount:
    """Kept per text: every device of a pool repeats the same few quantities, and parsing them cost
    more than the rest of a capacity check (benchmarks/allocate_vs_go.py). Errors are not kept."""
    quantity = parse_quantity(text)
    fmt, kept = format_of(text)
    return Amount(quantity, fmt, text if kept else None)


def new_quantity(value: int, fmt: str) -> Amount:
    """``resource.NewQuantity(value, format)``."""
    return Amount(from_int(value), fmt)


_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


def canonical(value: Exact, fmt: str) -> str:
    """Quantity.String's canonical form (quantity.go, ``CanonicalizeBytes``).

    Binary only for an integer of magnitude at least 1024, else decimal with an exponent that
    is a multiple of three; values finer than a nano are rounded up, as Kubernetes does.
    """
    if fmt == "BinarySI" and value.denominator == 1 and abs(int(value)) >= 1024:
        number, power = int(value), 0
        while number % 1024 == 0 and power < len(_BINARY) - 1 and number:
            number, power = number // 1024, power + 1
        return f"{number}{_BINARY[power]}"
    nanos = value * 10**9
    number = -((-nanos.numerator) // nanos.denominator)  # round up to a nano
    exponent = -9
    while number and number % 1000 == 0 and exponent < 18:
        number, exponent = number // 1000, exponent + 3
    if number == 0:
        return "0"
    if fmt == "DecimalExponent":
        return f"{number}e{exponent}" if exponent else str(number)
    return f"{number}{_DECIMAL[exponent]}"


@dataclass(frozen=True)
class Policy:
    """``DeviceCapacity.requestPolicy``: a default and valid values or a valid range."""

    default: Amount | None = None
    valid_values: tuple[Amount, ...] | None = None
    minimum: Amount | None = None
    maximum: Amount | None = None
    step: Amount | None = None
    has_range: bool = False


@dataclass(frozen=True)
class Capacity:
    value: Amount
    policy: Policy | None


def policy_of(raw: Mapping[str, Any] | None, where: str) -> Policy | None:
    """The API's ``requestPolicy`` map as a :class:`Policy`."""
    if raw is None:
        return None
    valid_range = raw.get("validRange")

    def optional(mapping: Mapping[str, Any] | None, key: str, path: str) -> Amount | None:
        value = (mapping or {}).get(key)
        return None if value is None else parse(value, f"{path}.{key}")

    values = raw.get("validValues")
    return Policy(
        default=optional(raw, "default", where),
        valid_values=None if values is None else tuple(parse(v, f"{where}.validValues") for v in values),
        minimum=optional(valid_range, "min", f"{where}.validRange"),
        maximum=optional(valid_range, "max", f"{where}.validRange"),
        step=optional(valid_range, "step", f"{where}.validRange"),
        has_range=valid_range is not None,
    )


def capacities_of(capacity: Mapping[str, Any], where: str) -> dict[str, Capacity]:
    """A device's ``capacity`` map (name -> ``DeviceCapacity`` model) with exact values and policies."""
    return {
        name: Capacity(parse(c.value, f"{where} {name}"), policy_of(c.request_policy, f"{where} {name}"))
        for name, c in capacity.items()
    }


def requested(requests: Mapping[str, str], where: str) -> dict[str, Amount]:
    """A request's ``capacity.requests`` with exact values."""
    return {name: parse(value, f"{where}: capacity.requests[{name}]") for name, value in requests.items()}


def cmp_request_over_capacity(
    requests: Mapping[str, Amount],
    capacities: Mapping[str, Capacity],
    held: Mapping[str, Exact],
) -> bool:
    """``CmpRequestOverCapacity``: the request's share fits beside what ``held`` already takes."""
    consumed = get_consumed_capacity_from_request(requests, capacities)
    if consumed is None:
        return False
    for name, capacity in capacities.items():
        taken = consumed[name].value
        if violates_policy(taken, capacity.policy):
            return False
        if taken + held.get(name, 0) > capacity.value.value:
            return False
    return True


def calculate_consumed_capacity(requested_value: Amount | None, capacity: Capacity) -> Amount:
    """``calculateConsumedCapacity`` (with ``fillEmptyRequest`` where nothing is requested)."""
    policy = capacity.policy
    if requested_value is None:
        return policy.default if policy is not None and policy.default is not None else capacity.value
    if policy is None:
        return requested_value
    if policy.has_range and policy.minimum is not None:
        return round_up_range(requested_value, policy)
    if policy.valid_values is not None:
        return round_up_valid_values(requested_value, policy.valid_values)
    return requested_value


def _ceil(value: Exact) -> int:
    """``Quantity.Value()``: rounds up to an integer."""
    return math.ceil(value)


def round_up_range(requested_value: Amount, policy: Policy) -> Amount:
    """``roundUpRange`` on its integer path: the result is ``NewQuantity`` in the step's format,
    so a request of ``20Gi`` on a step of ``1Gi`` is written ``20Gi`` (``21474836480`` in DecimalSI)."""
    assert policy.minimum is not None
    if requested_value.value < policy.minimum.value:
        return policy.minimum
    if policy.step is None:
        return requested_value
    if requested_value.value > _MAX_INT64:
        raise CapacityError(
            f"capacity request cannot be represented in the device's range arithmetic: "
            f"request {requested_value} exceeds MaxInt64"
        )
    wanted, step, low = _ceil(requested_value.value), _ceil(policy.step.value), _ceil(policy.minimum.value)
    steps = -((low - wanted) // step)  # ceil((wanted - low) / step), rounding as Go's does for added >= 0
    if low >= 0 and steps > (_MAX_INT64 - low) // step:
        raise CapacityError(
            f"capacity request cannot be represented in the device's range arithmetic: "
            f"rounding request {requested_value} up to the next step passes MaxInt64"
        )
    return new_quantity(low + step * steps, policy.step.fmt)


def round_up_valid_values(requested_value: Amount, valid_values: tuple[Amount, ...]) -> Amount:
    """``roundUpValidValues``: the first valid value at least as large, else the request itself."""
    return next((v for v in valid_values if requested_value.value <= v.value), requested_value)


def get_consumed_capacity_from_request(
    requests: Mapping[str, Amount], capacities: Mapping[str, Capacity]
) -> dict[str, Amount] | None:
    """What one allocation takes of each capacity (``GetConsumedCapacityFromRequest``).

    None when the request names a capacity the device does not have
    (``requestsContainNonExistCapacity``): another device may have it. Raises
    :class:`CapacityError` for a request that cannot be represented or a negative amount, which
    abort the allocation as upstream.
    """
    if any(name not in capacities for name in requests):
        return None
    consumed = {}
    for name, capacity in capacities.items():
        try:
            taken = calculate_consumed_capacity(requests.get(name), capacity)
        except CapacityError as error:
            raise CapacityError(f'capacity "{name}": {error}') from None
        if taken.value < 0:
            raise CapacityError(f'capacity "{name}": capacity value is negative')
        consumed[name] = taken
    return consumed


def violates_policy(consumed: Exact, policy: Policy | None) -> bool:
    """``violatesPolicy`` (the default compared by value; Go compares the Quantity structs)."""
    if policy is None or (policy.default is not None and consumed == policy.default.value):
        return False
    if policy.has_range:
        if policy.maximum is not None and consumed > policy.maximum.value:
            return True
        if policy.step is not None and policy.minimum is not None:
            return (_ceil(consumed) - _ceil(policy.minimum.value)) % _ceil(policy.step.value) != 0
        return False
    if policy.valid_values:
        return all(consumed != v.value for v in policy.valid_values)
    return False
