//! What a Guidepost engine reports about a turn ([`EngineObservations`]), and expectations on
//! it ([`EngineExpectation`]) used by step satisfaction and checkpoint assertions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A journey state the engine reached in a turn.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
pub struct JourneyStateReached {
    /// The journey.
    pub journey: String,
    /// The state (`{state}` or, inside an inlined sub-journey, `{state}>{child}`).
    pub state: String,
    /// The transition that entered the state, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<String>,
}

impl JourneyStateReached {
    /// Parses a node guideline id of Guidepost's projection, `journey_node:{journey}.{state}[:{edge}]`.
    /// Parlant's own form, `journey_node:{node}[:{edge}]` with an opaque node id, names no
    /// journey: see [`parlant_events`](crate::agents::parlant_events) for how those are attributed.
    ///
    /// ```
    /// use guidepost_sim::observations::JourneyStateReached;
    /// let s = JourneyStateReached::from_node_guideline_id("journey_node:book_taxi.pickup:edge_001").unwrap();
    /// assert_eq!((s.journey.as_str(), s.state.as_str(), s.edge.as_deref()), ("book_taxi", "pickup", Some("edge_001")));
    /// ```
    pub fn from_node_guideline_id(id: &str) -> Option<Self> {
        let rest = id.strip_prefix("journey_node:")?;
        let (node, edge) = match rest.split_once(':') {
            Some((node, edge)) => (node, Some(edge.to_string())),
            None => (rest, None),
        };
        let (journey, state) = node.split_once('.')?;
        Some(Self { journey: journey.to_string(), state: state.to_string(), edge })
    }
}

/// A journey node an agent reported that could not be attributed to one journey: Parlant's
/// node ids are opaque and its API lists no nodes, so a node is attributed through the
/// journeys active in the turn or the agent definition's state ids; when neither settles it,
/// the node is kept here, with the journeys it may belong to, rather than dropped.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
pub struct UnattributedJourneyNode {
    /// The node id as the agent reported it.
    pub node: String,
    /// The transition that entered it, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<String>,
    /// The journeys it may belong to (none known when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<String>,
}

/// A tool call the engine made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCalled {
    /// The tool (`service:name` or `name`).
    pub tool: String,
    /// The arguments.
    #[serde(default)]
    pub arguments: Value,
}

/// What a Guidepost engine reports about one turn. Agents that are not Guidepost engines
/// report none; then satisfaction falls back to the judge.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EngineObservations {
    /// Journeys that became active.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub journeys_entered: Vec<String>,
    /// Journeys that reached `end`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub journeys_completed: Vec<String>,
    /// Journey states reached, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub journey_states: Vec<JourneyStateReached>,
    /// Tools called, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools_called: Vec<ToolCalled>,
    /// Guidelines matched (ids).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guidelines_matched: Vec<String>,
    /// Journey nodes reported without a journey they could be attributed to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unattributed_journey_nodes: Vec<UnattributedJourneyNode>,
    /// Replies replaced by the agent's fallback because every reply the model wrote failed
    /// the engine's reply checks: what the checks found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reply_fallbacks: Vec<String>,
}

impl EngineObservations {
    /// Appends `other` to `self`.
    pub fn absorb(&mut self, other: &EngineObservations) {
        self.journeys_entered.extend(other.journeys_entered.iter().cloned());
        self.journeys_completed.extend(other.journeys_completed.iter().cloned());
        self.journey_states.extend(other.journey_states.iter().cloned());
        self.tools_called.extend(other.tools_called.iter().cloned());
        self.guidelines_matched.extend(other.guidelines_matched.iter().cloned());
        self.unattributed_journey_nodes.extend(other.unattributed_journey_nodes.iter().cloned());
        self.reply_fallbacks.extend(other.reply_fallbacks.iter().cloned());
    }

    /// Whether a tool whose name is `tool` (or ends with `:tool`) was called.
    pub fn tool_was_called(&self, tool: &str) -> bool {
        self.tools_called.iter().any(|t| tool_name_matches(&t.tool, tool))
    }
}

/// Whether the reported tool id `actual` names the tool `wanted` (`service:name` or `name`).
pub fn tool_name_matches(actual: &str, wanted: &str) -> bool {
    actual == wanted || actual.rsplit_once(':').is_some_and(|(_, name)| name == wanted)
}

