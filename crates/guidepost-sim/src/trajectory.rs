//! The trajectory: who the simulated customer is (persona), what it wants (goal), the optional
//! step graph, limits, and what one turn of a run records ([`StepTrace`]).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::message::ModelMessage;
use crate::observations::EngineObservations;
use crate::steps::StepGraph;

/// Who the simulated customer is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Persona {
    /// A name, used in the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Voice, preferences and situation.
    pub description: String,
    /// Rules the customer keeps to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guardrails: Vec<String>,
}

/// Limits of loop detection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoopDetection {
    /// The run stops when the same step is selected this many times in a row (default 3).
    #[serde(default = "default_consecutive", alias = "maxConsecutiveSameStep")]
    pub max_consecutive_same_step: u32,
    /// Longest repeated cycle of steps looked for (default 3; 0 or 1 disables cycles).
    #[serde(default = "default_cycle_length", alias = "maxCycleLength")]
    pub max_cycle_length: u32,
    /// The run stops when a cycle repeats this many times after its first occurrence
    /// (default 2, i.e. three occurrences in a row).
    #[serde(default = "default_cycle_repetitions", alias = "maxCycleRepetitions")]
    pub max_cycle_repetitions: u32,
}

fn default_consecutive() -> u32 {
    3
}
fn default_cycle_length() -> u32 {
    3
}
fn default_cycle_repetitions() -> u32 {
    2
}

impl Default for LoopDetection {
    fn default() -> Self {
        Self {
            max_consecutive_same_step: default_consecutive(),
            max_cycle_length: default_cycle_length(),
            max_cycle_repetitions: default_cycle_repetitions(),
        }
    }
}

/// A conversation to simulate.
#[derive(Debug, Clone)]
pub struct Trajectory {
    /// What the customer wants to achieve.
    pub goal: String,
    /// Who the customer is.
    pub persona: Persona,
    /// Milestones the customer goes through (optional).
    pub steps: Option<StepGraph>,
    /// Customer turns at most; `None` means no limit other than loops and budgets (the
    /// simulator has no hidden cap).
    pub max_turns: Option<u32>,
    /// The conversation id; one per run.
    pub conversation_id: String,
    /// Free data stored with the run, never shown to the customer model.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Loop detection limits.
    pub loop_detection: LoopDetection,
}

/// Why a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// A terminal step was satisfied, or (without a graph) the customer said its goal was met.
    GoalReached,
    /// The turn limit was reached.
    MaxTurns,
    /// A policy stopped the run (including a simulated customer that kept speaking as the agent).
    PolicyViolation,
    /// The same step, or the same cycle of steps, was selected too often.
    AgentLoop,
    /// No step could be selected and the policy requires one.
    NoStepMatch,
    /// The agent, a model or the harness failed; the partial run is kept.
    Error,
    /// The customer ended the conversation without reaching its goal.
    CustomerEnded,
    /// A token or cost budget was exhausted.
    BudgetExceeded,
    /// A checkpoint assertion failed.
    CheckpointFailed,
    /// A step ran out of attempts or time.
    StepFailed,
    /// A scenario script without a `simulate: rest` item played its last item.
    ScriptEnded,
}

impl StopReason {
    /// The wire name (`goal-reached` ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::GoalReached => "goal-reached",
            Self::MaxTurns => "max-turns",
            Self::PolicyViolation => "policy-violation",
            Self::AgentLoop => "agent-loop",
            Self::NoStepMatch => "no-step-match",
            Self::Error => "error",
            Self::CustomerEnded => "customer-ended",
            Self::BudgetExceeded => "budget-exceeded",
            Self::CheckpointFailed => "checkpoint-failed",
            Self::StepFailed => "step-failed",
            Self::ScriptEnded => "script-ended",
        }
    }
}

impl StopReason {
    /// The reason Tally's files carry, one of its six (`goal-reached`, `max-turns`,
    /// `policy-violation`, `agent-loop`, `no-step-match`, `error`; its viewers reject any
    /// other): Guidepost's finer reasons map to the nearest, and are kept beside it.
    ///
    /// - `customer-ended`: `goal-reached` when the run completed, else `policy-violation`
    ///   (the run's stop policy ended it short of the goal);
    /// - `budget-exceeded`: `max-turns` (a limit of the run was reached);
    /// - `checkpoint-failed`, `step-failed`: `policy-violation` (the agent failed an assertion
    ///   or a step);
    /// - `script-ended`: `goal-reached` when the run completed, else `max-turns` (the script
    ///   ran out of turns).
    ///
    /// ```
    /// use guidepost_sim::StopReason;
    /// assert_eq!(StopReason::BudgetExceeded.to_tally(false), StopReason::MaxTurns);
    /// assert_eq!(StopReason::ScriptEnded.to_tally(true), StopReason::GoalReached);
    /// assert!(StopReason::CheckpointFailed.to_tally(false).is_tally());
    /// ```
    pub fn to_tally(self, completed: bool) -> StopReason {
        match self {
            Self::GoalReached
            | Self::MaxTurns
            | Self::PolicyViolation
            | Self::AgentLoop
            | Self::NoStepMatch
            | Self::Error => self,
            Self::CustomerEnded if completed => Self::GoalReached,
            Self::CustomerEnded | Self::CheckpointFailed | Self::StepFailed => Self::PolicyViolation,
            Self::BudgetExceeded => Self::MaxTurns,
            Self::ScriptEnded if completed => Self::GoalReached,
            Self::ScriptEnded => Self::MaxTurns,
        }
    }

