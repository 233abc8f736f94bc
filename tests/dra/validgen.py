"""Seeded generator of DRA objects, valid and invalid, for the validation differential.

Each object starts from a valid document of its kind that sets most fields of the 1.36/1.37 API
(taints, tolerations, shared counters and their consumption, capacity with request policies and
requests, binding conditions, per-device node fields, ``allowMultipleAllocations``,
``extendedResourceName``, ``firstAvailable``, constraints, config, metadata) and gets zero to two
mutations, each setting one field to a value drawn from a list of near-miss values: valid and
invalid names, lengths at and past a limit counted in bytes (``é`` is two), wrong JSON types
(which strict decoding must refuse), numbers past what Go stores in every integer field (each is
an ``int64``: ``2**63``, ``-2**63 - 1``, ``2**64``, ``10**20``), empty lists, unknown fields. The
same seed always gives the same objects (``random.Random``, no set iteration).

Each object is drawn in one of the API versions its release serves for the kind (v1alpha3 and
v1beta1 in their own shape: a device's fields under ``basic``, a request's flat, v1alpha3's
capacity a bare quantity), and starts from every field some release knows: a field the drawn
release lacks in that version is removed (``kubedevice.dra.apifields``, the table of each
release's Go types), but for one object in twelve, which keeps them all and so must be refused
for unknown fields. So 1.31's classic DRA (a class's ``suitableNodes``, a claim's ``controller``,
PodSchedulingContexts), 1.33's v1alpha3 DeviceTaintRules with ``deviceClassName`` and CEL
``selectors``, list-type attributes and node-allocatable resources (1.36) are all drawn where
they exist. Every release draws the same mutations, which are unknown fields wherever the
release's Go types lack them.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

from kubedevice.dra import apifields, features

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
# Past int64 both ways, past uint64, and a huge number: Go's decoder stores none of them in an int64.
_OUT_OF_RANGE = [2**63, -(2**63) - 1, 2**64, 10**20]
_WRONG = ["2", 2.0, 2.5, "true", True, None, [], {}, -1, 0, 1, 2**40, *_OUT_OF_RANGE]
_BOOLS = [True, False, "true", 1, None]
_LABEL_VALUES = ["", "v", "a" * 63, "a" * 64, "-a", "a b", "é"]
_COUNTS = [1, 0, -1, 2, 10, "2", 2.0, None, *_OUT_OF_RANGE]


def device_class(rng: random.Random, release: str = DEFAULT_RELEASE) -> Doc:
    return {
        "apiVersion": API,
        "kind": "DeviceClass",
        "metadata": _meta(rng, False),
        "spec": {
            "selectors": [{"cel": {"expression": 'device.driver == "example.com"'}}],
            "config": [{"opaque": {"driver": "example.com", "parameters": {"a": 1}}}],
            "extendedResourceName": "example.com/gpu",
            "suitableNodes": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]},
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
        "nodeAllocatableResourceMappings": {"memory": {"capacityKey": "mem", "allocationMultiplier": "1"}},
        "nodeAllocatableResources": {"memory": {"mapping": {"capacityKey": "mem", "capacityMultiplier": "1"}}},
    }
    spec: Doc = {
        "driver": "example.com",
        "pool": {"name": "pool", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "node",
        "devices": [device],
    }
    if features.at_least(release, "1.36") and rng.random() < 0.3:  # a list attribute (DRAListTypeAttributes)
        device["attributes"]["sizes"] = {"ints": [1, 2]}
    counters = [{"name": "cs", "counters": {"mem": {"value": "10Gi"}}}]
    if not features.at_least(release, "1.35"):  # 1.33 and 1.34: the devices' own counters in the slice
        spec["sharedCounters"] = counters
    elif rng.random() < 0.25:  # the pool's counters: from 1.35 a slice holds devices or counter sets
        del spec["devices"]
        spec["sharedCounters"] = counters
    if "devices" in spec and rng.random() < 0.3 and features.at_least(release, "1.33"):  # per-device nodes
        del spec["nodeName"]
        spec["perDeviceNodeSelection"] = True
        device["nodeName"] = "node"
    return {"apiVersion": API, "kind": "ResourceSlice", "metadata": _meta(rng, False), "spec": spec}


def _claim_spec(rng: random.Random, release: str) -> Doc:
    """A claim using every request field; half of them without the ``distinctAttribute`` constraint,
    which releases without DRAConsumableCapacity drop and then refuse as a constraint with neither
    attribute, so that those releases see valid claims too. Before 1.33 (no subrequests, no
    ``distinctAttribute``) the second request is an exact one too."""
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
        },
        "controller": "example.com",
    }
    if rng.random() < 0.5 or not features.at_least(release, "1.34"):
        del spec["devices"]["constraints"][1]
    if not features.at_least(release, "1.33"):
        spec["devices"]["requests"][1] = {"name": "any", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}
        spec["devices"]["constraints"][0]["requests"] = ["gpu", "any"]
    return spec


def resource_claim(rng: random.Random, release: str = DEFAULT_RELEASE) -> Doc:
    return {"apiVersion": API, "kind": "ResourceClaim", "metadata": _meta(rng, True), "spec": _claim_spec(rng, release)}


def resource_claim_template(rng: random.Random, release: str = DEFAULT_RELEASE) -> Doc:
    return {
        "apiVersion": API,
        "kind": "ResourceClaimTemplate",
        "metadata": _meta(rng, True),
        "spec": {"metadata": {"labels": {"app": "x"}}, "spec": _claim_spec(rng, release)},
    }


def device_taint_rule(rng: random.Random, release: str = DEFAULT_RELEASE) -> Doc:
    """The 1.33 and 1.34 selector's class and CEL selectors are there, and go where the release lacks them."""
    selector: Doc = {"deviceClassName": "gpu", "driver": "example.com", "pool": "pool", "device": "d0"}
    selector["selectors"] = [{"cel": {"expression": "true"}}]
    return {
        "apiVersion": API,
        "kind": "DeviceTaintRule",
        "metadata": _meta(rng, False),
        "spec": {"deviceSelector": selector, "taint": {"key": "example.com/t", "value": "v", "effect": "NoExecute"}},
    }


