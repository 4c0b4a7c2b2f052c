//! What is sent to a chat model and what comes back.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::usage::{Usage, UsageLedger};

/// Which engine decision a call serves. It selects the model (one per task kind may be
/// configured), names recordings, and groups usage.
///
/// Serialized as a snake_case string (`"matching"`, `"journey_selection"` ...); any other
/// string becomes [`TaskKind::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum TaskKind {
    /// Guideline matching (does a guideline's condition hold?).
    Matching,
    /// Journey state selection.
    JourneySelection,
    /// Tool-call inference.
    ToolInference,
    /// Writing the agent's reply.
    Generation,
    /// A simulated customer's message.
    Simulation,
    /// Judging a conversation (simulator assertions).
    Judge,
    /// Embedding texts.
    Embedding,
    /// Anything else, by name.
    Other(String),
}

impl TaskKind {
    /// The task kinds that have their own configuration key, in a stable order.
    pub const NAMED: [TaskKind; 7] = [
        TaskKind::Matching,
        TaskKind::JourneySelection,
        TaskKind::ToolInference,
        TaskKind::Generation,
        TaskKind::Simulation,
        TaskKind::Judge,
        TaskKind::Embedding,
    ];

    /// The snake_case name of the task kind.
    pub fn as_str(&self) -> &str {
        match self {
            TaskKind::Matching => "matching",
            TaskKind::JourneySelection => "journey_selection",
            TaskKind::ToolInference => "tool_inference",
            TaskKind::Generation => "generation",
            TaskKind::Simulation => "simulation",
            TaskKind::Judge => "judge",
            TaskKind::Embedding => "embedding",
            TaskKind::Other(name) => name,
        }
    }
}

impl From<&str> for TaskKind {
    fn from(name: &str) -> Self {
        match name {
            "matching" => TaskKind::Matching,
            "journey_selection" => TaskKind::JourneySelection,
            "tool_inference" => TaskKind::ToolInference,
            "generation" => TaskKind::Generation,
            "simulation" => TaskKind::Simulation,
            "judge" => TaskKind::Judge,
            "embedding" => TaskKind::Embedding,
            other => TaskKind::Other(other.to_string()),
        }
    }
}

impl From<String> for TaskKind {
    fn from(name: String) -> Self {
        TaskKind::from(name.as_str())
    }
}

impl From<TaskKind> for String {
    fn from(task: TaskKind) -> Self {
        task.as_str().to_string()
    }
}

impl fmt::Display for TaskKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions to the model.
    System,
    /// The caller's turn (the prompt).
    User,
    /// The model's earlier answers.
    Assistant,
}

impl Role {
    /// The wire name (`system`, `user`, `assistant`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One message of the conversation sent to the model.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub content: String,
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self { role: Role::System, content: content.into() }
    }
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self { role: Role::User, content: content.into() }
    }
    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self { role: Role::Assistant, content: content.into() }
    }
}

/// The shape of the answer asked for.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputFormat {
    /// Free text.
    #[default]
    Text,
    /// A JSON value conforming to `schema`.
    Json {
        /// A short identifier for the schema (`[A-Za-z0-9_-]`, used as the tool/schema name).
        name: String,
        /// The JSON Schema the answer must conform to.
        schema: Value,
        /// Ask the provider to enforce the schema exactly when it can (OpenAI strict mode).
        strict: bool,
    },
}

/// A request to a chat model.
///
/// Build one with [`ChatRequest::new`] and the chained setters:
///
/// ```
/// use guidepost_llm::{ChatRequest, TaskKind};
/// let req = ChatRequest::new(TaskKind::Generation)
///     .system("You are a helpful agent.")
///     .user("Hello")
///     .temperature(0.0)
///     .max_tokens(200);
/// assert_eq!(req.messages.len(), 2);
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The engine decision this call serves.
    pub task: TaskKind,
    /// The conversation, in order.
    pub messages: Vec<ChatMessage>,
    /// The answer shape.
    #[serde(default)]
    pub output: OutputFormat,
    /// Sampling temperature; provider default when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Upper bound on completion tokens; provider default when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Where to attribute the usage of this call (turn / session). Not part of the request's
    /// identity: ignored by caches and never serialized.
    #[serde(skip)]
    pub ledger: Option<UsageLedger>,
}

impl Default for TaskKind {
    fn default() -> Self {
        TaskKind::Other("unspecified".to_string())
    }
}

