//! Guidepost engine: guideline matching, relational resolution and journeys.
//!
//! One matching pass, as [`GuidelineMatcher::match_turn`] runs it:
//!
//! 1. **Journey prediction** ([`journeys::prediction::JourneyPredictor`]): active journeys
//!    always, plus the top-k inactive journeys most similar to the conversation.
//!    Guidelines scoped to (or starting) other journeys are pruned.
//! 2. **Categorization** ([`categorize`]): observational, actionable, previously applied
//!    (plain or customer-dependent), low criticality, disambiguation, journey node
//!    selection.
//! 3. **Batching** ([`batching`]) per category under a token budget, one structured call
//!    per batch ([`batches`]), every batch of the pass in parallel. Prompts
//!    ([`prompt`], `src/prompts/*.j2`) put their static instructions first and carry a
//!    bounded window of the conversation.
//! 4. **Journey node selection** ([`journeys::selection::JourneySelector`]):
//!    deterministic fast paths, else one call that decides stay / advance / backtrack /
//!    exit; paths follow the core path algebra ([`journeys::paths`]).
//! 5. **Relational resolution** ([`RelationalResolver`]): dependencies, priority,
//!    entailment, with every effect recorded.
//!
//! The outcome ([`MatchingOutcome`]) carries the resolved matches, the journey paths and a
//! serializable [`record::MatchingRecord`] that explains every decision.
//!
//! ## In the preparation loop
//!
//! Compile the definition once ([`CompiledAgent::new`], shared by every session), build a
//! [`GuidelineMatcher`], then per turn:
//!
//! 1. `match_turn(&ctx)` with the session's events and the previous turn's
//!    [`guidepost_core::AgentState`] (applied guidelines, journey paths);
//! 2. infer and run tools for [`MatchingOutcome::tool_enabled`] matches (guideline tools
//!    and tool nodes), stage the results in the context
//!    ([`MatchingContext::with_tool_results`]);
//! 3. `rematch(&ctx, &previous)`: re-evaluates only guidelines with a `reevaluation`
//!    relationship to a tool that ran, journeys standing on a tool node whose tool ran,
//!    and journeys the new results point to; everything else is carried;
//! 4. stop when no tool ran and [`MatchingOutcome::journeys_awaiting_tools`] is empty (or
//!    at `max_engine_iterations`); compose from [`MatchingOutcome::ordinary`] and the
//!    tool results; store [`MatchingOutcome::journey_paths`] in the new agent state.
//!
//! ```
//! use std::sync::Arc;
//! use guidepost_core::definition::{SourceFile, load_agent};
//! use guidepost_engine::{CompiledAgent, GuidelineMatcher, MatcherConfig, MatchingContext};
//! use guidepost_engine::context::events::conversation;
//! use guidepost_llm::providers::scripted::ScriptedModel;
//! use guidepost_llm::TaskKind;
//! use serde_json::json;
//!
//! let yaml = r#"
//! agent: { name: Otto }
//! guidelines:
//!   - id: refund
//!     condition: The customer asks about refunds
//!     action: Explain the 30-day refund policy
//! "#;
//! let definition = load_agent(&[SourceFile::new("otto.yaml", yaml)]).definition.expect("valid");
//! let agent = Arc::new(CompiledAgent::new(Arc::new(definition)));
//! let model = ScriptedModel::new().on(TaskKind::Matching, |_| {
//!     Ok(json!({"checks": [{"id": "1", "rationale": "asks about a refund", "applies": true}]}))
//! });
//! let matcher = GuidelineMatcher::new(agent, Arc::new(model), None, MatcherConfig::default());
//! let ctx = MatchingContext::new(conversation(&["Can I get a refund?"]), Default::default());
//! let outcome = tokio::runtime::Builder::new_current_thread()
//!     .build()
//!     .expect("runtime")
//!     .block_on(matcher.match_turn(&ctx))
//!     .expect("matched");
//! assert!(outcome.matched("refund"));
//! assert_eq!(outcome.record.model_calls(), 1);
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod batches;
pub mod batching;
pub mod catalog;
pub mod categorize;
pub mod config;
pub mod context;
pub mod error;
pub mod journeys;
pub mod matcher;
mod pass;
pub mod prompt;
pub mod record;
pub mod resolver;
mod touched;

pub use catalog::{CompiledAgent, Entity, MatchableGuideline};
pub use categorize::Category;
pub use config::{MatcherConfig, NumericPriority, RecheckAfterTools, VerdictStyle};
pub use context::{MatchingContext, StagedToolResult};
pub use error::{BatchError, EngineError};
pub use journeys::prediction::JourneyPredictor;
pub use journeys::selection::JourneySelector;
pub use matcher::{GuidelineMatcher, MatchingOutcome};
pub use record::{GuidelineMatch, MatchKind, MatchingRecord};
pub use resolver::RelationalResolver;
pub use touched::unspaced as writes_without_spaces;
