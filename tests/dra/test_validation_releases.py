"""Validation of the fields 1.36 and 1.37 turn on, per release: taints, tolerations, counters,
capacity request policies, binding conditions, per-device node selection, ResourceClaimTemplate
(pkg/apis/resource/validation/validation.go and the strategies' dropDisabledFields, v1.36.3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kubedevice.dra import features
from kubedevice.dra.cli import app
from kubedevice.dra.models import DecodeError, ResourceClaim, ResourceClaimTemplate, ResourceSlice, from_document
from kubedevice.dra.validation import validate

LABEL_KEY_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
DNS_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def messages(obj: Any, release: str = features.NEWEST) -> list[str]:
    return [str(e) for e in validate(obj, features.defaults(release), release)]


def resource_slice(spec: dict[str, Any]) -> ResourceSlice:
    base = {"driver": "gpu.example.com", "nodeName": "node-1", "pool": {"name": "node-1", "resourceSliceCount": 1}}
    obj = from_document(
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": base | spec}
    )
    assert isinstance(obj, ResourceSlice)
    return obj


def device(**fields: Any) -> ResourceSlice:
    return resource_slice({"devices": [{"name": "gpu-0", **fields}]})


def claim(exactly: dict[str, Any], **devices: Any) -> ResourceClaim:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", **exactly}}
    obj = from_document(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"devices": {"requests": [request], **devices}},
        }
    )
    assert isinstance(obj, ResourceClaim)
    return obj


# --- taints and tolerations -----------------------------------------------------------------


def test_device_taints() -> None:
    taints = [
        {"key": "example.com/unhealthy", "value": "yes", "effect": "NoSchedule"},
        {"key": "", "effect": "Drain"},
        {"key": "a", "value": "-bad-"},
    ]
    assert messages(device(taints=taints)) == [
        'spec.devices[0].taints[1].key: Invalid value: "": name part must be non-empty',
        f'spec.devices[0].taints[1].key: Invalid value: "": {LABEL_KEY_NAME_MSG}',
        'spec.devices[0].taints[1].effect: Unsupported value: "Drain": supported values: "NoExecute", '
        '"NoSchedule", "None"',
        f'spec.devices[0].taints[2].value: Invalid value: "-bad-": {LABEL_VALUE_MSG}',
        "spec.devices[0].taints[2].effect: Required value",
    ]
    assert messages(device(taints=[{"key": "k", "effect": "NoSchedule"}] * 17)) == [
        "spec.devices[0].taints: Too many: 17: must have at most 16 items"
    ]


def test_taints_are_dropped_where_the_gate_is_off() -> None:
    """1.35: DRADeviceTaints is alpha and off, so the API server drops the taints unchecked."""
    broken = device(taints=[{"key": "", "effect": "Drain"}])
    assert messages(broken, "1.35") == []
    assert len(messages(broken, "1.36")) == 3


def test_request_tolerations() -> None:
    tolerations = [
        {"operator": "Exists"},
        {"key": "k", "operator": "Exists", "value": "v"},
        {"key": "k/", "operator": "Equal", "value": "-x"},
        {"key": "k"},  # valid: the operator defaults to Equal (+default="Equal"; a live 1.36 server agrees)
        {"key": "k", "operator": "Lt", "effect": "Evict"},
    ]
    path = "spec.devices.requests[0].exactly.tolerations"
    assert messages(claim({"tolerations": tolerations})) == [
        f'{path}[1].value: Invalid value: "v": must be empty for operator `Exists`',
        f'{path}[2].key: Invalid value: "k/": name part must be non-empty',
        f'{path}[2].key: Invalid value: "k/": {LABEL_KEY_NAME_MSG}',
        f'{path}[2].value: Invalid value: "-x": {LABEL_VALUE_MSG}',
        f'{path}[4].operator: Unsupported value: "Lt": supported values: "Equal", "Exists"',
        f'{path}[4].effect: Unsupported value: "Evict": supported values: "NoExecute", "NoSchedule", "None"',
    ]
    # 1.35 drops them (DRADeviceTaints is off); 1.34's claim strategy has no such case, so a 1.34.4
    # server validates them, with its two effects (tests/interop/test_validation_apiserver.py).
    assert messages(claim({"tolerations": tolerations}), "1.35") == []
    assert messages(claim({"tolerations": tolerations}), "1.34")[-1] == (
        f'{path}[4].effect: Unsupported value: "Evict": supported values: "NoExecute", "NoSchedule"'
    )
    assert messages(claim({"tolerations": [{"operator": "Exists", "effect": "None"}]}), "1.34") == [
        f'{path}[0].effect: Unsupported value: "None": supported values: "NoExecute", "NoSchedule"'
    ]


# --- binding conditions ---------------------------------------------------------------------


def test_binding_conditions() -> None:
    assert messages(device(bindingConditions=["ready"], bindingFailureConditions=["failed"], bindsToNode=True)) == []
    assert messages(device(bindingConditions=["ready", "ready"], bindingFailureConditions=["ready"])) == [
        'spec.devices[0].bindingConditions[1]: Duplicate value: "ready"',
        'spec.devices[0].bindingFailureConditions[0]: Invalid value: "ready": '
        "bindingFailureConditions must not overlap with bindingConditions",
    ]
    # json.Marshal of the bad value: a missing list is Go's nil slice, "null"; an empty one "[]".
    assert messages(device(bindingConditions=["ready"])) == [
        "spec.devices[0].bindingFailureConditions: Invalid value: null: "
        "bindingFailureConditions are required to use bindingConditions"
    ]
    assert messages(device(bindingConditions=["ready"], bindingFailureConditions=[])) == [
        "spec.devices[0].bindingFailureConditions: Invalid value: []: "
        "bindingFailureConditions are required to use bindingConditions"
    ]
    assert messages(device(bindingFailureConditions=["failed"])) == [
        "spec.devices[0].bindingConditions: Invalid value: null: "
        "bindingConditions are required to use bindingFailureConditions"
    ]
    assert messages(device(bindingConditions=list("abcde"), bindingFailureConditions=["f"])) == [
        "spec.devices[0].bindingConditions: Too many: 5: must have at most 4 items"
    ]
    assert messages(device(bindingConditions=["ready"]), "1.35") == []  # dropped: the gate is off


# --- shared counters ------------------------------------------------------------------------


def counter_slice(shared: list[dict[str, Any]], consumes: list[dict[str, Any]]) -> list[str]:
    """A pool's counters in one slice and a device consuming them in another, as 1.35+ requires."""
    sets_slice = resource_slice({"sharedCounters": shared})
    device_slice = device(consumesCounters=consumes)
    return messages(sets_slice) + messages(device_slice)


