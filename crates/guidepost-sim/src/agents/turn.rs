//! What an agent did in answer to one customer message: [`AgentTurn`], an ordered list of
//! [`TurnItem`]s (messages, preambles, tool calls) that every kind of agent produces, so the
//! artifacts show text, tool calls and results in the order they happened, and a tool call
//! looks the same whichever agent made it ([`ToolCallRecord`]).

use guidepost_llm::Usage;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::message::{ContentPart, MessageContent, MessageRole, ModelMessage, ToolOutput};
use crate::observations::EngineObservations;

/// A tool call the agent made during a turn, with its result, in one form whichever agent made
/// it: the tool's name and service apart, the arguments, the result data the agent saw, and the
/// error when the call failed.
///
/// ```
/// use guidepost_sim::agents::ToolCallRecord;
/// use serde_json::json;
/// // A Parlant `tool` event entry (Guidepost's server and engine write the same shape).
/// let call = ToolCallRecord::from_parlant(&json!({
///     "tool_id": "fixtures:book_taxi",
///     "arguments": {"pickup": "Oak St"},
///     "result": {"data": {"booking_id": "TX-1"}, "metadata": {}, "control": {}, "canned_responses": []}
/// }));
/// assert_eq!((call.name.as_str(), call.service.as_deref()), ("book_taxi", Some("fixtures")));
/// assert_eq!(call.result, json!({"booking_id": "TX-1"}));
/// assert_eq!(call.tool_id(), "fixtures:book_taxi");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// Call id (generated when the agent gives none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The tool's name, without its service (`book_taxi`).
    pub name: String,
    /// The service hosting the tool, when the agent names one (`fixtures` in
    /// `fixtures:book_taxi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// The arguments.
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// The result data the agent saw (Parlant's `result.data`).
    #[serde(default)]
    pub result: Value,
    /// The error, when the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn empty_object() -> Value {
    json!({})
}

impl ToolCallRecord {
    /// A successful call of `tool_id` (`service:name` or `name`).
    pub fn new(tool_id: &str, arguments: Value, result: Value) -> Self {
        let (service, name) = split_tool_id(tool_id);
        Self { id: String::new(), name, service, arguments, result, error: None }
    }

    /// The call as a Parlant `tool` event writes it: `{tool_id, arguments, result}` where
    /// `result` is a ToolResult (`{data, metadata, control, …}`); a failed call has its
    /// reason in `result.metadata.error_details` (Parlant writes `data: "Tool call error"`).
    /// A `result` that is not a ToolResult is taken as the data itself.
    pub fn from_parlant(entry: &Value) -> Self {
        let tool_id = entry.get("tool_id").and_then(Value::as_str).unwrap_or("unknown");
        let arguments = entry.get("arguments").cloned().filter(|a| !a.is_null()).unwrap_or_else(empty_object);
        let result = entry.get("result").cloned().unwrap_or(Value::Null);
        let is_tool_result = result.as_object().is_some_and(|r| r.contains_key("data"));
        let error = result
            .pointer("/metadata/error_details")
            .map(|e| e.as_str().map(String::from).unwrap_or_else(|| e.to_string()));
        let data = if is_tool_result { result.get("data").cloned().unwrap_or(Value::Null) } else { result };
        Self { error, ..Self::new(tool_id, arguments, data) }
    }

    /// `service:name`, or the name alone when the service is unknown.
    pub fn tool_id(&self) -> String {
        match &self.service {
            Some(service) => format!("{service}:{}", self.name),
            None => self.name.clone(),
        }
    }

    /// The same call with `name` split into service and name when it was given as
    /// `service:name` (agents that report tools in one string).
    pub fn normalized(mut self) -> Self {
        if self.service.is_none()
            && let (Some(service), name) = split_tool_id(&self.name)
        {
            self.service = Some(service);
            self.name = name;
        }
        self
    }
}

fn split_tool_id(tool_id: &str) -> (Option<String>, String) {
    match tool_id.split_once(':') {
        Some((service, name)) if !service.is_empty() && !name.is_empty() => {
            (Some(service.to_string()), name.to_string())
        }
        _ => (None, tool_id.to_string()),
    }
}

/// One thing the agent did in a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TurnItem {
    /// A message to the customer.
    Message {
        /// Its text.
        text: String,
    },
    /// A short acknowledgement sent while the reply was being prepared (Parlant tags it
    /// `__preamble__`).
    Preamble {
        /// Its text.
        text: String,
    },
    /// A tool call and its result.
    ToolCall(Box<ToolCallRecord>),
}

/// The agent's answer to one customer message: what it did, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentTurn {
    /// Messages, preambles and tool calls, in the order they happened.
    pub items: Vec<TurnItem>,
    /// Engine state, when the agent reports it (a Guidepost engine, a Parlant server).
    pub observations: Option<EngineObservations>,
    /// Model usage of the agent, when it reports it.
    pub usage: Option<Usage>,
}

impl AgentTurn {
    /// A turn of plain messages.
    pub fn text(messages: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self { items: messages.into_iter().map(|m| TurnItem::Message { text: m.into() }).collect(), ..Self::default() }
    }

    /// Appends a message.
    pub fn push_message(&mut self, text: impl Into<String>) {
        self.items.push(TurnItem::Message { text: text.into() });
    }

    /// Appends a preamble.
    pub fn push_preamble(&mut self, text: impl Into<String>) {
        self.items.push(TurnItem::Preamble { text: text.into() });
    }

