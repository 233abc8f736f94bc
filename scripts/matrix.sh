#!/usr/bin/env bash
# The release matrix: the compact e2e suite (marker `release`: the device plugin's capacity, a
# two-device pod, SIGTERM and the kubelet-restart race; the DRA driver's claim, hotplug and health,
# a kubelet restart, health in the pod status) on a real cluster of each supported Kubernetes
# release, one release after another (one cluster at a time: two would share nothing but the CPU),
# then `kubedevice dra`'s validation and conversion differential against that release's API
# server (tests/interop/test_validation_apiserver.py). 1.31 to 1.33, releases users still meet
# but no cluster of which kubedevice runs, get the differential alone (kube-apiserver only).
#
#   bash scripts/matrix.sh [--cached-only] [RELEASE ...] [-- pytest arguments]
#
# RELEASE is 1.31 to 1.37 (default: all seven). A release not built yet is built first (about 10
# minutes of CPU on two cores, cached under ~/.cache/kubedevice by version; kube-apiserver alone
# for 1.31 to 1.33, about 8); --cached-only skips those instead. Needs root, like every e2e test.
# Run it in the project's venv (scripts/install.sh --test). The last line is the verdict per release.
set -uo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
cached_only=0
releases=()
while [ $# -gt 0 ]; do
    case "$1" in
        --cached-only) cached_only=1 ;;
        --) shift; break ;;
        *) releases+=("$1") ;;
    esac
    shift
done
[ ${#releases[@]} -gt 0 ] || releases=(1.31 1.32 1.33 1.34 1.35 1.36 1.37)
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
verdicts=()
status=0
for release in "${releases[@]}"; do
    version=$("$py" -c "from kubedevice.testing import components as c; print(c.ALL_RELEASES['$release'])") || exit 2
    cluster=$("$py" -c "from kubedevice.testing import components as c; print(int('$release' in c.RELEASES))")
    if [ "$cached_only" = 1 ] && ! "$py" -c "
import sys
from kubedevice.testing import components as c
sys.exit(0 if c.apiserver_cached('$release') else 1)"; then
        verdicts+=("$release: skipped (not built)")
        continue
    fi
    start=$(date +%s)
    ok=1
    if [ "$cluster" = 1 ]; then
        echo "== Kubernetes $version: the compact suite" >&2
        KUBEDEVICE_K8S_RELEASE=$release "$py" -m pytest -q -p no:cacheprovider -m "e2e and release" tests/e2e "$@" || ok=0
    fi
    echo "== Kubernetes $version: the validation and conversion differential" >&2
    "$py" -c "from kubedevice.testing import components as c; c.apiserver('$release')" || ok=0
    "$py" -m pytest -q -p no:cacheprovider tests/interop/test_validation_apiserver.py -k "$release-" "$@" || ok=0
    if [ "$ok" = 1 ]; then
        verdicts+=("$release ($version): passed in $(( $(date +%s) - start )) s")
    else
        verdicts+=("$release ($version): FAILED after $(( $(date +%s) - start )) s")
        status=1
    fi
done
echo "matrix: $(IFS=';'; echo "${verdicts[*]}")"
exit $status
