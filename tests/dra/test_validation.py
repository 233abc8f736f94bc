"""API-server validation: the messages and field paths of pkg/apis/resource/validation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubedevice.dra import features
from kubedevice.dra.models import DecodeError, DeviceClass, ResourceClaim, ResourceSlice, from_document
from kubedevice.dra.validation import ErrorType, FieldError, raw_json, validate
from kubedevice.gostrings import quote as go_quote

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
# Kubernetes' own estimate: 12,785,859 (three levels: 399,555, under the 1,000,000 limit).
EXPENSIVE = (
    "device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, device.attributes.all(d, a == b))))"
)


def device_class(spec: dict[str, Any], name: str = "gpu.example.com", version: str = "v1") -> DeviceClass:
    obj = from_document(
        {"apiVersion": f"resource.k8s.io/{version}", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}
    )
    assert isinstance(obj, DeviceClass)
    return obj


def messages(obj: Any, release: str = features.NEWEST) -> list[str]:
    return [str(e) for e in validate(obj, release=release)]


def selector(expression: str) -> dict[str, Any]:
    return {"cel": {"expression": expression}}


def opaque(driver: str = "dra.example.com", parameters: Any = None) -> dict[str, Any]:
    params = {"kind": "GpuConfig", "sharing": "TimeSlicing"} if parameters is None else parameters
    return {"opaque": {"driver": driver, "parameters": params}}


def test_the_documentation_example_class_is_valid() -> None:
    spec = {
        "selectors": [
            selector('device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].type == "gpu"')
        ],
        "config": [opaque()],
    }
    for version in ("v1alpha3", "v1beta1", "v1beta2", "v1"):
        assert messages(device_class(spec, version=version)) == []


def test_metadata_name_is_required_and_a_dns_subdomain() -> None:
    assert messages(device_class({}, name="")) == ["metadata.name: Required value: name or generateName is required"]
    assert messages(device_class({}, name="%#$")) == [f'metadata.name: Invalid value: "%#$": {SUBDOMAIN_MSG}']
    # DeviceClass names go through validate.LongName (apimachinery/pkg/api/validate/content): "bytes".
    assert messages(device_class({}, name="a" * 254)) == [
        f'metadata.name: Invalid value: "{"a" * 254}": must be no more than 253 bytes'
    ]


def test_selector_limits() -> None:
    assert messages(device_class({"selectors": [selector("true")] * 33})) == [
        "spec.selectors: Too many: 33: must have at most 32 items"
    ]
    assert messages(device_class({"selectors": [selector("true")] * 32})) == []
    assert messages(device_class({"selectors": [{}]})) == ["spec.selectors[0].cel: Required value"]


def test_expression_length_is_counted_in_bytes_and_not_compiled_beyond() -> None:
    at_limit = "true" + " " * (10240 - 4)
    assert messages(device_class({"selectors": [selector(at_limit)]})) == []
    too_long = "é" * 5121  # 10,242 bytes, 5,121 characters
    assert messages(device_class({"selectors": [selector(too_long)]})) == [
        "spec.selectors[0].cel.expression: Too long: may not be more than 10240 bytes"
    ]


def test_compile_errors_are_invalid_values_with_the_expression() -> None:
    errors = validate(device_class({"selectors": [selector("true"), selector("device.driver ==")]}))
    assert len(errors) == 1
    assert errors[0].field == "spec.selectors[1].cel.expression"
    assert str(errors[0]).startswith('spec.selectors[1].cel.expression: Invalid value: "device.driver ==": ')
    assert "compilation failed" in errors[0].detail
    non_bool = messages(device_class({"selectors": [selector("device.driver")]}))
    assert len(non_bool) == 1 and "bool" in non_bool[0]


def test_expensive_expressions_are_forbidden_by_the_cost_estimate() -> None:
    assert messages(device_class({"selectors": [selector(EXPENSIVE)]})) == [
        "spec.selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit"
    ]


def test_config_rules() -> None:
    assert messages(device_class({"config": [opaque()] * 33})) == [
        "spec.config: Too many: 33: must have at most 32 items"
    ]
    assert messages(device_class({"config": [{}]})) == ["spec.config[0].opaque: Required value"]
    # From 1.35 ValidateCSIDriverName stops at the missing name (live 1.35-1.37 servers agree); 1.34 goes on.
    assert messages(device_class({"config": [opaque(driver="")]})) == ["spec.config[0].opaque.driver: Required value"]
    assert [str(e) for e in validate(device_class({"config": [opaque(driver="")]}), release="1.34")] == [
        "spec.config[0].opaque.driver: Required value",
        f'spec.config[0].opaque.driver: Invalid value: "": {SUBDOMAIN_MSG}',
    ]
    # The driver is lower-cased before the DNS check, as for CSI drivers.
    assert messages(device_class({"config": [opaque(driver="GPU.Example.com")]})) == []
    long_driver = "a" * 60 + ".com"
    assert messages(device_class({"config": [opaque(driver=long_driver)]}), "1.36") == [
        "spec.config[0].opaque.driver: Too long: may not be more than 63 bytes"
    ]
    # 1.37 checks it declaratively: characters, not bytes (a live v1.37.2 server says so).
    assert messages(device_class({"config": [opaque(driver=long_driver)]})) == [
        "spec.config[0].opaque.driver: Too long: may not be more than 63 characters"
    ]
    assert messages(device_class({"config": [{"opaque": {"driver": "dra.example.com"}}]})) == [
        "spec.config[0].opaque.parameters: Required value"
    ]
    assert messages(device_class({"config": [opaque(parameters=[1, 2])]})) == [
        'spec.config[0].opaque.parameters: Invalid value: "<value omitted>": must be a valid JSON object'
    ]


def test_parameters_size_limit_counts_the_json_bytes() -> None:
    fits = {"k": "x" * (10240 - len('{"k":""}'))}
    assert len(raw_json(fits)) == 10240
    assert messages(device_class({"config": [opaque(parameters=fits)]})) == []
    assert messages(device_class({"config": [opaque(parameters={"k": "x" * 10240})]})) == [
        "spec.config[0].opaque.parameters: Too long: may not be more than 10240 bytes"
    ]
    assert raw_json({"a": "<&>"}) == b'{"a":"\\u003c\\u0026\\u003e"}'


def test_v1alpha3_suitable_nodes_are_checked() -> None:
    """Only 1.31 has ``suitableNodes``, kept with DRAControlPlaneController on and checked at the top
    level (``field.NewPath("suitableNodes")`` in validateDeviceClassSpec, kubernetes v1.31.14)."""
    gates = features.from_flags("1.31", "DRAControlPlaneController=true")

    def with_controller(spec: dict[str, Any]) -> list[str]:
        doc = {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceClass", "metadata": {"name": "c"}}
        return [str(e) for e in validate(from_document({**doc, "spec": spec}, release="1.31"), gates, "1.31")]

    spec = {"suitableNodes": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "In"}]}]}}
    assert with_controller(spec) == [
        "suitableNodes.nodeSelectorTerms[0].matchExpressions[0].values: Required value: "
        "must be specified when `operator` is 'In' or 'NotIn'"
    ]
    assert with_controller({"suitableNodes": {}}) == [
        "suitableNodes.nodeSelectorTerms: Required value: must have at least one node selector term"
    ]


def test_extended_resource_name() -> None:
    assert messages(device_class({"extendedResourceName": "example.com/gpu"})) == []
    assert messages(device_class({"extendedResourceName": "gpu"}), "1.36") == [
        'spec.extendedResourceName: Invalid value: "gpu": must be a valid extended resource name'
    ]
    # 1.37's declarative check says why (its wording; a live v1.37.2 server agrees).
    path = "spec.extendedResourceName: Invalid value"
    assert messages(device_class({"extendedResourceName": "gpu"})) == [
        f"{path}: \"gpu\": a name must be a domain-prefixed path, such as 'example.com/my-prop'"
    ]
    assert messages(device_class({"extendedResourceName": "deviceclass.resource.kubernetes.io/x"})) == [
        f'{path}: "deviceclass.resource.kubernetes.io/x": must not have "kubernetes.io/" domain'
    ]


def claim(requests: list[dict[str, Any]], **devices: Any) -> ResourceClaim:
    obj = from_document(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "claim", "namespace": "default"},
            "spec": {"devices": {"requests": requests, **devices}},
        }
    )
    assert isinstance(obj, ResourceClaim)
    return obj


def test_claim_requests() -> None:
    ok = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
    assert messages(claim([ok])) == []
    assert messages(claim([ok, ok])) == ['spec.devices.requests[1]: Duplicate value: "gpu"']
    assert messages(claim([{"name": "gpu"}])) == [
        "spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required"
    ]
    assert messages(claim([{"name": "gpu", "exactly": {}}])) == [
        "spec.devices.requests[0].exactly.deviceClassName: Required value"
    ]
    assert messages(
        claim([{"name": "gpu", "exactly": {"deviceClassName": "c", "allocationMode": "All", "count": 2}}])
    ) == [
        "spec.devices.requests[0].exactly.count: Invalid value: 2: must not be specified when allocationMode is 'All'"
    ]
    assert messages(claim([{"name": "gpu", "exactly": {"deviceClassName": "c", "count": -1}}])) == [
        "spec.devices.requests[0].exactly.count: Invalid value: -1: must be greater than zero"
    ]
    assert messages(claim([{"name": "gpu", "exactly": {"deviceClassName": "c", "allocationMode": "Some"}}])) == [
        'spec.devices.requests[0].exactly.allocationMode: Unsupported value: "Some": '
        'supported values: "All", "ExactCount"'
    ]
    assert messages(
        claim([{"name": "gpu", "exactly": {"deviceClassName": "c", "selectors": [selector(EXPENSIVE)]}}])
    ) == ["spec.devices.requests[0].exactly.selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit"]


def test_claim_constraints_and_config_refer_to_requests() -> None:
    ok = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
    assert messages(claim([ok], constraints=[{"matchAttribute": "model"}])) == [
        'spec.devices.constraints[0].matchAttribute: Invalid value: "model": '
        "a fully qualified name must be a domain and a name separated by a slash"
    ]
    assert messages(claim([ok], constraints=[{"requests": ["nic"]}])) == [
        'spec.devices.constraints[0].requests[0]: Invalid value: "nic": must be the name of a request in the claim '
        "or the name of a request and a subrequest separated by '/'",
        'spec.devices.constraints[0]: Required value: exactly one of "matchAttribute" or "distinctAttribute" is '
        "required, but multiple fields are set",
    ]
    assert messages(claim([ok], config=[{"requests": ["gpu"], **opaque()}])) == []


def test_v1beta1_claim_errors_use_the_internal_exactly_path() -> None:
    obj = from_document(
        {
            "apiVersion": "resource.k8s.io/v1beta1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c"},
            "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "Bad_Class"}]}},
        }
    )
    assert [e.field for e in validate(obj)] == ["spec.devices.requests[0].exactly.deviceClassName"]


def resource_slice(spec: dict[str, Any]) -> ResourceSlice:
    base = {"driver": "gpu.example.com", "nodeName": "node-1", "pool": {"name": "node-1", "resourceSliceCount": 1}}
    obj = from_document(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "node-1-gpu"},
            "spec": {**base, **spec},
        }
    )
    assert isinstance(obj, ResourceSlice)
    return obj


def test_slice_devices() -> None:
    device = {
        "name": "gpu-0",
        "attributes": {"model": {"string": "a100"}, "gpu.example.com/index": {"int": 0}},
        "capacity": {"memory": {"value": "40Gi"}},
    }
    assert messages(resource_slice({"devices": [device]})) == []
    assert messages(resource_slice({"devices": [device, device]})) == ['spec.devices[1]: Duplicate value: "gpu-0"']
    bad = {
        "name": "GPU_0",
        "attributes": {"1st": {"string": "x"}, "v": {"version": "1.02"}, "two": {"int": 1, "bool": True}},
    }
    assert messages(resource_slice({"devices": [bad]})) == [
        'spec.devices[0].name: Invalid value: "GPU_0": a lowercase RFC 1123 label must consist of lower case '
        "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  "
        "or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        'spec.devices[0].attributes: Invalid value: "1st": a valid C identifier must start with alphabetic character '
        "or '_', followed by a string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', "
        "regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')",
        'spec.devices[0].attributes[v].version: Invalid value: "1.02": '
        "must be a string compatible with semver.org spec 2.0.0",
        'spec.devices[0].attributes[two]: Invalid value: {"int":1,"bool":true}: exactly one value must be specified',
    ]
    assert messages(resource_slice({"devices": [{"name": f"d{i}"} for i in range(129)]})) == [
        "spec.devices: Too many: 129: must have at most 128 items"
    ]


def test_slice_node_selection_and_pool() -> None:
    assert messages(resource_slice({"allNodes": True})) == [
        'spec: Invalid value: "{`nodeName`, `allNodes`}": exactly one of `nodeName`, `nodeSelector`, `allNodes`, '
        "`perDeviceNodeSelection` is required, but multiple fields are set"
    ]
    assert messages(resource_slice({"nodeName": None, "pool": {"name": "p", "resourceSliceCount": 0}})) == [
        "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero",
        "spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
        "`perDeviceNodeSelection` is required",
    ]


def test_go_quoting_and_error_rendering() -> None:
    assert go_quote('a"b\\c\n\x01é') == '"a\\"b\\\\c\\n\\x01é"'
    assert str(FieldError(ErrorType.REQUIRED, "x")) == "x: Required value"
    assert str(FieldError(ErrorType.INVALID, "x", True, "why")) == "x: Invalid value: true: why"
    assert json.loads(raw_json({"k": "é"})) == {"k": "é"}


# --- what a real 1.36 API server decided differently (issue 21) ------------------------------


def meta_object(kind: str, metadata: dict[str, Any]) -> Any:
    spec: dict[str, Any] = {}
    if kind == "ResourceSlice":
        spec = {"driver": "gpu.example.com", "allNodes": True, "pool": {"name": "p", "resourceSliceCount": 1}}
    return from_document({"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": metadata, "spec": spec})


def test_generate_name_alone_is_valid_because_the_name_is_generated_first() -> None:
    for kind in ("DeviceClass", "ResourceClaim", "ResourceSlice"):
        assert messages(meta_object(kind, {"generateName": "gpu-"})) == [], kind
    # A bad prefix: the generateName check and the generated name's (58 bytes kept + 5 random).
    assert messages(meta_object("ResourceSlice", {"generateName": "Gpu-"})) == [
        f'metadata.generateName: Invalid value: "Gpu-": {SUBDOMAIN_MSG}',
        f'metadata.name: Invalid value: "Gpu-xxxxx": {SUBDOMAIN_MSG}',
    ]
    # DeviceClass (ValidateObjectMetaWithOpts) checks only the generated name.
    assert messages(meta_object("DeviceClass", {"generateName": "Gpu-"})) == [
        f'metadata.name: Invalid value: "Gpu-xxxxx": {SUBDOMAIN_MSG}'
    ]
    # 100 bytes of prefix: only 58 are kept, and a generated name is 63 bytes long.
    assert messages(meta_object("ResourceClaim", {"generateName": "a" * 100})) == []
    assert messages(meta_object("ResourceClaim", {"generateName": "a" * 254})) == [
        f'metadata.generateName: Invalid value: "{"a" * 254}": must be no more than 253 characters'
    ]


def test_a_generate_name_prefix_is_masked_as_go_masks_it() -> None:
    """``maskTrailingDash`` drops two bytes for the letter it adds and leaves a lone ``-`` alone
    (apimachinery pkg/api/validation/generic.go): ``a..-`` passes as ``a.a``, ``-`` and ``é-`` fail."""
    claim = "ResourceClaim"
    assert messages(meta_object(claim, {"generateName": "a..-"})) == [
        f'metadata.name: Invalid value: "a..-xxxxx": {SUBDOMAIN_MSG}'
    ]
    for prefix in ("-", "é-"):
        assert messages(meta_object(claim, {"generateName": prefix})) == [
            f"metadata.generateName: Invalid value: {go_quote(prefix)}: {SUBDOMAIN_MSG}",
            f"metadata.name: Invalid value: {go_quote(prefix + 'xxxxx')}: {SUBDOMAIN_MSG}",
        ]


def test_a_namespace_on_a_cluster_scoped_object_is_cleared_not_refused() -> None:
    for kind in ("DeviceClass", "ResourceSlice"):
        assert messages(meta_object(kind, {"name": "x", "namespace": "default"})) == [], kind
    assert messages(meta_object("ResourceClaim", {"name": "x", "namespace": "Bad"}))[0].startswith(
        'metadata.namespace: Invalid value: "Bad": a lowercase RFC 1123 label'
    )


def test_lengths_are_counted_in_bytes() -> None:
    device = {"name": "gpu-0", "attributes": {"model": {"string": "é" * 40}}}  # 40 characters, 80 bytes
    assert messages(resource_slice({"devices": [device]})) == [
        "spec.devices[0].attributes[model].string: Too long: may not be more than 64 bytes"
    ]
    device = {"name": "gpu-0", "attributes": {"model": {"strings": ["ok", "é" * 33]}}}
    lists = features.from_flags(features.NEWEST, "DRAListTypeAttributes=true")  # alpha: off by default
    assert [str(e) for e in validate(resource_slice({"devices": [device]}), lists)] == [
        "spec.devices[0].attributes[model].strings[1]: Too long: may not be more than 64 bytes"
    ]
    assert messages(resource_slice({"devices": [{"name": "gpu-0", "attributes": {"é" * 17: {"int": 1}}}]})) == [
        "spec.devices[0].attributes: Too long: may not be more than 32 bytes",
        f'spec.devices[0].attributes: Invalid value: "{"é" * 17}": a valid C identifier must start with alphabetic '
        "character or '_', followed by a string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  "
        "or 'MyName', regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')",
    ]
    driver = "é" * 32  # 64 bytes > 63
    assert messages(device_class({"config": [opaque(driver=driver)]}), "1.36")[0] == (
        "spec.config[0].opaque.driver: Too long: may not be more than 63 bytes"
    )
    # 1.37's declarative MaxLength counts 32 characters: only the format is wrong.
    assert [m.split(": ")[1] for m in messages(device_class({"config": [opaque(driver=driver)]}))] == ["Invalid value"]


def test_extended_resource_name_counts_the_requests_prefix() -> None:
    label = "a" * 63
    fits = ".".join([label, label, label, "a" * 51])  # 243 bytes: requests. makes 252
    too_long = ".".join([label, label, label, "a" * 53])  # 245 bytes: requests. makes 254
    assert messages(device_class({"extendedResourceName": f"{fits}/gpu"})) == []
    assert messages(device_class({"extendedResourceName": f"{too_long}/gpu"}), "1.36") == [
        f'spec.extendedResourceName: Invalid value: "{too_long}/gpu": must be a valid extended resource name'
    ]
    assert messages(device_class({"extendedResourceName": f"{too_long}/gpu"})) == [
        f'spec.extendedResourceName: Invalid value: "{too_long}/gpu": prefix part must be no more than 253 bytes'
    ]
    assert messages(device_class({"extendedResourceName": "requests.example.com/gpu"})) == [
        'spec.extendedResourceName: Invalid value: "requests.example.com/gpu": must not have "requests." prefix'
    ]


def test_an_attribute_key_with_two_slashes_is_accepted_as_today() -> None:
    device = {"name": "gpu-0", "attributes": {"a.example.com/b/c": {"int": 1}}}
    assert messages(resource_slice({"devices": [device]})) == []
    ok = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
    assert messages(claim([ok], constraints=[{"requests": ["gpu"], "matchAttribute": "a.example.com/b/c"}])) == []


def test_an_empty_device_list_is_set() -> None:
    counters = [{"name": "gpu-0-counters", "counters": {"memory": {"value": "8Gi"}}}]
    assert messages(resource_slice({"sharedCounters": counters, "devices": []})) == [
        'spec: Invalid value: "": only one of `sharedCounters` or `devices` is allowed'
    ]
    assert messages(resource_slice({"sharedCounters": counters})) == []


def test_admin_access_is_unknown_on_a_subrequest() -> None:
    sub = {"name": "one", "deviceClassName": "gpu.example.com", "adminAccess": True}
    with pytest.raises(DecodeError) as caught:
        claim([{"name": "gpu", "firstAvailable": [{"name": "zero", "deviceClassName": "c"}, sub]}])
    assert caught.value.messages == ['unknown field "spec.devices.requests[0].firstAvailable[1].adminAccess"']
    assert messages(claim([{"name": "gpu", "exactly": {"deviceClassName": "c", "adminAccess": True}}])) == []


def test_a_constraint_with_neither_attribute_is_required_at_the_constraint() -> None:
    ok = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
    assert messages(claim([ok], constraints=[{"requests": ["gpu"]}])) == [
        'spec.devices.constraints[0]: Required value: exactly one of "matchAttribute" or "distinctAttribute" is '
        "required, but multiple fields are set"
    ]


def test_match_fields_reports_every_error_of_an_entry() -> None:
    selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.uid", "operator": "Exists", "values": []}]}]}
    term = "spec.nodeSelector.nodeSelectorTerms[0]"
    assert messages(resource_slice({"nodeName": None, "nodeSelector": selector})) == [
        f'{term}.matchFields[0].operator: Invalid value: "Exists": not a valid selector operator',
        f'{term}.matchFields[0].key: Invalid value: "metadata.uid": not a valid field selector key',
    ]
    selector = {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["A", "b"]}]}]
    }
    assert messages(resource_slice({"nodeName": None, "nodeSelector": selector})) == [
        f"{term}.matchFields[0].values: Required value: "
        "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
        f'{term}.matchFields[0].values[0]: Invalid value: "A": {SUBDOMAIN_MSG}',
    ]
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Has", "values": ["-x"]}]}]}
    assert messages(resource_slice({"nodeName": None, "nodeSelector": selector})) == [
        f'{term}.matchExpressions[0].operator: Invalid value: "Has": not a valid selector operator',
        f'{term}.matchExpressions[0].values[0]: Invalid value: "-x": a valid label must be an empty string or '
        "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
    ]
