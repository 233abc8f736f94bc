"""Decoding every apiVersion into one shape, and back; bad documents name what is wrong."""

from __future__ import annotations

import json

import pytest
import yaml

from kubedevice.dra.models import (
    DecodeError,
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
    dump,
    from_document,
    load_text,
    to_document,
)

MIXED = """\
apiVersion: resource.k8s.io/v1alpha3
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
  suitableNodes:
    nodeSelectorTerms:
    - matchExpressions: [{key: gpu, operator: Exists}]
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: two-gpus, namespace: default}
spec:
  devices:
    requests:
    - name: gpus
      deviceClassName: gpu.example.com
      count: 2
    constraints:
    - matchAttribute: gpu.example.com/model
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceSlice
metadata: {name: node-1-gpu}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: node-1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    basic:
      attributes: {model: {string: a100}}
      capacity: {memory: {value: 40Gi}}
"""


def test_mixed_kinds_in_one_file_decode_to_the_canonical_shape() -> None:
    device_class, claim, slice_ = load_text(MIXED)
    assert isinstance(device_class, DeviceClass) and isinstance(claim, ResourceClaim)
    assert isinstance(slice_, ResourceSlice)
    assert device_class.spec.suitable_nodes is not None
    request = claim.spec.devices.requests[0]
    assert request.exactly is not None
    assert (request.exactly.device_class_name, request.exactly.count) == ("gpu.example.com", 2)
    assert request.exactly.allocation_mode == "ExactCount"  # API-server default
    device = slice_.spec.devices[0]
    assert device.attributes["model"].as_value() == {"string": "a100"}
    assert device.capacity["memory"].value == "40Gi"


def test_round_trip_keeps_each_objects_own_api_version_shape() -> None:
    documents = list(yaml.safe_load_all(MIXED))
    for obj, original in zip(load_text(MIXED), documents, strict=True):
        out = to_document(obj)
        assert out["apiVersion"] == original["apiVersion"]
        assert to_document(from_document(out)) == out
    slice_doc = to_document(load_text(MIXED)[2])
    assert slice_doc["spec"]["devices"][0]["basic"]["capacity"] == {"memory": {"value": "40Gi"}}
    claim_doc = to_document(load_text(MIXED)[1])
    assert claim_doc["spec"]["devices"]["requests"][0]["deviceClassName"] == "gpu.example.com"


def test_v1alpha3_capacity_is_a_bare_quantity_and_v1_is_flat() -> None:
    alpha = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "d.example.com",
            "nodeName": "n",
            "pool": {"name": "n", "resourceSliceCount": 1},
            "devices": [{"name": "a", "basic": {"capacity": {"memory": "1Gi"}}}],
        },
    }
    obj = from_document(alpha)
    assert isinstance(obj, ResourceSlice)
    assert obj.spec.devices[0].capacity["memory"].value == "1Gi"
    assert to_document(obj)["spec"]["devices"][0] == {"name": "a", "basic": {"capacity": {"memory": "1Gi"}}}
    v1 = json.loads(dump([obj.model_copy(update={"api_version": "resource.k8s.io/v1"})], "json"))
    assert v1["spec"]["devices"][0]["capacity"] == {"memory": {"value": "1Gi"}}


def test_v1_claim_with_exactly_and_first_available() -> None:
    obj = from_document(
        yaml.safe_load("""
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c}
spec:
  devices:
    requests:
    - name: big
      firstAvailable:
      - {name: one, deviceClassName: big.example.com}
      - {name: two, deviceClassName: small.example.com, count: 2}
    - name: all
      exactly: {deviceClassName: x.example.com, allocationMode: All}
""")
    )
    assert isinstance(obj, ResourceClaim)
    big, every = obj.spec.devices.requests
    assert [(s.name, s.count) for s in big.first_available] == [("one", 1), ("two", 2)]
    assert every.exactly is not None and (every.exactly.allocation_mode, every.exactly.count) == ("All", 0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "kind: DeviceClass\napiVersion: resource.k8s.io/v2\nmetadata: {name: x}\n",
            'no matches for apiVersion "resource.k8s.io/v2"',
        ),
        ("kind: Pod\napiVersion: resource.k8s.io/v1\nmetadata: {name: x}\n", 'no matches for kind "Pod"'),
        ("kind: DeviceClass\nmetadata: {name: x}\n", "apiVersion not set"),
        ("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nspec: {selector: []}\n", 'unknown field "spec.selector"'),
        (
            "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nspec: {suitableNodes: {}}\n",
            'unknown field "spec.suitableNodes"',
        ),
        (
            "apiVersion: resource.k8s.io/v1beta1\nkind: DeviceClass\nspec: {suitableNodes: {}}\n",
            'unknown field "spec.suitableNodes"',
        ),
        (
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
            "spec: {devices: {requests: [{name: a, exactly: {count: many}}]}}\n",
            'ResourceClaim in version "v1" cannot be handled as a ResourceClaim: json: cannot unmarshal string '
            "into Go struct field ExactDeviceRequest.spec.devices.requests.exactly.count of type int64",
        ),
        (
            "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\n"
            "spec: {devices: [{name: a, capacity: {m: {value: lots}}}]}\n",
            "quantities must match the regular expression",
        ),
    ],
)
def test_bad_documents_say_what_is_wrong(text: str, expected: str) -> None:
    with pytest.raises(DecodeError) as caught:
        load_text(text, "f.yaml")
    assert expected in str(caught.value)
    assert "f.yaml:1" in str(caught.value)


