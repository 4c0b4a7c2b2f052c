//! Tools the agent can call, and the services that provide them.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A tool's identity: the service that provides it and its name there, written
/// `service:name` on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ToolId {
    /// Name of the providing service.
    pub service: String,
    /// Name of the tool within the service.
    pub name: String,
}

impl ToolId {
    /// Creates a tool id.
    pub fn new(service: impl Into<String>, name: impl Into<String>) -> Self {
        Self { service: service.into(), name: name.into() }
    }

    /// Parses `service:name`.
    pub fn parse(text: &str) -> Option<Self> {
        let (service, name) = text.split_once(':')?;
        (!service.is_empty() && !name.is_empty() && !name.contains(':')).then(|| Self::new(service, name))
    }
}

impl fmt::Display for ToolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.service, self.name)
    }
}

/// The type of a tool parameter. Values are validated against it before any call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ParameterType {
    /// Text.
    #[default]
    String,
    /// Whole number.
    Integer,
    /// Any number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// Calendar date, `YYYY-MM-DD`.
    Date,
    /// RFC 3339 timestamp.
    Datetime,
    /// Duration such as `90s`, `15m`, `2h`, `1d`.
    Timedelta,
    /// A list of `items`.
    Array,
    /// A UUID.
    Uuid,
    /// A file-system-like path.
    Path,
}

/// Where the value of a parameter may come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ParameterSource {
    /// Anywhere in the context.
    #[default]
    Any,
    /// Only from what the customer said.
    Customer,
    /// Only from context (variables, tool results), never asked from the customer.
    Context,
}

/// Whether a tool is decided alone or together with related tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// Decided alone, seeing no other candidate tools.
    None,
    /// Decided together with tools it has an `overlap` relationship with.
    #[default]
    Auto,
    /// Always decided with the full tool context.
    Always,
}

/// One parameter of a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolParameter {
    /// Parameter name.
    pub name: String,
    /// Value type.
    pub kind: ParameterType,
    /// Item type of an `array` parameter.
    pub items: Option<ParameterType>,
    /// What the parameter means.
    pub description: Option<String>,
    /// Allowed values, if restricted.
    pub allowed: Vec<serde_json::Value>,
    /// Whether the tool cannot run without it.
    pub required: bool,
    /// Value used when none is given.
    pub default: Option<serde_json::Value>,
    /// Where the value may come from.
    pub source: ParameterSource,
    /// Hidden parameters are never asked from the customer nor reported as missing.
    pub hidden: bool,
    /// Example values.
    pub examples: Vec<serde_json::Value>,
    /// Missing parameters with the lowest precedence are asked for first.
    pub precedence: Option<i32>,
    /// Name shown to the customer when asking for the value.
    pub display_name: Option<String>,
    /// Why the value matters, shown when asking for it.
    pub significance: Option<String>,
}

/// One row of a fixture table: arguments that match and the outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixtureCase {
    /// Argument values to match; a list value matches any of its elements.
    pub args: IndexMap<String, serde_json::Value>,
    /// What the call returns.
    pub outcome: FixtureOutcome,
}

/// The result of a fixture call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FixtureOutcome {
    /// The tool succeeds with this data.
    Result(serde_json::Value),
    /// The tool fails with this message.
    Error(String),
}

/// A table of inputs to results, for demos and tests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fixture {
    /// Rows, tried in order.
    pub cases: Vec<FixtureCase>,
    /// Outcome when no row matches.
    pub otherwise: Option<FixtureOutcome>,
}

impl Fixture {
    /// The outcome for `args`: the first case whose every listed argument matches.
    ///
    /// Strings compare case-insensitively and with surrounding whitespace trimmed, so
    /// `"beijing "` matches `"Beijing"`.
    pub fn outcome_for(&self, args: &IndexMap<String, serde_json::Value>) -> Option<&FixtureOutcome> {
        self.cases
            .iter()
            .find(|case| {
                case.args
                    .iter()
                    .all(|(name, expected)| args.get(name).is_some_and(|given| fixture_value_matches(expected, given)))
            })
            .map(|case| &case.outcome)
            .or(self.otherwise.as_ref())
    }
}

fn fixture_value_matches(expected: &serde_json::Value, given: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (expected, given) {
        (Value::Array(options), _) => options.iter().any(|o| fixture_value_matches(o, given)),
        (Value::String(a), Value::String(b)) => a.trim().to_lowercase() == b.trim().to_lowercase(),
        (Value::String(a), Value::Number(n)) => a.trim() == n.to_string(),
        (Value::Number(a), Value::String(b)) => a.to_string() == b.trim(),
        _ => expected == given,
    }
}

