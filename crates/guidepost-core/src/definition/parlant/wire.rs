//! The JSON a Parlant 3.3 server answers on its REST API, as far as an import reads it.
//! Fields Parlant always sends are still optional here where an older or newer server might
//! leave them out; unknown fields are ignored.

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value;

/// `GET /agents`, `GET /agents/{id}`.
#[derive(Debug, Clone, Deserialize)]
pub struct AgentDto {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// What it is for.
    #[serde(default)]
    pub description: Option<String>,
    /// Preparation iterations per reply.
    #[serde(default)]
    pub max_engine_iterations: Option<u32>,
    /// `fluid`, `canned_fluid`, `composited_canned` or `strict_canned`.
    #[serde(default)]
    pub composition_mode: Option<String>,
    /// `block` or `stream`.
    #[serde(default)]
    pub message_output_mode: Option<String>,
    /// Tag ids.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// `GET /tags`.
#[derive(Debug, Clone, Deserialize)]
pub struct TagDto {
    /// Its id (random, or `agent:<id>` / `journey:<id>` for the built-in ones).
    pub id: String,
    /// Its name.
    pub name: String,
}

/// `GET /guidelines`, and the `guideline` of `GET /guidelines/{id}`.
#[derive(Debug, Clone, Deserialize)]
pub struct GuidelineDto {
    /// Its id.
    pub id: String,
    /// When it applies.
    pub condition: String,
    /// What the agent does; none for an observation.
    #[serde(default)]
    pub action: Option<String>,
    /// Extra context.
    #[serde(default)]
    pub description: Option<String>,
    /// `low`, `medium` or `high`.
    #[serde(default)]
    pub criticality: Option<String>,
    /// Whether it is matched at all.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Tag ids (`agent:<id>`, `journey:<id>` or tags').
    #[serde(default)]
    pub tags: Vec<String>,
    /// Free-form metadata, with the properties Parlant's indexing wrote into it.
    #[serde(default)]
    pub metadata: IndexMap<String, Value>,
    /// Composition mode while it is matched.
    #[serde(default)]
    pub composition_mode: Option<String>,
    /// Whether it is tracked as applied.
    #[serde(default = "yes")]
    pub track: bool,
    /// Labels.
    #[serde(default)]
    pub labels: Vec<String>,
    /// Numeric priority.
    #[serde(default)]
    pub priority: i32,
}

fn yes() -> bool {
    true
}

/// A tool's id: `{"service_name", "tool_name"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
pub struct ToolIdDto {
    /// The service.
    pub service_name: String,
    /// The tool's name there.
    pub tool_name: String,
}

/// One tool association of `GET /guidelines/{id}`.
#[derive(Debug, Clone, Deserialize)]
pub struct ToolAssociationDto {
    /// The tool.
    pub tool_id: ToolIdDto,
}

/// `GET /guidelines/{id}`.
#[derive(Debug, Clone, Deserialize)]
pub struct GuidelineDetailDto {
    /// The guideline.
    pub guideline: GuidelineDto,
    /// The tools it may call.
    #[serde(default)]
    pub tool_associations: Vec<ToolAssociationDto>,
}

/// A tool as the REST API lists it (no service name).
#[derive(Debug, Clone, Deserialize)]
pub struct ToolDto {
    /// Its name.
    pub name: String,
}

/// One end of a relationship: a guideline, a tag or a tool.
#[derive(Debug, Clone, PartialEq)]
pub enum RelationshipEnd {
    /// A guideline, by id.
    Guideline(String),
    /// A tag, by id (`journey:<id>` for a journey).
    Tag(String),
    /// A tool, by name only: the API leaves its service out.
    Tool(String),
}

/// `GET /relationships?...`.
#[derive(Debug, Clone, Deserialize)]
pub struct RelationshipDto {
    /// Its id.
    pub id: String,
    /// `entailment`, `priority`, `dependency`, `disambiguation`, `overlap` or `reevaluation`.
    pub kind: String,
    #[serde(default)]
    source_guideline: Option<IdOnly>,
    #[serde(default)]
    source_tag: Option<IdOnly>,
    #[serde(default)]
    source_tool: Option<ToolDto>,
    #[serde(default)]
    target_guideline: Option<IdOnly>,
    #[serde(default)]
    target_tag: Option<IdOnly>,
    #[serde(default)]
    target_tool: Option<ToolDto>,
}

#[derive(Debug, Clone, Deserialize)]
struct IdOnly {
    id: String,
}

impl RelationshipDto {
    fn end(guideline: &Option<IdOnly>, tag: &Option<IdOnly>, tool: &Option<ToolDto>) -> Option<RelationshipEnd> {
        guideline
            .as_ref()
            .map(|g| RelationshipEnd::Guideline(g.id.clone()))
            .or_else(|| tag.as_ref().map(|t| RelationshipEnd::Tag(t.id.clone())))
            .or_else(|| tool.as_ref().map(|t| RelationshipEnd::Tool(t.name.clone())))
    }

