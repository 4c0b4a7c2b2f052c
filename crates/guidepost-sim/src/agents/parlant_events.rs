//! Reading one turn from a Parlant session's events, as Parlant 3.3 writes them (and
//! Guidepost's server, which speaks the same API):
//!
//! - `message` events from the agent are its messages; one whose `data.tags` holds
//!   `__preamble__` is a preamble; a streamed one's text is its `data.chunks`;
//! - `tool` events hold `data.tool_calls: [{tool_id: "service:name", arguments, result}]`, each
//!   read with [`ToolCallRecord::from_parlant`];
//! - the last `ready` status with `data.data.stage == "completed"` ends the turn and lists
//!   `matched_guidelines`, `matched_journeys` and `matched_journey_states` (each `[{id}]`);
//! - an `error` status (Parlant writes it after the completed `ready`) fails the turn.
//!
//! Only the events of the completed turn's trace id are read, so a turn cancelled earlier
//! cannot leak into the next one.
//!
//! # Journey states
//!
//! Parlant reports a journey state as the node's id: `matched_journey_states: [{id: <node>}]`
//! and, among the matched guidelines, `journey_node:<node>` or `journey_node:<node>:<edge>`.
//! Node ids are opaque (nanoids, unless the agent was built with explicit state ids) and the
//! REST API lists no nodes, so each node is attributed to a journey by, in order:
//!
//! 1. Guidepost's form `<journey>.<state>` (Guidepost's server writes states that way);
//! 2. the agent definition's state ids ([`JourneyStateIndex`]), narrowed by the journeys the
//!    turn lists in `matched_journeys`;
//! 3. `matched_journeys` alone, when it lists exactly one journey.
//!
//! A node none of these settles is kept as an [`UnattributedJourneyNode`], never dropped.

use std::collections::{BTreeSet, HashMap};

use guidepost_core::AgentDefinition;
use guidepost_core::journey::END_STATE;
use serde_json::Value;

use crate::agents::{AgentTurn, ToolCallRecord};
use crate::error::AgentError;
use crate::observations::{EngineObservations, JourneyStateReached, ToolCalled, UnattributedJourneyNode};
pub use guidepost_core::payload::PREAMBLE_TAG;

/// Which journeys have a state with a given id, from agent definitions: lets a Parlant node
/// id that equals a state id (an agent built with explicit state ids) be named.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JourneyStateIndex {
    states: HashMap<String, BTreeSet<String>>,
    journeys: BTreeSet<String>,
}

impl JourneyStateIndex {
    /// The states of every journey of `definitions`.
    pub fn from_definitions<'a>(definitions: impl IntoIterator<Item = &'a AgentDefinition>) -> Self {
        let mut index = Self::default();
        for definition in definitions {
            for journey in &definition.journeys {
                index.journeys.insert(journey.id.clone());
                for state in &journey.states {
                    index.add(&journey.id, &state.id);
                }
                index.add(&journey.id, END_STATE);
            }
        }
        index
    }

    /// Records that `journey` has a state `state`.
    pub fn add(&mut self, journey: &str, state: &str) {
        self.journeys.insert(journey.to_string());
        self.states.entry(state.to_string()).or_default().insert(journey.to_string());
    }

    /// The journeys having a state `state`.
    pub fn journeys_with_state(&self, state: &str) -> Vec<String> {
        self.states.get(state).map(|j| j.iter().cloned().collect()).unwrap_or_default()
    }

    /// Whether a journey `journey` is known.
    pub fn has_journey(&self, journey: &str) -> bool {
        self.journeys.contains(journey)
    }
}

/// Where a reported journey node lands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeAttribution {
    /// A state of one journey.
    State(JourneyStateReached),
    /// No single journey could be named.
    Unattributed(UnattributedJourneyNode),
}