/// An expectation on engine events, written in scenario files as a one-key map.
///
/// ```yaml
/// - journey_entered: book_taxi
/// - journey_completed: book_taxi
/// - journey_state: { journey: book_taxi, state: confirm }
/// - tool_called: { tool: book_taxi, arguments: { pickup: Main Street 1 } }
/// - guideline_matched: correction
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum EngineExpectation {
    /// The journey became active.
    JourneyEntered(String),
    /// The journey reached `end`.
    JourneyCompleted(String),
    /// The journey reached the state.
    JourneyState {
        /// The journey.
        journey: String,
        /// The state.
        state: String,
    },
    /// The tool was called; when `arguments` is given, every listed argument must be equal
    /// (strings compared case-insensitively, trimmed).
    ToolCalled {
        /// The tool name.
        tool: String,
        /// Arguments that must match (a subset).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments: Option<serde_json::Map<String, Value>>,
    },
    /// The guideline matched.
    GuidelineMatched(String),
    /// The tool was never called.
    ToolNotCalled(String),
}

impl EngineExpectation {
    /// Whether the expectation holds for the observations.
    pub fn holds(&self, seen: &EngineObservations) -> bool {
        match self {
            Self::JourneyEntered(j) => {
                seen.journeys_entered.contains(j) || seen.journey_states.iter().any(|s| &s.journey == j)
            }
            Self::JourneyCompleted(j) => {
                seen.journeys_completed.contains(j)
                    || seen
                        .journey_states
                        .iter()
                        .any(|s| &s.journey == j && s.state == guidepost_core::journey::END_STATE)
            }
            Self::JourneyState { journey, state } => {
                seen.journey_states.iter().any(|s| &s.journey == journey && &s.state == state)
            }
            Self::ToolCalled { tool, arguments } => seen.tools_called.iter().any(|t| {
                tool_name_matches(&t.tool, tool) && arguments.as_ref().is_none_or(|a| arguments_match(a, &t.arguments))
            }),
            Self::GuidelineMatched(g) => seen.guidelines_matched.contains(g),
            Self::ToolNotCalled(tool) => !seen.tool_was_called(tool),
        }
    }

    /// A short description for reports.
    pub fn describe(&self) -> String {
        match self {
            Self::JourneyEntered(j) => format!("journey `{j}` entered"),
            Self::JourneyCompleted(j) => format!("journey `{j}` completed"),
            Self::JourneyState { journey, state } => format!("journey `{journey}` reached state `{state}`"),
            Self::ToolCalled { tool, arguments: None } => format!("tool `{tool}` called"),
            Self::ToolCalled { tool, arguments: Some(a) } => {
                format!("tool `{tool}` called with {}", Value::Object(a.clone()))
            }
            Self::GuidelineMatched(g) => format!("guideline `{g}` matched"),
            Self::ToolNotCalled(t) => format!("tool `{t}` never called"),
        }
    }
}

fn arguments_match(wanted: &serde_json::Map<String, Value>, actual: &Value) -> bool {
    wanted.iter().all(|(key, want)| match (want, actual.get(key)) {
        (Value::String(w), Some(Value::String(a))) => w.trim().eq_ignore_ascii_case(a.trim()),
        (w, Some(a)) => w == a,
        (_, None) => false,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_arguments_are_a_case_insensitive_subset() {
        let seen = EngineObservations {
            tools_called: vec![ToolCalled {
                tool: "fixtures:book_taxi".into(),
                arguments: json!({"pickup": "Main St 1", "time": "now"}),
            }],
            ..Default::default()
        };
        let yes: EngineExpectation =
            crate::scenario::from_yaml("tool_called: { tool: book_taxi, arguments: { pickup: main st 1 } }").unwrap();
        let no: EngineExpectation =
            crate::scenario::from_yaml("tool_called: { tool: book_taxi, arguments: { pickup: Oak } }").unwrap();
        assert!(yes.holds(&seen));
        assert!(!no.holds(&seen));
        assert!(!EngineExpectation::ToolNotCalled("book_taxi".into()).holds(&seen));
    }
}
