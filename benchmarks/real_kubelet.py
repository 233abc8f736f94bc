#!/usr/bin/env python3
"""kubedevice and the Kubernetes sample device plugin under a real kubelet (v1.36.3), side by side.

    python benchmarks/real_kubelet.py [--rounds 5]     # about 3 minutes once the cluster is built

Starts its own cluster (kubedevice.testing.cluster, docs/real-cluster.md) and measures:
  serve → allocatable   ``kubedevice serve`` start until the Node object shows the devices
                        (the kubelet updates node status every 0.5 s here)
  re-register           kubelet restart → the kubelet connected to the plugin again ("Connected to
                        new client", after the dial and GetDevicePluginOptions of a Register it
                        accepted), in its own log, from "Starting device plugin registration server"
  admitted / created    pods bound to the node right after the kubelet answers healthz, one
                        device each (plus one pod kept running across restarts, see the
                        troubleshooting section of docs/user-guide.md)
Medians over the rounds; each peer gets the same rounds, interleaved.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kubedevice.testing import components  # noqa: E402
from kubedevice.testing.cluster import Cluster  # noqa: E402
from kubedevice.testing.scenarios import (  # noqa: E402
    Daemon,
    delete_pods,
    device_pod,
    kubelet_restart_round,
    unique,
    wait_for,
    wait_outcome,
)

KD_RESOURCE = "example.com/bench"
SAMPLE_RESOURCE = "example.com/resource"
_LINE = re.compile(r"^[IWE](\d{4} \d{2}:\d{2}:\d{2}\.\d{6})")


def serve_to_allocatable(cluster: Cluster, work: Path, rounds: int) -> list[float]:
    api = cluster.api()
    took = []
    for i in range(rounds):
        resource = f"example.com/s{i}"
        config = work / f"start-{i}.yaml"
        config.write_text(f"resources:\n  - name: {resource}\n    static: {{count: 4, paths: [/dev/null]}}\n")
        started = time.monotonic()
        daemon = Daemon(cluster, config, work / "serve-start.log")
        wait_for("allocatable", lambda r=resource: api.resource(cluster.node_name, r)[1] == 4, 30.0, 0.02)
        took.append(time.monotonic() - started)
        daemon.stop()
    return took


def registration_delay(log: Path, offset: int, resource: str) -> float | None:
    """Seconds from the kubelet's registration server start to ``resource``'s registration, in the
    part of the kubelet log written after ``offset``."""
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    server = registered = None
    for line in text.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        when = datetime.strptime(match.group(1), "%m%d %H:%M:%S.%f")
        if server is None and "Starting device plugin registration server" in line:
            server = when
        elif server is not None and "Connected to new client" in line and f'"{resource}"' in line:
            registered = when
            break
    if server is None or registered is None:
        return None
    return (registered - server).total_seconds()


def race(cluster: Cluster, resource: str, pods: int, rounds: int) -> tuple[list[float], int, int]:
    api = cluster.api()
    keeper = unique("keeper")
    api.create_pod(device_pod(keeper, {resource: 1}, cluster.node_name))
    assert wait_outcome(api, keeper)[0] == "Running"
    delays, admitted, created = [], 0, 0
    log = cluster.logs / "kubelet.log"
    for _ in range(rounds):
        offset = log.stat().st_size
        result = kubelet_restart_round(cluster, resource, pods)
        delay = registration_delay(log, offset, resource)
        if delay is not None:
            delays.append(delay)
        created += len(result.outcomes)
        admitted += sum(1 for phase, _, _ in result.outcomes.values() if phase == "Running")
    delete_pods(api, [keeper])
    return delays, admitted, created


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kd-bench-"))
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="kdb-")))  # short: socket paths below it are limited
    started = time.monotonic()
    cluster.up(components.ensure_all())
    print(f"cluster up in {time.monotonic() - started:.1f} s ({cluster.dir})")
    try:
        start = serve_to_allocatable(cluster, work, args.rounds)
        config = work / "race.yaml"
        config.write_text(f"resources:\n  - name: {KD_RESOURCE}\n    static: {{count: 8, paths: [/dev/null]}}\n")
        daemon = Daemon(cluster, config, work / "serve-race.log")
        wait_for("bench devices", lambda: cluster.api().resource(cluster.node_name, KD_RESOURCE) == (8, 8), 30.0)
        kd = race(cluster, KD_RESOURCE, 3, args.rounds)
        daemon.stop()
        cluster.spawn(
            "sample-device-plugin",
            [str(cluster.binaries.kube("sample-device-plugin"))],
            env={"PLUGIN_SOCK_DIR": "/var/lib/kubelet/device-plugins"},
        )
        wait_for("sample devices", lambda: cluster.api().resource(cluster.node_name, SAMPLE_RESOURCE) == (2, 2), 30.0)
        sample = race(cluster, SAMPLE_RESOURCE, 1, args.rounds)
        cluster.stop("sample-device-plugin")
    finally:
        cluster.down()
    print(
        f"serve start → allocatable in the Node object: median {statistics.median(start):.2f} s "
        f"(min {min(start):.2f}, max {max(start):.2f}, n={len(start)})"
    )
    print(f"{'after a kubelet restart':<28}{'kubedevice':>14}{'sample plugin':>16}")
    print(f"{'re-registered (median)':<28}{_median(kd[0]):>14}{_median(sample[0]):>16}")
    print(f"{'pods admitted / created':<28}{f'{kd[1]}/{kd[2]}':>14}{f'{sample[1]}/{sample[2]}':>16}")
    return 0


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s" if values else "n/a"


if __name__ == "__main__":
    sys.exit(main())
