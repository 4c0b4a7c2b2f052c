#!/usr/bin/env bash
# Builds the Python wheel that carries the `guidepost` command, for `pip install` on machines
# without a Rust toolchain (Linux x86-64, Python 3.9 or newer).
#
#   scripts/wheel.sh                    # a release build, stripped: target/wheels/guidepost-*.whl
#   scripts/wheel.sh --from-debug-build # the debug build already in target/debug (scripts/test.sh)
#
# The wheel holds the binary as its `guidepost` script, so `pip install` puts the same command
# on the PATH, beside the pure-Python `guidepost` package (`python/guidepost`: tools written as
# Python functions). It is built by maturin (from PyPI, pinned, installed once into
# ~/.cache/guidepost/tools) with the binary bindings `pyproject.toml` declares; maturin names the
# wheel after the oldest manylinux the binary runs on.
#
# --from-debug-build packages the binary `cargo build --workspace` made without compiling
# anything: maturin runs cargo with the same profile, features and settings
# (scripts/cargo-env.sh), which finds everything fresh. If the binary changes meanwhile (cargo
# compiled after all), the script fails: the wheel must carry the build the suite tests.
# Prints the wheel's path on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cargo-env.sh

maturin_version=1.16.0
tools="${GUIDEPOST_TOOLS_DIR:-$HOME/.cache/guidepost/tools}"
venv="$tools/maturin-$maturin_version"
if [ ! -x "$venv/bin/maturin" ]; then
    echo "wheel: installing maturin $maturin_version from PyPI into $venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "maturin==$maturin_version" >&2
fi

target="${CARGO_TARGET_DIR:-target}"
case "${1:-}" in
    "")
        out="$target/wheels"
        args=(--release --strip)
        ;;
    --from-debug-build)
        out="$target/wheels/debug"
        args=(--profile dev)
        binary="$target/debug/guidepost"
        if [ ! -x "$binary" ]; then
            echo "wheel: no $binary; run cargo build --workspace first" >&2
            exit 1
        fi
        built=$(sha256sum < "$binary")
        ;;
    *)
        echo "usage: scripts/wheel.sh [--from-debug-build]" >&2
        exit 2
        ;;
esac

rm -rf "$out"
"$venv/bin/maturin" build --locked --quiet "${args[@]}" --out "$out" >&2
if [ -n "${built:-}" ] && [ "$(sha256sum < "$binary")" != "$built" ]; then
    echo "wheel: $binary changed while maturin ran: cargo built a guidepost other than the one" >&2
    echo "wheel: \`cargo build --workspace\` made (settings differ from scripts/cargo-env.sh's?)" >&2
    exit 1
fi
wheel=$(ls "$out"/guidepost-*.whl)
echo "wheel: built $wheel" >&2
echo "$wheel"
