//! `guidepost eval`: labelled decision cases run against any model.
//!
//! A case is a conversation about one agent (with tool results, context variables and the
//! agent state before its last customer message) and the decisions that message calls for:
//! which guidelines apply ([`run::Kind::Guideline`]), where each journey stands
//! ([`run::Kind::Journey`]), what relational resolution keeps ([`run::Kind::Relationship`]),
//! whether a clarifying question is due and what it offers ([`run::Kind::Disambiguation`]),
//! and which tools are called with what ([`run::Kind::Tool`]). [`case::load`] reads case
//! files ([`case`] describes the format; [`case::schema`] is its JSON Schema),
//! [`run::evaluate`] runs them through the engine's matching pass and tool-call inference on
//! the given models, and [`report::Report`] gives accuracy per kind, precision and recall,
//! pass^k over repeated runs, the wrong decisions with the model's rationale, and latency and
//! tokens per call.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod case;
mod decide;
mod load;
mod meter;
pub mod report;
mod resolution;
pub mod run;

pub use case::{CaseError, Suite, load};
pub use report::Report;
pub use run::{CaseDone, Models, Options, Outcome, evaluate, evaluate_with};

#[cfg(test)]
mod tests;
