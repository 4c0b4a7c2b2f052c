//! Integration tests of the `guidepost` command, in one binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[path = "integration/bench.rs"]
mod bench;
#[path = "integration/bounded.rs"]
mod bounded;
#[path = "integration/check.rs"]
mod check;
#[path = "integration/degraded.rs"]
mod degraded;
#[path = "integration/durability.rs"]
mod durability;
#[path = "integration/eval.rs"]
mod eval;
#[path = "integration/exactly_once.rs"]
mod exactly_once;
#[path = "integration/fake_parlant_engine.rs"]
mod fake_parlant_engine;
#[path = "integration/graph.rs"]
mod graph;
#[path = "integration/help.rs"]
mod help;
#[path = "integration/hostile.rs"]
mod hostile;
#[path = "integration/neighbours.rs"]
mod neighbours;
#[path = "integration/parlant_import.rs"]
mod parlant_import;
#[path = "integration/parlant_interop.rs"]
mod parlant_interop;
#[path = "integration/python_tools.rs"]
mod python_tools;
#[path = "integration/readers.rs"]
mod readers;
#[path = "integration/readme.rs"]
mod readme;
#[path = "integration/serve.rs"]
mod serve;
#[path = "integration/store_health.rs"]
mod store_health;
#[path = "integration/wheel.rs"]
mod wheel;

use std::path::PathBuf;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

pub fn guidepost() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("guidepost").unwrap();
    cmd.current_dir(repo_root());
    cmd
}