def test_shared_counters_and_consumption() -> None:
    good = [{"name": "gpu-0-counters", "counters": {"memory": {"value": "40Gi"}}}]
    uses = [{"counterSet": "gpu-0-counters", "counters": {"memory": {"value": "10Gi"}}}]
    assert counter_slice(good, uses) == []
    shared = [
        {"name": "Bad_Name", "counters": {"memory": {"value": "1"}}},
        {"name": "", "counters": {}},
        {"name": "gpu-0-counters", "counters": {"Mem": {"value": "1"}}},
        {"name": "gpu-0-counters", "counters": {"memory": {"value": "1"}}},
    ]
    consumes = [{"counterSet": "", "counters": {f"c{i}": {"value": "1"} for i in range(33)}}]
    assert counter_slice(shared, consumes) == [
        f'spec.sharedCounters[0].name: Invalid value: "Bad_Name": {DNS_LABEL_MSG}',
        "spec.sharedCounters[1].name: Required value",
        "spec.sharedCounters[1].counters: Required value",
        f'spec.sharedCounters[2].counters: Invalid value: "Mem": {DNS_LABEL_MSG}',
        'spec.sharedCounters[3]: Duplicate value: "gpu-0-counters"',
        "spec.devices[0].consumesCounters[0].counterSet: Required value",
        "spec.devices[0].consumesCounters[0].counters: Too many: 33: must have at most 32 items",
    ]
    nine = [{"name": f"s{i}", "counters": {"c": {"value": "1"}}} for i in range(9)]
    assert messages(resource_slice({"sharedCounters": nine})) == [
        "spec.sharedCounters: Too many: 9: must have at most 8 items"
    ]
    three = [{"counterSet": f"s{i}", "counters": {"c": {"value": "1"}}} for i in range(3)]
    assert messages(device(consumesCounters=three)) == [
        "spec.devices[0].consumesCounters: Too many: 3: must have at most 2 items"
    ]


def test_counters_are_dropped_before_1_36() -> None:
    bad = resource_slice({"sharedCounters": [{"name": "", "counters": {}}]})
    assert messages(bad, "1.35") == []


def test_devices_and_shared_counters_together() -> None:
    both = resource_slice({"sharedCounters": [{"name": "s", "counters": {"c": {"value": "1"}}}], "devices": []})
    assert messages(both) == ['spec: Invalid value: "": only one of `sharedCounters` or `devices` is allowed']


# --- per-device node selection --------------------------------------------------------------


