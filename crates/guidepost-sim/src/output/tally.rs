//! Tally's shapes: `Conversation` / `ConversationStep` (the `conversation.jsonl` codec) and
//! `TrajectoryMetaV1` (`trajectory.meta.json`).

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
