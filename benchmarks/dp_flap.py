#!/usr/bin/env python3
"""What a flapping device costs the API server through the real kubelet's node status (issue #22 §3).

    python benchmarks/dp_flap.py [--minutes 2] [--seed 1] [--status-every 10]   # ~3 x (minutes + 0.5) min, not in CI

A device plugin's device changes health; the kubelet puts its resource's allocatable into the Node
object, and every change it finds there costs a node status PATCH at the API server, which every
watcher of Nodes then receives. This starts its own cluster (kubedevice.testing.cluster,
v1.36.3), gives its kubelet a production node's node-status settings (the KubeletConfiguration
defaults: ``nodeStatusUpdateFrequency`` 10 s, ``nodeStatusReportFrequency`` 5 min; the test
cluster's are 0.5 s and 1 s; ``--status-every`` sets the first, as clusters that want faster node
status do), runs ``kubedevice serve`` with one device whose exec health check
looks for a marker file, and counts for each phase, over the same time:

  steady           the marker stays: the device is always healthy
  flapping         each second the marker is there or not at random (50/50, seeded): a device
                   flapping at 1 Hz, under serve's default damping (a check every 10 s,
                   Unhealthy after 3 failures in a row, Healthy after 1 pass)
  flapping, undamped  the same flapping, checks every 0.5 s, Unhealthy after 1 failure

The counts: node status PATCHes at the API server (its ``apiserver_request_total`` for
``nodes/status``, verb PATCH, from ``/metrics``), changes of the device's health that serve sent
(its ``kubedevice_devices`` gauge, sampled every 0.1 s) and changes of allocatable seen in the
Node object (polled every 0.5 s). Where the kubelet's node status PATCHes come from:
``pkg/kubelet/kubelet_node_status.go`` ``tryUpdateNodeStatus`` (a PATCH when the status changed,
else one per ``nodeStatusReportFrequency``).
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import ssl
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kubedevice.testing import components  # noqa: E402
from kubedevice.testing.cluster import Cluster  # noqa: E402
from kubedevice.testing.scenarios import Daemon, wait_for  # noqa: E402

RESOURCE = "example.com/flap"
DEFAULT_STATUS_SECONDS = 10.0
"""The kubelet's default ``nodeStatusUpdateFrequency`` (pkg/kubelet/apis/config/v1beta1/defaults.go)."""
SETTLE_SECONDS = 15.0
"""After a phase's serve starts: its registration's own status change is not the phase's."""
_PATCHES = re.compile(
    r'^apiserver_request_total\{(?=[^}]*resource="nodes")(?=[^}]*subresource="status")'
    r'(?=[^}]*verb="PATCH")[^}]*\} (\S+)$',
    re.M,
)
_UNHEALTHY = re.compile(
    rf'^kubedevice_devices\{{(?=[^}}]*health="unhealthy")(?=[^}}]*resource="{RESOURCE}")'
    r"[^}]*\} (\S+)$",
    re.M,
)


@dataclass
class Phase:
    name: str
    health: str
    """The config's ``health:`` block (YAML flow style)."""
    flapping: bool


PHASES = [
    Phase("steady", "{checks: [{type: exec, argv: [test, -e, MARKER]}]}", flapping=False),
    Phase("flapping", "{checks: [{type: exec, argv: [test, -e, MARKER]}]}", flapping=True),
    Phase(
        "flapping, undamped",
        "{checks: [{type: exec, argv: [test, -e, MARKER]}], interval_seconds: 0.5, "
        "failure_threshold: 1, recovery_threshold: 1}",
        flapping=True,
    ),
]


@dataclass
class Counts:
    patches: float = 0.0
    health_changes: int = 0
    allocatable_changes: int = 0


class Flapper(threading.Thread):
    """Each second, the marker file there or not at random (``seed``), until stopped."""

    def __init__(self, marker: Path, seed: int) -> None:
        super().__init__(daemon=True)
        self.marker = marker
        self.random = random.Random(seed)
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            if self.random.random() < 0.5:
                self.marker.touch()
            else:
                self.marker.unlink(missing_ok=True)


def node_status_patches(cluster: Cluster) -> float:
    """The API server's count of node status PATCHes so far (every response code)."""
    pki = cluster.dir / "pki"
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    with urllib.request.urlopen(f"{cluster.api().server}/metrics", context=context, timeout=10) as response:
        text = response.read().decode()
    return sum(float(value) for value in _PATCHES.findall(text))


