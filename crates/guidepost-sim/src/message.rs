//! Conversation messages in the AI SDK `ModelMessage` shape that Tally's files use: a role and
//! either a string or typed parts (`text`, `tool-call`, `tool-result`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageRole {
    /// Instructions.
    System,
    /// The (simulated) customer.
    User,
    /// The agent under test.
    Assistant,
    /// Tool results.
    Tool,
}

/// The output of a tool call, as AI SDK v5 writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "kebab-case")]
pub enum ToolOutput {
    /// A JSON result.
    Json(Value),
    /// A text result.
    Text(String),
    /// A failure described in text.
    ErrorText(String),
    /// A failure described in JSON.
    ErrorJson(Value),
}

/// One part of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ContentPart {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// A tool call made by the agent.
    #[serde(rename_all = "camelCase")]
    ToolCall {
        /// Id pairing the call with its result.
        tool_call_id: String,
        /// The tool's name (without its service).
        tool_name: String,
        /// The arguments.
        input: Value,
        /// `{"guidepost": {"service": …}}` when the agent named the tool's service.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_options: Option<Value>,
    },
    /// The result of a tool call.
    #[serde(rename_all = "camelCase")]
    ToolResult {
        /// Id of the call.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// What it returned.
        output: ToolOutput,
    },
}

/// A message's content: a plain string or a list of parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Typed parts.
    Parts(Vec<ContentPart>),
}

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelMessage {
    /// Who wrote it.
    pub role: MessageRole,
    /// What it says.
    pub content: MessageContent,
    /// AI SDK `providerOptions`: Guidepost's marks live under `guidepost`
    /// (`{"guidepost": {"preamble": true}}` on a preamble).
    #[serde(default, rename = "providerOptions", skip_serializing_if = "Option::is_none")]
    pub provider_options: Option<Value>,
}

impl ModelMessage {
    /// A message of `role` with `content`.
    pub fn new(role: MessageRole, content: MessageContent) -> Self {
        Self { role, content, provider_options: None }
    }

    /// A customer message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(MessageRole::User, MessageContent::Text(text.into()))
    }

    /// An agent text message.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(MessageRole::Assistant, MessageContent::Text(text.into()))
    }

    /// An agent's preamble: a short acknowledgement sent before the reply was ready, marked
    /// `providerOptions.guidepost.preamble` so readers can tell it from the reply.
    pub fn preamble(text: impl Into<String>) -> Self {
        let mut message = Self::assistant(text);
        message.provider_options = Some(serde_json::json!({"guidepost": {"preamble": true}}));
        message
    }

    /// Whether this is a preamble (see [`ModelMessage::preamble`]).
    pub fn is_preamble(&self) -> bool {
        self.provider_options.as_ref().and_then(|o| o.pointer("/guidepost/preamble")).and_then(Value::as_bool)
            == Some(true)
    }

    /// The text of the message (text parts joined with newlines; tool parts left out).
    pub fn text(&self) -> String {
        match &self.content {
            MessageContent::Text(text) => text.clone(),
            MessageContent::Parts(parts) => parts
                .iter()
                .filter_map(|p| match p {
                    ContentPart::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    /// The content rendered for a prompt: text, with tool calls and results as bracketed lines.
    pub fn render(&self) -> String {
        match &self.content {
            MessageContent::Text(text) => text.clone(),
            MessageContent::Parts(parts) => parts
                .iter()
                .map(|p| match p {
                    ContentPart::Text { text } => text.clone(),
                    ContentPart::ToolCall { tool_name, input, .. } => format!("[tool-call:{tool_name}] {input}"),
                    ContentPart::ToolResult { tool_name, output, .. } => {
                        let value = match output {
                            ToolOutput::Json(v) | ToolOutput::ErrorJson(v) => v.to_string(),
                            ToolOutput::Text(t) | ToolOutput::ErrorText(t) => t.clone(),
                        };
                        format!("[tool-result:{tool_name}] {value}")
                    }
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}
