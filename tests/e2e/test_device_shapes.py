"""Issue 20's device shapes where they reach a container, on the real kubelet and containerd.

- A glob over ``…/serial/by-id/*`` keeps the matched (stable) name in the container, and a
  ``container_path`` template places a device where the pod expects it: the container reports
  what it sees at each path and writes to it (the test image's ``--write``).
- ``usb: {vendor, product, nodes: [tty]}``: a USB-serial adapter found in a fake sysfs by what
  users know gives the pod its tty; ``udev: {subsystem, match}`` with ``container_path:
  "{devlink}"`` gives it a tty at its udev by-id name.
- ``node_selector``: ``serve --node <the cluster's node>`` serves a resource only while the real
  Node carries its label; patching the label adds it to and removes it from the Node's capacity.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Node
from lightkube.types import PatchType

from kubedevice.testing.cluster import Cluster
from kubedevice.testing.fakehost import FakeHost
from kubedevice.testing.scenarios import (
    Daemon,
    char_node,
    container_output,
    delete_pods,
    device_pod,
    node_on_this_machine,
    unique,
    wait_for,
)

pytestmark = pytest.mark.e2e


def probing_pod(name: str, resource: str, count: int, paths: list[str]) -> dict[str, Any]:
    pod = device_pod(name, {resource: count})
    pod["spec"]["containers"][0]["args"] = ["--write", *paths]
    return pod


def probe(cluster: Cluster, pod_name: str, paths: list[str]) -> dict[str, str]:
    """Per path: ``ok`` or the error the container met writing to it."""
    api = cluster.api()
    pod = wait_for(
        "pod running", lambda: (p := api.pod(pod_name)) and p["status"].get("phase") == "Running" and p, 60.0
    )
    log = container_output(cluster, pod)
    outcomes = [line.removeprefix("write ") for line in log.splitlines() if line.startswith("write ")]
    return {line.split(": ", 1)[0]: line.split(": ", 1)[1] for line in outcomes}


def test_by_id_names_and_container_path_templates_reach_the_container(cluster: Cluster, short_tmp: Path) -> None:
    dev = short_tmp / "dev"
    tty = char_node(dev / "ttyKD0")
    by_id = dev / "serial" / "by-id"
    by_id.mkdir(parents=True)
    stable = by_id / "usb-KD_e2e_A10K1-if00-port0"
    stable.symlink_to("../../ttyKD0")
    for i in range(2):
        char_node(dev / f"ttyKE{i}")
    config = short_tmp / "config.yaml"
    config.write_text(f"""resources:
  - name: example.com/e2e-by-id
    glob: {{paths: ["{by_id}/*"]}}
  - name: example.com/e2e-indexed
    glob: {{paths: ["{dev}/ttyKE*"]}}
    container_path: /dev/serial{{index}}
""")
    daemon = Daemon(cluster, config, short_tmp / "serve.log")
    names = [unique("by-id"), unique("indexed")]
    try:
        api = cluster.api()
        wait_for(
            "both resources",
            lambda: (
                api.resource(cluster.node_name, "example.com/e2e-by-id") == (1, 1)
                and api.resource(cluster.node_name, "example.com/e2e-indexed") == (2, 2)
            ),
            10.0,
        )
        api.create_pod(probing_pod(names[0], "example.com/e2e-by-id", 1, [str(stable), str(tty)]))
        api.create_pod(probing_pod(names[1], "example.com/e2e-indexed", 2, ["/dev/serial0", "/dev/serial1"]))
        seen = probe(cluster, names[0], [str(stable), str(tty)])
        assert seen[str(stable)] == "ok", seen  # the stable name, as matched
        assert "no such file" in seen[str(tty)], seen  # not the node it resolves to on the host
        assert probe(cluster, names[1], ["/dev/serial0", "/dev/serial1"]) == {
            "/dev/serial0": "ok",
            "/dev/serial1": "ok",
        }
    finally:
        delete_pods(cluster.api(), names)
        assert daemon.stop() == 0, daemon.tail


def test_a_label_change_on_the_real_node_adds_and_removes_a_resource(cluster: Cluster, short_tmp: Path) -> None:
    label, resource, always = "kubedevice.test/e2e-shapes", "example.com/e2e-labelled", "example.com/e2e-always"
    config = short_tmp / "config.yaml"
    config.write_text(f"""resources:
  - name: {resource}
    static: {{count: 2, paths: [/dev/null]}}
    node_selector: {{{label}: "yes"}}
  - name: {always}
    static: {{count: 1, paths: [/dev/null]}}
