//! What a tool call returns: a Parlant-compatible [`ToolResult`] on success, a
//! [`ToolOutcome::Error`] otherwise, and the [`ToolCallRecord`] the registry hands back.

use std::fmt;
use std::time::Duration;

use guidepost_core::tool::ToolId;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::context::ToolEmission;

/// Who drives the session after the turn, as a tool may request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlMode {
    /// The agent answers on its own.
    Auto,
    /// A human takes over.
    Manual,
}

/// How long a tool result stays in context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifespan {
    /// Only the current response sees the result; it is not stored in the session.
    Response,
    /// The result is stored in the session (the default).
    Session,
}

/// Session control requested by a tool (`result.control` on the wire).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolControl {
    /// Switch the session mode after the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ControlMode>,
    /// How long the result stays in context; absent means [`Lifespan::Session`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifespan: Option<Lifespan>,
}

/// A guideline a tool adds for the current response only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransientGuideline {
    /// What the agent should do.
    pub action: String,
    /// When it applies; absent means always (for this response).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// Priority relative to other guidelines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// How critical the guideline is (`low`, `medium`, `high`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criticality: Option<String>,
    /// Free-form description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The result of a successful tool call, serialized exactly like Parlant's `ToolResult`
/// (`{"data", "metadata", "control", "canned_responses", "canned_response_fields",
/// "guidelines"}`). Deserialization is lenient: every field but `data` may be missing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// What the model sees.
    #[serde(default)]
    pub data: Value,
    /// Data for frontends only; the model does not see it.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Session control requested by the tool.
    #[serde(default)]
    pub control: ToolControl,
    /// Extra canned-response templates for this response.
    #[serde(default)]
    pub canned_responses: Vec<String>,
    /// Fields available to canned-response templates.
    #[serde(default)]
    pub canned_response_fields: Map<String, Value>,
    /// Transient guidelines for this response.
    #[serde(default)]
    pub guidelines: Vec<TransientGuideline>,
}

impl ToolResult {
    /// A result carrying only `data`.
    pub fn new(data: impl Into<Value>) -> Self {
        Self { data: data.into(), ..Self::default() }
    }
}

impl From<Value> for ToolResult {
    fn from(data: Value) -> Self {
        Self::new(data)
    }
}

/// What went wrong in a failed call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolErrorKind {
    /// The arguments did not fit the tool's parameters; the tool was not called.
    InvalidArguments {
        /// Every problem found.
        problems: Vec<ArgumentProblem>,
    },
    /// The call did not finish in time.
    Timeout {
        /// The limit that was hit, in milliseconds.
        after_ms: u64,
    },
    /// The tool ran and reported a failure (error fixture, HTTP error status, MCP
    /// `isError`, a plugin `error` object, ...).
    Failed,
    /// The tool's service failed to give an answer: an HTTP error status of its own (5xx,
    /// 401, 403, 407, 408, 429: it is down, overloaded or refuses Guidepost's credentials), a
    /// result over [`Limit::ToolResultSize`](guidepost_core::limits::Limit::ToolResultSize) or
    /// one that does not decode, a connection that broke. Unlike [`Self::Failed`], the reply
    /// has no fact to give: the lookup was lost.
    ServiceError,
    /// The tool's code panicked.
    Panicked,
    /// The tool or its service could not be reached or is not registered.
    Unavailable,
    /// An earlier attempt of the turn sent the call and its answer was lost; it was not
    /// sent again because its tool cannot tell a repeat from a new call. Its outcome is
    /// being checked.
    Unconfirmed,
}

impl ToolErrorKind {
    /// A short stable name: `invalid_arguments`, `timeout`, `failed`, `service_error`,
    /// `panicked`, `unavailable`, `unconfirmed`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::InvalidArguments { .. } => "invalid_arguments",
            Self::Timeout { .. } => "timeout",
            Self::Failed => "failed",
            Self::ServiceError => "service_error",
            Self::Panicked => "panicked",
            Self::Unavailable => "unavailable",
            Self::Unconfirmed => "unconfirmed",
        }
    }
}

/// Why one argument was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// A required parameter has no value.
    Missing,
    /// The value does not fit the parameter's type or allowed values.
    Invalid,
    /// The tool has no parameter of that name.
    Unknown,
}

/// One rejected argument.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArgumentProblem {
    /// Parameter name.
    pub parameter: String,
    /// What kind of problem.
    pub problem: ProblemKind,
    /// Human-readable explanation.
    pub message: String,
    /// The rejected value, for invalid arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Whether the parameter is hidden (never to be asked from the customer).
    #[serde(default)]
    pub hidden: bool,
}

impl fmt::Display for ArgumentProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.parameter, self.message)
    }
}

/// The outcome of one tool call. A failure is an ordinary value the agent can talk about,
/// never an error that fails the turn.
// Outcomes are produced once per call and moved, not stored in bulk; boxing the result
// would only make matching on them clumsier.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// The tool succeeded.
    Ok(ToolResult),
    /// The tool failed, or was not called.
    Error {
        /// What happened, naming the tool and, where relevant, the parameter or HTTP status.
        message: String,
        /// The kind of failure.
        kind: ToolErrorKind,
    },
}

