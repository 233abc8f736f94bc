#!/usr/bin/env bash
# The newest lane: a fresh virtual environment resolved to the NEWEST versions pyproject.toml
# allows (no lock), then ruff, mypy and the quick tests (no Go builds, no cluster, no image), so
# that a dependency release that breaks kubedevice is caught the day it ships. On failure the
# last line names every package whose version differs from requirements/test.txt: the suspects.
# When nothing but type stubs and the checkers differs, the tests are not run again: every
# package they import is then the locked one (the newest lane only; --lowest always runs them).
#
#   bash scripts/test-newest.sh [pytest arguments]
#   bash scripts/test-newest.sh --lowest [pytest arguments]
#
# --lowest resolves the runtime dependencies to the LOWEST versions pyproject.toml allows (uv's
# lowest-direct resolution; the test tools stay newest): the lower bounds are tested, not hoped.
# The venv lives in ${KUBEDEVICE_CACHE:-~/.cache/kubedevice}/<lane>-venv, made anew each run.
set -uo pipefail
cd "$(dirname "$0")/.."
lane=newest
if [ "${1:-}" = --lowest ]; then lane=lowest; shift; fi
cache=${KUBEDEVICE_CACHE:-$HOME/.cache/kubedevice}
venv=$cache/$lane-venv
rm -rf "$venv"
python3 -m venv "$venv" || exit 1
export PIP_DISABLE_PIP_VERSION_CHECK=1
py=$venv/bin/python
if [ "$lane" = lowest ]; then
    uv=$(bash scripts/lock.sh --check-tools) || exit 1
    pins=$venv/lowest.txt
    "$uv" pip compile --quiet \
        --python-version 3.11 --resolution lowest-direct --no-header -o "$pins" pyproject.toml || exit 1
    "$py" -m pip install --quiet -r "$pins" || { echo "lowest lane: FAILED to install $pins" >&2; exit 1; }
fi
if ! "$py" -m pip install --quiet --upgrade-strategy only-if-needed -e ".[test]"; then
    echo "$lane lane: FAILED to install the $lane resolution of pyproject.toml" >&2
    exit 1
fi
# The differences from the lock, one "name lock -> newest" each.
suspects=$("$py" - requirements/test.txt <<'PY'
import importlib.metadata as md, re, sys
locked = dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^ ;\\]+)", open(sys.argv[1]).read(), re.M))
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
locked = {norm(k): v for k, v in locked.items()}
out = []
for dist in md.distributions():
    name, version = norm(dist.metadata["Name"]), dist.version
    if name in locked and locked[name] != version:
        out.append(f"{name} {locked[name]} -> {version}")
    elif name not in locked and name not in {"pip", "kubedevice"}:
        out.append(f"{name} (new) {version}")
print(", ".join(sorted(out)) or "none")
PY
)
echo "$lane lane: differs from the lock: $suspects"
# Only type stubs and the static checkers moved (or nothing did): every package the tests import
# at run time is the locked one, which the locked suite has just tested, so ruff and mypy are
# the whole of what is new. Any other difference runs the tests too.
static_only=$(printf '%s\n' "$suspects" | tr ',' '\n' | awk '
    { sub(/^ +/, ""); name = $1 }
    name == "none" || name == "" || name ~ /^types-/ || name ~ /-stubs$/ || name == "mypy" || name == "ruff" \
        || name == "mypy-extensions" { next }
    { other = 1 }
    END { print other ? "no" : "yes" }')
stage=""
"$py" -m ruff check src tests benchmarks || stage="ruff"
[ -n "$stage" ] || "$py" -m mypy src || stage="mypy"
if [ -z "$stage" ] && [ "$static_only" = yes ] && [ "$lane" = newest ]; then
    echo "$lane lane: only type stubs or checkers differ from the lock; ruff and mypy passed, the tests ran locked"
elif [ -z "$stage" ]; then
    "$py" -m pytest -q -p no:cacheprovider -m "not e2e and not interop and not image" "$@" || stage="pytest"
fi
if [ -n "$stage" ]; then
    echo "$lane lane: FAILED at $stage; packages that differ from the lock: $suspects"
    exit 1
fi
echo "$lane lane: passed"
