//! Integration tests of the engine: end-to-end matching with a scripted model whose
//! answers are chosen by rules on the request, so the tests pin what the engine decides
//! from given model answers (fast paths, resolution, path algebra, pruning).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[path = "integration/support.rs"]
mod support;

#[path = "integration/weather.rs"]
mod weather;

#[path = "integration/taxi.rs"]
mod taxi;

#[path = "integration/relationships.rs"]
mod relationships;

#[path = "integration/disambiguation.rs"]
mod disambiguation;

#[path = "integration/robustness.rs"]
mod robustness;

#[path = "integration/prompts.rs"]
mod prompts;

#[path = "integration/properties.rs"]
mod properties;

#[path = "integration/verdicts.rs"]
mod verdicts;

#[path = "integration/journey_rules.rs"]
mod journey_rules;
