#!/usr/bin/env bash
# A real single-node Kubernetes for testing device plugins: scripts/cluster.sh up|down|status [--dir DIR] [--keep].
# See docs/real-cluster.md. Runs this checkout's kubedevice.testing.cluster, which needs root: as
# another user it runs itself again through sudo with the same python (the one that has kubedevice's
# dependencies, a virtualenv's for instance) and the same PATH (where go is), both of which sudo resets.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}"
# The interpreter's own path: a virtualenv's bin/ or a pyenv shim would not be found under sudo.
python="$(python3 -c 'import sys; print(sys.executable)')" || {
    echo "kubedevice: scripts/cluster.sh needs python3 with kubedevice's dependencies in PATH" >&2
    exit 1
}
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
        echo "kubedevice: the cluster needs root (namespaces, mounts, cgroups) and sudo is not installed: run this as root" >&2
        exit 1
    fi
    echo "kubedevice: the cluster needs root: running again as 'sudo $python -m kubedevice.testing.cluster $*'" >&2
    keep=("PATH=$PATH" "PYTHONPATH=$PYTHONPATH")
    [ -z "${KUBEDEVICE_CLUSTER_DIR:-}" ] || keep+=("KUBEDEVICE_CLUSTER_DIR=$KUBEDEVICE_CLUSTER_DIR")
    exec sudo -- env "${keep[@]}" "$python" -m kubedevice.testing.cluster "$@"
fi
exec "$python" -m kubedevice.testing.cluster "$@"
