//! The authoring format: what people write in definition files (YAML or JSON).
//!
//! These types are the source of the published JSON Schema. They favour the reader:
//! references by name, shorthands (`next: lookup`, `tool: get_weather`, a parameter given
//! as just its type) and defaults for everything that has a sensible one. Loading resolves
//! them into the [`crate::AgentDefinition`] model; exporting writes the model back in a
//! canonical form of this format.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::agent::{CompositionMode, OutputMode};
use crate::guideline::Criticality;
use crate::relationship::RelationshipKind;
use crate::tool::{Overlap, ParameterSource, ParameterType, ServiceKind};

fn is_false(b: &bool) -> bool {
    !*b
}

/// One definition file. An agent is one file, or a directory whose files together define
/// it (exactly one of them has the `agent` section).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Guidepost agent definition")]
pub struct AgentFile {
    /// Optional JSON Schema reference for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The agent's identity and settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentSection>,
    /// Tags used to scope and group entities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<TagDecl>,
    /// Guidelines (condition + action) and observations (condition only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guidelines: Vec<GuidelineDecl>,
    /// Relationships between guidelines, tags, journeys and tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relationships: Vec<RelationshipDecl>,
    /// Multi-step flows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub journeys: Vec<JourneyDecl>,
    /// Tools the agent may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDecl>,
    /// Services that provide tools (MCP, OpenAPI, Parlant plugin servers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<ServiceDecl>,
    /// Context variables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<VariableDecl>,
    /// Glossary terms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub glossary: Vec<TermDecl>,
    /// Things the agent can do, offered when relevant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<CapabilityDecl>,
    /// Approved reply templates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub canned_responses: Vec<CannedResponseDecl>,
}

/// The agent's identity and settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    /// Stable id; defaults to a slug of the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The agent's name.
    pub name: String,
    /// What the agent is for; the model reads it as the agent's identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Upper bound on preparation iterations per reply (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10))]
    pub max_engine_iterations: Option<u32>,
    /// How replies are composed (default `fluid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composition_mode: Option<CompositionMode>,
    /// Whether replies are streamed (default `block`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_mode: Option<OutputMode>,
    /// Tags of the agent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Preamble settings (off by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preamble: Option<PreambleDecl>,
    /// Reply sent in `canned_strict` mode when no template fits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_match_reply: Option<String>,
    /// The language the agent replies in: a language code such as `zh`, `en` or `pt-BR`, or
    /// `customer` (the default) for the language of the customer's messages. Replies follow
    /// it whatever language the instructions are written in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(customer|[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*)$"))]
    pub language: Option<String>,
    /// Reply sent when every reply the model composed failed the reply checks (it echoed
    /// the customer, spoke in the customer's voice, stated a fact from nowhere or used the
    /// wrong language). Defaults to a short apology in the agent's language.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_reply: Option<String>,
}

/// Preamble settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PreambleDecl {
    /// Send a short acknowledgement while the reply is prepared.
    #[serde(default)]
    pub enabled: bool,
    /// Example acknowledgements that set the tone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

/// A tag: just its name, or an object with a description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum TagDecl {
    /// The tag's name (also its id).
    Name(String),
    /// A tag with details.
    Full(TagDetails),
}

/// A tag with details.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TagDetails {
    /// Name, used in references.
    pub name: String,
    /// Stable id; defaults to the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What the tag groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A guideline, or an observation when `action` is absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GuidelineDecl {
    /// Name used to reference the guideline; also its stable id. Derived from the content
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// When the guideline applies.
    pub condition: String,
    /// What the agent should do. Absent: an observation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Extra context for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `low`, `medium` (default) or `high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criticality: Option<Criticality>,
    /// Numeric priority (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Set `false` to keep the guideline but never match it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Set `false` to never treat the guideline as already applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub track: Option<bool>,
    /// Tags (declared under `tags`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Labels copied onto sessions where the guideline matched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Tools the agent may call when the guideline matches (`name` or `service:name`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub metadata: IndexMap<String, serde_json::Value>,
    /// Composition mode while this guideline is matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composition_mode: Option<CompositionMode>,
    /// Canned responses (by id) tied to this guideline: offered only while it is matched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub canned_responses: Vec<String>,
    /// When this matches, these also apply (entailment).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entails: Vec<String>,
    /// When this and any of these match, only this one stays (priority).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub priority_over: Vec<String>,
    /// Applies only when all of these match too (dependency).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Applies only when at least one of these matches too (one dependency group).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on_any: Vec<String>,
    /// For an observation: the guidelines or journeys the customer may mean; when several
    /// are plausible the agent asks which one (disambiguation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disambiguates: Vec<String>,
    /// Evaluate this guideline again after these tools run (reevaluation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reevaluate_after: Vec<String>,
    /// Customer messages labelled with whether the condition holds for them
    /// (`{message, applies}`): the checks show them to the model beside the condition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<crate::guideline::GuidelineExample>,
}