    /// Appends a tool call.
    pub fn push_tool_call(&mut self, call: ToolCallRecord) {
        self.items.push(TurnItem::ToolCall(Box::new(call)));
    }

    /// The messages to the customer (preambles left out), in order.
    pub fn messages(&self) -> Vec<&str> {
        self.items
            .iter()
            .filter_map(|i| match i {
                TurnItem::Message { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The preambles, in order.
    pub fn preambles(&self) -> Vec<&str> {
        self.items
            .iter()
            .filter_map(|i| match i {
                TurnItem::Preamble { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCallRecord> {
        self.items.iter().filter_map(|i| match i {
            TurnItem::ToolCall(call) => Some(call.as_ref()),
            _ => None,
        })
    }

    /// The turn as AI SDK messages, in order: a preamble or message is an assistant text
    /// message (a preamble marked with [`ModelMessage::preamble`]); consecutive tool calls are an
    /// assistant message of `tool-call` parts followed by a tool message of their
    /// `tool-result` parts. Calls without an id get `call-<turn>-<n>`.
    pub fn to_model_messages(&self, turn_index: u32) -> Vec<ModelMessage> {
        let mut out = Vec::new();
        let mut calls: Vec<ContentPart> = Vec::new();
        let mut results: Vec<ContentPart> = Vec::new();
        let mut call_number = 0usize;
        let flush = |out: &mut Vec<ModelMessage>, calls: &mut Vec<ContentPart>, results: &mut Vec<ContentPart>| {
            if !calls.is_empty() {
                out.push(ModelMessage::new(MessageRole::Assistant, MessageContent::Parts(std::mem::take(calls))));
                out.push(ModelMessage::new(MessageRole::Tool, MessageContent::Parts(std::mem::take(results))));
            }
        };
        for item in &self.items {
            match item {
                TurnItem::ToolCall(call) => {
                    let id =
                        if call.id.is_empty() { format!("call-{turn_index}-{call_number}") } else { call.id.clone() };
                    call_number += 1;
                    calls.push(ContentPart::ToolCall {
                        tool_call_id: id.clone(),
                        tool_name: call.name.clone(),
                        input: call.arguments.clone(),
                        provider_options: call.service.as_ref().map(|s| json!({"guidepost": {"service": s}})),
                    });
                    results.push(ContentPart::ToolResult {
                        tool_call_id: id,
                        tool_name: call.name.clone(),
                        output: match &call.error {
                            Some(e) => ToolOutput::ErrorText(e.clone()),
                            None => ToolOutput::Json(call.result.clone()),
                        },
                    });
                }
                TurnItem::Message { text } => {
                    flush(&mut out, &mut calls, &mut results);
                    out.push(ModelMessage::assistant(text.clone()));
                }
                TurnItem::Preamble { text } => {
                    flush(&mut out, &mut calls, &mut results);
                    out.push(ModelMessage::preamble(text.clone()));
                }
            }
        }
        flush(&mut out, &mut calls, &mut results);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_messages_keep_the_order_of_the_turn() {
        let mut turn = AgentTurn::default();
        turn.push_preamble("Let me check.");
        turn.push_tool_call(ToolCallRecord::new("fixtures:lookup", json!({"id": 1}), json!({"ok": true})));
        turn.push_tool_call(ToolCallRecord {
            error: Some("timeout".into()),
            ..ToolCallRecord::new("other", json!({}), Value::Null)
        });
        turn.push_message("Found it.");
        let messages = turn.to_model_messages(3);
        let shape: Vec<(MessageRole, bool, String)> =
            messages.iter().map(|m| (m.role, m.is_preamble(), m.render())).collect();
        assert_eq!(
            shape,
            [
                (MessageRole::Assistant, true, "Let me check.".to_string()),
                (MessageRole::Assistant, false, "[tool-call:lookup] {\"id\":1}\n[tool-call:other] {}".to_string()),
                (
                    MessageRole::Tool,
                    false,
                    "[tool-result:lookup] {\"ok\":true}\n[tool-result:other] timeout".to_string()
                ),
                (MessageRole::Assistant, false, "Found it.".to_string()),
            ]
        );
        let json = serde_json::to_value(&messages[1]).unwrap_or_default();
        assert_eq!(json["content"][0]["toolCallId"], "call-3-0");
        assert_eq!(json["content"][0]["providerOptions"], json!({"guidepost": {"service": "fixtures"}}));
        assert!(json["content"][1].get("providerOptions").is_none());
        assert_eq!(turn.messages(), ["Found it."]);
        assert_eq!(turn.preambles(), ["Let me check."]);
    }

    #[test]
    fn parlant_tool_entries_become_one_form() {
        let failed = ToolCallRecord::from_parlant(&json!({"tool_id": "svc:t", "arguments": {"a": 1},
            "result": {"data": "Tool call error", "metadata": {"error_details": "boom"}, "control": {}}}));
        assert_eq!(failed.error.as_deref(), Some("boom"));
        assert_eq!(failed.result, json!("Tool call error"));
        let bare = ToolCallRecord::from_parlant(&json!({"tool_id": "t", "result": {"id": 7}}));
        assert_eq!((bare.service, bare.result, bare.arguments), (None, json!({"id": 7}), json!({})));
        let named = ToolCallRecord { name: "svc:t".into(), ..ToolCallRecord::new("x", json!({}), Value::Null) };
        assert_eq!(named.normalized().tool_id(), "svc:t");
    }
}