/// Attributes the node `node` (entered through `edge`) to a journey; see the module docs.
///
/// ```
/// use guidepost_sim::agents::parlant_events::{JourneyStateIndex, NodeAttribution, attribute_node};
/// let index = JourneyStateIndex::default();
/// // An opaque node id, one journey active: the state is kept under its node id.
/// let one = attribute_node("Xk3mQ9aLp0", None, &["refunds".to_string()], &index);
/// assert!(matches!(one, NodeAttribution::State(s) if s.journey == "refunds" && s.state == "Xk3mQ9aLp0"));
/// // Two journeys active and nothing else to go by: kept, unattributed.
/// let two = attribute_node("Xk3mQ9aLp0", None, &["a".to_string(), "b".to_string()], &index);
/// assert!(matches!(two, NodeAttribution::Unattributed(n) if n.candidates == ["a", "b"]));
/// ```
pub fn attribute_node(
    node: &str,
    edge: Option<String>,
    matched_journeys: &[String],
    index: &JourneyStateIndex,
) -> NodeAttribution {
    let state = |journey: &str, state: &str, edge: Option<String>| {
        NodeAttribution::State(JourneyStateReached { journey: journey.to_string(), state: state.to_string(), edge })
    };
    if let Some((journey, rest)) = node.split_once('.')
        && (matched_journeys.iter().any(|j| j == journey) || index.has_journey(journey))
    {
        return state(journey, rest, edge);
    }
    let known = index.journeys_with_state(node);
    let candidates: Vec<String> = if known.is_empty() {
        matched_journeys.to_vec()
    } else {
        let active: Vec<String> = known.iter().filter(|j| matched_journeys.contains(j)).cloned().collect();
        if active.is_empty() { known } else { active }
    };
    match candidates.as_slice() {
        [journey] => state(journey, node, edge),
        _ => NodeAttribution::Unattributed(UnattributedJourneyNode { node: node.to_string(), edge, candidates }),
    }
}

fn ids(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.get("id").and_then(Value::as_str).or_else(|| i.as_str()).map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// `journey_node:<node>[:<edge>]` → `(node, edge)`.
fn node_guideline(id: &str) -> Option<(String, Option<String>)> {
    let rest = id.strip_prefix("journey_node:")?;
    Some(match rest.split_once(':') {
        Some((node, edge)) => (node.to_string(), Some(edge.to_string())),
        None => (rest.to_string(), None),
    })
}

/// The observations of a completed `ready` status's `data.data`: guidelines (node guidelines
/// apart), journeys, and journey states attributed as the module docs describe.
pub fn observations_from_ready(data: &Value, index: &JourneyStateIndex) -> EngineObservations {
    let mut seen = EngineObservations::default();
    let matched_journeys = ids(data.get("matched_journeys"));
    let mut from_guidelines: Vec<(String, Option<String>)> = Vec::new();
    for id in ids(data.get("matched_guidelines")) {
        match node_guideline(&id) {
            Some(node) => from_guidelines.push(node),
            None => seen.guidelines_matched.push(id),
        }
    }
    let mut nodes: Vec<(String, Option<String>)> = Vec::new();
    for id in ids(data.get("matched_journey_states")) {
        let (node, edge) = node_guideline(&id).unwrap_or((id, None));
        let edge = edge.or_else(|| from_guidelines.iter().find(|(n, _)| n == &node).and_then(|(_, e)| e.clone()));
        if !nodes.iter().any(|(n, _)| n == &node) {
            nodes.push((node, edge));
        }
    }
    for (node, edge) in from_guidelines {
        if !nodes.iter().any(|(n, _)| n == &node) {
            nodes.push((node, edge));
        }
    }
    for (node, edge) in nodes {
        match attribute_node(&node, edge, &matched_journeys, index) {
            NodeAttribution::State(state) => {
                if state.state == END_STATE && !seen.journeys_completed.contains(&state.journey) {
                    seen.journeys_completed.push(state.journey.clone());
                }
                seen.journey_states.push(state);
            }
            NodeAttribution::Unattributed(node) => seen.unattributed_journey_nodes.push(node),
        }
    }
    seen.journeys_entered = matched_journeys;
    seen
}

fn str_at<'a>(event: &'a Value, pointer: &str) -> Option<&'a str> {
    event.pointer(pointer).and_then(Value::as_str)
}

