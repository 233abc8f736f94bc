#!/usr/bin/env bash
# A real single-node Kubernetes for testing device plugins: scripts/cluster.sh up|down|status [--dir DIR].
# See docs/real-cluster.md. Runs this checkout's kubedevice.testing.cluster.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}"
exec python3 -m kubedevice.testing.cluster "$@"
