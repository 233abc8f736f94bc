"""kubedevice.cel.quantity: Kubernetes' resource.Quantity parsing (apimachinery's rules)."""

from __future__ import annotations

import pytest

from kubedevice.cel.quantity import QuantityError, parse_quantity


@pytest.mark.parametrize(
    ("text", "value", "integer"),
    [
        ("1Gi", 1 << 30, 1 << 30),
        ("1.5", 1.5, None),
        ("100m", 0.1, None),
        ("1e3", 1000, 1000),
        ("-2Ki", -2048, -2048),
        ("0.1n", 1e-9, None),
        ("Ki", 0, 0),
        ("+5", 5, 5),
    ],
)
def test_quantity_parse(text: str, value: float, integer: int | None) -> None:
    q = parse_quantity(text)
    assert float(q.value) == pytest.approx(value)
    assert q.as_int64() == integer


@pytest.mark.parametrize("text", ["", "bad", "1.2.3", "1Kb", "1e", "--1"])
def test_quantity_rejects(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)