    /// Where it starts.
    pub fn source(&self) -> Option<RelationshipEnd> {
        Self::end(&self.source_guideline, &self.source_tag, &self.source_tool)
    }

    /// Where it ends.
    pub fn target(&self) -> Option<RelationshipEnd> {
        Self::end(&self.target_guideline, &self.target_tag, &self.target_tool)
    }
}

/// `GET /journeys`.
#[derive(Debug, Clone, Deserialize)]
pub struct JourneyDto {
    /// Its id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// What it is for.
    #[serde(default)]
    pub description: Option<String>,
    /// The ids of the observation guidelines that start it.
    #[serde(default)]
    pub conditions: Vec<String>,
    /// Tag ids.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Composition mode while it is active.
    #[serde(default)]
    pub composition_mode: Option<String>,
    /// Labels.
    #[serde(default)]
    pub labels: Vec<String>,
    /// Numeric priority.
    #[serde(default)]
    pub priority: i32,
}

/// `GET /terms`.
#[derive(Debug, Clone, Deserialize)]
pub struct TermDto {
    /// The term.
    pub name: String,
    /// What it means.
    #[serde(default)]
    pub description: String,
    /// Other words for it.
    #[serde(default)]
    pub synonyms: Vec<String>,
    /// Tag ids.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// `GET /context-variables`.
#[derive(Debug, Clone, Deserialize)]
pub struct ContextVariableDto {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// What the value means.
    #[serde(default)]
    pub description: Option<String>,
    /// The tool that computes it.
    #[serde(default)]
    pub tool_id: Option<ToolIdDto>,
    /// A cron expression: the value is computed again after the next tick.
    #[serde(default)]
    pub freshness_rules: Option<String>,
    /// Tag ids.
    #[serde(default)]
    pub tags: Option<Vec<String>>,
}

/// One stored value of a context variable.
#[derive(Debug, Clone, Deserialize)]
pub struct VariableValueDto {
    /// The value.
    #[serde(default)]
    pub data: Value,
}

/// `GET /context-variables/{id}?include_values=true`.
#[derive(Debug, Clone, Deserialize)]
pub struct VariableReadDto {
    /// Values by key: `DEFAULT`, a customer id or `tag:<id>`.
    #[serde(default)]
    pub key_value_pairs: Option<IndexMap<String, VariableValueDto>>,
}

/// A declared field of a canned response.
#[derive(Debug, Clone, Deserialize)]
pub struct CannedFieldDto {
    /// Its name.
    pub name: String,
    /// What it holds.
    #[serde(default)]
    pub description: Option<String>,
    /// Example values.
    #[serde(default)]
    pub examples: Vec<Value>,
}

/// `GET /canned_responses`.
#[derive(Debug, Clone, Deserialize)]
pub struct CannedResponseDto {
    /// Its id.
    pub id: String,
    /// The template.
    pub value: String,
    /// Declared fields.
    #[serde(default)]
    pub fields: Vec<CannedFieldDto>,
    /// Tag ids (`guideline:<id>`, `journey:<id>`, `journey_node:<id>`, `__preamble__` among them).
    #[serde(default)]
    pub tags: Vec<String>,
    /// When it fits.
    #[serde(default)]
    pub signals: Vec<String>,
    /// Free-form metadata.
    #[serde(default)]
    pub metadata: IndexMap<String, Value>,
    /// Fields that must be available.
    #[serde(default)]
    pub field_dependencies: Vec<String>,
}

/// `GET /capabilities`.
#[derive(Debug, Clone, Deserialize)]
pub struct CapabilityDto {
    /// Short title.
    pub title: String,
    /// What the agent can do.
    #[serde(default)]
    pub description: String,
    /// Phrases that signal it.
    #[serde(default)]
    pub signals: Vec<String>,
    /// Tag ids.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// `GET /services`, `GET /services/{name}`.
#[derive(Debug, Clone, Deserialize)]
pub struct ServiceDto {
    /// Its name.
    pub name: String,
    /// `sdk`, `openapi` or `mcp`.
    pub kind: String,
    /// Where it is.
    #[serde(default)]
    pub url: Option<String>,
    /// Its tools (`GET /services/{name}` only).
    #[serde(default)]
    pub tools: Option<Vec<ToolDto>>,
}
