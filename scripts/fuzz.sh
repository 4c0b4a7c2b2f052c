#!/usr/bin/env bash
# Runs every fuzz target (proptest properties named `fuzz_*`, see guidepost_core::fuzz) for
# GUIDEPOST_FUZZ_SECONDS seconds each (default 60), repeating runs of GUIDEPOST_FUZZ_CASES
# inputs (default 2000; the definition loader takes at least 256) with fresh random seeds until the time is up, at the lowest priority
# on one thread. Prints the executions per target; stops at the first failure (proptest
# prints the minimal failing input).
#
#   GUIDEPOST_FUZZ_SECONDS=600 scripts/fuzz.sh            # every target, 10 minutes each
#   GUIDEPOST_FUZZ_SECONDS=30 scripts/fuzz.sh openai_sse  # targets whose name contains this
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${GUIDEPOST_FUZZ_SECONDS:-60}
cases=${GUIDEPOST_FUZZ_CASES:-2000}
only=${1:-}
export GUIDEPOST_FUZZ_CASES=$cases CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} RUST_TEST_THREADS=1

# target name, crate, test name filter
targets=(
  "definition_loader guidepost-core fuzz_definition_loader"
  "scenario_loader guidepost-sim fuzz_scenario_loader"
  "recordings guidepost-llm fuzz_recordings"
  "openai_sse guidepost-llm fuzz_openai_sse"
  "anthropic_sse guidepost-llm fuzz_anthropic_sse"
  "tool_results guidepost-tools fuzz_parlant_call_stream"
  "mcp_results guidepost-tools fuzz_mcp_result"
)

summary=()
for entry in "${targets[@]}"; do
  read -r name crate filter <<<"$entry"
  [[ -n "$only" && "$name" != *"$only"* ]] && continue
  nice -n 19 cargo test -q -p "$crate" --test integration --no-run >/dev/null 2>&1 \
    || nice -n 19 cargo test -q -p "$crate" --test integration --no-run
  runs=0 executions=0
  deadline=$((SECONDS + seconds))
  while ((SECONDS < deadline)); do
    if ! out=$(nice -n 19 cargo test -q -p "$crate" --test integration -- "$filter" --test-threads=1 2>&1); then
      echo "$out" | tail -n 40
      echo "fuzz target $name FAILED after $executions executions" >&2
      exit 1
    fi
    passed=$(echo "$out" | sed -n 's/.*test result: ok\. \([0-9]*\) passed.*/\1/p' | head -n 1)
    runs=$((runs + 1))
    executions=$((executions + ${passed:-0} * cases))
  done
  line="$name: $executions executions in $runs runs of $cases inputs (${seconds} s)"
  echo "$line"
  summary+=("$line")
done
printf '%s\n' "summary:" "${summary[@]}"
