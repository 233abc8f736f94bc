"""Pods as input: claims from templates, named claims and extended resources, allocated and explained.

Real YAML files through ``kubedevice dra allocate`` / ``dra explain`` (typer's runner) and the
same objects through :mod:`kubedevice.dra.pods`; the expected claims are the ones Kubernetes
v1.36.3's resourceclaim controller and scheduler make (see the module's docstring).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from kubedevice.dra.cli import app
from kubedevice.dra.models import (
    DeviceClass,
    NodeObject,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    from_document,
    load_text,
    of_kind,
)
from kubedevice.dra.pods import (
    EXTENDED_CLAIM_ANNOTATION,
    POD_CLAIM_ANNOTATION,
    PodInputError,
    claims_for_pod,
    extended_requests,
    generate_name,
    pod_requests,
    resource_classes,
    schedule,
)
from kubedevice.dra.structured import Node, Unallocatable

runner = CliRunner()
DRIVER = "null.example.com"

CLASSES = f"""\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: null-class}}
spec:
  extendedResourceName: example.com/null
  selectors:
  - cel: {{expression: 'device.driver == "{DRIVER}"'}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: big}}
spec:
  selectors:
  - cel: {{expression: 'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].size == "big"'}}
"""
SLICES = f"""\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: node-1-null}}
spec:
  driver: {DRIVER}
  nodeName: node-1
  pool: {{name: node-1, resourceSliceCount: 1}}
  devices:
  - {{name: dev-0, attributes: {{size: {{string: small}}}}}}
  - {{name: dev-1, attributes: {{size: {{string: big}}}}}}
  - {{name: dev-2, attributes: {{size: {{string: small}}}}}}
"""
TEMPLATE = """\
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata: {name: one-big, namespace: default}
spec:
  metadata:
    labels: {team: a}
    annotations: {note: kept}
  spec:
    devices:
      requests:
      - {name: dev, deviceClassName: big}
"""
NAMED_CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared, namespace: default}
spec:
  devices:
    requests:
    - name: dev
      exactly: {deviceClassName: null-class}
"""


def pod(name: str, claims: str = "", resources: str = "", uid: str = "uid-1") -> str:
    text = f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, uid: {uid}}}\nspec:\n"
    text += f"  containers:\n  - name: main\n    image: busybox\n{resources}"
    return text + (f"  resourceClaims:\n{claims}" if claims else "")


TEMPLATE_POD = pod("trainer", "  - {name: accel, resourceClaimTemplateName: one-big}\n")
NAMED_POD = pod("reader", "  - {name: data, resourceClaimName: shared}\n", uid="uid-2")
EXTENDED_POD = pod("legacy", resources="    resources:\n      limits: {example.com/null: 1}\n", uid="uid-3")


def write(tmp_path: Path, name: str, *texts: str) -> str:
    path = tmp_path / name
    path.write_text("---\n".join(texts))
    return str(path)


def objects(*texts: str) -> tuple[list[Any], list[Pod]]:
    dra, pods = [], []
    for document in yaml.safe_load_all("---\n".join(texts)):
        if document["kind"] == "Pod":
            pods.append(Pod.model_validate(document))
        else:
            dra.append(from_document(document))
    return dra, pods


def allocate_cli(tmp_path: Path, *texts: str, extra: tuple[str, ...] = ()) -> Any:
    files = [write(tmp_path, "classes.yaml", CLASSES), write(tmp_path, "slices.yaml", SLICES)]
    files.append(write(tmp_path, "pods.yaml", *texts))
    return runner.invoke(app, ["allocate", *files, "--node", "node-1", *extra])


# --- the controller's claims from templates ------------------------------------------------


def test_template_pod_gets_the_controllers_claim_and_a_big_device(tmp_path: Path) -> None:
    result = allocate_cli(tmp_path, TEMPLATE, TEMPLATE_POD)
    assert result.exit_code == 0, result.output
    (claim,) = list(yaml.safe_load_all(result.output))
    meta = claim["metadata"]
    assert "name" not in meta
    assert meta["generateName"] == "trainer-accel-"
    assert meta["namespace"] == "default"
    assert meta["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "trainer", "uid": "uid-1", "controller": True}
    ]
    assert meta["annotations"] == {"note": "kept", POD_CLAIM_ANNOTATION: "accel"}
    assert meta["labels"] == {"team": "a"}
    (result_entry,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result_entry["request"], result_entry["device"]) == ("dev", "dev-1")
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "trainer", "uid": "uid-1"}]


