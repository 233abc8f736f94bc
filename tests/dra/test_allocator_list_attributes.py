"""List-type attributes in ``matchAttribute`` and ``distinctAttribute`` (``DRAListTypeAttributes``).

With the gate on (alpha, off by default in 1.36 and 1.37) the scheduler runs
``internal/experimental``: every value is a set, ``matchAttribute`` needs a value common to all
devices (an intersection), ``distinctAttribute`` needs pairwise disjoint sets; an empty list
matches nothing. With it off (``internal/incubating``) scalars compare by equality and a list
value matches nothing after the first device. Cases ported from upstream's
``allocatortesting/allocator_testing.go`` (k8s.io/dynamic-resource-allocation v0.37.2).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubedevice.dra.structured import AllocationError, Unallocatable, allocate

from .allocator_builders import DRIVER_A, NODE_1, claim, device, picked, request, resource_class, resource_slice

ON = {"DRAListTypeAttributes": True}
MATCH = [{"matchAttribute": f"{DRIVER_A}/stringAttribute"}]
DISTINCT = [{"distinctAttribute": f"{DRIVER_A}/stringAttribute"}]


def strings(*values: str) -> dict[str, Any]:
    return {"strings": list(values)}


def one(value: str) -> dict[str, Any]:
    return {"string": value}


def run(values: list[dict[str, Any]], count: int, constraints: list[dict[str, Any]], **kwargs: Any) -> list[str]:
    devices = [device(f"device-{i + 1}", attributes={"stringAttribute": v}) for i, v in enumerate(values)]
    c = claim(request("req-0", count=count), constraints=constraints)
    [result] = allocate([c], [resource_class()], [resource_slice("slice-1", devices)], NODE_1, **kwargs)
    return [d for _, d in picked(result)]


CASES = [
    (
        "list-attributes-match-constaint-scalar-string-values",
        [one("value1"), one("value1")],
        2,
        ["device-1", "device-2"],
    ),
    (
        "list-attributes-match-constaint-list-of-string-values-with-common-elements",
        [strings("value1", "value2", "value3"), strings("value2", "value3", "value4")],
        2,
        ["device-1", "device-2"],
    ),
    (
        "list-attributes-match-constaint-list-of-string-values-with-partially-common-elements",
        [strings("value1", "value2"), strings("value2", "value3"), strings("value3", "value1")],
        3,
        None,
    ),
    (
        "list-attributes-match-constraint-backtrack-needs-intersection-restore",
        [strings("value1", "value2"), strings("value1"), strings("value2"), strings("value2")],
        3,
        ["device-1", "device-3", "device-4"],
    ),
    (
        "list-attributes-match-constaint-list-of-string-values-without-common-elements",
        [strings("value1", "value2"), strings("value3", "value4")],
        2,
        None,
    ),
    (
        "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-with-common-elements",
        [one("value1"), strings("value1", "value2")],
        2,
        ["device-1", "device-2"],
    ),
    (
        "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-with-partially-common-elements",
        [one("value1"), strings("value1", "value2"), strings("value2", "value3")],
        3,
        None,
    ),
    ("empty list matches nothing", [strings(), strings("value1")], 2, None),
]


@pytest.mark.parametrize(("values", "count", "found"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_match_attribute_with_list_types(values: list[dict[str, Any]], count: int, found: list[str] | None) -> None:
    if found is None:
        with pytest.raises(Unallocatable, match="satisfies the constraints"):
            run(values, count, MATCH, features=ON)
        return
    assert run(values, count, MATCH, features=ON) == found


def test_list_attributes_disabled_match_constraint_with_lists() -> None:
    """Off: equal lists still do not match (``internal/incubating`` knows only scalars)."""
    values = [strings("value1", "value2", "value3"), strings("value1", "value2", "value3")]
    with pytest.raises(Unallocatable):
        run(values, 2, MATCH)
    assert run(values, 2, MATCH, features=ON) == ["device-1", "device-2"]
    assert run([one("a"), one("a")], 2, MATCH) == ["device-1", "device-2"]


DISTINCT_CASES = [
    (
        "list-attributes-distinct-constraint-scalar-string-values-all-distinct",
        [one("a"), one("b")],
        2,
        ["device-1", "device-2"],
    ),
    ("list-attributes-distinct-constraint-scalar-string-values-not-distinct", [one("a"), one("a")], 2, None),
    (
        "list-attributes-distinct-constraint-list-of-string-values-all-distinct",
        [strings("value1", "value2"), strings("value3", "value4")],
        2,
        ["device-1", "device-2"],
    ),
    (
        "list-attributes-distinct-constraint-list-of-string-values-with-common-elements",
        [strings("value1", "value2"), strings("value2", "value3")],
        2,
        None,
    ),
    (
        "list-attributes-distinct-constraint-mixed-scalar-and-list-all-distinct",
        [one("value1"), strings("value2", "value3")],
        2,
        ["device-1", "device-2"],
    ),
    (
        "list-attributes-distinct-constraint-mixed-scalar-and-list-with-common-elements",
        [one("value1"), strings("value1", "value2")],
        2,
        None,
    ),
    (
        "distinct backtracking pops the value it added",
        [strings("a", "b"), strings("b", "c"), strings("c", "d")],
        2,
        ["device-1", "device-3"],
    ),
]


@pytest.mark.parametrize(
    ("values", "count", "found"), [c[1:] for c in DISTINCT_CASES], ids=[c[0] for c in DISTINCT_CASES]
)
def test_distinct_attribute_with_list_types(values: list[dict[str, Any]], count: int, found: list[str] | None) -> None:
    if found is None:
        with pytest.raises(Unallocatable, match="satisfies the constraints"):
            run(values, count, DISTINCT, features=ON)
        return
    assert run(values, count, DISTINCT, features=ON) == found


def test_list_attributes_disabled_distinct_constraint_with_lists() -> None:
    values = [strings("value1", "value2", "value3"), strings("value4")]
    with pytest.raises(Unallocatable):
        run(values, 2, DISTINCT)
    assert run(values, 2, DISTINCT, features=ON) == ["device-1", "device-2"]


def test_list_attributes_match_constraint_with_empty_or_unknown_type() -> None:
    """An attribute with no value fails in CEL first, as upstream ("unsupported attribute value")."""
    with pytest.raises(AllocationError, match="unsupported attribute value"):
        run([{}, strings()], 2, MATCH, features=ON)
