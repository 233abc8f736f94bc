"""What the cluster's processes are given: the kubelet's and containerd's configs, the CNI plugin,
the namespace's set-up script and each release's API server flags.

A setting here that differs from a production node is listed in docs/real-cluster.md ("Settings
that differ from a production node") with its reason.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..components import Binaries
from .state import Ports

PAUSE_IMAGE = "kubedevice.test/pause:1"
"""containerd's sandbox image (its config names it; the kubelet does not)."""
TEST_IMAGE = "kubedevice.test/envsleep:1"
"""Both tags name the same static program (cluster/go/image): it prints its environment, then
``scenarios.OUTPUT_END``, then sleeps until SIGTERM."""
NODE_IP = "10.87.0.1"
"""The node's address, on a veth pair inside the cluster's network namespace (the kubelet refuses
a loopback node IP). Nothing outside that namespace has it: a host route to it leads nowhere."""
SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
"""The kubelet's kernel tunables (container_manager_linux.go): private copies inside the namespace."""
HIDDEN = ("/var/lib", "/run", "/var/log")
"""The host's directories each node's namespace mounts its own over."""


def etcd_argv(etcd: Path, directory: Path, ports: Ports) -> list[str]:
    """etcd, its data in ``directory/etcd``, on loopback; no fsync (a test cluster's data is disposable)."""
    client, peer = f"http://127.0.0.1:{ports.etcd_client}", f"http://127.0.0.1:{ports.etcd_peer}"
    return [
        str(etcd),
        f"--data-dir={directory / 'etcd'}",
        "--name=default",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=default={peer}",
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def apiserver_argv(binary: Path, directory: Path, ports: Ports, version: str) -> list[str]:
    """kube-apiserver of ``version`` with the certificates of ``directory/pki``, on loopback."""
    pki = directory / "pki"
    return [
        str(binary),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={ports.apiserver}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc",
        "--authorization-mode=Node,RBAC",
        "--service-cluster-ip-range=10.96.0.0/24",
        "--allow-privileged=true",
        "--profiling=false",
        f"--kubelet-client-certificate={pki / 'admin.crt'}",
        f"--kubelet-client-key={pki / 'admin.key'}",
        *apiserver_release_flags(version),
    ]


def scheduler_argv(binary: Path, directory: Path, ports: Ports) -> list[str]:
    kubeconfig = directory / "scheduler.kubeconfig"
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.scheduler}",
        "--leader-elect=false",
    ]


def controller_manager_argv(binary: Path, directory: Path, ports: Ports) -> list[str]:
    """Every controller under its own service account (``--use-service-account-credentials``)."""
    kubeconfig, pki = directory / "controller-manager.kubeconfig", directory / "pki"
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.controller_manager}",
        "--leader-elect=false",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        "--use-service-account-credentials=true",
    ]


def apiserver_release_flags(version: str) -> list[str]:
    """What one release's API server needs beyond the rest.

    From 1.37 the default endpoint reconciler refuses a loopback ``--advertise-address`` ("cannot use
    public IP 127.0.0.1 with endpoint reconciler"); nothing here uses the ``kubernetes`` Service's
    endpoints (pods that call the API server are given ``KUBERNETES_SERVICE_HOST``), so ``none``.
    Earlier releases keep their default, as proven before.
    """
    minor = int(version.lstrip("v").split(".")[1])
    return ["--endpoint-reconciler-type=none"] if minor >= 37 else []


def kubelet_skew_error(apiserver: str, kubelet: str) -> str | None:
    """Why a kubelet of version ``kubelet`` may not run beside an API server of ``apiserver``, or None.

    Kubernetes' version skew policy (kubernetes.io/releases/version-skew-policy): a kubelet must not
    be newer than the API server and may be up to three minor releases older. So an upgrade
    runs the control plane first and the kubelets after it.
    """
    server, node = (int(version.lstrip("v").split(".")[1]) for version in (apiserver, kubelet))
    if node > server:
        return f"a kubelet {kubelet} may not be newer than the API server {apiserver} (upgrade the control plane first)"
    if server - node > 3:
        return f"a kubelet {kubelet} is more than 3 minor releases older than the API server {apiserver}"
    return None