def test_generate_name_is_cut_in_proportion_like_the_controller() -> None:
    assert generate_name("p", "c") == "p-c-"
    long_pod, long_claim = "p" * 40, "c" * 30
    cut = generate_name(long_pod, long_claim)  # 72 > 57: 40*57//72 and 30*57//72 characters
    assert cut == "p" * 31 + "-" + "c" * 23
    assert len(cut) <= 57


def test_a_claim_recorded_in_the_pod_status_is_used_instead_of_a_new_one() -> None:
    recorded = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: trainer-accel-x7k2p
  namespace: default
  ownerReferences: [{apiVersion: v1, kind: Pod, name: trainer, uid: uid-1, controller: true}]
spec:
  devices:
    requests:
    - name: dev
      exactly: {deviceClassName: big}
"""
    status = "status:\n  resourceClaimStatuses:\n  - {name: accel, resourceClaimName: trainer-accel-x7k2p}\n"
    dra, (the_pod,) = objects(CLASSES, TEMPLATE, recorded, TEMPLATE_POD + status)
    found = claims_for_pod(
        the_pod,
        claims=of_kind(dra, ResourceClaim),
        templates=of_kind(dra, ResourceClaimTemplate),
        classes=of_kind(dra, DeviceClass),
    )
    (only,) = found.claims
    assert only.claim.metadata.name == "trainer-accel-x7k2p"
    assert not only.generated


def test_missing_template_or_claim_is_one_line_naming_pod_and_claim(tmp_path: Path) -> None:
    result = allocate_cli(tmp_path, TEMPLATE_POD)
    assert result.exit_code == 2
    assert 'pod default/trainer: spec.resourceClaims[0] (accel): resource claim template "one-big"' in result.output
    result = allocate_cli(tmp_path, NAMED_POD)
    assert result.exit_code == 2
    assert 'pod default/reader: spec.resourceClaims[0] (data): ResourceClaim "shared" is not in the input' in (
        result.output
    )


def test_disabled_prioritized_list_refuses_the_template_as_the_controller_does() -> None:
    template = TEMPLATE.replace(
        "- {name: dev, deviceClassName: big}",
        "- {name: dev, firstAvailable: [{name: one, deviceClassName: big}]}",
    )
    dra, (the_pod,) = objects(CLASSES, template, TEMPLATE_POD)
    with pytest.raises(PodInputError, match="prioritized list of subrequests, but the feature is disabled"):
        claims_for_pod(
            the_pod,
            claims=[],
            templates=of_kind(dra, ResourceClaimTemplate),
            classes=of_kind(dra, DeviceClass),
            features={"DRAPrioritizedList": False},
        )


# --- named claims -------------------------------------------------------------------------


def test_named_claim_shared_by_two_pods_is_allocated_once_and_reserved_for_both(tmp_path: Path) -> None:
    second = NAMED_POD.replace("reader", "reader-2").replace("uid-2", "uid-4")
    result = allocate_cli(tmp_path, NAMED_CLAIM, NAMED_POD, second)
    assert result.exit_code == 0, result.output
    (claim,) = list(yaml.safe_load_all(result.output))
    assert claim["metadata"]["name"] == "shared"
    assert [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]] == ["dev-0"]
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["reader", "reader-2"]


def test_pods_one_after_another_do_not_get_the_same_device(tmp_path: Path) -> None:
    other = TEMPLATE_POD.replace("trainer", "trainer-2").replace("uid-1", "uid-5")
    result = allocate_cli(tmp_path, TEMPLATE, TEMPLATE_POD, other)
    assert result.exit_code == 1  # one big device only
    assert "cannot schedule pod default/trainer-2 on node node-1" in result.output
    assert "request dev: needs 1 device(s) of class big" in result.output


# --- extended resources -------------------------------------------------------------------


def test_extended_resource_is_served_by_the_class_with_that_name(tmp_path: Path) -> None:
    result = allocate_cli(tmp_path, EXTENDED_POD)
    assert result.exit_code == 0, result.output
    (claim,) = list(yaml.safe_load_all(result.output))
    assert claim["metadata"]["generateName"] == "legacy-extended-resources-"
    assert claim["metadata"]["annotations"] == {EXTENDED_CLAIM_ANNOTATION: "true"}
    assert claim["metadata"]["ownerReferences"][0]["name"] == "legacy"
    assert claim["spec"]["devices"]["requests"] == [
        {
            "name": "container-0-request-0",
            "exactly": {"deviceClassName": "null-class", "allocationMode": "ExactCount", "count": 1},
        }
    ]
    (entry,) = claim["status"]["allocation"]["devices"]["results"]
    assert (entry["request"], entry["device"]) == ("container-0-request-0", "dev-0")


def test_implicit_class_resource_name_and_request_names_per_container_and_resource() -> None:
    text = """\