/// What sending a call again does, which decides whether a call whose outcome was lost (its
/// process died while it ran) may be sent again when its turn runs again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Idempotency {
    /// Unknown: a repeat may act twice. A consequential call whose outcome was lost is not
    /// sent again; the customer is told its outcome is being checked.
    #[default]
    Unknown,
    /// The service performs a call once per idempotency key and answers a repeat of the key
    /// with the first call's outcome (the key is sent as `Idempotency-Key`, in the MCP
    /// request's `_meta`, or in a native tool's context).
    Keyed,
    /// Sending the call again with the same arguments has no further effect (it only reads,
    /// or sets a state to a value).
    Repeatable,
}

impl Idempotency {
    /// Whether a call whose outcome was lost may be sent again.
    pub fn allows_resending(self) -> bool {
        !matches!(self, Self::Unknown)
    }
}

/// A tool the agent may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Service and name.
    pub id: ToolId,
    /// What the tool does; the model reads this when deciding whether to call it.
    pub description: Option<String>,
    /// Parameters in declaration order.
    pub parameters: Vec<ToolParameter>,
    /// Consequential tools (payments, cancellations) get the most careful call inference,
    /// and a call whose outcome was lost is sent again only when `idempotency` allows it.
    pub consequential: bool,
    /// What sending a call of it again does.
    #[serde(default)]
    pub idempotency: Idempotency,
    /// How the tool is batched with others when deciding calls.
    pub overlap: Overlap,
    /// Fixture table, for tools served by the built-in fixture service.
    pub fixture: Option<Fixture>,
}

/// How a tool service is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ServiceKind {
    /// Tables in the definition file (the built-in `fixtures` service).
    Fixture,
    /// Rust async functions registered through the builder API.
    Native,
    /// HTTP endpoints described by an OpenAPI document.
    Openapi,
    /// A Model Context Protocol server (stdio command or streamable HTTP URL).
    Mcp,
    /// A server speaking the Parlant plugin tool-service protocol.
    Parlant,
}

/// A tool service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolService {
    /// Service name, the first part of its tools' ids.
    pub name: String,
    /// How it is reached.
    pub kind: ServiceKind,
    /// Base URL (openapi, mcp over HTTP, parlant).
    pub url: Option<String>,
    /// OpenAPI document location (path or URL).
    pub spec: Option<String>,
    /// Command line of a stdio MCP server.
    pub command: Vec<String>,
    /// Environment for a stdio MCP server.
    pub env: IndexMap<String, String>,
    /// Per-call timeout in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Whether the service performs a call once per idempotency key (every tool of it is
    /// [`Idempotency::Keyed`]).
    #[serde(default)]
    pub idempotency_keys: bool,
}

/// Name of the built-in service that serves fixture tools.
pub const FIXTURE_SERVICE: &str = "fixtures";
/// Name of the built-in service that serves native Rust tools.
pub const NATIVE_SERVICE: &str = "native";

impl ServiceKind {
    /// Whether the service's tool list is only known at run time (so references to
    /// undeclared tools of it cannot be checked statically).
    pub fn is_dynamic(self) -> bool {
        matches!(self, Self::Openapi | Self::Mcp | Self::Parlant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_ids_parse_and_print() {
        let id = ToolId::parse("weather:get_weather");
        assert_eq!(id, Some(ToolId::new("weather", "get_weather")));
        assert_eq!(ToolId::new("a", "b").to_string(), "a:b");
        assert_eq!(ToolId::parse("nocolon"), None);
        assert_eq!(ToolId::parse(":x"), None);
    }

    #[test]
    fn fixture_matching() {
        let fixture = Fixture {
            cases: vec![FixtureCase {
                args: [("city".to_string(), json!(["北京", "Beijing"]))].into_iter().collect(),
                outcome: FixtureOutcome::Result(json!({"temperature": 15})),
            }],
            otherwise: Some(FixtureOutcome::Error("unknown city".into())),
        };
        let call = |city: &str| {
            let args: IndexMap<String, serde_json::Value> = [("city".to_string(), json!(city))].into_iter().collect();
            fixture.outcome_for(&args).cloned()
        };
        assert_eq!(call(" beijing"), Some(FixtureOutcome::Result(json!({"temperature": 15}))));
        assert_eq!(call("北京"), Some(FixtureOutcome::Result(json!({"temperature": 15}))));
        assert_eq!(call("火星"), Some(FixtureOutcome::Error("unknown city".into())));
    }
}
