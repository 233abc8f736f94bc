#!/usr/bin/env bash
# The whole test suite, from a fresh clone: the locked dependencies (scripts/install.sh --test,
# into the active virtual environment or ./.venv), the Debian tools the image, chart and cluster
# tests need (installed when run as root, else named), then ruff, mypy and pytest (unit,
# simulator, interop with the official Go code, the real-cluster e2e tests). Arguments go to
# pytest: `bash scripts/test.sh -m "not e2e"`, `bash scripts/test.sh tests/dra`.
#
# Without arguments the suite runs as two lanes at once: the cluster lane (markers e2e and image:
# real clusters and image builds, mostly waiting on them) beside everything else, each line of the
# cluster lane's output prefixed with [cluster]. Both must pass. KUBEDEVICE_SERIAL_TESTS=1 runs
# one pytest instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
bash scripts/install.sh --test
if [ -z "${VIRTUAL_ENV:-}" ]; then
    # shellcheck disable=SC1091  # made by install.sh
    . .venv/bin/activate
fi
python3 -m ruff check src tests benchmarks
python3 -m mypy src
if [ "$#" -gt 0 ] || [ "${KUBEDEVICE_SERIAL_TESTS:-}" = 1 ]; then
    exec python3 -m pytest "$@"
fi
(
    set -o pipefail
    python3 -m pytest -p no:cacheprovider -m "e2e or image" 2>&1 | sed -u 's/^/[cluster] /'
) &
cluster=$!
# a stopped run stops the lane's pytest as Ctrl-C would, so its fixtures take their clusters down
trap 'pkill -INT -P "$cluster" 2>/dev/null; wait "$cluster"; exit 130' INT TERM
set +e
python3 -m pytest -m "not e2e and not image"
rest=$?
wait "$cluster"
lane=$?
set -e
echo "lanes: the rest exited $rest, the cluster lane $lane"
# pytest's own codes pass through (5: a lane collected no test, which .ci/run refuses)
if [ "$rest" -ne 0 ]; then exit "$rest"; fi
exit "$lane"
