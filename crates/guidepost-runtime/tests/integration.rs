//! Integration tests of the response lifecycle, in one binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[path = "integration/support.rs"]
mod support;

#[path = "integration/banking.rs"]
mod banking;
#[path = "integration/canned.rs"]
mod canned;
#[path = "integration/context.rs"]
mod context;
#[path = "integration/degraded.rs"]
mod degraded;
#[path = "integration/failures.rs"]
mod failures;
#[path = "integration/journeys.rs"]
mod journeys;
#[path = "integration/lifecycle.rs"]
mod lifecycle;
#[path = "integration/prompts.rs"]
mod prompts;
#[path = "integration/pulses.rs"]
mod pulses;
#[path = "integration/reply_checks.rs"]
mod reply_checks;
#[path = "integration/reruns.rs"]
mod reruns;
#[path = "integration/tools.rs"]
mod tools;