/// A relationship between two entities. References: a guideline id, `journey:<id>`,
/// `tag:<tag>` (all members), `any-tag:<tag>` (any member), `tool:<name>`; a bare name
/// resolves to the guideline or journey of that id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelationshipDecl {
    /// What the relationship means.
    pub kind: RelationshipKind,
    /// Source reference.
    pub source: String,
    /// Target reference, or several (one relationship each; for `dependency_any`, one
    /// group).
    pub target: OneOrMany,
    /// Group name of a `dependency_any` relationship.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// One string or a list of strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum OneOrMany {
    /// A single value.
    One(String),
    /// Several values.
    Many(Vec<String>),
}

impl OneOrMany {
    /// The values as a list.
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            Self::One(one) => vec![one.clone()],
            Self::Many(many) => many.clone(),
        }
    }
}

/// A journey: a graph of states, entered when one of its conditions holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JourneyDecl {
    /// Stable id, used in references (`journey:<id>`); defaults to a slug of the title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Title, shown to the model.
    pub title: String,
    /// What the journey is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The journey starts when any of these conditions holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<String>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Labels copied onto sessions where the journey is active.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Numeric priority (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Composition mode while the journey is active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composition_mode: Option<CompositionMode>,
    /// Transitions out of the implicit start state: a state id, or a list of transitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<TransitionsDecl>,
    /// The states.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<StateDecl>,
    /// Guidelines that apply only while this journey is active.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guidelines: Vec<GuidelineDecl>,
}

/// Transitions: one unconditional target, or a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum TransitionsDecl {
    /// Go to this state (or `end`) unconditionally.
    To(String),
    /// Several transitions, tried by their conditions.
    List(Vec<TransitionDecl>),
}

/// One transition: a target, or a target with a condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum TransitionDecl {
    /// Go to this state (or `end`) unconditionally.
    To(String),
    /// Go to a state when a condition holds.
    Full(TransitionDetails),
}

/// A transition with details.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransitionDetails {
    /// Target state id, or `end`.
    pub to: String,
    /// Condition under which the transition is taken; absent means unconditionally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// Stable id; defaults to `edge_NNN` in definition order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// A journey state. Its kind is given by exactly one of `chat`, `tool`, `fork` or
/// `journey`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateDecl {
    /// Id, unique within the journey; used by transitions.
    pub id: String,
    /// Chat state: what the agent should say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<String>,
    /// Tool state: the tool (or tools) to call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<OneOrMany>,
    /// Tool state: how to call the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
    /// Fork state: routing only.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fork: bool,
    /// Sub-journey state: run this journey, then continue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journey: Option<String>,
    /// Extra context for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Where to go next: a state id (unconditional) or a list of transitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<TransitionsDecl>,
    /// Canned responses (by id) tied to this state: offered only while it is current.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub canned_responses: Vec<String>,
    /// Composition mode while this state is current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composition_mode: Option<CompositionMode>,
    /// Labels copied onto sessions that reach this state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub metadata: IndexMap<String, serde_json::Value>,
}

