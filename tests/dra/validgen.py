"""Seeded generator of DRA objects, valid and invalid, for the validation differential.

Each object starts from a valid document of its kind that sets most fields of the 1.36/1.37 API
(taints, tolerations, shared counters and their consumption, capacity with request policies and
requests, binding conditions, per-device node fields, ``allowMultipleAllocations``,
``extendedResourceName``, ``firstAvailable``, constraints, config, metadata) and gets zero to two
mutations, each setting one field to a value drawn from a list of near-miss values: valid and
invalid names, lengths at and past a limit counted in bytes (``é`` is two), wrong JSON types
(which strict decoding must refuse), empty lists, unknown fields. The same seed always gives the
same objects (``random.Random``, no set iteration).

DeviceTaintRules take the shape of the release: v1alpha3 before 1.36 (the only version those
releases have), whose 1.34 selector also has ``deviceClassName`` and CEL ``selectors``; v1beta2
from 1.36. Every release draws the same mutations, among them those two fields and a ``status``,
which are unknown fields wherever the release's Go types lack them.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

Doc = dict[str, Any]
API = "resource.k8s.io/v1"
NAMESPACE = "default"
DEFAULT_RELEASE = "1.36"

# Values that exercise the name, label and length rules, each valid or invalid somewhere.
_NAMES = ["a", "gpu-0", "Gpu", "a.b", "a_b", "-a", "a" * 63, "a" * 64, "é", "", "1a", "a..b"]
_QUALIFIED = [
    "x",
    "example.com/x",
    "example.com/x/y",
    "Example.com/x",
    "/x",
    "example.com/",
    "a" * 32,
    "a" * 33,
    "x-y_z",
    "x.y",
    "é",
    "example.com/" + "a" * 33,
    "a" * 64 + "/x",
    "_x",
    "1x",
]
_QUANTITIES = ["1", "0", "-1", "10Gi", "1.5", "1m", "abc", "", "1e3", "100Mi", 5, "5Gi"]
_STRINGS64 = ["x", "é" * 32, "é" * 33, "a" * 64, "a" * 65, "", "v1"]
_VERSIONS = ["1.2.3", "1.2", "v1.2.3", "1.0.0-rc.1", "01.2.3", "", "1.2.3+build"]
_EFFECTS = ["NoSchedule", "NoExecute", "None", "PreferNoSchedule", "", "noschedule", 1]
_TIMES = ["2026-01-01T00:00:00Z", "yesterday", "2026-13-01T00:00:00Z", "", 5, "2026-01-01T00:00:00+01:00"]
_CEL = [
    'device.driver == "example.com"',
    "true",
    "device.attributes",
    "1 +",
    "",
    'device.capacity["x"]',
    '"x".matches("[")',
    "device.allowMultipleAllocations",
]
_WRONG = ["2", 2.0, 2.5, "true", True, None, [], {}, -1, 0, 1, 2**40]
_BOOLS = [True, False, "true", 1, None]
_LABEL_VALUES = ["", "v", "a" * 63, "a" * 64, "-a", "a b", "é"]
_COUNTS = [1, 0, -1, 2, 10, "2", 2.0, None]


def device_class(rng: random.Random, release: str = DEFAULT_RELEASE) -> Doc:
    return {
        "apiVersion": API,
        "kind": "DeviceClass",
        "metadata": _meta(rng, False),
        "spec": {
            "selectors": [{"cel": {"expression": 'device.driver == "example.com"'}}],
            "config": [{"opaque": {"driver": "example.com", "parameters": {"a": 1}}}],
            "extendedResourceName": "example.com/gpu",
        },
    }


def resource_slice(rng: random.Random, release: str = DEFAULT_RELEASE) -> Doc:
    device = {
        "name": "d0",
        "attributes": {
            "model": {"string": "x"},
            "example.com/n": {"int": 1},
            "ok": {"bool": True},
            "v": {"version": "1.2.3"},
        },
        "capacity": {
            "mem": {
                "value": "10Gi",
                "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "max": "10Gi", "step": "1Gi"}},
            }
        },
        "consumesCounters": [{"counterSet": "cs", "counters": {"mem": {"value": "1Gi"}}}],
        "allowMultipleAllocations": True,
        "bindsToNode": True,
        "bindingConditions": ["ready"],
        "bindingFailureConditions": ["failed"],
        "taints": [{"key": "example.com/t", "value": "v", "effect": "NoSchedule"}],
    }
    spec: Doc = {
        "driver": "example.com",
        "pool": {"name": "pool", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "node",
        "devices": [device],
    }
    if rng.random() < 0.25:  # the pool's counters: a slice holds devices or counter sets, never both
        del spec["devices"]
        spec["sharedCounters"] = [{"name": "cs", "counters": {"mem": {"value": "10Gi"}}}]
    elif rng.random() < 0.3:  # per-device node selection instead of a slice-wide node
        del spec["nodeName"]
        spec["perDeviceNodeSelection"] = True
        device["nodeName"] = "node"
    return {"apiVersion": API, "kind": "ResourceSlice", "metadata": _meta(rng, False), "spec": spec}


def _claim_spec(rng: random.Random) -> Doc:
    """A claim using every request field; half of them without the ``distinctAttribute`` constraint,
    which releases without DRAConsumableCapacity drop and then refuse as a constraint with neither
    attribute, so that those releases see valid claims too."""
    spec: Doc = {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": "gpu",
                        "selectors": [{"cel": {"expression": "true"}}],
                        "allocationMode": "ExactCount",
                        "count": 1,
                        "tolerations": [
                            {"key": "example.com/t", "operator": "Equal", "value": "v", "effect": "NoSchedule"}
                        ],
                        "capacity": {"requests": {"mem": "1Gi"}},
                    },
                },
                {
                    "name": "any",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu", "allocationMode": "All"},
                        {
                            "name": "small",
                            "deviceClassName": "gpu",
                            "count": 2,
                            "tolerations": [{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}],
                        },
                    ],
                },
            ],
            "constraints": [
                {"requests": ["gpu", "any/small"], "matchAttribute": "example.com/n"},
                {"distinctAttribute": "example.com/model"},
            ],
            "config": [{"requests": ["gpu"], "opaque": {"driver": "example.com", "parameters": {"x": "y"}}}],
        }
    }
    if rng.random() < 0.5:
        del spec["devices"]["constraints"][1]
    return spec


def resource_claim(rng: random.Random, release: str = DEFAULT_RELEASE) -> Doc:
    return {"apiVersion": API, "kind": "ResourceClaim", "metadata": _meta(rng, True), "spec": _claim_spec(rng)}


def resource_claim_template(rng: random.Random, release: str = DEFAULT_RELEASE) -> Doc:
    return {
        "apiVersion": API,
        "kind": "ResourceClaimTemplate",
        "metadata": _meta(rng, True),
        "spec": {"metadata": {"labels": {"app": "x"}}, "spec": _claim_spec(rng)},
    }


def taint_rule_version(release: str) -> str:
    """The DeviceTaintRule version generated for a release: the one it has before 1.36, else v1beta2."""
    return "resource.k8s.io/v1alpha3" if release in ("1.34", "1.35") else "resource.k8s.io/v1beta2"


def device_taint_rule(rng: random.Random, release: str = DEFAULT_RELEASE) -> Doc:
    selector: Doc = {"driver": "example.com", "pool": "pool", "device": "d0"}
    if release == "1.34":  # 1.34's v1alpha3 selector: a class and CEL selectors too
        selector = {"deviceClassName": "gpu", **selector, "selectors": [{"cel": {"expression": "true"}}]}
    return {
        "apiVersion": taint_rule_version(release),
        "kind": "DeviceTaintRule",
        "metadata": _meta(rng, False),
        "spec": {"deviceSelector": selector, "taint": {"key": "example.com/t", "value": "v", "effect": "NoExecute"}},
    }


def _meta(rng: random.Random, namespaced: bool) -> Doc:
    meta: Doc = {"name": f"obj-{rng.randrange(10**6)}", "labels": {"app": "x"}, "annotations": {"a": "b"}}
    if namespaced:
        meta["namespace"] = NAMESPACE
    return meta


# Each mutation: (path, values). A path step "*" is any existing list item or map key.
_META = [
    (("metadata", "name"), [*_NAMES, "a" * 253, "a" * 254, "é" * 127, "a.-b"]),
    (("metadata", "generateName"), ["gen-", "Gen-", "a" * 260, "", "-", "a..-", "é-"]),
    (
        ("metadata", "labels"),
        [{"example.com/k": "v"}, {"k": "a" * 64}, {"": "v"}, {"a/b/c": "v"}, {"k": 1}, {"k": "é"}],
    ),
    (("metadata", "annotations"), [{"Example/k": "v"}, {"k": 1}, {"a" * 64: "v"}, {"k": "a" * 300000}]),
    (("metadata", "namespace"), ["other", "Bad_ns"]),
    (("metadata", "unknownField"), [1]),
]
_TAINT = [
    ("key", _QUALIFIED),
    ("value", [*_LABEL_VALUES, 1]),
    ("effect", _EFFECTS),
    ("timeAdded", _TIMES),
    ("extra", [1]),
]
_TOLERATION = [
    ("key", [*_QUALIFIED, ""]),
    ("operator", ["Equal", "Exists", "In", "", 1]),
    ("value", _LABEL_VALUES),
    ("effect", _EFFECTS),
    ("tolerationSeconds", [5, -1, "5", 1.5, None]),
]
_EXACT = [
    ("deviceClassName", _NAMES),
    ("allocationMode", ["All", "ExactCount", "Some", "", 1]),
    ("count", _COUNTS),
    ("adminAccess", _BOOLS),
    ("selectors", [[], [{"cel": {"expression": e}} for e in _CEL]]),
    (
        "capacity",
        [{"requests": {"mem": q}} for q in _QUANTITIES] + [{"requests": {}}, {"requests": {"Bad/": "1"}}, {"x": 1}],
    ),
    ("tolerations", [[], [{}], [{"operator": "Exists"}] * 17]),
    ("unknown", [1]),
]


def _spec_mutations(kind: str) -> list[tuple[tuple[Any, ...], list[Any]]]:
    if kind == "DeviceClass":
        return [
            (("spec", "selectors", 0, "cel", "expression"), _CEL),
            (("spec", "selectors"), [[], [{"cel": {"expression": "true"}}] * 33, [{}], "x"]),
            (("spec", "config", 0, "opaque", "driver"), [*_NAMES, "example.com", "a" * 64 + ".com"]),
            (("spec", "config", 0, "opaque", "parameters"), [None, "x", 1, [], {"a": "é" * 6000}]),
            (("spec", "config"), [[], [{}], [{"opaque": {"driver": "example.com"}}]]),
            (
                ("spec", "extendedResourceName"),
                [
                    "example.com/gpu",
                    "gpu",
                    "kubernetes.io/gpu",
                    "requests.x/y",
                    "example.com/" + "a" * 240,
                    "example.com/" + "a" * 63,
                    "",
                    1,
                    "deviceclass.resource.kubernetes.io/x",
                ],
            ),
            (("spec", "unknown"), [1]),
        ]
    if kind == "ResourceSlice":
        d = ("spec", "devices", 0)
        return [
            (("spec", "driver"), [*_NAMES, "example.com", "a" * 64, "Example.com", 1]),
            (("spec", "pool", "name"), ["pool", "a/b", "a//b", "", "Pool", "a" * 254, "/a", 1]),
            (("spec", "pool", "generation"), _WRONG),
            (("spec", "pool", "resourceSliceCount"), _WRONG),
            (("spec", "nodeName"), ["", "Node", "n" * 254, None, 1]),
            (("spec", "allNodes"), [*_BOOLS, False]),
            (("spec", "perDeviceNodeSelection"), _BOOLS),
            (
                ("spec", "nodeSelector"),
                [
                    {"nodeSelectorTerms": []},
                    {"nodeSelectorTerms": [{}]},
                    {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": []}]}
                        ]
                    },
                    {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}
                        ]
                    },
                    {"nodeSelectorTerms": [{"matchFields": [{"key": "x", "operator": "Gt", "values": ["a", "b"]}]}]},
                ],
            ),
            (
                ("spec", "devices"),
                [[], [{"name": "d0"}, {"name": "d0"}], [{"name": f"d{i}"} for i in range(129)], [{}]],
            ),
            (
                ("spec", "sharedCounters"),
                [
                    [],
                    [{"name": "cs", "counters": {}}],
                    [{"name": "", "counters": {}}],
                    [{"name": f"c{i}", "counters": {"a": {"value": "1"}}} for i in range(9)],
                    [{"name": "cs", "counters": {"Bad!": {"value": "1"}}}],
                    [{"name": "cs", "counters": {"mem": {"value": "x"}}}],
                ],
            ),
            ((*d, "name"), _NAMES),
            (
                (*d, "attributes"),
                [
                    {},
                    {"a" * 33: {"int": 1}},
                    {"example.com/x/y": {"int": 1}},
                    {"x": {}},
                    {"x": {"int": 1, "bool": True}},
                    {"x": {"int": "5"}},
                    {"x": {"int": 2.0}},
                    {"x": {"bool": "true"}},
                    {"x": {"version": "1.2"}},
                    {"x": {"string": "é" * 33}},
                    {"x": {"string": "a" * 64}},
                    {"Bad": {"int": 1}},
                    {"a.b/c": {"int": 1}},
                    {"x": {"list": [1]}},
                ]
                + [{"x": {"version": v}} for v in _VERSIONS]
                + [{"x": {"string": s}} for s in _STRINGS64],
            ),
            (
                (*d, "capacity"),
                [{"mem": {"value": q}} for q in _QUANTITIES]
                + [
                    {"mem": {"value": "10", "requestPolicy": {"default": "20"}}},
                    {"mem": {"value": "10", "requestPolicy": {"validValues": ["1", "2"]}}},
                    {"mem": {"value": "10", "requestPolicy": {"default": "1", "validValues": ["1", "2"]}}},
                    {"mem": {"value": "10", "requestPolicy": {"default": "3", "validValues": ["1", "2"]}}},
                    {"mem": {"value": "10", "requestPolicy": {"default": "1", "validValues": ["2", "1"]}}},
                    {"mem": {"value": "10", "requestPolicy": {"default": "1", "validRange": {"min": "2"}}}},
                    {"mem": {"value": "10", "requestPolicy": {"default": "2", "validRange": {"min": "2", "max": "1"}}}},
                    {
                        "mem": {
                            "value": "10",
                            "requestPolicy": {"default": "2", "validRange": {"min": "2", "step": "3"}},
                        }
                    },
                    {
                        "mem": {
                            "value": "10",
                            "requestPolicy": {"default": "2", "validRange": {"min": "2"}, "validValues": ["2"]},
                        }
                    },
                    {
                        "mem": {
                            "value": "10",
                            "requestPolicy": {"default": "1", "validValues": [str(i) for i in range(1, 12)]},
                        }
                    },
                ],
            ),
            (
                (*d, "consumesCounters"),
                [
                    [],
                    [{"counterSet": "nope", "counters": {"mem": {"value": "1"}}}],
                    [{"counterSet": "cs", "counters": {}}],
                    [{"counterSet": "cs", "counters": {"x": {"value": "1"}}}],
                    [{"counterSet": "cs", "counters": {"mem": {"value": "1"}}}] * 3,
                ],
            ),
            ((*d, "nodeName"), ["node", "", "Node"]),
            ((*d, "allNodes"), _BOOLS),
            (
                (*d, "nodeSelector"),
                [{"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}]}],
            ),
            ((*d, "allowMultipleAllocations"), _BOOLS),
            ((*d, "bindsToNode"), _BOOLS),
            ((*d, "bindingConditions"), [[], ["Ready"], ["a"] * 5, ["a", "a"], ["bad cond"], ["a" * 317], None]),
            ((*d, "bindingFailureConditions"), [[], ["ready"], ["b"] * 5, ["x/y"], None]),
            ((*d, "taints"), [[], [{}], [{"key": "k", "effect": "NoSchedule"}] * 17]),
            *[((*d, "taints", 0, field), values) for field, values in _TAINT],
            ((*d, "unknown"), [1]),
        ]
    if kind in ("ResourceClaim", "ResourceClaimTemplate"):
        s = ("spec", "spec") if kind == "ResourceClaimTemplate" else ("spec",)
        r = (*s, "devices", "requests")
        extra: list[tuple[tuple[Any, ...], list[Any]]] = []
        if kind == "ResourceClaimTemplate":
            extra = [
                (
                    ("spec", "metadata"),
                    [{"labels": {"Bad/": "x"}}, {"name": "x"}, {"annotations": {"a": 1}}, {"generateName": "x"}, {}],
                )
            ]
        return [
            *extra,
            (
                (*r,),
                [
                    [],
                    [{"name": "a", "exactly": {"deviceClassName": "gpu"}}] * 2,
                    [{"name": "a"}],
                    [
                        {
                            "name": "a",
                            "exactly": {"deviceClassName": "gpu"},
                            "firstAvailable": [{"name": "b", "deviceClassName": "gpu"}],
                        }
                    ],
                ],
            ),
            ((*r, 0, "name"), [*_NAMES, "any"]),
            *[((*r, 0, "exactly", field), values) for field, values in _EXACT],
            *[((*r, 0, "exactly", "tolerations", 0, field), values) for field, values in _TOLERATION],
            (
                (*r, 1, "firstAvailable"),
                [
                    [],
                    [{"name": "x", "deviceClassName": "gpu"}] * 2,
                    [{"name": f"x{i}", "deviceClassName": "gpu"} for i in range(9)],
                ],
            ),
            *[((*r, 1, "firstAvailable", 1, field), values) for field, values in _EXACT if field != "unknown"],
            ((*r, 1, "firstAvailable", 0, "name"), [*_NAMES, "small"]),
            ((*r, 1, "firstAvailable", 0, "adminAccess"), [True]),
            (
                (*s, "devices", "constraints"),
                [
                    [{}],
                    [{"matchAttribute": "x", "distinctAttribute": "y"}],
                    [{"requests": ["nope"], "matchAttribute": "x"}],
                    [{"requests": ["any"], "matchAttribute": "x"}],
                    [{"requests": ["any/big", "gpu/x"], "matchAttribute": "x"}],
                    [{"requests": ["gpu", "gpu"], "matchAttribute": "x"}],
                ],
            ),
            ((*s, "devices", "constraints", 0, "matchAttribute"), _QUALIFIED),
            ((*s, "devices", "constraints", 1, "distinctAttribute"), _QUALIFIED),
            (
                (*s, "devices", "config"),
                [
                    [{}],
                    [{"opaque": {"driver": "example.com"}}],
                    [{"requests": ["nope"], "opaque": {"driver": "x", "parameters": {}}}],
                    [{"requests": ["any/big"], "opaque": {"driver": "x", "parameters": {}}}],
                ],
            ),
            ((*s, "devices", "config", 0, "opaque", "driver"), _NAMES),
            ((*s, "devices", "unknown"), [1]),
        ]
    condition = {
        "type": "EvictionInProgress",
        "status": "True",
        "observedGeneration": 1,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "reason": "r",
        "message": "m",
    }
    return [
        (("spec", "deviceSelector", "driver"), [*_NAMES, "example.com"]),
        (("spec", "deviceSelector", "pool"), ["a/b", "", "a//b", "Pool", "a" * 254]),
        (("spec", "deviceSelector", "device"), _NAMES),
        (("spec", "deviceSelector"), [{}, None, {"unknown": 1}]),
        (("spec", "deviceSelector", "deviceClassName"), [*_NAMES, "gpu.example.com", "a" * 254, 1, None]),
        (
            ("spec", "deviceSelector", "selectors"),
            [
                [],
                [{"cel": {"expression": "true"}}] * 33,
                [{}],
                [{"cel": {}}],
                "x",
                None,
                [{"cel": {"expression": "true"}, "x": 1}],
            ],
        ),
        (("spec", "deviceSelector", "selectors", 0, "cel", "expression"), [*_CEL, "x" * 10241, 1]),
        *[(("spec", "taint", field), values) for field, values in _TAINT],
        (("spec", "taint"), [{}, None]),
        (
            ("status",),
            [
                {},
                None,
                {"conditions": []},
                {"conditions": [condition]},
                {"conditions": "x"},
                {"x": 1},
                {"conditions": [{**condition, "lastTransitionTime": "yesterday"}]},
                {"conditions": [{**condition, "status": 1}]},
                {"conditions": [{"type": "a" * 400}] * 9},
            ],
        ),
    ]


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> bool:
    """Set ``path`` in ``doc``; False when an intermediate step does not exist (mutation skipped)."""
    node = doc
    for step in path[:-1]:
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                return False
        elif not isinstance(node, dict) or step not in node:
            return False
        node = node[step]
    last = path[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            return False
    elif not isinstance(node, dict):
        return False
    node[last] = copy.deepcopy(value)
    return True


NAMESPACED = ("ResourceClaim", "ResourceClaimTemplate")
"""Posted to ``NAMESPACE``: another namespace in the object is refused before validation (400), not modelled."""

BUILDERS: dict[str, Callable[[random.Random, str], Doc]] = {
    "DeviceClass": device_class,
    "ResourceSlice": resource_slice,
    "ResourceClaim": resource_claim,
    "ResourceClaimTemplate": resource_claim_template,
    "DeviceTaintRule": device_taint_rule,
}


def generate(kind: str, count: int, seed: int = 0, release: str = DEFAULT_RELEASE) -> list[Doc]:
    """``count`` objects of ``kind`` in the shape of ``release``: about one in six unmutated, the
    rest with one or two mutations."""
    rng = random.Random(f"{kind}-{seed}")
    mutations = _META + _spec_mutations(kind)
    out = []
    for _ in range(count):
        doc = BUILDERS[kind](rng, release)
        for _ in range(rng.choice((0, 1, 1, 1, 2, 2))):
            path, values = rng.choice(mutations)
            value = rng.choice(values)  # drawn whatever happens next, so one skip shifts no later draw
            if path != ("metadata", "namespace") or kind not in NAMESPACED:
                _set(doc, path, value)
        out.append(doc)
    return out
