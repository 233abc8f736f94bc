"""The default preferred-allocation policy: NUMA packing, deterministic, within the contract."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubedevice import Device
from kubedevice.allocation.policies import AllocationRequestError, check_answer, check_request, pack_numa


def devices(layout: dict[tuple[int, ...], int]) -> list[Device]:
    out = []
    for nodes, count in layout.items():
        out += [Device(f"n{'-'.join(map(str, nodes)) or 'x'}-{i}", numa_nodes=nodes) for i in range(count)]
    return out


def test_fills_the_node_already_used_by_must_include() -> None:
    pool = devices({(0,): 2, (1,): 4})
    assert pack_numa(pool, [pool[0]], 2) == ["n0-0", "n0-1"]


def test_prefers_one_node_that_fits_over_splitting() -> None:
    pool = devices({(0,): 2, (1,): 4, (2,): 3})
    assert set(pack_numa(pool, [], 4)) == {f"n1-{i}" for i in range(4)}


def test_devices_without_topology_come_last() -> None:
    pool = devices({(): 5, (1,): 2})
    assert pack_numa(pool, [], 3)[:2] == ["n1-0", "n1-1"]


def test_is_deterministic_whatever_the_input_order() -> None:
    pool = devices({(0,): 3, (1,): 3, (): 2})
    shuffled = pool[:]
    random.Random(7).shuffle(shuffled)
    assert pack_numa(pool, [], 5) == pack_numa(shuffled, [], 5)


@given(
    st.dictionaries(st.tuples(st.integers(0, 3)), st.integers(1, 6), min_size=1, max_size=4),
    st.data(),
)
def test_answers_always_meet_the_contract(layout: dict[tuple[int, ...], int], data: st.DataObject) -> None:
    pool = devices(layout)
    must = data.draw(st.lists(st.sampled_from(pool), unique=True, max_size=len(pool)))
    size = data.draw(st.integers(len(must), len(pool)))
    answer = pack_numa(pool, must, size)
    check_answer(answer, {d.id for d in pool}, [d.id for d in must], size)


@pytest.mark.parametrize(
    ("available", "must", "size", "fragment"),
    [
        (["a"], [], -1, "negative"),
        (["a"], ["b"], 1, "b"),
        (["a", "b"], ["a", "b"], 1, "smaller"),
        (["a"], [], 2, "larger"),
    ],
)
def test_contradictory_requests_are_refused(available: list[str], must: list[str], size: int, fragment: str) -> None:
    with pytest.raises(AllocationRequestError, match=fragment):
        check_request(set(available), must, size)