def pod_scheduling_context(rng: random.Random, release: str = DEFAULT_RELEASE) -> Doc:
    """1.31's classic DRA: the scheduler's node choices for a pod's claims."""
    return {
        "apiVersion": API,
        "kind": "PodSchedulingContext",
        "metadata": _meta(rng, True),
        "spec": {"selectedNode": "node-a", "potentialNodes": ["node-a", "node-b"]},
        "status": {"resourceClaims": [{"name": "gpu", "unsuitableNodes": ["node-b"]}]},
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
    (("metadata", "generation"), [1, *_OUT_OF_RANGE]),
    (("metadata", "deletionGracePeriodSeconds"), [30, *_OUT_OF_RANGE]),
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
    ("tolerationSeconds", [5, -1, "5", 1.5, None, *_OUT_OF_RANGE]),
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
            (
                ("spec", "suitableNodes"),
                [
                    {},
                    {"nodeSelectorTerms": []},
                    {"nodeSelectorTerms": [{"matchExpressions": [{"key": "-a", "operator": "In", "values": ["-b"]}]}]},
                    {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In"}]}]},
                    "x",
                ],
            ),
        ]
    if kind == "PodSchedulingContext":
        return [
            (("spec", "selectedNode"), [*_NAMES, 1]),
            (("spec", "potentialNodes"), [[], ["a", "a"], [f"n{i}" for i in range(129)], ["Bad_node"], [""], "x"]),
            (("status", "resourceClaims"), [[], [{"name": "x"}], [{"name": 1}], [{"unknown": 1}]]),
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
            # numbers Go cannot decode into an attribute's int64, drawn as often as any other field
            # (among the many attribute shapes above they were too rare to be drawn at all)
            ((*d, "attributes"), [*({"x": {"int": n}} for n in _OUT_OF_RANGE), {"x": {"ints": [1, 2**63]}}]),
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
            (
                (*d, "attributes", "sizes"),
                [
                    {"ints": []},
                    {"strings": ["a" * 65]},
                    {"versions": ["1.2"]},
                    {"ints": [1], "int": 1},
                    {"bools": [True]},
                ],
            ),
            (
                (*d, "nodeAllocatableResourceMappings"),
                [
                    {},
                    {"example.com/x": {"allocationMultiplier": "1"}},
                    {"memory": {}},
                    {"memory": {"allocationMultiplier": "0"}},
                    {"memory": {"capacityKey": ""}},
                    {"memory": {"capacityKey": "nope"}},
                ],
            ),
            (
                (*d, "nodeAllocatableResources"),
                [
                    {},
                    {"example.com/x": {"overhead": {"perPod": "1"}}},
                    {"memory": {}},
                    {"memory": {"mapping": {"capacityKey": "mem"}}},
                    {"memory": {"mapping": {"capacityMultiplier": "1"}}},
                    {"memory": {"mapping": {"deviceMultiplier": "-1"}}},
                    {"memory": {"overhead": {}}},
                    {"memory": {"overhead": {"perContainer": "-1"}}},
                ],
            ),
            (("__keep_fields_of_other_releases__",), [True]),
        ]
    if kind in ("ResourceClaim", "ResourceClaimTemplate"):
        s = ("spec", "spec") if kind == "ResourceClaimTemplate" else ("spec",)
        r = (*s, "devices", "requests")
        extra: list[tuple[tuple[Any, ...], list[Any]]] = []
        if kind == "ResourceClaim":  # decoded on create, then cleared: only what Go cannot decode fails
            extra = [(("status",), [claim_status(n) for n in (5, *_OUT_OF_RANGE)] + [claim_status(1, 2**63)])]
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
            ((*r, 1, "firstAvailable", 1, "tolerations", 0, "tolerationSeconds"), [5, *_OUT_OF_RANGE]),
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
            ((*s, "controller"), [*_NAMES, "Example.com", 1]),
            (("__keep_fields_of_other_releases__",), [True]),
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
                *({"conditions": [{**condition, "observedGeneration": n}]} for n in _OUT_OF_RANGE),
                {"conditions": [{"type": "a" * 400}] * 9},
            ],
        ),
        (("__keep_fields_of_other_releases__",), [True]),
    ]


