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

# The workspace's own crates are compiled by clippy's driver (rustc with clippy's lints
# added; dependencies are compiled by rustc as usual). The build is then also the lint pass:
# scripts/test.sh takes its lints from the build scripts/run.sh made, instead of running
# `cargo clippy`, which checks every dependency again in a mode of its own. Lints are
# warnings here (scripts/test.sh fails on any); CLIPPY_ARGS passes options such as `-D
# warnings` (joined by __CLIPPY_HACKERY__, as cargo-clippy does). Without the clippy component
# the driver is missing and the crates are compiled by rustc; set RUSTC_WORKSPACE_WRAPPER
# (empty to turn it off) to choose.
if [ -z "${RUSTC_WORKSPACE_WRAPPER+set}" ]; then
    clippy_driver="$(rustc --print sysroot 2>/dev/null)/bin/clippy-driver"
    if [ -x "$clippy_driver" ]; then
        export RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
    fi
    unset clippy_driver
fi
