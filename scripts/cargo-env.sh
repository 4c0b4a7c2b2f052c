# Build settings shared by scripts/test.sh and scripts/run.sh (sourced by both), so that
# whichever runs second reuses what the first built.
#
# Both scripts build the workspace once, usually from scratch on a new machine. Incremental
# compilation, which saves work when a developer rebuilds a crate after an edit, only adds to
# such a build (about 10 s of CPU over the workspace's own crates), and so do line tables for
# backtraces (about 6 s; a panic still says file:line). A developer's own `cargo build` and
# `cargo test` keep both, from Cargo.toml's profile, and rebuild the workspace's crates (not
# their dependencies) once when switching. Set either variable to override it.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-false}"
