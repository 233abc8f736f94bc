"""Seeded generator of allocation cases (classes, slices, claims, allocated claims) for the
differential test against the scheduler's allocator (tests/interop/test_allocator_differential.py).

A case is plain ``resource.k8s.io/v1`` JSON, the shape the Go peer decodes, so both sides read the
same objects. Every construct family of the 1.36/1.37 allocator can be switched on separately, so
a disagreement can be pinned on one family and a family our allocator does not implement yet can
be run on its own. Objects are kept valid per the API server's validation (a case the API server
would refuse tells nothing about the allocator); the sizes stay small (at most 8 devices a pool)
so that an infeasible case is answered quickly by an exhaustive search too.
"""

from __future__ import annotations

import random
from typing import Any

from kubedevice.dra import features
from kubedevice.dra.structured import gates

FAMILIES = (
    "cel",  # CEL selectors over attributes and capacity, in classes and requests
    "all_mode",  # allocationMode All
    "first_available",  # prioritized lists
    "admin",  # adminAccess requests
    "constraints",  # matchAttribute / distinctAttribute
    "pools",  # several pools and nodes: allNodes, nodeSelector, other nodes, incomplete and stale pools
    "allocated",  # claims that already hold devices
    "counters",  # partitionable devices: sharedCounters per pool, consumesCounters
    "per_device_nodes",  # perDeviceNodeSelection with per-device nodeName / nodeSelector / allNodes
    "capacity",  # consumable capacity: allowMultipleAllocations, requestPolicy, capacity.requests
    "binding",  # bindingConditions, bindingFailureConditions, bindsToNode
    "taints",  # device taints and request tolerations
)

NODE = "node-a"
OTHER_NODE = "node-b"
DRIVERS = ("gpu.example.com", "nic.example.com")
API = "resource.k8s.io/v1"

GATES_136 = {name: features.defaults("1.36")[name] for name in gates.ALLOCATOR_GATES}
"""The DRA gates the allocator reads, as 1.36 ships them (kubedevice.dra.features, checked against
pkg/features/kube_features.go of k8s.io/kubernetes v1.36.3)."""

GATES_137 = {**GATES_136, **{name: features.defaults("1.37")[name] for name in gates.GATES_SINCE_137}}
"""1.37 adds only alpha (off) allocator features next to 1.36's defaults."""

BETA_OFF = {
    "DRAPartitionableDevices": False,
    "DRAConsumableCapacity": False,
    "DRADeviceBindingConditions": False,
    "DRADeviceTaints": False,
}
"""The 1.36 beta gates off (as in 1.35): the allocator must then ignore their fields, as the scheduler does."""


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
    if namespace:
        meta["namespace"] = namespace
    return meta