""")
    client = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="kubedevice-e2e")

    def set_label(value: str | None) -> None:
        client.patch(Node, cluster.node_name, {"metadata": {"labels": {label: value}}}, patch_type=PatchType.MERGE)

    api = cluster.api()
    daemon = Daemon(
        cluster, config, short_tmp / "serve.log", "--node", cluster.node_name, "--kubeconfig", str(cluster.kubeconfig)
    )
    try:
        wait_for("the unselected resource", lambda: api.resource(cluster.node_name, always) == (1, 1), 10.0)
        assert api.resource(cluster.node_name, resource) == (0, 0), daemon.tail
        set_label("yes")
        wait_for("the labelled resource", lambda: api.resource(cluster.node_name, resource) == (2, 2), 10.0)
        set_label(None)
        # The kubelet keeps a resource it saw in capacity; what it can give drops to nothing.
        wait_for("the labelled resource gone", lambda: api.resource(cluster.node_name, resource)[1] == 0, 10.0)
        assert api.resource(cluster.node_name, always) == (1, 1)
        assert "node labels changed" in daemon.tail
    finally:
        set_label(None)
        assert daemon.stop() == 0, daemon.tail


@pytest.fixture
def stack() -> Iterator[contextlib.ExitStack]:
    with contextlib.ExitStack() as exits:
        yield exits


def test_a_usb_tty_found_by_vendor_and_product_reaches_the_container(
    cluster: Cluster, short_tmp: Path, stack: contextlib.ExitStack
) -> None:
    """``usb: {vendor, product, nodes: [tty]}`` over a fake sysfs (a CP2102 whose usb-serial tty is
    ttyUSB57); the node the kubelet hands to containerd must exist on the machine, so the test
    makes /dev/ttyUSB57 (the null device's numbers) for the test's length and removes only it."""
    host = FakeHost(short_tmp / "host")
    name = host.usb_device(1, 5, "10c4", "ea60", serial="KD57")
    tty = host.usb_class_node(name, "ttyUSB57")
    stack.enter_context(node_on_this_machine(Path(tty)))
    config = short_tmp / "config.yaml"
    config.write_text(
        "resources:\n  - name: example.com/e2e-cp2102\n"
        '    usb: {vendor: "10c4", product: "ea60", nodes: [tty]}\n'
        '    env: {SERIALS: "{serials}"}\n'
    )
    daemon = Daemon(cluster, config, short_tmp / "serve.log", "--host-root", str(host.root))
    pod_name = unique("usb-tty")
    try:
        api = cluster.api()
        wait_for("the CP2102", lambda: api.resource(cluster.node_name, "example.com/e2e-cp2102") == (1, 1), 10.0)
        api.create_pod(probing_pod(pod_name, "example.com/e2e-cp2102", 1, [tty]))
        assert probe(cluster, pod_name, [tty]) == {tty: "ok"}, daemon.tail
        pod = api.pod(pod_name)
        assert pod is not None and "SERIALS=KD57" in container_output(cluster, pod).splitlines()
    finally:
        delete_pods(cluster.api(), [pod_name])
        assert daemon.stop() == 0, daemon.tail


def test_a_udev_matched_tty_appears_at_its_by_id_name(
    cluster: Cluster, short_tmp: Path, stack: contextlib.ExitStack
) -> None:
    """``udev: {subsystem: tty, match: …}`` over a fake udev database; ``container_path:
    "{devlink}"`` puts the node at its by-id name in the container (by-id chosen over by-path)."""
    host = FakeHost(short_tmp / "host")
    name = host.usb_device(1, 6, "0403", "6001", serial="A10K1XYZ")
    tty = host.usb_class_node(name, "ttyUSB58")
    by_id = "/dev/serial/by-id/usb-FTDI_KD_e2e_A10K1XYZ-if00-port0"
    host.udev_entry(
        tty,
        links=["/dev/serial/by-path/pci-0000:00:14.0-usb-0:6:1.0-port0", by_id],
        properties={"ID_VENDOR_ID": "0403", "ID_SERIAL_SHORT": "A10K1XYZ"},
    )
    stack.enter_context(node_on_this_machine(Path(tty)))
    config = short_tmp / "config.yaml"
    config.write_text(
        "resources:\n  - name: example.com/e2e-ftdi\n"
        '    udev: {subsystem: tty, match: {ID_VENDOR_ID: "0403", ID_SERIAL_SHORT: "A10K1*"}}\n'
        '    container_path: "{devlink}"\n'
    )
    daemon = Daemon(cluster, config, short_tmp / "serve.log", "--host-root", str(host.root))
    pod_name = unique("udev-tty")
    try:
        api = cluster.api()
        wait_for("the FTDI tty", lambda: api.resource(cluster.node_name, "example.com/e2e-ftdi") == (1, 1), 10.0)
        api.create_pod(probing_pod(pod_name, "example.com/e2e-ftdi", 1, [by_id, tty]))
        seen = probe(cluster, pod_name, [by_id, tty])
        assert seen[by_id] == "ok", (seen, daemon.tail)
        assert "no such file" in seen[tty], seen
    finally:
        delete_pods(cluster.api(), [pod_name])
        assert daemon.stop() == 0, daemon.tail
