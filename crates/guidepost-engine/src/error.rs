//! Errors of the engine.
//!
//! Model failures inside one batch never surface here: a failed batch leaves its
//! guidelines unmatched and records the error in the [`crate::record::MatchingRecord`].
//! [`EngineError`] is returned only when matching as a whole cannot produce a result.

use guidepost_llm::LlmError;

/// What can make a matching call fail as a whole.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// Every model call of the turn failed, so nothing could be decided.
    #[error("every model call of this matching pass failed; first error: {first}")]
    AllBatchesFailed {
        /// The first error, for diagnosis.
        first: LlmError,
        /// How many calls failed.
        failed: usize,
    },
}

/// Why one batch produced no verdicts. Recorded, never returned from a turn.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BatchError {
    /// The model call failed (transport, timeout, schema violation after re-asks ...).
    #[error("model call failed: {0}")]
    Model(#[from] LlmError),
    /// The prompt could not be rendered.
    #[error("prompt rendering failed: {0}")]
    Prompt(String),
}