class _Case:
    """One case under construction; ``on(family)`` says whether a family may be used."""

    def __init__(self, rng: random.Random, families: frozenset[str]) -> None:
        self.rng = rng
        self.families = families
        self.slices: list[dict[str, Any]] = []
        self.device_names: list[tuple[str, str, str]] = []  # driver, pool, device: for allocated claims
        self.multi: set[tuple[str, str, str]] = set()  # devices that allow multiple allocations
        self.drivers: list[str] = []  # drivers with a pool: requests ask for these

    def on(self, family: str, chance: float = 0.5) -> bool:
        return family in self.families and self.rng.random() < chance

    # --- devices ---------------------------------------------------------------------------

    def device(self, driver: str, pool: str, index: int, counter_sets: list[str]) -> dict[str, Any]:
        rng = self.rng
        name = f"dev-{index}"
        attributes: dict[str, Any] = {
            "model": {"string": rng.choice(["a100", "h100"])},
            "numa": {"int": rng.randint(0, 1)},
            "healthy": {"bool": rng.random() < 0.9},
            "version": {"version": rng.choice(["1.0.0", "2.1.0"])},
            f"{driver}/index": {"int": index},
        }
        device: dict[str, Any] = {
            "name": name,
            "attributes": attributes,
            "capacity": {"memory": {"value": rng.choice(["8Gi", "16Gi", "40Gi"])}},
        }
        if counter_sets and self.on("counters", 0.7):
            device["consumesCounters"] = [
                {
                    "counterSet": rng.choice(counter_sets),
                    "counters": {"mem": {"value": rng.choice(["2Gi", "4Gi", "8Gi"])}},
                }
            ]
        if self.on("capacity", 0.5):
            device["allowMultipleAllocations"] = True
            device["capacity"]["memory"]["requestPolicy"] = self.request_policy()
            self.multi.add((driver, pool, name))
        if self.on("binding", 0.3):
            device["bindingConditions"] = ["example.com/ready"]
            device["bindingFailureConditions"] = ["example.com/failed"]
            if rng.random() < 0.5:
                device["bindsToNode"] = True
        if self.on("taints", 0.4):
            device["taints"] = [
                {
                    "key": "example.com/unhealthy",
                    "value": rng.choice(["yes", "no"]),
                    "effect": rng.choice(["NoSchedule", "NoExecute", "None"]),
                }
            ]
            if rng.random() < 0.2:
                added = "2026-01-02T03:04:05Z"
                device["taints"].append({"key": "example.com/maintenance", "effect": "NoSchedule", "timeAdded": added})
        self.device_names.append((driver, pool, name))
        return device

    def request_policy(self) -> dict[str, Any]:
        rng = self.rng
        if rng.random() < 0.5:
            return {"default": "1Gi", "validValues": ["1Gi", "2Gi", "4Gi"]}
        return {"default": "2Gi", "validRange": {"min": "1Gi", "max": "8Gi", "step": "1Gi"}}

    # --- slices ----------------------------------------------------------------------------

    def node_fields(self, node_local: bool) -> dict[str, Any]:
        if node_local or not self.on("pools", 0.6):
            return {"nodeName": self.rng.choice([NODE, NODE, OTHER_NODE]) if self.on("pools", 0.3) else NODE}
        if self.rng.random() < 0.5:
            return {"allNodes": True}
        return {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": [self.rng.choice(["z1", "z2"])]}]}
                ]
            }
        }

    def per_device_node(self, device: dict[str, Any]) -> None:
        choice = self.rng.randrange(4)
        if choice == 0:
            device["nodeName"] = NODE
        elif choice == 1:
            device["nodeName"] = OTHER_NODE
        elif choice == 2:
            device["allNodes"] = True
        else:
            device["nodeSelector"] = {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [self.rng.choice([NODE, OTHER_NODE])]}
                        ]
                    }
                ]
            }

    def pool(self, driver: str, pool: str) -> None:
        rng = self.rng
        self.drivers.append(driver)
        counter_sets: list[str] = []
        slices: list[dict[str, Any]] = []
        if self.on("counters", 0.7):
            counter_sets = [f"set-{i}" for i in range(rng.randint(1, 2))]
            slices.append(
                {
                    "sharedCounters": [
                        {"name": s, "counters": {"mem": {"value": rng.choice(["8Gi", "12Gi", "16Gi"])}}}
                        for s in counter_sets
                    ]
                }
            )
        per_device = self.on("per_device_nodes", 0.6)
        node_fields = {} if per_device else self.node_fields(False)
        devices = [self.device(driver, pool, i, counter_sets) for i in range(rng.randint(1, 6))]
        split = rng.randint(1, len(devices)) if len(devices) > 1 and rng.random() < 0.3 else len(devices)
        for part in (devices[:split], devices[split:]):
            if not part:
                continue
            spec: dict[str, Any] = {"devices": part, **node_fields}
            if per_device:
                spec["perDeviceNodeSelection"] = True
                for device in part:
                    self.per_device_node(device)
            slices.append(spec)
        generation = rng.randint(1, 3)
        count = len(slices) + (1 if self.on("pools", 0.1) else 0)  # one missing: an incomplete pool
        for index, spec in enumerate(slices):
            name = f"{pool}-{driver.split('.', maxsplit=1)[0]}-{index}"
            spec["driver"] = driver
            spec["pool"] = {"name": pool, "generation": generation, "resourceSliceCount": count}
            self.slices.append({"apiVersion": API, "kind": "ResourceSlice", "metadata": _meta(name), "spec": spec})
        if generation > 1 and self.on("pools", 0.3):
            self.stale(driver, pool, generation - 1)

    def stale(self, driver: str, pool: str, generation: int) -> None:
        """A slice of an older generation, which the scheduler ignores once a newer one is seen."""
        spec = {
            "driver": driver,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
            "nodeName": NODE,
            "devices": [{"name": "old-0", "attributes": {"model": {"string": "a100"}}}],
        }
        self.slices.append({"apiVersion": API, "kind": "ResourceSlice", "metadata": _meta(f"{pool}-old"), "spec": spec})

    # --- classes and claims ----------------------------------------------------------------

    def classes(self) -> list[dict[str, Any]]:
        classes = []
        for driver in DRIVERS:
            selectors = [{"cel": {"expression": f"device.driver == '{driver}'"}}]
            if self.on("cel", 0.4):
                selectors.append({"cel": {"expression": self.expression(driver)}})
            classes.append(
                {
                    "apiVersion": API,
                    "kind": "DeviceClass",
                    "metadata": _meta(driver.split(".", maxsplit=1)[0]),
                    "spec": {"selectors": selectors},
                }
            )
        return classes

    def expression(self, driver: str) -> str:
        return self.rng.choice(
            [
                "device.attributes['" + driver + "'].model == 'a100'",
                "device.attributes['" + driver + "'].numa == 1",
                "device.attributes['" + driver + "'].healthy",
                "device.capacity['" + driver + "'].memory.compareTo(quantity('16Gi')) >= 0",
                "device.attributes['" + driver + "'].version.isGreaterThan(semver('1.5.0'))",
                "device.attributes['" + driver + "'].index % 2 == 0",
                "device.attributes['" + driver + "'].missing == 1",  # a runtime error: the allocation aborts
            ]
        )

    def exact(self, driver: str) -> dict[str, Any]:
        rng = self.rng
        request: dict[str, Any] = {"deviceClassName": driver.split(".", maxsplit=1)[0]}
        if self.on("all_mode", 0.3):
            request["allocationMode"] = "All"
        else:
            request["allocationMode"] = "ExactCount"
            request["count"] = rng.choice([1, 1, 2, 3])
        if self.on("cel", 0.4):
            request["selectors"] = [{"cel": {"expression": self.expression(driver)}}]
        if self.on("taints", 0.5):
            request["tolerations"] = [self.toleration()]
        if self.on("capacity", 0.5):
            request["capacity"] = {"requests": {"memory": rng.choice(["1Gi", "2Gi", "3Gi", "6Gi", "12Gi"])}}
        return request

    def toleration(self) -> dict[str, Any]:
        rng = self.rng
        if rng.random() < 0.1:
            return {"operator": "Exists"}  # an empty key with Exists tolerates every taint
        toleration: dict[str, Any] = {"key": "example.com/unhealthy", "operator": rng.choice(["Exists", "Equal"])}
        if toleration["operator"] == "Equal":
            toleration["value"] = rng.choice(["yes", "no"])
        if rng.random() < 0.5:
            toleration["effect"] = rng.choice(["NoSchedule", "NoExecute"])
            if toleration["effect"] == "NoExecute" and rng.random() < 0.5:
                toleration["tolerationSeconds"] = 60
        return toleration

    def request(self, index: int) -> dict[str, Any]:
        driver = self.rng.choice(self.drivers)
        if self.on("first_available", 0.4):
            subs = [{"name": f"sub-{i}", **self.exact(self.rng.choice(DRIVERS))} for i in range(self.rng.randint(1, 3))]
            return {"name": f"req-{index}", "firstAvailable": subs}
        exact = self.exact(driver)
        if self.on("admin", 0.3):
            exact["adminAccess"] = True
            exact.pop("capacity", None)  # adminAccess and capacity.requests are not allowed together
        return {"name": f"req-{index}", "exactly": exact}

    def constraints(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not self.on("constraints", 0.6):
            return []
        driver = self.rng.choice(DRIVERS)
        attribute = f"{driver}/{self.rng.choice(['numa', 'model', 'index'])}"
        constraint: dict[str, Any] = {"distinctAttribute" if self.rng.random() < 0.4 else "matchAttribute": attribute}
        if len(requests) > 1 and self.rng.random() < 0.5:
            constraint["requests"] = [r["name"] for r in requests[:2]]
        return [constraint]

    def claim(self, name: str) -> dict[str, Any]:
        requests = [self.request(i) for i in range(self.rng.choice([1, 1, 2]))]
        devices: dict[str, Any] = {"requests": requests}
        constraints = self.constraints(requests)
        if constraints:
            devices["constraints"] = constraints
        return {
            "apiVersion": API,
            "kind": "ResourceClaim",
            "metadata": _meta(name, "default"),
            "spec": {"devices": devices},
        }

    def allocated(self) -> list[dict[str, Any]]:
        """Claims that already hold some of the generated devices (admin access, shares)."""
        if not self.device_names or not self.on("allocated", 0.7):
            return []
        claims = []
        for index in range(self.rng.randint(1, 2)):
            held = self.rng.sample(self.device_names, self.rng.randint(1, min(2, len(self.device_names))))
            results = []
            for driver, pool, device in held:
                result: dict[str, Any] = {"request": "req-0", "driver": driver, "pool": pool, "device": device}
                if self.on("admin", 0.3):
                    result["adminAccess"] = True
                elif (driver, pool, device) in self.multi:
                    result["shareID"] = f"0a1b2c3d-0000-4000-8000-00000000000{index}"
                    result["consumedCapacity"] = {"memory": self.rng.choice(["2Gi", "4Gi"])}
                results.append(result)
            claim = self.claim(f"held-{index}")
            claim["status"] = {"allocation": {"devices": {"results": results}}}
            claims.append(claim)
        return claims


def case(seed: int, families: frozenset[str], gates: dict[str, bool]) -> dict[str, Any]:
    """One case drawn from ``seed`` with only ``families`` beyond the core (ExactCount, class selectors)."""
    gen = _Case(random.Random(seed), families)
    pools = [(DRIVERS[0], "pool-0")]
    if gen.on("pools", 0.7):
        pools += [(DRIVERS[1], "pool-0"), (DRIVERS[0], "pool-1")]
    for driver, pool in pools:
        gen.pool(driver, pool)
    gen.rng.shuffle(gen.slices)  # the scheduler sorts; the input order must not matter
    return {
        "features": dict(gates),
        "node": {"name": NODE, "labels": {"zone": "z1", "kubernetes.io/hostname": NODE}},
        "classes": gen.classes(),
        "slices": gen.slices,
        "claims": [gen.claim(f"claim-{i}") for i in range(gen.rng.choice([1, 1, 2]))],
        "allocated": gen.allocated(),
    }