impl ToolOutcome {
    /// A [`ToolErrorKind::Failed`] outcome.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Error { message: message.into(), kind: ToolErrorKind::Failed }
    }

    /// A [`ToolErrorKind::ServiceError`] outcome.
    pub fn service_error(message: impl Into<String>) -> Self {
        Self::Error { message: message.into(), kind: ToolErrorKind::ServiceError }
    }

    /// The outcome of an HTTP error `status`: the service's own failure
    /// ([`ToolErrorKind::ServiceError`]) for 5xx and for 401, 403, 407, 408 and 429 (down,
    /// overloaded, or refusing the credentials it was given), the tool's answer
    /// ([`ToolErrorKind::Failed`]: not found, invalid, conflict, ...) otherwise.
    pub fn http_error(status: u16, message: impl Into<String>) -> Self {
        if status >= 500 || matches!(status, 401 | 403 | 407 | 408 | 429) {
            Self::service_error(message)
        } else {
            Self::failed(message)
        }
    }

    /// A [`ToolErrorKind::Unavailable`] outcome.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::Error { message: message.into(), kind: ToolErrorKind::Unavailable }
    }

    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        matches!(self, Self::Ok(_))
    }

    /// The error kind, for failed calls.
    pub fn error_kind(&self) -> Option<&ToolErrorKind> {
        match self {
            Self::Ok(_) => None,
            Self::Error { kind, .. } => Some(kind),
        }
    }

    /// The result as the model and the session see it. A failure becomes
    /// `{"data": "Tool call error: <message>", "metadata": {"error_details": ...,
    /// "error_kind": ...}}`, the shape Parlant records for failed calls (with the message
    /// added to `data` so the agent can explain what went wrong).
    pub fn to_result(&self, tool: &ToolId) -> ToolResult {
        match self {
            Self::Ok(result) => result.clone(),
            Self::Error { message, kind } => {
                let mut metadata = Map::new();
                metadata.insert("error_details".into(), json!(format!("Tool error (tool='{tool}'): {message}")));
                metadata.insert("error_kind".into(), json!(kind.name()));
                if let ToolErrorKind::InvalidArguments { problems } = kind {
                    metadata.insert("invalid_arguments".into(), serde_json::to_value(problems).unwrap_or(Value::Null));
                }
                ToolResult { data: json!(format!("Tool call error: {message}")), metadata, ..ToolResult::default() }
            }
        }
    }
}

/// Everything the registry knows about one finished call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRecord {
    /// The tool called.
    pub tool: ToolId,
    /// The arguments after validation (coerced, defaults filled); the raw arguments when
    /// validation failed.
    pub arguments: Map<String, Value>,
    /// What happened.
    pub outcome: ToolOutcome,
    /// Messages, statuses and custom events the tool emitted while running, in order.
    pub emissions: Vec<ToolEmission>,
    /// Wall-clock time of the call.
    pub duration: Duration,
}

impl ToolCallRecord {
    /// The result as recorded in the session's `tool` event (see [`ToolOutcome::to_result`]).
    pub fn result(&self) -> ToolResult {
        self.outcome.to_result(&self.tool)
    }

    /// The `{"tool_id", "arguments", "result"}` entry of a Parlant `tool` event.
    pub fn to_event_entry(&self) -> Value {
        json!({
            "tool_id": self.tool.to_string(),
            "arguments": self.arguments,
            "result": serde_json::to_value(self.result()).unwrap_or(Value::Null),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn results_round_trip_in_parlant_shape() {
        let wire = json!({"data":{"order_number":"12345","status":"shipped"},"metadata":{"carrier":"toy-post"},
            "control":{"lifespan":"session"},"canned_responses":[],"canned_response_fields":{},"guidelines":[]});
        let result: ToolResult = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(result.control.lifespan, Some(Lifespan::Session));
        assert_eq!(serde_json::to_value(&result).unwrap(), wire);
    }

    #[test]
    fn lenient_results_fill_missing_fields() {
        let result: ToolResult =
            serde_json::from_value(json!({"data": 1, "guidelines": [{"action": "say hi"}]})).unwrap();
        assert_eq!(result.data, json!(1));
        assert_eq!(result.guidelines[0].action, "say hi");
        assert!(serde_json::from_value::<ToolResult>(json!({"data": 1, "control": {"mode": "weird"}})).is_err());
    }

    #[test]
    fn errors_render_for_the_model() {
        let outcome = ToolOutcome::failed("HTTP 500 from GET /x");
        let result = outcome.to_result(&ToolId::new("api", "x"));
        assert_eq!(result.data, json!("Tool call error: HTTP 500 from GET /x"));
        assert_eq!(result.metadata["error_details"], json!("Tool error (tool='api:x'): HTTP 500 from GET /x"));
        assert_eq!(result.metadata["error_kind"], json!("failed"));
    }
}