impl ChatRequest {
    /// An empty text request for `task`.
    pub fn new(task: TaskKind) -> Self {
        Self { task, ..Self::default() }
    }
    /// Appends a system message.
    pub fn system(mut self, content: impl Into<String>) -> Self {
        self.messages.push(ChatMessage::system(content));
        self
    }
    /// Appends a user message.
    pub fn user(mut self, content: impl Into<String>) -> Self {
        self.messages.push(ChatMessage::user(content));
        self
    }
    /// Appends an assistant message.
    pub fn assistant(mut self, content: impl Into<String>) -> Self {
        self.messages.push(ChatMessage::assistant(content));
        self
    }
    /// Asks for a JSON answer conforming to `schema`, strict when the provider supports it.
    pub fn json_output(mut self, name: impl Into<String>, schema: Value) -> Self {
        self.output = OutputFormat::Json { name: name.into(), schema, strict: true };
        self
    }
    /// Sets the answer shape.
    pub fn output(mut self, output: OutputFormat) -> Self {
        self.output = output;
        self
    }
    /// Sets the temperature.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }
    /// Sets the completion token limit.
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }
    /// Adds a stop sequence.
    pub fn stop(mut self, stop: impl Into<String>) -> Self {
        self.stop.push(stop.into());
        self
    }
    /// Attributes the call's usage to `ledger`.
    pub fn ledger(mut self, ledger: UsageLedger) -> Self {
        self.ledger = Some(ledger);
        self
    }
    /// The content of the last message (usually the prompt), or `""`.
    pub fn last_message(&self) -> &str {
        self.messages.last().map_or("", |m| m.content.as_str())
    }
    /// The content of the last user message, or `""`.
    pub fn last_user_message(&self) -> &str {
        self.messages.iter().rev().find(|m| m.role == Role::User).map_or("", |m| m.content.as_str())
    }
    /// The system messages joined with newlines.
    pub fn system_text(&self) -> String {
        let parts: Vec<&str> =
            self.messages.iter().filter(|m| m.role == Role::System).map(|m| m.content.as_str()).collect();
        parts.join("\n")
    }
    /// The schema name when a JSON answer is asked for.
    pub fn schema_name(&self) -> Option<&str> {
        match &self.output {
            OutputFormat::Json { name, .. } => Some(name),
            OutputFormat::Text => None,
        }
    }
}

/// The answer itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum Output {
    /// A text answer.
    Text(String),
    /// A structured answer, already parsed (and validated by the re-ask middleware when present).
    Json(Value),
}

impl Output {
    /// The text, when this is a text answer.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Output::Text(text) => Some(text),
            Output::Json(_) => None,
        }
    }
    /// The value, when this is a structured answer.
    pub fn as_json(&self) -> Option<&Value> {
        match self {
            Output::Json(value) => Some(value),
            Output::Text(_) => None,
        }
    }
    /// The answer rendered as text (JSON answers are serialized compactly).
    pub fn to_text(&self) -> String {
        match self {
            Output::Text(text) => text.clone(),
            Output::Json(value) => value.to_string(),
        }
    }
}

/// A model's answer with what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The answer.
    pub output: Output,
    /// Tokens, latency and model of the call.
    pub usage: Usage,
    /// Where the model chose among several tokens, and how likely each was, for providers
    /// that report it (local models answering under a grammar). Empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<TokenDecision>,
}

impl ChatResponse {
    /// An answer without token probabilities.
    pub fn new(output: Output, usage: Usage) -> Self {
        Self { output, usage, decisions: Vec::new() }
    }

    /// How likely the model found `first` against `second` where it chose between them: at
    /// the first decision whose options include either (as a whole token, quotes and spaces
    /// aside), `p(first) / (p(first) + p(second))`. An option that is not among the
    /// reported ones counts as 0. `None` when no decision offered either.
    pub fn odds(&self, first: &str, second: &str) -> Option<f32> {
        odds(&self.decisions, first, second)
    }
}

/// [`ChatResponse::odds`] over `decisions`.
pub fn odds(decisions: &[TokenDecision], first: &str, second: &str) -> Option<f32> {
    label_odds(decisions, &[first, second]).map(|p| p[0])
}

