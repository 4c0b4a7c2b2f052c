//! [`TurnTrace`]: what happened in one turn and why, for the server, the CLI and the
//! simulator.

use guidepost_engine::MatchingRecord;
use guidepost_llm::UsageTotals;
use serde::{Deserialize, Serialize};

use crate::state::{StagedCall, ToolInsights};

/// One preparation iteration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IterationTrace {
    /// 1-based.
    pub iteration: u32,
    /// The matcher's record: candidates, verdicts, rationales, journeys, relationships.
    pub matching: Option<MatchingRecord>,
    /// Tool-call inference: batches and what they decided.
    pub tool_inference: Vec<InferenceTrace>,
    /// Calls made in this iteration.
    pub tool_calls: Vec<StagedCall>,
    /// Wall time of the iteration.
    pub duration_ms: u64,
}

/// One tool-call inference batch.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct InferenceTrace {
    /// Tools decided together.
    pub tools: Vec<String>,
    /// Whether a model call was needed (a parameterless, non-consequential tool is run
    /// without one).
    pub model_call: bool,
    /// The model's rationale.
    pub rationale: Option<String>,
    /// Prompt tokens.
    pub prompt_tokens: u64,
}

/// How the reply was composed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CompositionTrace {
    /// Composition mode used.
    pub mode: String,
    /// Template chosen in a canned mode.
    pub template_id: Option<String>,
    /// Problems the self-check found in the draft.
    pub self_check: Vec<String>,
    /// What the reply checks found in each reply the model wrote (empty: the first passed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reply_checks: Vec<Vec<guidepost_core::reply_check::ReplyProblem>>,
    /// Whether the agent's fallback reply was sent because no written reply passed.
    #[serde(default)]
    pub fallback: bool,
    /// Model calls made.
    pub model_calls: u32,
    /// Prompt tokens.
    pub prompt_tokens: u64,
}

/// Everything about one turn.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TurnTrace {
    /// The turn.
    pub trace_id: String,
    /// Preparation iterations.
    pub iterations: Vec<IterationTrace>,
    /// The guidelines (and journey nodes) the reply followed, after relational resolution.
    pub matched: Vec<String>,
    /// Final tool insights (missing and invalid arguments).
    pub tool_insights: ToolInsights,
    /// Composition.
    pub composition: CompositionTrace,
    /// Model usage of the whole turn.
    pub usage: UsageTotals,
    /// Whether the turn was cancelled by a newer customer message.
    pub cancelled: bool,
    /// The error that ended the turn, if any.
    pub error: Option<String>,
    /// Wall time.
    pub duration_ms: u64,
}

impl TurnTrace {
    /// Model calls made by matching, tool inference and composition.
    pub fn model_calls(&self) -> u64 {
        self.usage.calls
    }
}