def namespace_script(directory: Path) -> str:
    """Inside the new namespaces: the network, the private directories, then become a reaping init."""
    ns = directory / "ns"
    lines = [
        "set -e",
        "ip link set lo up",
        # Both ends inside: the node gets a local address (the kubelet checks it is) and no way out.
        "ip link add kdnode0 type veth peer name kdnode1",
        f"ip addr add {NODE_IP}/32 dev kdnode0",
        "ip link set kdnode0 up",
        "ip link set kdnode1 up",
    ]
    for target in HIDDEN:
        lines.append(f"mount --bind '{ns / target.strip('/').replace('/', '-')}' {target}")
    for path in SYSCTLS:
        copy = ns / "sysctl" / path.replace("/", ".")
        lines.append(f"[ ! -e '{copy}' ] || mount --bind '{copy}' /proc/sys/{path}")
    lines.append(f"touch '{directory / 'ns.ready'}'")
    lines.append(f"exec \"$1\" -c '{_REAPER}'")
    return "\n".join(lines)


_REAPER = """
import os, signal, sys, time
# PID 1 of the namespace: reap orphans (container shims re-parent here) and stay until killed.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.5)
"""


def kubelet_config(port: int, healthz_port: int, client_ca: Path, cgroup_root: str) -> str:
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "127.0.0.1",
        "port": port,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "readOnlyPort": 0,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": False,
        "cgroupRoot": cgroup_root,
        "enforceNodeAllocatable": [],
        "failSwapOn": False,
        "failCgroupV1": False,
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "nodeStatusUpdateFrequency": "500ms",
        "nodeStatusReportFrequency": "1s",
        "resolvConf": "",
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # The test node shares the machine's disk: the kubelet's default hard thresholds (free
        # space under 10% of the node's filesystem, 15% of the images') evicted every pod of a
        # CI run on a machine with 16% free. Disk pressure is not what the tests test; kind turns
        # it off the same way.
        "evictionHard": {"nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%"},
        "serializeImagePulls": False,
    }
    return json.dumps(config, indent=1)


def containerd_config(directory: Path, bins: Binaries) -> str:
    cni = directory / "cni"
    return f"""version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.cri.v1.runtime"]
  enable_cdi = true
  cdi_spec_dirs = ["/run/cdi"]
  # the sandbox lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj below containerd's own
  restrict_oom_score_adj = true
  # device nodes from device plugins are owned by the pod's runAsUser/runAsGroup, so a non-root
  # pod can open its device (kubernetes#92211); docs/sources.md tells users to set it too
  device_ownership_from_security_context = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      snapshotter = "native"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "{bins.runc}"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{cni / "bin"}"]
    conf_dir = "{cni / "net.d"}"
    use_internal_loopback = true  # no standard CNI plugins here, not even loopback

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "native"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{PAUSE_IMAGE}"

# ctr import unpacks through the transfer service: it needs the snapshotter named per platform
[[plugins."io.containerd.transfer.v1.local".unpack_config]]
  platform = "linux/amd64"
  snapshotter = "native"

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


CNI_PLUGIN = r"""#!/bin/sh
# The cluster's CNI plugin (the kernel here has no dummy/ipvlan links, which the standard plugins
# need): a veth pair between the pod's network namespace and the cluster's, with a /32 route each
# way (pod <-> node address), so the kubelet's probes reach the pod. Both namespaces are the
# cluster's own; neither has any other route, so nothing leaves the machine.
set -e
config=$(cat)
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0","1.1.0"]}'; exit 0 ;;
ADD) ;;
*) exit 0 ;;
esac
mkdir -p '@IPAM@'
n=$(flock '@IPAM@/lock' sh -c 'n=$(cat "$0/next" 2>/dev/null || echo 2); echo $((n + 1)) > "$0/next"; echo $n' '@IPAM@')
addr="10.88.$((n / 250)).$((n % 250 + 2))"
nsenter --net="$CNI_NETNS" sh -c '
  ip link add "$1" type veth peer name "kd$3"
  ip link set "kd$3" netns "$4"
  ip link set lo up && ip link set "$1" up
  ip addr add "$2/32" dev "$1"
  ip route add "$5/32" dev "$1"' sh "$CNI_IFNAME" "$addr" "$n" "$$" '@NODE_IP@'
ip link set "kd$n" up
ip route add "$addr/32" dev "kd$n" src '@NODE_IP@'
printf '{"cniVersion":"1.0.0","interfaces":[{"name":"%s","sandbox":"%s"}],' "$CNI_IFNAME" "$CNI_NETNS"
printf '"ips":[{"address":"%s/32","interface":0}]}\n' "$addr"
"""
