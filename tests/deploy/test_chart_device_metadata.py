"""``dra.deviceMetadata``: the config asks the driver for device metadata, and what it writes is
where the node's container runtime reads it (the paths the pod writes are the node's paths)."""

from __future__ import annotations

from typing import Any

from kubedevice.config import parse_config

from .helmkit import Helm, one

DRA = ("dra.enabled=true", "dra.driverName=gpu.example.com")


def mounts(docs: list[dict[str, Any]]) -> dict[str, str]:
    """Each hostPath volume's node path by the path the container sees it at."""
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    volumes = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    [container] = pod["containers"]
    return {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"] if m["name"] in volumes}


def test_device_metadata_adds_the_config_flag(helm: Helm) -> None:
    off, on = helm.template(*DRA), helm.template(*DRA, "dra.deviceMetadata=true")
    configs = [parse_config(one(docs, "ConfigMap")["data"]["config.yaml"]).dra for docs in (off, on)]
    assert [c.device_metadata if c is not None else None for c in configs] == [False, True]


def test_the_files_and_their_specs_are_written_at_the_nodes_paths(helm: Helm) -> None:
    """The CDI spec's hostPath is the file's path as the driver sees it: the runtime on the node
    resolves it, so the plugin directory and the CDI directory are mounted at their node paths."""
    for kubelet_dir, cdi_dir in (("/var/lib/kubelet", "/var/run/cdi"), ("/data/kubelet", "/etc/cdi")):
        docs = helm.template(*DRA, "dra.deviceMetadata=true", f"dra.kubeletDir={kubelet_dir}", f"cdi.dir={cdi_dir}")
        config = parse_config(one(docs, "ConfigMap")["data"]["config.yaml"])
        seen = mounts(docs)
        assert seen[f"{kubelet_dir}/plugins"] == f"{kubelet_dir}/plugins"
        assert seen[str(config.cdi_dir)] == cdi_dir
        args = one(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[args.index("--kubelet-dir") + 1] == kubelet_dir