def test_per_device_node_selection() -> None:
    spec = {"nodeName": None, "perDeviceNodeSelection": True}
    devices = [
        {"name": "a", "nodeName": "node-1"},
        {"name": "b"},
        {"name": "c", "nodeName": "node-1", "allNodes": True},
        {"name": "d", "nodeName": ""},
        {"name": "e", "allNodes": False},
    ]
    choices = (
        "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set "
        "to true in the ResourceSlice spec"
    )
    assert messages(resource_slice({**spec, "devices": devices})) == [
        f"spec.devices[1]: Required value: {choices}",
        f'spec.devices[2]: Invalid value: "{{`nodeName`, `allNodes`}}": {choices}',
        'spec.devices[3].nodeName: Invalid value: "": must not be empty',
        f"spec.devices[3]: Required value: {choices}",
        "spec.devices[4].allNodes: Invalid value: false: must be either unset or set to true",
        f"spec.devices[4]: Required value: {choices}",
    ]


# --- consumable capacity --------------------------------------------------------------------


def policy_messages(value: str, policy: dict[str, Any], multiple: bool = True, release: str = "1.36") -> list[str]:
    capacity = {"memory": {"value": value, "requestPolicy": policy}}
    return messages(device(allowMultipleAllocations=multiple, capacity=capacity), release)


def test_request_policy() -> None:
    path = "spec.devices[0].capacity[memory].requestPolicy"
    assert policy_messages("40Gi", {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}) == []
    assert policy_messages("40Gi", {"default": "1Gi"}, multiple=False) == [
        f"{path}: Forbidden: allowMultipleAllocations must be true"
    ]
    assert policy_messages("40Gi", {"default": "1Gi", "validValues": ["1Gi"], "validRange": {"min": "1Gi"}}) == [
        f'{path}: Forbidden: exactly one policy can be specified, cannot specify "validValues" and "validRange" '
        "at the same time"
    ]
    assert policy_messages("40Gi", {"validValues": ["1Gi"]}) == [
        f"{path}.default: Required value: required when validValues is defined"
    ]
    assert policy_messages("40Gi", {"default": "3Gi", "validValues": ["2Gi", "1Gi", "41Gi", "1024Mi"]}) == [
        f'{path}.validValues[1]: Invalid value: "1Gi": values must be sorted in ascending order',
        f'{path}.validValues[3]: Invalid value: "1Gi": values must be sorted in ascending order',  # after 41Gi
        f'{path}.validValues[2]: Invalid value: "41Gi": option is larger than capacity value: 40Gi',
        f'{path}.validValues[3]: Duplicate value: "1073741824"',
        f'{path}.validValues: Invalid value: "3Gi": default value is not valid according to the requestPolicy',
    ]
    assert policy_messages("40Gi", {"default": "1Gi", "validRange": {"max": "2Gi"}}) == [
        f"{path}.validRange.min: Required value: required when validRange is defined"
    ]
    range_policy = {"default": "50Gi", "validRange": {"min": "45Gi", "max": "42Gi", "step": "4Gi"}}
    assert policy_messages("40Gi", range_policy) == [
        f'{path}.validRange.min: Invalid value: "45Gi": min is larger than capacity value: 40Gi',
        f'{path}.validRange.max: Invalid value: "45Gi": min is larger than max: 42Gi',
        f'{path}.validRange.max: Invalid value: "42Gi": max is larger than capacity value: 40Gi',
        f'{path}.validRange.max: Invalid value: "50Gi": default is more than max: 42Gi',
        f'{path}.validRange.step: Invalid value: "4Gi": one step 49Gi is larger than capacity value: 40Gi',
        f'{path}.validRange.step: Invalid value: "50Gi": value is not a multiple of a given step (4Gi) from (45Gi)',
        f'{path}.validRange.step: Invalid value: "42Gi": value is not a multiple of a given step (4Gi) from (45Gi)',
    ]
    assert policy_messages("40", {"default": "1", "validRange": {"min": "2"}}) == [
        f'{path}.validRange.min: Invalid value: "1": default is less than min: 2'
    ]
    # 1.37 reports a default outside the range at the default (a live v1.37.2 server agrees:
    # tests/interop/test_validation_apiserver.py)
    assert policy_messages("40", {"default": "1", "validRange": {"min": "2"}}, release="1.37") == [
        f'{path}.validRange.default: Invalid value: "1": default is less than min: 2'
    ]


def test_consumable_capacity_is_dropped_before_1_36() -> None:
    assert policy_messages("40Gi", {"default": "1Gi"}, multiple=False) != []
    capacity = {"memory": {"value": "40Gi", "requestPolicy": {"validValues": ["1Gi"]}}}
    assert messages(device(capacity=capacity), "1.35") == []