def claim_status(seconds: int, generation: int = 1) -> Doc:
    """A claim's status with its two integers: a result's tolerationSeconds, a condition's observedGeneration."""
    toleration = {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
    result = {"request": "gpu", "driver": "example.com", "pool": "pool", "device": "d0", "tolerations": [toleration]}
    condition = {
        "type": "Ready",
        "status": "True",
        "observedGeneration": generation,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "reason": "r",
        "message": "m",
    }
    device = {"driver": "example.com", "pool": "pool", "device": "d0", "conditions": [condition]}
    return {"allocation": {"devices": {"results": [result]}}, "devices": [device]}


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


NAMESPACED = ("ResourceClaim", "ResourceClaimTemplate", "PodSchedulingContext")
"""Posted to ``NAMESPACE``: another namespace in the object is refused before validation (400), not modelled."""

BUILDERS: dict[str, Callable[[random.Random, str], Doc]] = {
    "DeviceClass": device_class,
    "ResourceSlice": resource_slice,
    "ResourceClaim": resource_claim,
    "ResourceClaimTemplate": resource_claim_template,
    "DeviceTaintRule": device_taint_rule,
    "PodSchedulingContext": pod_scheduling_context,
}
_KEEP = "__keep_fields_of_other_releases__"


def versions(kind: str, release: str) -> list[str]:
    """The API versions of ``release`` that have ``kind``, oldest first."""
    return [version for version, kinds in features.API_KINDS[release].items() if kind in kinds]


def generate(kind: str, count: int, seed: int = 0, release: str = DEFAULT_RELEASE) -> list[Doc]:
    """``count`` objects of ``kind`` as ``release`` has them, each in one of its versions: about one
    in six unmutated, the rest with one or two mutations."""
    rng = random.Random(f"{kind}-{seed}")
    mutations = _META + _spec_mutations(kind)
    out = []
    for _ in range(count):
        doc = BUILDERS[kind](rng, release)
        version = rng.choice(versions(kind, release))
        keep = False
        for _ in range(rng.choice((0, 1, 1, 1, 2, 2))):
            path, values = rng.choice(mutations)
            value = rng.choice(values)  # drawn whatever happens next, so one skip shifts no later draw
            keep = keep or path == (_KEEP,)
            if path != ("metadata", "namespace") or kind not in NAMESPACED:
                _set(doc, path, value)
        doc.pop(_KEEP, None)
        out.append(in_version(doc, version, release, keep))
    return out


def in_version(doc: Doc, version: str, release: str, keep: bool = False) -> Doc:
    """``doc`` (v1's shape) in ``version``'s shape, without the fields other releases have (but
    with them when ``keep``)."""
    out = copy.deepcopy(doc)
    out["apiVersion"] = f"{features.API_GROUP}/{version}"
    spec = out.get("spec")
    if version in ("v1alpha3", "v1beta1") and isinstance(spec, dict):
        if out["kind"] == "ResourceSlice":
            for device in _dicts(spec.get("devices")):
                _basic(device, version)
        claim = spec.get("spec") if out["kind"] == "ResourceClaimTemplate" else spec
        claims = out["kind"] in ("ResourceClaim", "ResourceClaimTemplate")
        if claims and isinstance(claim, dict) and isinstance(claim.get("devices"), dict):
            for request in _dicts(claim["devices"].get("requests")):
                exact = request.pop("exactly", None)
                if isinstance(exact, dict):
                    request.update(exact)
    if not keep:
        _prune(out, out["kind"], version, release)
    return out


def _dicts(items: Any) -> list[Doc]:
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def _basic(device: Doc, version: str) -> None:
    """A device's fields under ``basic``; v1alpha3's capacity a bare quantity."""
    basic = {key: device.pop(key) for key in list(device) if key != "name"}
    if version == "v1alpha3" and isinstance(basic.get("capacity"), dict):
        basic["capacity"] = {k: v.get("value") if isinstance(v, dict) else v for k, v in basic["capacity"].items()}
    device["basic"] = basic


def _prune(doc: Doc, kind: str, version: str, release: str) -> None:
    """Remove the fields this release lacks in ``version`` that some Go type has: what no Go type
    has (``unknown``, ``extra``) is a mutation's, and stays to be refused."""
    _prune_node(doc, "", apifields.tree(kind, version, release), _field_names())


def _field_names() -> frozenset[str]:
    return frozenset(
        path.rpartition(".")[2]
        for kind in BUILDERS
        for version in ("v1alpha3", "v1beta1", "v1beta2", "v1")
        for release in features.RELEASES
        for path in apifields.tree(kind, version, release)
    )


def _prune_node(node: Any, path: str, ours: dict[str, str], names: frozenset[str]) -> None:
    if not isinstance(node, dict):
        return
    for key in list(node):
        child = f"{path}.{key}" if path else key
        if child not in ours:
            if key in names and not (path == "" and key in ("apiVersion", "kind")):
                del node[key]
            continue
        if not any(path.startswith(child + ".") for path in ours):
            continue  # a type of core/v1 or meta/v1 (ObjectMeta, NodeSelector): not ours to prune
        go_type, value = ours[child].lstrip("*"), node[key]
        items = [value]
        if go_type.startswith("[]") and isinstance(value, list):
            items = value
        elif go_type.startswith("map[") and isinstance(value, dict):
            items = list(value.values())
        for item in items:
            _prune_node(item, child, ours, names)