def unhealthy(metrics_port: int) -> float | None:
    """serve's count of unhealthy devices it advertises, or None while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2) as response:
            found = _UNHEALTHY.findall(response.read().decode())
    except OSError:
        return None
    return float(found[0]) if found else None


def measure(cluster: Cluster, phase: Phase, work: Path, seconds: float, seed: int, metrics_port: int) -> Counts:
    """One phase: serve with the phase's config, settle, then count for ``seconds``."""
    marker = work / "ok"
    marker.touch()
    config = work / f"{phase.name.replace(' ', '').replace(',', '-')}.yaml"
    config.write_text(
        f"resources:\n  - name: {RESOURCE}\n    static: {{count: 1, paths: [/dev/null]}}\n"
        f"    health: {phase.health.replace('MARKER', str(marker))}\n"
    )
    daemon = Daemon(cluster, config, work / "serve.log", "--metrics-address", f"127.0.0.1:{metrics_port}")
    flapper = Flapper(marker, seed)
    api = cluster.api()
    try:
        wait_for("the device advertised", lambda: api.resource(cluster.node_name, RESOURCE) == (1, 1), 60, 0.2)
        if phase.flapping:
            flapper.start()
        time.sleep(SETTLE_SECONDS)
        counts, before = Counts(), node_status_patches(cluster)
        last_health, last_allocatable, next_poll = unhealthy(metrics_port), None, 0.0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            health = unhealthy(metrics_port)
            if health is not None and last_health is not None and health != last_health:
                counts.health_changes += 1
            last_health = health if health is not None else last_health
            if time.monotonic() >= next_poll:
                allocatable = api.resource(cluster.node_name, RESOURCE)[1]
                if last_allocatable is not None and allocatable != last_allocatable:
                    counts.allocatable_changes += 1
                last_allocatable, next_poll = allocatable, time.monotonic() + 0.5
            time.sleep(0.1)
        counts.patches = node_status_patches(cluster) - before
        return counts
    finally:
        flapper.done.set()
        daemon.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=2.0, help="the measured time of each phase (default 2)")
    parser.add_argument("--seed", type=int, default=1, help="the flapping's random seed (default 1)")
    parser.add_argument(
        "--status-every",
        type=float,
        default=DEFAULT_STATUS_SECONDS,
        help="the kubelet's nodeStatusUpdateFrequency in seconds (default 10, the kubelet's)",
    )
    parser.add_argument("--metrics-port", type=int, default=19464, help="serve's /metrics port on 127.0.0.1")
    args = parser.parse_args()
    for name, value in (("--minutes", args.minutes), ("--status-every", args.status_every)):
        if value <= 0:
            print(f"dp_flap: {name}: must be more than 0", file=sys.stderr)
            return 2
    work = Path(tempfile.mkdtemp(prefix="kd-flap-"))
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="kdf-")))  # short: socket paths below it are limited
    cluster.up(components.ensure_all())
    try:
        # Both set: with only the first, the kubelet would report as often (defaults.go), not every 5 min.
        cluster.node(1).reconfigure_kubelet(
            {"nodeStatusUpdateFrequency": f"{args.status_every:g}s", "nodeStatusReportFrequency": "5m"}
        )
        results = [
            (phase, measure(cluster, phase, work, args.minutes * 60, args.seed, args.metrics_port)) for phase in PHASES
        ]
    finally:
        cluster.down()
        cluster.remove_files()
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"kubelet {components.KUBERNETES_VERSION}, node status every {args.status_every:g} s (reported at least "
        f"every 5 min); {args.minutes:g} min per phase, seed {args.seed}"
    )
    print(f"{'phase':<22}{'PATCH nodes/status /min':>25}{'health changes /min':>22}{'allocatable changes /min':>27}")
    for phase, counts in results:
        per_minute = [
            value / args.minutes for value in (counts.patches, counts.health_changes, counts.allocatable_changes)
        ]
        print(f"{phase.name:<22}{per_minute[0]:>25.1f}{per_minute[1]:>22.1f}{per_minute[2]:>27.1f}")
    print(f"the cluster's logs, kept: {cluster.logs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
