"""Kubernetes' Format library (format.named, format.<name>(), <format>.validate). Expected
values and costs come from k8s.io/dynamic-resource-allocation/cel v0.37.2 (tests/interop/cel);
the differential corpus covers the library further."""

from __future__ import annotations

import json

import pytest

from kubedevice.dra.cel import DeviceInput, compile_selector

TRUE = [
    'format.dns1123Label().validate("my-name") == optional.none()',
    'format.dns1123Label().validate("a.b").value() == ["must not contain dots"]',
    'format.byte().validate("").hasValue()',
    'format.date().validate("2023-02-29").hasValue()',
    'format.date().validate("2024-2-29").hasValue()',
    'format.datetime().validate("2024-01-02T24:04:05Z").hasValue()',
    'format.datetime().validate("2024-01-02T03:04:05").hasValue()',
    'format.named("dns1123Label").hasValue()',
    'format.named("uri").value() == format.uri()',
    "format.dns1123Label().validate(device.driver).hasValue()",  # upper case
    "type(format.uri()) == type(format.byte())",
]
FALSE = [
    'format.labelValue().validate("").hasValue()',
    'format.dns1123LabelPrefix().validate("ab-").hasValue()',
    'format.uri().validate("http://x.io/a").hasValue()',
    'format.uuid().validate("123e4567e89b12d3a456426614174000").hasValue()',
    'format.date().validate("2024-02-29").hasValue()',
    'format.datetime().validate("2024-01-02t03:04:05.123+01:00").hasValue()',
    'format.named("nope").hasValue()',
    'format.named("uri").value() == format.byte()',
]
MESSAGES = [
    (
        "dns1123Label",
        "A_b",
        [
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
            "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
            "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        ],
    ),
    ("qualifiedName", "/x", ["prefix part must be non-empty"]),
    ("uri", "x y", ['parse "x y": invalid URI for request']),
    ("labelValue", "a" * 64, ["must be no more than 63 bytes"]),
    ("uuid", "nope", ["does not match the UUID format"]),
]
COSTS = [
    ('format.dns1123Label().validate("a.b").value() == ["must not contain dots"]', 45),
    ('format.uuid().validate("123e4567-e89b-12d3-a456-426614174000").hasValue()', 130),
    ('format.named("uri").value() == format.uri()', 10),
    ("format.dns1123Label().validate(device.driver).hasValue()", 228),
]
DEVICE = DeviceInput("Gpu.example.com")


@pytest.mark.parametrize(("expression", "want"), [(e, True) for e in TRUE] + [(e, False) for e in FALSE])
def test_format_library_answers_as_kubernetes(expression: str, want: bool) -> None:
    assert compile_selector(expression).matches(DEVICE) is want


@pytest.mark.parametrize(("name", "text", "messages"), MESSAGES)
def test_validate_reports_the_apimachinery_messages(name: str, text: str, messages: list[str]) -> None:
    expression = f"format.{name}().validate({json.dumps(text)}).value() == {json.dumps(messages)}"
    assert compile_selector(expression).matches(DEVICE)


@pytest.mark.parametrize(("expression", "cost"), COSTS)
def test_static_costs_are_kubernetes(expression: str, cost: int) -> None:
    assert compile_selector(expression).cost_estimate == cost
