"""A device capacity's request policy (``validateMultiAllocatableDeviceCapacity`` and
``validateRequestPolicy*`` of pkg/apis/resource/validation/validation.go): whether a device shared
by several claims offers consistent defaults, valid values and ranges."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...apimachinery.field import ErrorList, Path, duplicate, forbidden, invalid, required, too_many
from .. import features
from ..models import DeviceCapacity
from .common import MAX_VALID_VALUES

if TYPE_CHECKING:
    from ..structured.consumable_capacity import Amount


def amount(value: Any) -> Amount | None:
    """A quantity with the format its canonical string keeps (``Quantity.String()`` in messages).

    Imported here: the package brings the allocator, which the driver's publisher, validating
    its own slices, has no use for.
    """
    from ..structured.consumable_capacity import CapacityError, parse  # noqa: PLC0415 - lazy on purpose

    try:
        return parse(value, "")
    except CapacityError:
        return None


def validate_capacity(capacity: DeviceCapacity, multiple: bool, path: Path, release: str) -> ErrorList:
    """``validate{Multi,Single}AllocatableDeviceCapacity``: a request policy needs
    allowMultipleAllocations; with it, the policy must be consistent with the capacity."""
    policy = capacity.request_policy
    if policy is None:
        return []
    policy_path = path.child("requestPolicy")
    if not multiple:
        return [forbidden(policy_path, "allowMultipleAllocations must be true")]
    maximum = amount(capacity.value)
    if maximum is None:  # the decoder refuses a bad quantity before validation
        return []
    valid_values, valid_range = policy.get("validValues") or [], policy.get("validRange")
    if valid_range is not None and not isinstance(valid_range, Mapping):
        return []
    if valid_values and valid_range is not None:
        detail = 'exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time'
        return [forbidden(policy_path, detail)]
    if not valid_values and valid_range is None:
        return []
    default = amount(policy["default"]) if policy.get("default") is not None else None
    if default is None:
        which = "validValues" if valid_values else "validRange"
        return [required(policy_path.child("default"), f"required when {which} is defined")]
    if valid_values:
        return _validate_valid_values(default, maximum, valid_values, policy_path.child("validValues"))
    bound_field = "default" if features.at_least(release, "1.37") else None
    return _validate_range(default, maximum, valid_range or {}, policy_path.child("validRange"), bound_field)


def _ceil(amount: Amount) -> int:
    """``Quantity.Value()``: rounded up to an integer."""
    value = amount.quantity.value
    return -((-value.numerator) // value.denominator)


def _validate_valid_values(default: Amount, maximum: Amount, raw: list[Any], path: Path) -> ErrorList:
    """``validateRequestPolicyValidValues``: ascending, within the capacity, unique, default among them."""
    options = [a for a in map(amount, raw) if a is not None]
    errors: ErrorList = []
    for i in range(len(options) - 1):
        if options[i].quantity.cmp(options[i + 1].quantity) > 0:
            errors.append(invalid(path.index(i + 1), str(options[i + 1]), "values must be sorted in ascending order"))
    if len(options) > MAX_VALID_VALUES:
        return [*errors, too_many(path, len(options), MAX_VALID_VALUES)]
    found = False
    for i, option in enumerate(options):
        if option.quantity.cmp(maximum.quantity) > 0:
            errors.append(invalid(path.index(i), str(option), f"option is larger than capacity value: {maximum}"))
        found = found or option.quantity.cmp(default.quantity) == 0
    seen: set[int] = set()
    for i, option in enumerate(options):
        if _ceil(option) in seen:
            errors.append(duplicate(path.index(i), str(_ceil(option))))
        seen.add(_ceil(option))
    if not found:
        errors.append(invalid(path, str(default), "default value is not valid according to the requestPolicy"))
    return errors


def _validate_range(
    default: Amount, maximum: Amount, raw: Mapping[str, Any], path: Path, bound_field: str | None
) -> ErrorList:
    """``validateRequestPolicyRange``: min required; min, max and default within each other and the
    capacity; default and max on a step from min. A default outside the range is reported at the
    bound it crosses up to 1.36 and at ``default`` from 1.37 (``bound_field``; kubernetes v1.37.2)."""
    low = amount(raw["min"]) if raw.get("min") is not None else None
    if low is None:
        return [required(path.child("min"), "required when validRange is defined")]
    errors: ErrorList = []
    if low.quantity.cmp(maximum.quantity) > 0:
        errors.append(invalid(path.child("min"), str(low), f"min is larger than capacity value: {maximum}"))
    if default.quantity.cmp(low.quantity) < 0:
        errors.append(invalid(path.child(bound_field or "min"), str(default), f"default is less than min: {low}"))
    high = amount(raw["max"]) if raw.get("max") is not None else None
    if high is not None:
        if low.quantity.cmp(high.quantity) > 0:
            errors.append(invalid(path.child("max"), str(low), f"min is larger than max: {high}"))
        if high.quantity.cmp(maximum.quantity) > 0:
            errors.append(invalid(path.child("max"), str(high), f"max is larger than capacity value: {maximum}"))
        if default.quantity.cmp(high.quantity) > 0:
            errors.append(invalid(path.child(bound_field or "max"), str(default), f"default is more than max: {high}"))
    step = amount(raw["step"]) if raw.get("step") is not None else None
    if step is not None:
        added = low.plus(step)  # Quantity.Add: the sum keeps the receiver's format
        if added.quantity.cmp(maximum.quantity) > 0:
            detail = f"one step {added} is larger than capacity value: {maximum}"
            errors.append(invalid(path.child("step"), str(step), detail))
        for value in (default, high) if high is not None else (default,):
            if _ceil(step) and (_ceil(value) - _ceil(low)) % _ceil(step):
                detail = f"value is not a multiple of a given step ({step}) from ({low})"
                errors.append(invalid(path.child("step"), str(value), detail))
    return errors
