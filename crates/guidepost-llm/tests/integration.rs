//! Integration tests of guidepost-llm: providers against fake servers, middleware, the stack.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "integration/support.rs"]
mod support;

#[path = "integration/anthropic.rs"]
mod anthropic;
#[path = "integration/cache.rs"]
mod cache;
#[path = "integration/fuzz.rs"]
mod fuzz;
#[path = "integration/hostile.rs"]
mod hostile;
#[path = "integration/limits.rs"]
mod limits;
#[path = "integration/openai.rs"]
mod openai;
#[path = "integration/resilience.rs"]
mod resilience;
#[path = "integration/stack.rs"]
mod stack;
#[path = "integration/streaming.rs"]
mod streaming;
