#!/usr/bin/env bash
# The whole test suite, from a fresh clone: the locked dependencies (scripts/install.sh --benchmarks: the test set and matplotlib,
# into the active virtual environment or ./.venv), the Debian tools the image, chart and cluster
# tests need (installed when run as root, else named), then ruff, mypy, the import contracts (lint-imports) and pytest (unit,
# simulator, interop with the official Go code, the real-cluster e2e tests). Arguments go to
# pytest: `bash scripts/test.sh -m "not e2e"`, `bash scripts/test.sh tests/dra`.
#
# Without arguments the suite runs as three lanes at once: the tests marked e2e or image (real
# clusters and image builds, mostly waiting on them) in tests/deploy and in tests/e2e, each its own
# pytest with its lines prefixed [deploy] or [e2e], beside everything else. All must pass.
# KUBEDEVICE_SERIAL_TESTS=1 runs one pytest instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
bash scripts/install.sh --benchmarks  # the test set, and matplotlib for the benchmarks' drawing tests
if [ -z "${VIRTUAL_ENV:-}" ]; then
    # shellcheck disable=SC1091  # made by install.sh
    . .venv/bin/activate
fi
python3 -m ruff check src tests benchmarks
python3 -m ruff format --check src tests benchmarks
python3 -m mypy src
lint-imports --no-cache  # the layers and import contracts of .importlinter
if [ "$#" -gt 0 ] || [ "${KUBEDEVICE_SERIAL_TESTS:-}" = 1 ]; then
    exec python3 -m pytest "$@"
fi
# a lane: its pytest's lines prefixed with its name; the subshell exits with pytest's code
lane() {
    local name=$1
    shift
    (
        set -o pipefail
        python3 -m pytest -p no:cacheprovider "$@" 2>&1 | sed -u "s/^/[$name] /"
    ) &
}
lane deploy -m "e2e or image" tests/deploy
deploy=$!
lane e2e -m "e2e or image" tests/e2e
e2e=$!
# a stopped run stops the lanes' pytest as Ctrl-C would, so their fixtures take their clusters down
trap 'pkill -INT -P "$deploy" 2>/dev/null; pkill -INT -P "$e2e" 2>/dev/null; wait; exit 130' INT TERM
set +e
python3 -m pytest -m "not e2e and not image"
rest=$?
wait "$deploy"
deploy_rc=$?
wait "$e2e"
e2e_rc=$?
set -e
echo "lanes: the rest exited $rest, deploy $deploy_rc, e2e $e2e_rc"
# pytest's own codes pass through (5: a lane collected no test, which .ci/run refuses)
for rc in "$rest" "$deploy_rc" "$e2e_rc"; do
    if [ "$rc" -ne 0 ]; then exit "$rc"; fi
done