/// How likely the model found each of `labels` where it chose among them: at the first
/// decision whose options include any (as a whole token, quotes and spaces aside), each
/// label's probability over the labels' total. A label not among the reported options counts
/// as 0. `None` when no decision offered any. With two labels, [`odds`].
pub fn label_odds(decisions: &[TokenDecision], labels: &[&str]) -> Option<Vec<f32>> {
    decisions.iter().find_map(|decision| {
        let probability = |wanted: &str| {
            decision
                .options
                .iter()
                .filter(|o| o.token.trim_matches(|c: char| c == '"' || c.is_whitespace()) == wanted)
                .map(|o| o.probability)
                .sum::<f32>()
        };
        let p: Vec<f32> = labels.iter().map(|label| probability(label)).collect();
        let total: f32 = p.iter().sum();
        (total > 0.0).then(|| p.iter().map(|x| x / total).collect())
    })
}

/// A point in an answer where the model chose among several tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenDecision {
    /// The byte offset in the answer's text where the chosen token starts.
    pub offset: usize,
    /// The likeliest tokens the model could take there, likeliest first.
    pub options: Vec<TokenOption>,
}

/// One token a model could take, and how likely it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenOption {
    /// The token's text.
    pub token: String,
    /// Its probability among the tokens the model could take there (0 to 1).
    pub probability: f32,
}

/// One item of a streamed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// The next piece of text.
    Delta(String),
    /// The end of the stream, with the full answer and its usage.
    Done(ChatResponse),
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn labels_are_weighed_at_the_first_decision_offering_any() {
        let option = |token: &str, probability| TokenOption { token: token.into(), probability };
        let decisions = [
            TokenDecision { offset: 0, options: vec![option("\"", 1.0)] },
            TokenDecision { offset: 1, options: vec![option("2", 0.6), option("1", 0.2), option("x", 0.2)] },
        ];
        let p = label_odds(&decisions, &["1", "2", "3"]).unwrap();
        assert!((p[0] - 0.25).abs() < 1e-6 && (p[1] - 0.75).abs() < 1e-6 && p[2] == 0.0, "{p:?}");
        assert_eq!(label_odds(&decisions[..1], &["1", "2"]), None);
    }

    #[test]
    fn odds_weigh_two_options_at_the_first_decision_offering_them() {
        let option = |token: &str, probability| TokenOption { token: token.into(), probability };
        let mut response = ChatResponse::new(Output::Json(serde_json::json!("yes")), Usage::new("m"));
        assert_eq!(response.odds("yes", "no"), None, "no decisions reported");
        response.decisions = vec![
            TokenDecision { offset: 0, options: vec![option("{", 0.9), option(" ", 0.1)] },
            TokenDecision { offset: 1, options: vec![option("yes", 0.6), option("no", 0.2), option("y", 0.2)] },
            TokenDecision { offset: 9, options: vec![option("no", 1.0)] },
        ];
        let odds = response.odds("yes", "no").unwrap();
        assert!((odds - 0.75).abs() < 1e-6, "{odds}");
        assert_eq!(response.odds("\"maybe\"", "never"), None);
        let json = serde_json::to_string(&response).unwrap();
        assert_eq!(serde_json::from_str::<ChatResponse>(&json).unwrap(), response);
        // Recordings made before decisions were reported have no such field, and still load.
        let mut without = serde_json::to_value(ChatResponse::new(Output::Text("hi".into()), Usage::new("m"))).unwrap();
        assert!(without.get("decisions").is_none());
        without.as_object_mut().unwrap().remove("decisions");
        assert!(serde_json::from_value::<ChatResponse>(without).unwrap().decisions.is_empty());
    }

    #[test]
    fn task_kind_round_trips_as_snake_case_string() {
        for task in TaskKind::NAMED {
            let json = serde_json::to_string(&task).unwrap();
            assert_eq!(json, format!("\"{}\"", task.as_str()));
            let back: TaskKind = serde_json::from_str(&json).unwrap();
            assert_eq!(back, task);
        }
        let other: TaskKind = serde_json::from_str("\"summary\"").unwrap();
        assert_eq!(other, TaskKind::Other("summary".into()));
    }

    #[test]
    fn request_accessors() {
        let req = ChatRequest::new(TaskKind::Matching)
            .system("sys A")
            .user("first")
            .assistant("reply")
            .user("second")
            .json_output("Checks", serde_json::json!({"type": "object"}));
        assert_eq!(req.last_user_message(), "second");
        assert_eq!(req.system_text(), "sys A");
        assert_eq!(req.schema_name(), Some("Checks"));
    }
}