def test_a_constraint_with_neither_attribute_before_1_36() -> None:
    """Without DRAConsumableCapacity the API server names matchAttribute (validateDeviceConstraint)."""
    neither = claim({}, constraints=[{"requests": ["gpu"]}])
    assert messages(neither, "1.35") == ["spec.devices.constraints[0].matchAttribute: Required value"]
    distinct = claim({}, constraints=[{"distinctAttribute": "gpu.example.com/uuid"}])
    assert messages(distinct, "1.35") == ["spec.devices.constraints[0].matchAttribute: Required value"]
    assert messages(distinct, "1.36") == []


def test_1_34_keeps_a_distinct_attribute_its_gate_should_drop() -> None:
    """1.34's strategy clears distinctAttribute on a loop variable's copy, so it stays and is validated
    (a 1.34.4 API server accepts this claim and refuses a bad name at distinctAttribute); 1.35 drops it."""
    distinct = claim({}, constraints=[{"distinctAttribute": "gpu.example.com/uuid"}])
    assert messages(distinct, "1.34") == []
    bad = claim({}, constraints=[{"distinctAttribute": "gpu.example.com/Bad_Name!"}])
    assert [m.split(":")[0] for m in messages(bad, "1.34")] == ["spec.devices.constraints[0].distinctAttribute"]
    assert messages(bad, "1.35") == ["spec.devices.constraints[0].matchAttribute: Required value"]


# --- ResourceClaimTemplate ------------------------------------------------------------------


def template(meta: dict[str, Any], exactly: dict[str, Any]) -> ResourceClaimTemplate:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", **exactly}}
    obj = from_document(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t", "namespace": "default"},
            "spec": {"metadata": meta, "spec": {"devices": {"requests": [request]}}},
        }
    )
    assert isinstance(obj, ResourceClaimTemplate)
    return obj


def test_resource_claim_template() -> None:
    assert messages(template({"labels": {"app": "x"}}, {})) == []
    bad = template({"labels": {"app": "-x"}, "annotations": {"a/b/c": ""}}, {"count": -1})
    assert messages(bad) == [
        'spec.metadata.annotations: Invalid value: "a/b/c": a valid label key must consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
        "'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an "
        "optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        f'spec.metadata.labels: Invalid value: "-x": {LABEL_VALUE_MSG}',
        "spec.spec.devices.requests[0].exactly.count: Invalid value: -1: must be greater than zero",
    ]


@pytest.mark.parametrize("release", features.RELEASES)
def test_a_1_34_core_slice_is_valid_in_every_release(release: str) -> None:
    attributes = {"model": {"string": "a100"}, "gpu.example.com/index": {"int": 0}}
    assert messages(device(attributes=attributes, capacity={"memory": {"value": "40Gi"}}), release) == []


# --- DeviceTaintRule ------------------------------------------------------------------------


