//! The case format: a YAML file of labelled decisions about one agent or several.
//!
//! ```yaml
//! agent: ../agents/weather.yaml          # relative to this file
//! cases:
//!   - id: city-in-the-opening
//!     description: The opening message names the city; the journey skips asking for it.
//!     conversation:                       # oldest first; the last customer message is decided on
//!       - customer: 北京明天天气怎么样？
//!     state:                              # the agent state before that message (optional)
//!       applied: [greet]
//!       journeys: {weather_lookup: [initial, ask_city]}
//!     variables: {tier: gold}             # context variable values (optional)
//!     expect:
//!       guidelines: {greet: false}        # guideline id: applies or not
//!       journeys: {weather_lookup: get_weather}   # state id, completed, exited or not_started
//!       tools: {get_weather: {location: 北京}}    # called with at least these arguments; false: not called
//! ```
//!
//! `expect` also takes `relationships` (like `guidelines`, for cases decided by relational
//! resolution: priorities, dependencies, entailment; `journey:<id>` for whether a journey stays
//! active) and `clarification` (the guidelines or `journey:<id>` a clarifying question offers;
//! `[]` for no question).
//!
//! More situations:
//! - **Tool calls of this turn**: `tool` lines after the last customer message ran in this turn,
//!   after that message (a journey standing at a tool step whose tool just ran, a guideline that
//!   a result makes true). The case runs as a turn does: a first pass on the message, then a pass
//!   with those results; tool decisions are about what is called next.
//! - **What matched before relational resolution**: `matched: [ids]` (guidelines, and
//!   `journey:<id>` for journeys active then) decides the case's `relationships` by relational
//!   resolution alone, without a model.
//! - **The agent's description**: `agent_description` gives the agent the description its
//!   checks read as its identity ("we only sell kettles"), in place of the definition's.
//! - **Several agents in one file**: `agents: {name: path, ...}` instead of `agent`, and each
//!   case names its own with `agent: <name>`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use guidepost_core::AgentDefinition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use crate::load::{CaseError, load};

/// A case file as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaseFile {
    /// The agent definition the cases are about, relative to this file. Give either this or
    /// `agents`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<PathBuf>,
    /// Several agent definitions, by the name a case gives in its `agent`, each relative to
    /// this file.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agents: BTreeMap<String, PathBuf>,
    /// The cases.
    pub cases: Vec<CaseSpec>,
}

/// One labelled decision point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    /// Unique within the suite.
    pub id: String,
    /// What the case checks, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Which of the file's `agents` the case is about (may be left out when it names one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The agent's description for this case, in place of the definition's: the checks read it
    /// as the agent's identity (what it offers, what it does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_description: Option<String>,
    /// The conversation, oldest first. The last customer message is the one decided on; `tool`
    /// lines after it are calls made in this turn, after it.
    pub conversation: Vec<Line>,
    /// The agent state before the last customer message.
    #[serde(default)]
    pub state: StateSpec,
    /// Context variable values, by variable name.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub variables: Map<String, Value>,
    /// What matched before relational resolution (guideline ids, and `journey:<id>` for the
    /// journeys active then, besides those of `state`): the case's `relationships` are then
    /// decided by relational resolution alone, without a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<Vec<String>>,
    /// The right decisions.
    pub expect: Expect,
}

/// One line of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Line {
    /// A customer message.
    Customer(String),
    /// An agent message.
    Agent(String),
    /// A tool the agent called, with its result: in an earlier turn, or (after the last
    /// customer message) in this one.
    Tool(ToolLine),
}

/// A tool call, with its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolLine {
    /// The tool's name.
    pub name: String,
    /// Its arguments.
    #[serde(default)]
    pub arguments: Map<String, Value>,
    /// What it returned (its `data`).
    pub result: Value,
}

/// The agent state before the decided message.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateSpec {
    /// Guidelines whose action was already carried out.
    #[serde(default)]
    pub applied: Vec<String>,
    /// Active journeys and the states they went through, from `initial`.
    #[serde(default)]
    pub journeys: BTreeMap<String, Vec<String>>,
}

/// The right decisions of a case; every entry is one decision.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Whether each guideline applies now.
    #[serde(default)]
    pub guidelines: BTreeMap<String, bool>,
    /// Whether each guideline is followed after relational resolution (priorities,
    /// dependencies, entailment); `journey:<id>`: whether the journey stays active.
    #[serde(default)]
    pub relationships: BTreeMap<String, bool>,
    /// Where each journey stands after the message: a state id, `completed` (it reached its
    /// end), `exited` (it was left before its end) or `not_started`.
    #[serde(default)]
    pub journeys: BTreeMap<String, String>,
    /// The options a clarifying question offers (guideline ids, `journey:<id>`); `[]` when no
    /// question is due.
    #[serde(default)]
    pub clarification: Option<Vec<String>>,
    /// For each tool: `false` when it must not be called, or the arguments it must be called
    /// with (at least these).
    #[serde(default)]
    pub tools: BTreeMap<String, ToolExpect>,
}

/// What a tool-call decision must be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ToolExpect {
    /// `false`: not called (`true`: called, with any arguments).
    Called(bool),
    /// Called with at least these arguments.
    With(Map<String, Value>),
}

impl CaseSpec {
    /// The lines before the decided message and the message itself: the conversation as it
    /// stood when the turn began.
    pub fn before_this_turn(&self) -> &[Line] {
        let last = self.conversation.iter().rposition(|l| matches!(l, Line::Customer(_)));
        &self.conversation[..last.map_or(0, |i| i + 1)]
    }

    /// The tool calls made in this turn, after the decided message.
    pub fn this_turn(&self) -> impl Iterator<Item = &ToolLine> {
        self.conversation[self.before_this_turn().len()..].iter().filter_map(|l| match l {
            Line::Tool(call) => Some(call),
            _ => None,
        })
    }
}

/// A case ready to run.
#[derive(Debug, Clone)]
pub struct Case {
    /// The case as written.
    pub spec: CaseSpec,
    /// The file it came from, and the line of its `id`.
    pub origin: (PathBuf, Option<usize>),
    /// Index of its agent in [`Suite::agents`].
    pub agent: usize,
}

/// Cases and the agents they are about.
#[derive(Debug, Clone, Default)]
pub struct Suite {
    /// The agent definitions, each loaded once (once more for each description a case gives
    /// it).
    pub agents: Vec<(PathBuf, AgentDefinition)>,
    /// The cases, in file order.
    pub cases: Vec<Case>,
}

impl Suite {
    /// Whether any case needs a model: all but those decided by relational resolution alone.
    pub fn needs_models(&self) -> bool {
        self.cases.iter().any(|c| c.spec.matched.is_none())
    }
}

/// The JSON Schema of case files.
pub fn schema() -> Value {
    serde_json::to_value(schemars::schema_for!(CaseFile)).unwrap_or(Value::Null)
}
