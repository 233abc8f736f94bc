#!/usr/bin/env bash
# The fuzz lane: the hypothesis tests with random seeds, round after round, for a time budget.
#   bash scripts/fuzz.sh [--minutes N] [pytest arguments, e.g. one test file or -k EXPR]
# CI runs the same tests derandomized (tests/conftest.py), so it tests the change being landed;
# this lane looks for new failures. Each round draws new examples; the example database under
# .hypothesis/examples keeps every failure and replays it first in later runs. The lane stops by
# itself when the budget (default 10 minutes) is spent, or after a round that failed, and then
# prints each minimal failing example: keep it as an @example(...) on its test.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=10
args=()
while [ "$#" -gt 0 ]; do
  case "$1" in
    --minutes) minutes="${2-}"; shift $(( $# > 1 ? 2 : 1 )) ;;
    --minutes=*) minutes="${1#*=}"; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
if ! [[ "$minutes" =~ ^[1-9][0-9]*$ ]]; then
  echo "--minutes: expected a whole number of minutes, got '$minutes'" >&2
  exit 2
fi
if [ "${#args[@]}" -eq 0 ]; then  # every test file that uses hypothesis
  mapfile -t args < <(grep -rlE '^from hypothesis import' tests --include='*.py' | sort)
fi

export KUBEDEVICE_HYPOTHESIS_PROFILE=explore
logs=.hypothesis/fuzz
mkdir -p "$logs"
end=$(( $(date +%s) + minutes * 60 ))
round=0
status=0
while left=$(( end - $(date +%s) )); [ "$left" -gt 0 ]; do
  round=$(( round + 1 ))
  log="$logs/round-$round.log"
  echo "round $round: ${left}s left, log $log"
  # SIGINT, not SIGTERM, at the end of the budget: pytest then tears its fixtures down, so the
  # daemons the robustness tests started are stopped too.
  set +e
  timeout --signal=INT --kill-after=60 "$left" \
    python3 -m pytest -q -p no:cacheprovider -m "hypothesis and not e2e" "${args[@]}" >"$log" 2>&1
  rc=$?
  set -e
  if [ "$rc" -eq 124 ] && ! grep -q '^FAILED' "$log"; then break; fi  # the budget ended mid-round
  if [ "$rc" -eq 0 ]; then continue; fi
  status=1
  if [ "$rc" -eq 5 ]; then echo "no hypothesis test collected from: ${args[*]}"; fi
  grep -E '^(FAILED|ERROR) ' "$log" || tail -n 30 "$log"
  # hypothesis shows the shrunk example as "Failing test case: test(" (older versions: "Falsifying
  # example:"), one argument a line, up to a lone ")"; pytest puts "E" and 7 spaces before each line.
  awk '/(Failing test case|Falsifying (explicit )?example):/ { shown = 1 }
       shown || /@reproduce_failure/ { line = $0; sub(/^E       /, "", line); print line }
       shown && /^[E ]*\)$/ { shown = 0 }' "$log"
  break
done
echo "fuzz: $round round(s), $([ "$status" -eq 0 ] && echo "no failure" || echo "FAILED, see above and $log")"
exit "$status"