def taint_rule(spec: dict[str, Any], version: str = "v1", name: str = "r") -> Any:
    return from_document(
        {
            "apiVersion": f"resource.k8s.io/{version}",
            "kind": "DeviceTaintRule",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def test_device_taint_rule() -> None:
    good = {
        "deviceSelector": {"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"},
        "taint": {"key": "example.com/maintenance", "effect": "NoExecute"},
    }
    for version in ("v1alpha3", "v1beta2", "v1"):
        assert messages(taint_rule(good, version)) == []
    bad = {"deviceSelector": {"driver": "", "pool": "Pool", "device": "gpu_0"}, "taint": {"key": "k"}}
    assert messages(taint_rule(bad, name="R")) == [
        f'metadata.name: Invalid value: "R": {SUBDOMAIN_MSG}',
        "spec.deviceSelector.driver: Required value",
        f'spec.deviceSelector.pool: Invalid value: "Pool": {SUBDOMAIN_MSG}',
        f'spec.deviceSelector.device: Invalid value: "gpu_0": {DNS_LABEL_MSG}',
        "spec.taint.effect: Required value",
    ]


def test_a_taint_rule_time_is_decoded_as_rfc3339() -> None:
    with pytest.raises(DecodeError) as caught:
        taint_rule({"taint": {"key": "k", "effect": "NoSchedule", "timeAdded": "yesterday"}})
    expected = 'DeviceTaintRule in version "v1" cannot be handled as a DeviceTaintRule: parsing time'
    assert expected in caught.value.first()


# --- the release decides what its code does; the gates decide gated fields ------------------


def meta_class(metadata: dict[str, Any]) -> Any:
    return from_document({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": metadata, "spec": {}})


def test_a_1_34_device_class_checks_its_generate_name() -> None:
    """1.34 validates a DeviceClass's metadata with ``ValidateObjectMeta`` and ``ValidateClassName``,
    which checks ``generateName`` itself; from 1.35 ``ValidateObjectMetaWithOpts`` checks only the
    generated name (kubernetes v1.34.4 and v1.35.4 validation.go; a 1.34.4 server agrees)."""
    bad = meta_class({"generateName": "Gen-"})
    generated = f'metadata.name: Invalid value: "Gen-xxxxx": {SUBDOMAIN_MSG}'
    assert messages(bad, "1.34") == [f'metadata.generateName: Invalid value: "Gen-": {SUBDOMAIN_MSG}', generated]
    assert messages(bad, "1.35") == [generated]
    long = meta_class({"generateName": "a" * 254})  # the generated name keeps 58 bytes of it
    assert messages(long, "1.34") == [
        f'metadata.generateName: Invalid value: "{"a" * 254}": must be no more than 253 characters'
    ]
    assert messages(long, "1.35") == []


def test_1_34_checks_every_item_and_names_a_duplicate_by_its_key_field() -> None:
    """1.34's ``validateSlice`` checks the items before the size limit and ``validateSet`` reports a
    duplicate at its key field; 1.35 stops at the limit and reports at the item."""
    slice_ = resource_slice({"devices": [{"name": "d0"}, {"name": "d0"}, {"name": "Bad"}]})
    assert [m.split(":")[0] for m in messages(slice_, "1.34")] == ["spec.devices[2].name", "spec.devices[1].name"]
    assert [m.split(":")[0] for m in messages(slice_, "1.35")] == ["spec.devices[2].name", "spec.devices[1]"]
    selectors = [{"cel": {"expression": "1 +"}}] * 33
    too_many = "spec.devices.requests[0].exactly.selectors: Too many: 33: must have at most 32 items"
    assert messages(claim({"selectors": selectors}), "1.35") == [too_many]
    old = messages(claim({"selectors": selectors}), "1.34")
    assert len(old) == 34 and old[-1] == too_many
    assert old[0].startswith("spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value")


def test_the_release_not_the_gate_set_picks_the_code() -> None:
    """Gates turned on or off with --feature-gates change gated fields only: a 1.34 server with
    DRAConsumableCapacity on still runs 1.34's code, and the 1.37 range rule follows the release."""
    distinct = claim({}, constraints=[{"distinctAttribute": "gpu.example.com/Bad_Name!"}])
    gates_134 = features.defaults("1.34")
    assert [e.field for e in validate(distinct, gates_134, "1.34")] == ["spec.devices.constraints[0].distinctAttribute"]
    assert [e.field for e in validate(distinct, gates_134, "1.35")] == ["spec.devices.constraints[0].matchAttribute"]
    dup = resource_slice({"devices": [{"name": "d0"}, {"name": "d0"}]})
    with_capacity = features.from_flags("1.34", "DRAConsumableCapacity=true")
    assert [e.field for e in validate(dup, with_capacity, "1.34")] == ["spec.devices[1].name"]
    capacity = {"memory": {"value": "40", "requestPolicy": {"default": "1", "validRange": {"min": "2"}}}}
    policy = device(allowMultipleAllocations=True, capacity=capacity)
    bound = "spec.devices[0].capacity[memory].requestPolicy.validRange"
    assert [e.field for e in validate(policy, features.defaults("1.37"), "1.36")] == [f"{bound}.min"]
    assert [e.field for e in validate(policy, features.defaults("1.36"), "1.37")] == [f"{bound}.default"]


def test_the_cli_passes_the_release_down(tmp_path: Path) -> None:
    """``dra validate --kubernetes-version 1.34`` applies the 1.34 rule, with gate overrides too."""
    path = tmp_path / "class.yaml"
    path.write_text("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {generateName: Gen-}\nspec: {}\n")
    runner = CliRunner()
    line = 'metadata.generateName: Invalid value: "Gen-"'
    for flags, refused in (
        ([], False),
        (["--kubernetes-version", "1.35"], False),
        (["--kubernetes-version", "1.34"], True),
        (["--kubernetes-version", "1.34", "--feature-gates", "DRAConsumableCapacity=true"], True),
    ):
        result = runner.invoke(app, ["validate", str(path), *flags])
        assert result.exit_code == 1, result.output  # the generated name is invalid everywhere
        assert (line in result.output) == refused, (flags, result.output)