/// Whether `event` is the completed `ready` status that ends a turn.
pub fn is_turn_end(event: &Value) -> bool {
    str_at(event, "/kind") == Some("status")
        && str_at(event, "/data/status") == Some("ready")
        && str_at(event, "/data/data/stage") == Some("completed")
}

/// Whether `event` is an `error` status.
pub fn is_error_status(event: &Value) -> bool {
    str_at(event, "/kind") == Some("status") && str_at(event, "/data/status") == Some("error")
}

/// Whether `event` is a message of the agent (or a human speaking as the agent).
pub fn is_agent_message(event: &Value) -> bool {
    str_at(event, "/kind") == Some("message")
        && matches!(str_at(event, "/source"), Some("ai_agent" | "human_agent_on_behalf_of_ai_agent"))
}

/// The trace id the turn ending in `events` belongs to: that of its last completed `ready`.
pub fn turn_trace(events: &[Value]) -> Option<&str> {
    events.iter().rev().find(|e| is_turn_end(e)).and_then(|e| str_at(e, "/trace_id"))
}

/// Folds one turn's events (those after the customer's message) into an [`AgentTurn`], in the
/// order they happened; journey nodes are attributed with `index`.
pub fn turn_from_events(events: &[Value], index: &JourneyStateIndex) -> Result<AgentTurn, AgentError> {
    let trace = turn_trace(events);
    let of_turn = |e: &&Value| trace.is_none() || str_at(e, "/trace_id").is_none_or(|t| Some(t) == trace);
    let mut turn = AgentTurn::default();
    let mut tools_called = Vec::new();
    let mut any_status = false;
    let mut ready: Option<&Value> = None;
    for event in events.iter().filter(of_turn) {
        match str_at(event, "/kind").unwrap_or_default() {
            "message" if is_agent_message(event) => {
                let text = str_at(event, "/data/message").filter(|t| !t.is_empty()).map(String::from).or_else(|| {
                    event
                        .pointer("/data/chunks")
                        .and_then(Value::as_array)
                        .map(|chunks| chunks.iter().filter_map(Value::as_str).collect())
                });
                let preamble = event
                    .pointer("/data/tags")
                    .and_then(Value::as_array)
                    .is_some_and(|tags| tags.iter().any(|t| t.as_str() == Some(PREAMBLE_TAG)));
                match text.filter(|t| !t.is_empty()) {
                    Some(text) if preamble => turn.push_preamble(text),
                    Some(text) => turn.push_message(text),
                    None => {}
                }
            }
            "tool" => {
                for entry in event.pointer("/data/tool_calls").and_then(Value::as_array).into_iter().flatten() {
                    let call = ToolCallRecord::from_parlant(entry);
                    tools_called.push(ToolCalled { tool: call.tool_id(), arguments: call.arguments.clone() });
                    turn.push_tool_call(call);
                }
            }
            "status" => {
                any_status = true;
                if is_error_status(event) {
                    let why = event
                        .pointer("/data/data/exception")
                        .map(|v| v.as_str().map(String::from).unwrap_or_else(|| v.to_string()));
                    return Err(AgentError::Reported(why.unwrap_or_else(|| "error status".into())));
                }
                if is_turn_end(event) {
                    ready = Some(event);
                }
            }
            _ => {}
        }
    }
    if any_status {
        let mut seen = ready
            .and_then(|e| e.pointer("/data/data"))
            .map(|data| observations_from_ready(data, index))
            .unwrap_or_default();
        seen.tools_called = tools_called;
        turn.observations = Some(seen);
    }
    Ok(turn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(offset: u64, kind: &str, source: &str, trace: &str, data: Value) -> Value {
        json!({"id": format!("e{offset}"), "offset": offset, "kind": kind, "source": source,
            "trace_id": trace, "correlation_id": trace, "data": data, "metadata": {}, "deleted": false})
    }

    #[test]
    fn parlant_node_ids_are_attributed_through_the_definition_and_the_active_journeys() {
        let mut index = JourneyStateIndex::default();
        index.add("weather", "ask_city");
        index.add("weather", "show");
        index.add("taxi", "show");
        let data = json!({"stage": "completed",
            "matched_guidelines": [{"id": "greet"}, {"id": "journey_node:ask_city:e1"}, {"id": "journey_node:Zq8Lm2Pk0x:e9"}],
            "matched_journeys": [{"id": "weather"}, {"id": "billing"}],
            "matched_journey_states": [{"id": "ask_city"}, {"id": "show"}, {"id": "Zq8Lm2Pk0x"}, {"id": "weather.end"}]});
        let seen = observations_from_ready(&data, &index);
        assert_eq!(seen.guidelines_matched, ["greet"]);
        assert_eq!(seen.journeys_entered, ["weather", "billing"]);
        let states: Vec<(&str, &str, Option<&str>)> =
            seen.journey_states.iter().map(|s| (s.journey.as_str(), s.state.as_str(), s.edge.as_deref())).collect();
        // `show` exists in two journeys; only `weather` is active. `weather.end` is Guidepost's form.
        assert_eq!(states, [("weather", "ask_city", Some("e1")), ("weather", "show", None), ("weather", "end", None)]);
        assert_eq!(seen.journeys_completed, ["weather"]);
        assert_eq!(
            seen.unattributed_journey_nodes,
            [UnattributedJourneyNode {
                node: "Zq8Lm2Pk0x".into(),
                edge: Some("e9".into()),
                candidates: vec!["weather".into(), "billing".into()]
            }]
        );
    }

    #[test]
    fn a_turn_keeps_its_order_its_preamble_and_only_its_own_trace() {
        let events = [
            event(1, "status", "ai_agent", "old", json!({"status": "ready", "data": {}})),
            event(2, "message", "ai_agent", "old", json!({"message": "stale", "participant": {}})),
            event(3, "status", "ai_agent", "t", json!({"status": "acknowledged", "data": {}})),
            event(
                4,
                "message",
                "ai_agent",
                "t",
                json!({"message": "One moment.", "participant": {}, "tags": [PREAMBLE_TAG]}),
            ),
            event(
                5,
                "tool",
                "system",
                "t",
                json!({"tool_calls": [{"tool_id": "svc:lookup", "arguments": {"q": 1},
                "result": {"data": {"n": 2}, "metadata": {}, "control": {}, "canned_responses": [], "canned_response_fields": {}}}]}),
            ),
            event(
                6,
                "message",
                "ai_agent",
                "t",
                json!({"message": "", "chunks": ["Two ", "found.", null], "participant": {}}),
            ),
            event(
                7,
                "status",
                "ai_agent",
                "t",
                json!({"status": "ready", "data": {"stage": "completed",
                "matched_guidelines": [], "matched_journeys": [], "matched_journey_states": []}}),
            ),
        ];
        let turn = turn_from_events(&events, &JourneyStateIndex::default()).unwrap();
        let kinds: Vec<String> = turn
            .items
            .iter()
            .map(|i| match i {
                crate::agents::TurnItem::Message { text } => format!("message {text}"),
                crate::agents::TurnItem::Preamble { text } => format!("preamble {text}"),
                crate::agents::TurnItem::ToolCall(c) => format!("tool {} {}", c.tool_id(), c.result),
            })
            .collect();
        assert_eq!(kinds, ["preamble One moment.", "tool svc:lookup {\"n\":2}", "message Two found."]);
        assert_eq!(turn.observations.unwrap().tools_called[0].tool, "svc:lookup");
    }

    #[test]
    fn an_error_after_the_completed_ready_fails_the_turn() {
        let events = [
            event(1, "status", "ai_agent", "t", json!({"status": "ready", "data": {"stage": "completed"}})),
            event(2, "status", "ai_agent", "t", json!({"status": "error", "data": {"exception": "KeyError"}})),
        ];
        assert_eq!(
            turn_from_events(&events, &JourneyStateIndex::default()),
            Err(AgentError::Reported("KeyError".into()))
        );
    }
}
