#!/usr/bin/env bash
# The whole test suite, from a fresh clone: the locked dependencies (scripts/install.sh --test,
# into the active virtual environment or ./.venv), the Debian tools the image, chart and cluster
# tests need (installed when run as root, else named), then ruff, mypy and pytest (unit,
# simulator, interop with the official Go code, the real-cluster e2e tests). Arguments go to
# pytest: `bash scripts/test.sh -m "not e2e"`, `bash scripts/test.sh tests/dra`.
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
python3 -m pytest "$@"
