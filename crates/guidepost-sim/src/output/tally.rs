//! Tally's shapes: `Conversation` / `ConversationStep` (the `conversation.jsonl` codec),
//! `TrajectoryMetaV1` (`trajectory.meta.json`) and `TrajectoryRunMeta`
//! (`runs/trajectory/<runId>.json`). Optional fields are left out rather than written as
//! `null`, which Tally's loaders reject.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::message::ModelMessage;
use crate::steps::{CustomCheck, Precondition};
use crate::trajectory::{LoopDetection, Persona, StepTrace, Trajectory};

/// One step of a Tally conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationStep {
    /// 0-based index.
    pub step_index: u32,
    /// The customer's message.
    pub input: ModelMessage,
    /// The agent's messages.
    pub output: Vec<ModelMessage>,
    /// When the step finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<DateTime<Utc>>,
    /// `{originalTurnIndex, stepId, selection, end?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A Tally conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    /// The conversation id.
    pub id: String,
    /// Its steps.
    pub steps: Vec<ConversationStep>,
    /// Conversation-level metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// The conversation step of one trace, as Tally's `stepTracesToConversation` builds it.
pub fn trace_to_step(index: usize, trace: &StepTrace) -> ConversationStep {
    let mut metadata = Map::new();
    metadata.insert("originalTurnIndex".into(), json!(trace.turn_index));
    metadata.insert("stepId".into(), json!(trace.step_id));
    metadata.insert("selection".into(), serde_json::to_value(&trace.selection).unwrap_or(Value::Null));
    if let Some(end) = &trace.end {
        metadata.insert("end".into(), serde_json::to_value(end).unwrap_or(Value::Null));
    }
    ConversationStep {
        step_index: u32::try_from(index).unwrap_or(u32::MAX),
        input: trace.user_message.clone(),
        output: trace.agent_messages.clone(),
        timestamp: Some(trace.timestamp),
        metadata: Some(metadata),
    }
}

/// The Tally conversation of a run.
pub fn to_conversation(id: &str, traces: &[StepTrace], metadata: Option<Map<String, Value>>) -> Conversation {
    Conversation {
        id: id.to_string(),
        steps: traces.iter().enumerate().map(|(i, t)| trace_to_step(i, t)).collect(),
        metadata,
    }
}

/// One line of `conversation.jsonl`: the step plus `conversationId` (and, on the first line,
/// `conversationMetadata` when there is any).
pub fn conversation_line(
    conversation_id: &str,
    step: &ConversationStep,
    conversation_metadata: Option<&Map<String, Value>>,
) -> String {
    let mut value = serde_json::to_value(step).unwrap_or(Value::Null);
    if let Value::Object(obj) = &mut value {
        obj.insert("conversationId".into(), json!(conversation_id));
        if let Some(meta) = conversation_metadata {
            obj.insert("conversationMetadata".into(), Value::Object(meta.clone()));
        }
    }
    value.to_string()
}

/// Reads `conversation.jsonl` back as Tally's decoder does: the id from line 1, invalid lines
/// skipped.
pub fn parse_conversation_jsonl(text: &str) -> Option<Conversation> {
    let mut id = None;
    let mut steps = Vec::new();
    let mut metadata = None;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(value) = serde_json::from_str::<Value>(line) else { continue };
        if id.is_none() {
            id = value.get("conversationId").and_then(Value::as_str).map(String::from);
            metadata = value.get("conversationMetadata").and_then(Value::as_object).cloned();
        }
        if let Ok(step) = serde_json::from_value::<ConversationStep>(value) {
            steps.push(step);
        }
    }
    Some(Conversation { id: id?, steps, metadata })
}

/// `trajectory.meta.json` (`TrajectoryMetaV1`): a declarative snapshot of the trajectory.
/// Custom preconditions keep only their name; satisfaction checks are not serialized.
pub fn trajectory_meta(trajectory: &Trajectory, trajectory_id: &str, created_at: DateTime<Utc>) -> Value {
    let mut meta = Map::new();
    meta.insert("version".into(), json!(1));
    meta.insert("trajectoryId".into(), json!(trajectory_id));
    meta.insert("createdAt".into(), json!(created_at));
    meta.insert("goal".into(), json!(trajectory.goal));
    meta.insert("persona".into(), persona_json(&trajectory.persona));
    if let Some(max) = trajectory.max_turns {
        meta.insert("maxTurns".into(), json!(max));
    }
    meta.insert("loopDetection".into(), loop_json(&trajectory.loop_detection));
    if !trajectory.metadata.is_empty() {
        meta.insert("metadata".into(), Value::Object(trajectory.metadata.clone()));
    }
    if let Some(graph) = &trajectory.steps {
        let steps: Vec<Value> = graph
            .steps
            .iter()
            .map(|s| {
                let mut step = Map::new();
                step.insert("id".into(), json!(s.id));
                step.insert("instruction".into(), json!(s.instruction));
                if !s.hints.is_empty() {
                    step.insert("hints".into(), json!(s.hints));
                }
                if let Some(n) = s.max_attempts {
                    step.insert("maxAttempts".into(), json!(n));
                }
                if let Some(t) = s.timeout {
                    step.insert("timeoutMs".into(), json!(u64::try_from(t.as_millis()).unwrap_or(u64::MAX)));
                }
                if !s.preconditions.is_empty() {
                    let pre: Vec<Value> = s
                        .preconditions
                        .iter()
                        .map(|p| match p {
                            Precondition::StepSatisfied(id) => json!({"type": "stepSatisfied", "stepId": id}),
                            Precondition::Custom { name, check } => {
                                let name = name.clone().or_else(|| match check {
                                    CustomCheck::Expr(e) => Some(e.source().to_string()),
                                    CustomCheck::Closure(_) => None,
                                });
                                match name {
                                    Some(n) => json!({"type": "custom", "name": n}),
                                    None => json!({"type": "custom"}),
                                }
                            }
                        })
                        .collect();
                    step.insert("preconditions".into(), Value::Array(pre));
                }
                Value::Object(step)
            })
            .collect();
        let mut graph_json = Map::new();
        graph_json.insert("start".into(), json!(graph.start));
        if !graph.terminals.is_empty() {
            graph_json.insert("terminals".into(), json!(graph.terminals));
        }
        graph_json.insert("steps".into(), Value::Array(steps));
        meta.insert("stepGraph".into(), Value::Object(graph_json));
    }
    Value::Object(meta)
}

