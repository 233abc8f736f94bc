#!/usr/bin/env bash
# Refresh the dependency locks: requirements/run.txt (what `kubedevice` needs),
# requirements/test.txt (that plus the test tools) and requirements/benchmarks.txt (that plus
# what the benchmarks draw with), every package pinned with its hashes.
#
#   bash scripts/lock.sh              keep today's pins, add or drop what pyproject changed
#   bash scripts/lock.sh --upgrade    move every pin to the newest version pyproject allows
#   bash scripts/lock.sh --upgrade-package typer   move one
#
# uv's resolver writes them (`uv pip compile --universal`): one lock for every platform and
# Python >= 3.11 (markers where a package differs), with the hashes of every wheel and sdist of
# each pinned version, so the aarch64 image and a Python 3.13 user install from the same file.
# Installing needs only pip (`pip install -r requirements/test.txt` checks every hash); uv is
# needed here only, pinned below and kept in its own virtual environment.
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.9
tools=${KUBEDEVICE_CACHE:-$HOME/.cache/kubedevice}/lock-tools-uv-$UV_VERSION
if [ ! -x "$tools/bin/uv" ]; then
    python3 -m venv "$tools"
    "$tools/bin/python" -m pip install -q "uv==$UV_VERSION"
fi
if [ "${1:-}" = --check-tools ]; then echo "$tools/bin/uv"; exit 0; fi  # for test-newest.sh --lowest
compile() {  # output, then extra arguments
    local out=$1; shift
    "$tools/bin/uv" pip compile --quiet --universal --python-version 3.11 --generate-hashes \
        --custom-compile-command "bash scripts/lock.sh" --output-file "$out" "$@"
}
compile requirements/run.txt pyproject.toml requirements/build.in "$@"
# The test set is constrained to the run set: the tests run exactly what a user installs.
compile requirements/test.txt pyproject.toml requirements/build.in --extra test \
    --constraint requirements/run.txt "$@"
# The benchmarks run beside the tests (they use its Go builds and cluster), so their set is the test set plus.
compile requirements/benchmarks.txt pyproject.toml requirements/build.in --extra test --extra benchmarks \
    --constraint requirements/test.txt "$@"
echo "lock.sh: requirements/run.txt $(grep -c '^[a-z]' requirements/run.txt) packages," \
     "requirements/test.txt $(grep -c '^[a-z]' requirements/test.txt) packages," \
     "requirements/benchmarks.txt $(grep -c '^[a-z]' requirements/benchmarks.txt) packages"