def test_malformed_yaml_names_the_line() -> None:
    text = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: [unclosed\n"
    with pytest.raises(DecodeError) as caught:
        load_text(text, "bad.yaml")
    assert str(caught.value).startswith(("bad.yaml:5:", "bad.yaml:4:")), caught.value


def test_second_document_line_is_reported() -> None:
    text = MIXED + "---\napiVersion: resource.k8s.io/v1\nkind: Nope\n"
    with pytest.raises(DecodeError) as caught:
        load_text(text, "f.yaml")
    line = MIXED.count("\n") + 2
    assert f"f.yaml:{line}: " in str(caught.value)


def test_list_documents_contribute_their_items() -> None:
    text = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "a"}},
                {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "b"}},
            ],
        }
    )
    assert [o.metadata.name for o in load_text(text)] == ["a", "b"]


# --- the API server's decoder: strict JSON types (sigs.k8s.io/json) and metav1.Time ----------

CANNOT = "cannot be handled as a"


def decode_error(text: str) -> str:
    with pytest.raises(DecodeError) as caught:
        load_text(text, "f.yaml")
    assert len(caught.value.messages) == 1
    return caught.value.messages[0].removeprefix("f.yaml:1: ")


CLAIM = (
    "apiVersion: resource.k8s.io/{v}\nkind: ResourceClaim\nmetadata: {{name: c}}\n"
    "spec: {{devices: {{requests: [{r}]}}}}\n"
)
SLICE = (
    "apiVersion: resource.k8s.io/{v}\nkind: ResourceSlice\nmetadata: {{name: s}}\n"
    "spec: {{driver: d, pool: {{name: p, resourceSliceCount: 1}}, allNodes: {all}, devices: [{d}]}}\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            CLAIM.format(v="v1", r="{name: a, exactly: {deviceClassName: c, count: '2'}}"),
            'ResourceClaim in version "v1" cannot be handled as a ResourceClaim: json: cannot unmarshal string into '
            "Go struct field ExactDeviceRequest.spec.devices.requests.exactly.count of type int64",
        ),
        (
            CLAIM.format(v="v1", r="{name: a, exactly: {deviceClassName: c, count: 2.0}}"),
            'ResourceClaim in version "v1" cannot be handled as a ResourceClaim: json: cannot unmarshal number 2.0 '
            "into Go struct field ExactDeviceRequest.spec.devices.requests.exactly.count of type int64",
        ),
        (
            CLAIM.format(v="v1beta1", r="{name: a, deviceClassName: c, count: 2.0}"),
            'ResourceClaim in version "v1beta1" cannot be handled as a ResourceClaim: json: cannot unmarshal number '
            "2.0 into Go struct field DeviceRequest.spec.devices.requests.count of type int64",
        ),
        (
            CLAIM.format(v="v1", r="{name: a, firstAvailable: [{name: b, deviceClassName: c, allocationMode: 1}]}"),
            'ResourceClaim in version "v1" cannot be handled as a ResourceClaim: json: cannot unmarshal number into '
            "Go struct field DeviceSubRequest.spec.devices.requests.firstAvailable.allocationMode of type "
            "v1.DeviceAllocationMode",
        ),
        (
            SLICE.format(v="v1", all="'true'", d="{name: a}"),
            'ResourceSlice in version "v1" cannot be handled as a ResourceSlice: json: cannot unmarshal string into '
            "Go struct field ResourceSliceSpec.spec.allNodes of type bool",
        ),
        (
            SLICE.format(v="v1", all="true", d="{name: a, attributes: {x: {int: '5'}}}"),
            'ResourceSlice in version "v1" cannot be handled as a ResourceSlice: json: cannot unmarshal string into '
            "Go struct field DeviceAttribute.spec.devices.attributes.int of type int64",
        ),
        (
            SLICE.format(v="v1beta1", all="true", d="{name: a, basic: {attributes: {x: {bool: 1}}}}"),
            'ResourceSlice in version "v1beta1" cannot be handled as a ResourceSlice: json: cannot unmarshal number '
            "into Go struct field DeviceAttribute.spec.devices.basic.attributes.bool of type bool",
        ),
        (
            SLICE.format(
                v="v1", all="true", d="{name: a, taints: [{key: k, effect: NoExecute, timeAdded: yesterday}]}"
            ),
            'ResourceSlice in version "v1" cannot be handled as a ResourceSlice: parsing time "yesterday" as '
            '"2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"',
        ),
        (
            "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: c}\n"
            "spec: {config: [{opaque: {driver: 5, parameters: {}}}]}\n",
            'DeviceClass in version "v1" cannot be handled as a DeviceClass: json: cannot unmarshal number into Go '
            "struct field OpaqueDeviceConfiguration.spec.config.DeviceConfiguration.opaque.driver of type string",
        ),
    ],
)
def test_wrong_json_types_are_refused_as_the_api_server_decodes(text: str, expected: str) -> None:
    assert decode_error(text) == expected


