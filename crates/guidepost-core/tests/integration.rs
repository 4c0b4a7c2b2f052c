//! Integration tests of guidepost-core, in one binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[path = "integration/common.rs"]
mod common;
#[path = "integration/corpus.rs"]
mod corpus;
#[path = "integration/examples.rs"]
mod examples;
#[path = "integration/graph.rs"]
mod graph;
#[path = "integration/hostile.rs"]
mod hostile;
#[path = "integration/lints.rs"]
mod lints;
#[path = "integration/projection.rs"]
mod projection;
#[path = "integration/robustness.rs"]
mod robustness;
#[path = "integration/roundtrip.rs"]
mod roundtrip;
#[path = "integration/schema.rs"]
mod schema;
