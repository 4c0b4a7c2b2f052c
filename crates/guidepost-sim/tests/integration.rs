//! Integration tests of the simulator (one binary; modules under `integration/`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[path = "integration/support.rs"]
mod support;

#[path = "integration/agents_jsonl.rs"]
mod agents_jsonl;
#[path = "integration/agents_openai.rs"]
mod agents_openai;
#[path = "integration/agents_parlant.rs"]
mod agents_parlant;
#[path = "integration/artifacts.rs"]
mod artifacts;
#[path = "integration/coverage.rs"]
mod coverage;
#[path = "integration/fuzz.rs"]
mod fuzz;
#[path = "integration/prompts.rs"]
mod prompts;
#[path = "integration/reply_quality.rs"]
mod reply_quality;
#[path = "integration/scenarios.rs"]
mod scenarios;
#[path = "integration/selection.rs"]
mod selection;
#[path = "integration/simulate.rs"]
mod simulate;
#[path = "integration/stop_reasons.rs"]
mod stop_reasons;
#[path = "integration/suite.rs"]
mod suite;
#[path = "integration/tally_artifacts.rs"]
mod tally_artifacts;
#[path = "integration/tally_schema.rs"]
mod tally_schema;
