#!/usr/bin/env bash
# Install kubedevice from this checkout with the locked dependencies (requirements/*.txt, every
# package pinned and hash-checked), into the active virtual environment, or into ./.venv
# (created) when none is active: a fresh machine's system Python may refuse pip (PEP 668), and
# the tests must not run on whatever happens to be installed there.
#
#   bash scripts/install.sh          requirements/run.txt: what `kubedevice` needs
#   bash scripts/install.sh --test   requirements/test.txt: that plus the test tools
#   bash scripts/install.sh --benchmarks   requirements/benchmarks.txt: that plus matplotlib,
#                                    which the benchmarks draw their pictures with
#
# Two pip calls, because pip checks hashes for every requirement or none and a source tree
# has no hash: first the lock, then kubedevice itself (editable, no dependencies, built with
# the locked setuptools instead of an unpinned one from build isolation).
set -euo pipefail
cd "$(dirname "$0")/.."
lock=requirements/run.txt
case "${1:-}" in
    --test) lock=requirements/test.txt ;;
    --benchmarks) lock=requirements/benchmarks.txt ;;
    "") ;;
    *) echo "install.sh: unknown argument ${1} (use --test, --benchmarks or nothing)" >&2; exit 2 ;;
esac
python=python3
if [ -z "${VIRTUAL_ENV:-}" ]; then
    [ -x .venv/bin/python ] || python3 -m venv .venv
    python=.venv/bin/python
    echo "install.sh: no virtual environment active; installing into $(pwd)/.venv" >&2
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$python" -m pip install --quiet --require-hashes -r "$lock"
"$python" -m pip install --quiet --no-deps --no-build-isolation -e .