fn persona_json(persona: &Persona) -> Value {
    let mut p = Map::new();
    if let Some(name) = &persona.name {
        p.insert("name".into(), json!(name));
    }
    p.insert("description".into(), json!(persona.description));
    if !persona.guardrails.is_empty() {
        p.insert("guardrails".into(), json!(persona.guardrails));
    }
    Value::Object(p)
}

fn loop_json(loops: &LoopDetection) -> Value {
    json!({
        "maxConsecutiveSameStep": loops.max_consecutive_same_step,
        "maxCycleLength": loops.max_cycle_length,
        "maxCycleRepetitions": loops.max_cycle_repetitions,
    })
}

/// The header-only first line of `conversation.jsonl`: `{conversationId, conversationMetadata}`
/// with no step keys. Tally takes the id and metadata from it and skips it as a step, which is
/// how a conversation of zero turns loads (Tally rejects an empty file).
pub fn conversation_header(conversation_id: &str, conversation_metadata: &Map<String, Value>) -> String {
    json!({"conversationId": conversation_id, "conversationMetadata": conversation_metadata}).to_string()
}

/// The `runs/trajectory/<runId>.json` of a run, in Tally's `TrajectoryRunMeta` shape: `runId`,
/// `conversationId`, `timestamp`, `goal`, `persona`, `completed`, `reason` (one of Tally's six,
/// see [`StopReason::to_tally`](crate::StopReason::to_tally)), `totalTurns`, `stepCount` and
/// `stepsCompleted` with a step graph, and `metadata` with Guidepost's own reason, summary,
/// error and cleanup problem. `result` holds the run's summary: Tally's viewers open every run
/// file as a run report and need a `result` object.
pub fn trajectory_run_meta(run_id: &str, trajectory: &Trajectory, result: &crate::runner::RunResult) -> Value {
    let mut meta = Map::new();
    meta.insert("runId".into(), json!(run_id));
    meta.insert("conversationId".into(), json!(result.conversation_id));
    meta.insert("timestamp".into(), json!(result.finished_at));
    meta.insert("goal".into(), json!(trajectory.goal));
    let mut persona = Map::new();
    if let Some(name) = &trajectory.persona.name {
        persona.insert("name".into(), json!(name));
    }
    persona.insert("description".into(), json!(trajectory.persona.description));
    meta.insert("persona".into(), Value::Object(persona));
    meta.insert("completed".into(), json!(result.completed));
    meta.insert("reason".into(), json!(result.reason.to_tally(result.completed)));
    meta.insert("totalTurns".into(), json!(result.traces.len()));
    if let Some(graph) = &trajectory.steps {
        meta.insert("stepCount".into(), json!(graph.steps.len()));
        let done = result.steps.iter().filter(|s| s.status == crate::steps::StepStatus::Satisfied).count();
        meta.insert("stepsCompleted".into(), json!(done));
    }
    meta.insert("metadata".into(), Value::Object(run_outcome(result)));
    meta.insert("result".into(), serde_json::to_value(result.summary_record()).unwrap_or_else(|_| json!({})));
    Value::Object(meta)
}

/// How a run ended, for the files' metadata: Tally's `reason` beside Guidepost's
/// `guidepostReason`, `completed`, `summary`, `turns`, and `scenarioId`, `trial`, `error`,
/// `failure` and `cleanupError` when there are any (never `null`).
pub fn run_outcome(result: &crate::runner::RunResult) -> Map<String, Value> {
    let mut outcome = Map::new();
    outcome.insert("reason".into(), json!(result.reason.to_tally(result.completed)));
    outcome.insert("guidepostReason".into(), json!(result.reason));
    outcome.insert("completed".into(), json!(result.completed));
    outcome.insert("summary".into(), json!(result.summary));
    outcome.insert("turns".into(), json!(result.traces.len()));
    outcome.insert("scenarioId".into(), json!(result.scenario_id));
    outcome.insert("trial".into(), json!(result.trial));
    if let Some(error) = &result.error {
        outcome.insert("error".into(), json!(error));
    }
    if let Some(failure) = &result.failure {
        outcome.insert("failure".into(), json!(failure));
    }
    if let Some(cleanup) = &result.cleanup_error {
        outcome.insert("cleanupError".into(), json!(cleanup));
    }
    outcome
}
