"""Consumable capacity as the scheduler computes it: how much of a device one allocation takes.

A port of ``structured/internal/incubating/consumable_capacity.go`` of
``k8s.io/dynamic-resource-allocation`` v0.37.2 (the variant the scheduler runs with the 1.36 and
1.37 default features), on exact fractions instead of ``resource.Quantity``:

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
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from ..cel.quantity import QuantityError, parse_quantity
from ..errors import KubedeviceError

_MAX_INT64 = (1 << 63) - 1


class CapacityError(KubedeviceError):
    """A request the allocator must refuse outright (``errCapacityRequestNotRepresentable``, ...)."""


@dataclass(frozen=True)
class Amount:
    """A quantity's exact value and how to write it back (``consumedCapacity`` in results)."""

    value: Fraction
    text: str


def amount(text: Any, where: str) -> Amount:
    """A quantity as ``resource.ParseQuantity`` reads it; a bad one names ``where``."""
    try:
        return Amount(_exact(str(text)), str(text))
    except QuantityError as error:
        raise CapacityError(f"{where}: {error}") from None


@lru_cache(maxsize=4096)
def _exact(text: str) -> Fraction:
    """A quantity's exact value, kept per text: every device of a pool repeats the same few
    quantities, and building the ``Fraction`` cost more than the rest of a capacity check
    (benchmarks/allocate_vs_go.py). A bad quantity raises each time (errors are not kept)."""
    return parse_quantity(text).value


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
        return None if value is None else amount(value, f"{path}.{key}")

    values = raw.get("validValues")
    return Policy(
        default=optional(raw, "default", where),
        valid_values=None if values is None else tuple(amount(v, f"{where}.validValues") for v in values),
        minimum=optional(valid_range, "min", f"{where}.validRange"),
        maximum=optional(valid_range, "max", f"{where}.validRange"),
        step=optional(valid_range, "step", f"{where}.validRange"),
        has_range=valid_range is not None,
    )


def _ceil(value: Fraction) -> int:
    """``Quantity.Value()``: rounds up to an integer."""
    return math.ceil(value)


def _round_up_range(requested: Amount, policy: Policy) -> Amount:
    """``roundUpRange`` on its integer path."""
    assert policy.minimum is not None
    if requested.value < policy.minimum.value:
        return policy.minimum
    if policy.step is None:
        return requested
    if requested.value > _MAX_INT64:
        raise CapacityError(
            f"capacity request cannot be represented in the device's range arithmetic: "
            f"request {requested.text} exceeds MaxInt64"
        )
    wanted, step, low = _ceil(requested.value), _ceil(policy.step.value), _ceil(policy.minimum.value)
    steps = -((low - wanted) // step)  # ceil((wanted - low) / step), rounding as Go's does for added >= 0
    if low >= 0 and steps > (_MAX_INT64 - low) // step:
        raise CapacityError(
            f"capacity request cannot be represented in the device's range arithmetic: "
            f"rounding request {requested.text} up to the next step passes MaxInt64"
        )
    result = low + step * steps
    return Amount(Fraction(result), str(result))


def _consumed(requested: Amount | None, capacity: Capacity) -> Amount:
    """``calculateConsumedCapacity``."""
    policy = capacity.policy
    if requested is None:
        return policy.default if policy is not None and policy.default is not None else capacity.value
    if policy is None:
        return requested
    if policy.has_range and policy.minimum is not None:
        return _round_up_range(requested, policy)
    if policy.valid_values is not None:
        return next((v for v in policy.valid_values if requested.value <= v.value), requested)
    return requested


def _violates(consumed: Fraction, policy: Policy | None) -> bool:
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


def consumed_by(requests: Mapping[str, Amount], capacities: Mapping[str, Capacity]) -> dict[str, Amount] | None:
    """What one allocation takes of each capacity (``GetConsumedCapacityFromRequest``).

    None when the request names a capacity the device does not have: another device may
    have it. Raises :class:`CapacityError` for a request that cannot be represented or a
    negative amount, which abort the allocation as upstream.
    """
    if any(name not in capacities for name in requests):
        return None
    consumed = {}
    for name, capacity in capacities.items():
        try:
            taken = _consumed(requests.get(name), capacity)
        except CapacityError as error:
            raise CapacityError(f'capacity "{name}": {error}') from None
        if taken.value < 0:
            raise CapacityError(f'capacity "{name}": capacity value is negative')
        consumed[name] = taken
    return consumed


def fits(
    requests: Mapping[str, Amount],
    capacities: Mapping[str, Capacity],
    held: Mapping[str, Fraction],
) -> bool:
    """``CmpRequestOverCapacity``: the request's share fits beside what ``held`` already takes."""
    consumed = consumed_by(requests, capacities)
    if consumed is None:
        return False
    for name, capacity in capacities.items():
        taken = consumed[name].value
        if _violates(taken, capacity.policy):
            return False
        if taken + held.get(name, Fraction(0)) > capacity.value.value:
            return False
    return True


def capacities_of(capacity: Mapping[str, Any], where: str) -> dict[str, Capacity]:
    """A device's ``capacity`` map (name -> ``DeviceCapacity`` model) with exact values and policies."""
    return {
        name: Capacity(amount(c.value, f"{where} {name}"), policy_of(c.request_policy, f"{where} {name}"))
        for name, c in capacity.items()
    }


def requested(requests: Mapping[str, str], where: str) -> dict[str, Amount]:
    """A request's ``capacity.requests`` with exact values."""
    return {name: amount(value, f"{where}: capacity.requests[{name}]") for name, value in requests.items()}