def test_the_first_type_error_in_document_order_is_the_one_reported() -> None:
    text = CLAIM.format(v="v1", r="{name: a, exactly: {count: '2', deviceClassName: 7}}")
    assert decode_error(text).endswith("ExactDeviceRequest.spec.devices.requests.exactly.count of type int64")
    text = CLAIM.format(v="v1", r="{name: a, exactly: {deviceClassName: 7, count: '2'}}")
    expected = "ExactDeviceRequest.spec.devices.requests.exactly.deviceClassName of type string"
    assert decode_error(text).endswith(expected)


def test_a_type_error_hides_unknown_fields() -> None:
    text = CLAIM.format(v="v1", r="{name: a, exactly: {deviceClassName: c, count: '2', colour: red}}")
    assert CANNOT in decode_error(text)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-01-02T03:04:05Z", None),
        ("2024-01-02T03:04:05.123+02:00", None),
        ("2024-02-29T03:04:05Z", None),
        ("2024-01-02", 'cannot parse "" as "T"'),
        ("2024-1-02T03:04:05Z", 'cannot parse "1-02T03:04:05Z" as "01"'),
        ("2024-13-02T03:04:05Z", ": month out of range"),
        ("2023-02-29T03:04:05Z", ": day out of range"),
        ("2024-01-02T25:04:05Z", ": hour out of range"),
        ("2024-01-02T03:04:05", 'cannot parse "" as "Z07:00"'),
        ("2024-01-02T03:04:05Zjunk", ': extra text: "junk"'),
        ("2024-01-02 03:04:05Z", 'cannot parse " 03:04:05Z" as "T"'),
    ],
)
def test_time_added_parses_as_go_time_parse_rfc3339(value: str, expected: str | None) -> None:
    device = f"{{name: a, taints: [{{key: k, effect: NoSchedule, timeAdded: '{value}'}}]}}"
    text = SLICE.format(v="v1", all="true", d=device)
    if expected is None:
        assert load_text(text)
        return
    message = decode_error(text)
    prefix = f'ResourceSlice in version "v1" cannot be handled as a ResourceSlice: parsing time "{value}"'
    assert message.startswith(prefix)
    assert message.endswith(expected)


def test_a_number_for_a_time_is_refused_by_the_string_decode_inside_it() -> None:
    text = SLICE.format(v="v1", all="true", d="{name: a, taints: [{key: k, effect: NoSchedule, timeAdded: 5}]}")
    assert decode_error(text) == (
        'ResourceSlice in version "v1" cannot be handled as a ResourceSlice: '
        "json: cannot unmarshal number into Go value of type string"
    )


def test_null_is_what_go_makes_of_it() -> None:
    text = CLAIM.format(v="v1", r="{name: a, exactly: {deviceClassName: c, count: null, selectors: null}}")
    (claim,) = load_text(text)
    assert isinstance(claim, ResourceClaim) and claim.spec.devices.requests[0].exactly is not None
    assert claim.spec.devices.requests[0].exactly.count == 1  # absent, then defaulted
    (slice_,) = load_text(SLICE.format(v="v1", all="true", d="null"))
    assert isinstance(slice_, ResourceSlice)
    assert [d.name for d in slice_.spec.devices] == [""]  # a zero Device, for validation to report