apiVersion: v1
kind: Pod
metadata: {name: multi, namespace: default}
spec:
  initContainers:
  - name: setup
    resources: {requests: {example.com/null: 3}}
  - name: sidecar
    restartPolicy: Always
    resources: {limits: {deviceclass.resource.kubernetes.io/big: 1}}
  containers:
  - name: a
    resources: {limits: {cpu: 1, example.com/null: 1, zz.example.com/x: 1}}
  - name: b
    resources: {requests: {example.com/null: "1"}}
"""
    dra, (the_pod,) = objects(CLASSES, text)
    mapping = resource_classes(of_kind(dra, DeviceClass))
    assert mapping["deviceclass.resource.kubernetes.io/big"].metadata.name == "big"
    assert mapping["deviceclass.resource.kubernetes.io/null-class"].metadata.name == "null-class"
    # containers 1+1 = 2; init "setup" alone needs 3: the pod needs max(2, 3) of example.com/null
    assert pod_requests(the_pod)["example.com/null"] == 3
    requests = extended_requests(the_pod, ["deviceclass.resource.kubernetes.io/big", "example.com/null"], mapping)
    # index: init containers first; "a"'s resources sorted: cpu, example.com/null, zz...: index 1.
    # "setup" reuses the 2 devices of "a" and "b" (later long-lived) and asks for 1 more.
    assert [(r.name, r.exactly.device_class_name, r.exactly.count) for r in requests if r.exactly] == [
        ("container-0-request-0", "null-class", 1),
        ("container-1-request-0", "big", 1),
        ("container-2-request-1", "null-class", 1),
        ("container-3-request-0", "null-class", 1),
    ]


def test_extended_resource_without_class_is_insufficient_as_node_resources_fit_says(tmp_path: Path) -> None:
    unknown = EXTENDED_POD.replace("example.com/null", "example.com/unknown")
    result = allocate_cli(tmp_path, unknown)
    assert result.exit_code == 1
    assert "cannot schedule pod default/legacy on node node-1: Insufficient example.com/unknown" in result.output


def test_a_device_plugin_resource_on_the_node_takes_precedence(tmp_path: Path) -> None:
    node = "apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\nstatus:\n  allocatable: {example.com/null: '4'}\n"
    dra, (the_pod,) = objects(CLASSES, EXTENDED_POD)
    node_object = NodeObject.model_validate(yaml.safe_load(node))
    found = claims_for_pod(the_pod, claims=[], templates=[], classes=of_kind(dra, DeviceClass), node=node_object)
    assert found.claims == () and found.unfit is None
    result = allocate_cli(tmp_path, node, EXTENDED_POD)
    assert result.exit_code == 0 and result.output == ""


def test_extended_resources_are_left_alone_when_the_feature_is_off() -> None:
    dra, (the_pod,) = objects(CLASSES, EXTENDED_POD)
    found = claims_for_pod(
        the_pod, claims=[], templates=[], classes=of_kind(dra, DeviceClass), features={"DRAExtendedResource": False}
    )
    assert found.claims == ()
    assert found.unfit == "Insufficient example.com/null"


def test_feature_gate_flag_reaches_the_pod_path(tmp_path: Path) -> None:
    result = allocate_cli(tmp_path, EXTENDED_POD, extra=("--kubernetes-version", "1.35"))
    assert result.exit_code == 1  # DRAExtendedResource is off by default in 1.35
    assert "Insufficient example.com/null" in result.output


# --- all of a pod's claims together, and explain ------------------------------------------


def test_all_claims_of_a_pod_are_allocated_together() -> None:
    claims = "  - {name: accel, resourceClaimTemplateName: one-big}\n  - {name: data, resourceClaimName: shared}\n"
    both = pod("trainer", claims, "    resources:\n      limits: {example.com/null: 1}\n")
    dra, (the_pod,) = objects(CLASSES, SLICES, TEMPLATE, NAMED_CLAIM, both)
    found = claims_for_pod(
        the_pod,
        claims=of_kind(dra, ResourceClaim),
        templates=of_kind(dra, ResourceClaimTemplate),
        classes=of_kind(dra, DeviceClass),
    )
    scheduled = schedule(found, of_kind(dra, DeviceClass), of_kind(dra, ResourceSlice), Node("node-1"))
    assert [c.metadata.name for c in scheduled] == ["trainer-accel-", "shared", "<extended-resources>"]
    devices = [r["device"] for c in scheduled for r in (c.status or {})["allocation"]["devices"]["results"]]
    assert devices == ["dev-1", "dev-0", "dev-2"]  # one pod, three claims, no device twice
    with pytest.raises(Unallocatable, match="no ResourceSlice targets node node-2"):
        schedule(found, of_kind(dra, DeviceClass), of_kind(dra, ResourceSlice), Node("node-2"))


def test_explain_says_why_a_pod_does_not_fit(tmp_path: Path) -> None:
    in_use = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: taken, namespace: default}
spec:
  devices:
    requests:
    - name: dev
      exactly: {deviceClassName: big}
status:
  allocation:
    devices:
      results:
      - {request: dev, driver: null.example.com, pool: node-1, device: dev-1}
"""
    pods = write(tmp_path, "pods.yaml", TEMPLATE, in_use, TEMPLATE_POD)
    classes, slices = write(tmp_path, "c.yaml", CLASSES), write(tmp_path, "s.yaml", SLICES)
    args = ["explain", "--class", classes, "--slices", slices, "--pod", pods, "--node", "node-1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    text = result.output
    assert "Pod default/trainer on node node-1:" in text
    assert "claim trainer-accel- (spec.resourceClaims accel):" in text
    assert "DeviceClass big (requests dev):" in text
    assert "null.example.com/node-1/dev-0: does not match" in text
    assert "schedulable: no: claim default/trainer-accel-, request dev: needs 1 device(s) of class big" in text
    assert "1 in use" in text
    result = runner.invoke(app, [*args, "--json"])
    (report,) = json.loads(result.output)
    assert report["pod"] == "default/trainer" and report["schedulable"] is False
    assert [d["matches"] for d in report["claims"][0]["classes"][0]["devices"]] == [False, True, False]


def test_explain_lists_the_devices_a_fitting_pod_gets(tmp_path: Path) -> None:
    pods = write(tmp_path, "pods.yaml", TEMPLATE, TEMPLATE_POD, EXTENDED_POD)
    classes, slices = write(tmp_path, "c.yaml", CLASSES), write(tmp_path, "s.yaml", SLICES)
    args = ["explain", "--class", classes, "--slices", slices, "--pod", pods, "--node", "node-1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "claim trainer-accel-, request dev: null.example.com/node-1/dev-1" in result.output
    assert "claim <extended-resources> (extended resources):" in result.output
    assert "claim <extended-resources>, request container-0-request-0: null.example.com/node-1/dev-0" in (result.output)
    result = runner.invoke(app, args[:-2])
    assert result.exit_code == 2 and "--pod needs --node" in result.output


def test_templates_decode_in_every_version_and_dump_back() -> None:
    (template,) = load_text(TEMPLATE)
    assert isinstance(template, ResourceClaimTemplate)
    (request,) = template.spec.spec.devices.requests
    assert request.exactly is not None and request.exactly.count == 1  # defaulted as the API server does


def test_explain_schedules_pods_in_turn_like_allocate(tmp_path: Path) -> None:
    other = TEMPLATE_POD.replace("trainer", "trainer-2").replace("uid-1", "uid-5")
    first, second = write(tmp_path, "a.yaml", TEMPLATE, TEMPLATE_POD), write(tmp_path, "b.yaml", other)
    classes, slices = write(tmp_path, "c.yaml", CLASSES), write(tmp_path, "s.yaml", SLICES)
    args = ["explain", "--class", classes, "--slices", slices, "--pod", first, "--pod", second, "--node", "node-1"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 1, result.output
    reports = json.loads(result.output)
    assert [r["schedulable"] for r in reports] == [True, False]
    assert "(ruled out: 1 in use; 2 by selectors)" in reports[1]["reason"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            EXTENDED_POD.replace("example.com/null: 1", "example.com/null: lots"),
            "pod default/legacy: container resources",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: 5}\n",
            "pods.yaml:4:20: Pod spec.containers",
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\nstatus: {allocatable: {example.com/x: many}}\n---\n"
            + EXTENDED_POD,
            "node node-1: status.allocatable",
        ),
    ],
)
def test_bad_pod_input_is_one_line_and_exit_2(tmp_path: Path, text: str, message: str) -> None:
    result = allocate_cli(tmp_path, text)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
