#!/usr/bin/env bash
# Runs every fuzz target (proptest properties named `fuzz_*`, see the guidepost-fuzz crate) for
# GUIDEPOST_FUZZ_SECONDS seconds each (default 60), repeating runs of GUIDEPOST_FUZZ_CASES
# inputs (default 2000; the definition loader takes at least 256) with fresh random seeds
# until the time is up, at the lowest priority on one thread. Prints the executions per
# target; stops at the first failure (proptest prints the minimal failing input).
#
#   GUIDEPOST_FUZZ_SECONDS=600 scripts/fuzz.sh                  # every target, 10 minutes each
#   GUIDEPOST_FUZZ_SECONDS=30 scripts/fuzz.sh openai_sse        # targets whose name contains this
#   GUIDEPOST_FUZZ_SECONDS=30 scripts/fuzz.sh openai anthropic  # ... or any of these
#
# The crates' integration test binaries are built first (nothing is compiled when the test
# suite has just built them, as in scripts/test.sh), then run directly from copies: a rebuild
# while a long run goes on neither waits for nor changes what it fuzzes.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${GUIDEPOST_FUZZ_SECONDS:-60}
cases=${GUIDEPOST_FUZZ_CASES:-2000}
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
  "openapi_conformance guidepost-server fuzz_openapi_conformance"
)

selected=()
for entry in "${targets[@]}"; do
  read -r name _ _ <<<"$entry"
  if (($# == 0)); then
    selected+=("$entry")
    continue
  fi
  for wanted in "$@"; do
    if [[ "$name" == *"$wanted"* ]]; then
      selected+=("$entry")
      break
    fi
  done
done
((${#selected[@]} > 0)) || { echo "no fuzz target matches: $*" >&2; exit 2; }

copies=$(mktemp -d)
trap 'rm -rf "$copies"' EXIT

# The crates' integration test binaries, built if they are not up to date, copied aside. In
# CI the suite has just built every crate's tests together: the same build is asked for (the
# same features), so nothing is compiled again.
crates=()
for entry in "${selected[@]}"; do
  read -r _ crate _ <<<"$entry"
  [[ " ${crates[*]} " == *" $crate "* ]] || crates+=("$crate")
done
if [[ "${CI:-}" == "true" ]]; then
  scope=(--workspace)
else
  scope=()
  for crate in "${crates[@]}"; do scope+=(-p "$crate"); done
fi
if ! artifacts=$(nice -n 19 cargo test -q "${scope[@]}" --test integration --no-run --message-format=json 2>/dev/null); then
  nice -n 19 cargo test -q "${scope[@]}" --test integration --no-run
  exit 1
fi
for crate in "${crates[@]}"; do
  built=$(echo "$artifacts" | grep '"kind":\["test"\]' | grep "\"manifest_path\":\"[^\"]*/crates/$crate/Cargo.toml\"" \
    | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
  [[ -x "$built" ]] || { echo "no integration test binary for $crate" >&2; exit 1; }
  cp "$built" "$copies/$crate"
done

summary=()
for entry in "${selected[@]}"; do
  read -r name crate filter <<<"$entry"
  runs=0 executions=0
  deadline=$((SECONDS + seconds))
  while ((SECONDS < deadline)); do
    # From the crate's folder, as `cargo test` runs it.
    if ! out=$(cd "crates/$crate" && nice -n 19 "$copies/$crate" "$filter" --test-threads=1 2>&1); then
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