/// A tool declaration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolDecl {
    /// Tool name.
    pub name: String,
    /// What it does; the model reads this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Providing service; defaults to `fixtures` for tools with a fixture, else `native`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// Parameters by name: a type name, or an object.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub parameters: IndexMap<String, ParameterDecl>,
    /// Consequential tools (payments, cancellations) get the most careful call inference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consequential: Option<bool>,
    /// Whether the tool performs a call once per idempotency key, answering a repeat with
    /// the first outcome (a native tool reads the key from its context). A consequential
    /// call whose outcome was lost is sent again only to such a tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_keys: Option<bool>,
    /// `none`, `auto` (default) or `always`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<Overlap>,
    /// A table of inputs to results; the tool is then served by the built-in fixture service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixture: Option<FixtureDecl>,
}

/// A parameter: just its type, or an object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ParameterDecl {
    /// Required parameter of this type.
    Type(ParameterType),
    /// Parameter with details.
    Full(Box<ParameterDetails>),
}

/// A parameter with details.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParameterDetails {
    /// Value type (default `string`).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ParameterType>,
    /// Item type of an `array`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<ParameterType>,
    /// What it means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Allowed values.
    #[serde(rename = "enum", default, skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<serde_json::Value>,
    /// Whether the tool cannot run without it (default: true unless a default is given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// Value used when none is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
    /// Where the value may come from: `any` (default), `customer` or `context`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<ParameterSource>,
    /// Never ask the customer for it nor report it missing.
    #[serde(default, skip_serializing_if = "is_false")]
    pub hidden: bool,
    /// Example values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<serde_json::Value>,
    /// Missing parameters with the lowest precedence are asked for first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precedence: Option<i32>,
    /// Name shown to the customer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Why the value matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub significance: Option<String>,
}

/// A fixture table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FixtureDecl {
    /// Rows tried in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cases: Vec<FixtureCaseDecl>,
    /// Outcome when no row matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otherwise: Option<FixtureOutcomeDecl>,
}

/// A fixture row.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FixtureCaseDecl {
    /// Argument values to match; a list matches any of its elements; strings compare
    /// case-insensitively.
    #[serde(default)]
    pub args: IndexMap<String, serde_json::Value>,
    /// Data returned on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// Error message returned instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A fixture outcome: `result` or `error`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FixtureOutcomeDecl {
    /// Data returned on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// Error message returned instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A tool service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServiceDecl {
    /// Service name; tools refer to it.
    pub name: String,
    /// `mcp`, `openapi`, `parlant`, `native` or `fixture`.
    pub kind: ServiceKind,
    /// Base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// OpenAPI document (path or URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<String>,
    /// Command line of a stdio MCP server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Environment of a stdio MCP server.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub env: IndexMap<String, String>,
    /// Per-call timeout in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Whether the service performs a call once per idempotency key (sent as the
    /// `Idempotency-Key` header, or in the MCP request's `_meta`) and answers a repeat with
    /// the first outcome. A consequential call whose outcome was lost is sent again only to
    /// such a service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_keys: Option<bool>,
}

/// A context variable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VariableDecl {
    /// Name, as shown to the model.
    pub name: String,
    /// Stable id; defaults to the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What the value means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Tool that produces the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// How long a tool-produced value stays fresh: a duration (`30s`, `15m`, `1h`, `1d`) or a
    /// cron schedule (`0 * * * *`: until the next full hour after it was set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freshness: Option<String>,
    /// Global default value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// A glossary term.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TermDecl {
    /// The term.
    pub name: String,
    /// Stable id; derived when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What it means.
    pub description: String,
    /// Other words for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub synonyms: Vec<String>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// A capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilityDecl {
    /// Short title.
    pub title: String,
    /// Stable id; derived when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What the agent can do.
    pub description: String,
    /// Phrases that signal a customer wants it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<String>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// An approved reply template.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CannedResponseDecl {
    /// Stable id, used by guidelines and states to refer to it; derived when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The template (Jinja syntax: `Your balance is {{balance}}.`).
    pub template: String,
    /// Declared fields.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<CannedFieldDecl>,
    /// Phrases describing when the template fits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<String>,
    /// Fields that must be available for the template to be used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub field_dependencies: Vec<String>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// A template field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CannedFieldDecl {
    /// Field name.
    pub name: String,
    /// What it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Example values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}
