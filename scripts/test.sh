#!/usr/bin/env bash
# The whole test suite, from a fresh clone: install (editable, with test extras), lint,
# type-check, then pytest (unit, simulator, interop with the official Go code).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e ".[test]"
python3 -m ruff check src tests benchmarks
python3 -m mypy src
python3 -m pytest "$@"
