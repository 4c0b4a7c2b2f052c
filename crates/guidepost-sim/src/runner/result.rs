//! What a run produced: [`RunResult`] and its serializable [`RunSummary`].

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use guidepost_llm::UsageTotals;
use serde::{Deserialize, Serialize};

use crate::observations::EngineObservations;
use crate::satisfaction::SatisfactionVerdict;
use crate::steps::StepRuntimeState;
use crate::trajectory::{StepTrace, StopReason};

/// Usage per participant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ParticipantUsage {
    /// The simulated customer (and ranker).
    pub customer: UsageTotals,
    /// The judge.
    pub judge: UsageTotals,
    /// The agent (when reported).
    pub agent: UsageTotals,
}

/// The outcome of a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointResult {
    /// Its name.
    pub name: String,
    /// After how many customer turns it was checked.
    pub after_turn: usize,
    /// Whether every expectation held.
    pub passed: bool,
    /// Descriptions of the expectations that failed.
    pub failures: Vec<String>,
}

/// Who failed when a run ends with `error`: the agent under test, the simulator's own models
/// (customer, ranker), the judge, or the harness (disk, options).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureSource {
    /// The agent under test (transport, protocol, timeout, reported error).
    Agent,
    /// The simulated customer or the step ranker.
    Simulator,
    /// The judge model.
    Judge,
    /// The simulator itself (artifacts, files).
    Harness,
}

/// Everything a run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// The scenario.
    pub scenario_id: String,
    /// The trial.
    pub trial: u32,
    /// The one conversation id of the run.
    pub conversation_id: String,
    /// The traces (the last one carries the end marker).
    pub traces: Vec<StepTrace>,
    /// Agent lines injected before the first customer turn.
    pub preamble: Vec<String>,
    /// Why it stopped.
    pub reason: StopReason,
    /// Whether the goal was reached.
    pub completed: bool,
    /// How it ended.
    pub summary: String,
    /// The error, when the reason is `error`.
    pub error: Option<String>,
    /// Who failed, when the reason is `error`.
    pub failure: Option<FailureSource>,
    /// Final step states.
    pub steps: Vec<StepRuntimeState>,
    /// Satisfaction verdicts, in order.
    pub verdicts: Vec<SatisfactionVerdict>,
    /// Checkpoints and final expectations.
    pub checkpoints: Vec<CheckpointResult>,
    /// Engine observations of all turns.
    pub observations: EngineObservations,
    /// Whether the agent reported engine observations.
    pub reports_engine: bool,
    /// Usage per participant.
    pub usage: ParticipantUsage,
    /// Start.
    pub started_at: DateTime<Utc>,
    /// End.
    pub finished_at: DateTime<Utc>,
    /// The artifact folder, when written.
    pub artifacts_dir: Option<PathBuf>,
    /// What the agent could not clean up when the run ended (a session or customer left on
    /// the server), if anything.
    pub cleanup_error: Option<String>,
}

/// The serializable summary of a run (reports and `runs/trajectory/<runId>.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The scenario.
    pub scenario_id: String,
    /// The trial.
    pub trial: u32,
    /// The conversation id.
    pub conversation_id: String,
    /// Whether the run passed (goal reached, checkpoints passed, no error).
    pub passed: bool,
    /// Whether the goal was reached.
    pub completed: bool,
    /// Why it stopped.
    pub reason: StopReason,
    /// How it ended.
    pub summary: String,
    /// The error, if any.
    pub error: Option<String>,
    /// Who failed, if anyone.
    pub failure: Option<FailureSource>,
    /// Customer turns.
    pub turns: usize,
    /// Final step states.
    pub steps: Vec<StepRuntimeState>,
    /// Checkpoints.
    pub checkpoints: Vec<CheckpointResult>,
    /// Usage per participant.
    pub usage: ParticipantUsage,
    /// Duration in milliseconds.
    pub duration_ms: u64,
    /// The artifact folder.
    pub artifacts_dir: Option<PathBuf>,
    /// What the agent could not clean up, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup_error: Option<String>,
}

impl RunResult {
    /// Passed: goal reached, every checkpoint passed, no error.
    pub fn passed(&self) -> bool {
        self.completed && self.error.is_none() && self.checkpoints.iter().all(|c| c.passed)
    }

    /// The serializable summary.
    pub fn summary_record(&self) -> RunSummary {
        RunSummary {
            scenario_id: self.scenario_id.clone(),
            trial: self.trial,
            conversation_id: self.conversation_id.clone(),
            passed: self.passed(),
            completed: self.completed,
            reason: self.reason,
            summary: self.summary.clone(),
            error: self.error.clone(),
            failure: self.failure,
            turns: self.traces.len(),
            steps: self.steps.clone(),
            checkpoints: self.checkpoints.clone(),
            usage: self.usage.clone(),
            duration_ms: u64::try_from((self.finished_at - self.started_at).num_milliseconds().max(0)).unwrap_or(0),
            artifacts_dir: self.artifacts_dir.clone(),
            cleanup_error: self.cleanup_error.clone(),
        }
    }
}
