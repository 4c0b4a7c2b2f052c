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
    /// Whether the model call failed (or its answer did not fit the schema): the batch's
    /// tools do not run this turn.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
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
    /// The last reply the model wrote, when it went out without the sentences that only said
    /// the customer's words again (the sent reply is what was left).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mended_from: Option<String>,
    /// Whether the reply only said that a request's outcome is being checked (a
    /// consequential call's outcome was lost and it was not sent again): no model wrote it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outcome_check: bool,
    /// The tracked guidelines the reply carries out, as the model reported them (see
    /// [`crate::compose::Composed::followed`]); absent when no report was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub followed: Option<Vec<String>>,
    /// Model calls made.
    pub model_calls: u32,
    /// Prompt tokens.
    pub prompt_tokens: u64,
}

/// A stage of a turn that failures can cost part or all of its work while the turn still
/// replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Guideline matching and journey selection: a failed model call leaves its guidelines
    /// unmatched (or its journey where it was).
    Matching,
    /// Tool-call inference: a failed model call means its tools do not run this turn.
    ToolInference,
    /// Tool calls: a call that timed out, panicked or whose service was unavailable (a tool
    /// that answered with a failure of its own is a result, not a loss).
    ToolCalls,
    /// Reply composition.
    Composition,
}

impl Stage {
    /// The stage as the chat and the events name it: `matching`, `tool_inference`,
    /// `tool_calls`, `composition`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Matching => "matching",
            Self::ToolInference => "tool_inference",
            Self::ToolCalls => "tool_calls",
            Self::Composition => "composition",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A stage that lost work to failures in this turn: the reply went out without it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DegradedStage {
    /// Which stage.
    pub stage: Stage,
    /// The preparation iteration (1-based; 0 for composition).
    pub iteration: u32,
    /// How many of its calls failed.
    pub failed: usize,
    /// How many calls it made.
    pub attempted: usize,
    /// The first error, secrets removed.
    pub error: String,
}

impl std::fmt::Display for DegradedStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} of {} calls failed", self.stage, self.failed, self.attempted)?;
        if self.iteration > 0 {
            write!(f, " (iteration {})", self.iteration)?;
        }
        write!(f, "; first error: {}", self.error)
    }
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
    /// Stages that lost work to failures (empty when every call of the turn succeeded).
    /// A reply sent with a degraded stage is marked so in the outcome's status
    /// ([`crate::TurnStatus::Degraded`]), the `ready` status event and the message event.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded: Vec<DegradedStage>,
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

    /// Whether a stage lost work to failures.
    pub fn is_degraded(&self) -> bool {
        !self.degraded.is_empty()
    }

    /// The degraded stages as JSON, with their errors (for the trace's readers).
    pub fn degraded_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.degraded).unwrap_or(serde_json::Value::Null)
    }

    /// The degraded stages as the customer's events show them: which stage lost how many of
    /// its calls, without the errors (a provider's or a tool service's error text is for the
    /// trace and the log, not for the customer), or `None` when nothing was lost.
    pub fn degraded_for_customers(&self) -> Option<serde_json::Value> {
        self.is_degraded().then(|| {
            self.degraded
                .iter()
                .map(|d| {
                    serde_json::json!({"stage": d.stage, "iteration": d.iteration, "failed": d.failed, "attempted": d.attempted})
                })
                .collect()
        })
    }
}
