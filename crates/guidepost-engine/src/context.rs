//! What the matcher looks at: the definition, the conversation, the state left by the
//! previous turn, and tool results staged earlier in this turn.

use guidepost_core::{AgentState, Event, EventKind, EventSource, ToolId};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use tokio::sync::OnceCell;

/// A tool call made earlier in this turn whose result the matcher should see.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagedToolResult {
    /// The tool that ran.
    pub tool: ToolId,
    /// The arguments it ran with.
    pub arguments: serde_json::Value,
    /// What it returned (an error is a value too, e.g. `{"error": "..."}`).
    pub result: serde_json::Value,
}

/// One message of the conversation as the prompts show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryMessage {
    /// `customer`, `agent` or `human_agent`.
    pub speaker: String,
    /// The text.
    pub text: String,
}

/// Everything one matching pass reads.
#[derive(Debug, Default, Clone)]
pub struct MatchingContext {
    /// Events of the session so far, oldest first (the current customer message included).
    pub events: Vec<Event>,
    /// The agent state written at the end of the previous turn: applied guidelines and
    /// journey paths.
    pub previous_state: AgentState,
    /// Tool results staged earlier in this turn (by the preparation loop).
    pub staged_tool_results: Vec<StagedToolResult>,
    /// Context variable values visible to the agent, by name.
    pub variables: IndexMap<String, serde_json::Value>,
    /// The customer's display name, when known.
    pub customer_name: Option<String>,
    /// A summary of messages older than the history window, when the caller has one.
    pub history_summary: Option<String>,
    /// The conversation's embedding, computed at most once per turn.
    pub(crate) conversation_embedding: OnceCell<Vec<f32>>,
}

/// A message event as prompts show it: `None` for other events, deleted ones, messages no
/// one in the conversation said (the customer UI's, the system's) and messages without text.
pub(crate) fn history_message(e: &Event) -> Option<HistoryMessage> {
    if e.kind != EventKind::Message || e.deleted {
        return None;
    }
    let speaker = match e.source {
        EventSource::Customer => crate::prompt::CUSTOMER_SPEAKER,
        EventSource::AiAgent | EventSource::HumanAgentOnBehalfOfAiAgent => "agent",
        EventSource::HumanAgent => "human_agent",
        EventSource::CustomerUi | EventSource::System => return None,
    };
    let text = e.data.get("message").and_then(|m| m.as_str())?;
    Some(HistoryMessage { speaker: speaker.to_string(), text: text.to_string() })
}

impl MatchingContext {
    /// A context over `events` with the previous turn's `state`.
    pub fn new(events: Vec<Event>, previous_state: AgentState) -> Self {
        Self { events, previous_state, ..Self::default() }
    }

    /// Adds staged tool results (builder style).
    pub fn with_tool_results(mut self, results: Vec<StagedToolResult>) -> Self {
        self.staged_tool_results = results;
        self
    }

    /// The messages of the conversation (customer, agent, human agent), oldest first.
    pub fn messages(&self) -> Vec<HistoryMessage> {
        self.events.iter().filter_map(history_message).collect()
    }

    /// The last customer message, or `""`.
    pub fn last_customer_message(&self) -> String {
        self.messages()
            .into_iter()
            .rev()
            .find(|m| m.speaker == crate::prompt::CUSTOMER_SPEAKER)
            .map(|m| m.text)
            .unwrap_or_default()
    }

    /// Tools that ran in this turn.
    pub fn tools_ran(&self) -> Vec<ToolId> {
        let mut out: Vec<ToolId> = Vec::new();
        for r in &self.staged_tool_results {
            if !out.contains(&r.tool) {
                out.push(r.tool.clone());
            }
        }
        out
    }

    /// Guidelines the agent applied earlier in the session.
    pub fn previously_applied(&self, guideline: &str) -> bool {
        self.previous_state.applied_guideline_ids.iter().any(|g| g == guideline)
    }
}

/// Builds message events for tests, examples and benchmarks.
pub mod events {
    use chrono::{DateTime, Utc};
    use guidepost_core::{Event, EventKind, EventSource};
    use indexmap::IndexMap;

    /// A message event from `source` at `offset`.
    pub fn message(source: EventSource, offset: u64, text: &str) -> Event {
        Event {
            id: format!("evt_{offset}"),
            source,
            kind: EventKind::Message,
            offset,
            creation_utc: DateTime::<Utc>::UNIX_EPOCH,
            trace_id: String::new(),
            data: serde_json::json!({ "message": text }),
            metadata: IndexMap::new(),
            deleted: false,
        }
    }

    /// A tool event at `offset` with one call of `tool` (`service:name`) that returned `data`.
    pub fn tool(offset: u64, tool: &str, arguments: serde_json::Value, data: serde_json::Value) -> Event {
        Event {
            kind: EventKind::Tool,
            source: EventSource::AiAgent,
            data: serde_json::json!({"tool_calls": [{"tool_id": tool, "arguments": arguments, "result": {"data": data, "metadata": {}, "control": {}}}]}),
            ..message(EventSource::AiAgent, offset, "")
        }
    }

    /// A conversation alternating customer and agent messages, starting with the customer.
    pub fn conversation(texts: &[&str]) -> Vec<Event> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let source = if i % 2 == 0 { EventSource::Customer } else { EventSource::AiAgent };
                message(source, i as u64, t)
            })
            .collect()
    }
}