    /// Whether Tally knows this reason (its `TrajectoryStopReason`).
    pub fn is_tally(self) -> bool {
        self.to_tally(false) == self
    }

    /// Every reason, Guidepost's own included.
    pub const ALL: [StopReason; 11] = [
        Self::GoalReached,
        Self::MaxTurns,
        Self::PolicyViolation,
        Self::AgentLoop,
        Self::NoStepMatch,
        Self::Error,
        Self::CustomerEnded,
        Self::BudgetExceeded,
        Self::CheckpointFailed,
        Self::StepFailed,
        Self::ScriptEnded,
    ];
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the step of a turn was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SelectionMethod {
    /// The start step, at the first turn.
    Start,
    /// The first step in graph order whose preconditions just became true.
    PreconditionsOrdered,
    /// The ranker's best candidate above the threshold.
    LlmRanked,
    /// No step (graceful continuation, scripted turns, or no graph).
    None,
}

/// A step considered for a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectionCandidate {
    /// The step.
    pub step_id: String,
    /// Confidence in [0, 1].
    pub score: f64,
    /// Why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

/// The selection of a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// How the step was chosen.
    pub method: SelectionMethod,
    /// The candidates considered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<Vec<SelectionCandidate>>,
}

/// The end marker on the last trace of a run.
///
/// Written as Tally's `StepTraceEnd`: `reason` is Tally's reason
/// ([`StopReason::to_tally`]) and `guidepostReason` Guidepost's own; reading prefers
/// `guidepostReason`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "EndMarkerWire", from = "EndMarkerWire")]
pub struct EndMarker {
    /// Always true.
    pub is_final: bool,
    /// Why the run stopped (Guidepost's reason).
    pub reason: StopReason,
    /// Whether the goal was reached.
    pub completed: bool,
    /// A sentence on how it ended.
    pub summary: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EndMarkerWire {
    is_final: bool,
    reason: StopReason,
    completed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    guidepost_reason: Option<StopReason>,
}

impl From<EndMarker> for EndMarkerWire {
    fn from(end: EndMarker) -> Self {
        Self {
            is_final: true,
            reason: end.reason.to_tally(end.completed),
            completed: end.completed,
            summary: end.summary,
            guidepost_reason: Some(end.reason),
        }
    }
}

impl From<EndMarkerWire> for EndMarker {
    fn from(wire: EndMarkerWire) -> Self {
        Self {
            is_final: wire.is_final,
            reason: wire.guidepost_reason.unwrap_or(wire.reason),
            completed: wire.completed,
            summary: wire.summary,
        }
    }
}

/// Where a customer turn came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnSource {
    /// Written by the simulated customer.
    Simulated,
    /// A fixed line of the scenario script.
    Scripted,
}

/// One customer turn and the agent's answer: the canonical record of a run.
///
/// Serialized field by field as Tally's `StepTrace` (camelCase); `source`, `observations` and
/// `latencyMs` are Guidepost additions that Tally's readers ignore.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepTrace {
    /// 0-based turn index.
    pub turn_index: u32,
    /// The customer's message.
    pub user_message: ModelMessage,
    /// The agent's messages, tool calls and tool results, in order.
    pub agent_messages: Vec<ModelMessage>,
    /// When the turn finished.
    pub timestamp: DateTime<Utc>,
    /// The step selected for the turn.
    pub step_id: Option<String>,
    /// How it was selected.
    pub selection: Selection,
    /// Present on the last trace only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<EndMarker>,
    /// Simulated or scripted.
    #[serde(default = "simulated", skip_serializing_if = "is_simulated")]
    pub source: TurnSource,
    /// What the engine reported, when the agent is a Guidepost engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observations: Option<EngineObservations>,
    /// How long the agent took to answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
}

fn simulated() -> TurnSource {
    TurnSource::Simulated
}
fn is_simulated(source: &TurnSource) -> bool {
    *source == TurnSource::Simulated
}

impl StepTrace {
    /// The agent's text messages.
    pub fn agent_texts(&self) -> Vec<String> {
        self.agent_messages
            .iter()
            .filter(|m| m.role == crate::message::MessageRole::Assistant)
            .map(ModelMessage::text)
            .filter(|t| !t.is_empty())
            .collect()
    }
}
