"""Allocations as ``dra explain pod/NAME`` makes them: the slices decoded with their equal parts
shared (``dra.live.interning``) and one ``structured.Shared`` across the calls for every node.
Each call must give the answer it gives alone, from slices decoded one by one: the same results,
the same reason, the same error (a CEL error is raised again by every call that meets it).
Cases are tests/dra/allocgen.py's, every construct family on."""

from __future__ import annotations

from typing import Any

import pytest

from kubedevice.dra import models
from kubedevice.dra.live.cluster import decode
from kubedevice.dra.models import DeviceClass, DRAObject, ResourceClaim, ResourceSlice
from kubedevice.dra.structured import AllocationError, Node, Shared, Unallocatable, allocate, allocated_devices
from tests.dra import allocgen

CASES = 80
NODES = (
    Node(allocgen.NODE, {"zone": "z1", "kubernetes.io/hostname": allocgen.NODE}),
    Node(allocgen.OTHER_NODE, {"zone": "z2", "kubernetes.io/hostname": allocgen.OTHER_NODE}),
)
Outcome = tuple[str, Any]


def outcome(objects: dict[str, list[DRAObject]], node: Node, gates: dict[str, bool], shared: Shared | None) -> Outcome:
    try:
        found = allocate(
            models.of_kind(objects["claims"], ResourceClaim),
            models.of_kind(objects["classes"], DeviceClass),
            models.of_kind(objects["slices"], ResourceSlice),
            node,
            allocated_devices(models.of_kind(objects["allocated"], ResourceClaim)),
            features=gates,
            shared=shared,
        )
    except Unallocatable as error:
        return "unschedulable", str(error)
    except AllocationError as error:
        return "error", str(error)
    return "allocated", [a.as_status(node.name) for a in found]


@pytest.mark.parametrize("seed", range(CASES))
def test_calls_sharing_views_and_verdicts_answer_as_alone(seed: int) -> None:
    case = allocgen.case(9000 + seed, frozenset(allocgen.FAMILIES), allocgen.GATES_136)
    kinds = ("classes", "slices", "claims", "allocated")
    alone = {kind: [models.from_document(d, kind, "1.36") for d in case[kind]] for kind in kinds}
    together = {kind: decode(case[kind], "1.36", "test") for kind in kinds}
    expected = {node.name: outcome(alone, node, case["features"], None) for node in NODES}
    shared = Shared()
    for node in (*NODES, *reversed(NODES)):  # each node after the other has filled the caches
        assert outcome(together, node, case["features"], shared) == expected[node.name]
