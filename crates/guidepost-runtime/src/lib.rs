//! The Guidepost response lifecycle: from a customer's message to the agent's reply.
//!
//! [`AgentRuntime::process`] runs one turn: it loads context (variables, glossary),
//! prepares in iterations (match guidelines and walk journeys with
//! [`guidepost_engine::GuidelineMatcher`], infer tool calls, run them with
//! [`guidepost_tools::registry::ToolRegistry`], match again on the results) until nothing
//! new happens or `max_engine_iterations` is reached, then composes the reply in the
//! agent's composition mode and emits it, with the status events clients expect.
//! [`SessionRunner`] serializes the turns of one session and cancels a turn when a newer
//! customer message arrives before its reply is emitted, so both messages get one reply.
//!
//! Hooks ([`EngineHooks`]) run at the lifecycle's fixed points; every turn yields a
//! [`TurnTrace`] saying what matched and why, which tools ran, and what the models cost.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod clock;
pub mod compose;
pub mod config;
pub mod error;
pub mod events;
pub mod history;
pub mod hooks;
pub mod journal;
pub mod prompt;
pub mod retrieval;
pub mod runtime;
pub mod session;
pub mod state;
pub mod tool_calls;
pub mod trace;
pub mod variables;

pub use config::{RuntimeConfig, RuntimeModels};
pub use error::{ConfigError, TurnError};
pub use events::{EventSink, MemorySession, NewEvent};
pub use hooks::{EngineHooks, HookAction, NoHooks};
pub use runtime::{AgentRuntime, EmittingLatch, PULSE_EVERY, TurnInput, TurnOutcome, TurnStatus};
pub use session::{SessionRunner, TurnHandle};
pub use state::{AskedInstead, ResponseState, ToolDecision, ToolInsights};
pub use trace::{DegradedStage, Stage, TurnTrace};
pub use variables::CustomerRef;
