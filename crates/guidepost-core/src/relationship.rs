//! Relationships between guidelines, tags, journeys and tools.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

use crate::tool::ToolId;

/// What a relationship means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RelationshipKind {
    /// Source active implies target active.
    Entailment,
    /// Both active: only the source stays.
    Priority,
    /// The source is dropped unless every dependency target is active.
    Dependency,
    /// The source is dropped unless at least one target of each group is active.
    DependencyAny,
    /// Source (an observation) is ambiguous among its targets: ask which one is meant.
    Disambiguation,
    /// When the target tool runs, the source is evaluated again in the next iteration.
    Reevaluation,
    /// Both tools are decided together in one tool-calling batch.
    Overlap,
}

impl RelationshipKind {
    /// The name used in definition files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Entailment => "entailment",
            Self::Priority => "priority",
            Self::Dependency => "dependency",
            Self::DependencyAny => "dependency_any",
            Self::Disambiguation => "disambiguation",
            Self::Reevaluation => "reevaluation",
            Self::Overlap => "overlap",
        }
    }
}

/// How a tag endpoint counts its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TagMode {
    /// Every member must be active (the default for a bare tag).
    All,
    /// At least one member must be active.
    Any,
}

/// One end of a relationship.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "id")]
pub enum Endpoint {
    /// A guideline, by id.
    Guideline(String),
    /// A journey, by id.
    Journey(String),
    /// The guidelines (and journeys) carrying a tag.
    Tag {
        /// Tag id.
        tag: String,
        /// All or any of the members.
        mode: TagMode,
    },
    /// A tool.
    Tool(ToolId),
}

impl Endpoint {
    /// The kind of entity, for messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::Guideline(_) => "guideline",
            Self::Journey(_) => "journey",
            Self::Tag { .. } => "tag",
            Self::Tool(_) => "tool",
        }
    }
}

impl fmt::Display for Endpoint {
    /// The reference syntax of definition files: `greet`, `journey:order`, `tag:vip`,
    /// `any-tag:vip`, `tool:service:name`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Guideline(id) => write!(f, "guideline:{id}"),
            Self::Journey(id) => write!(f, "journey:{id}"),
            Self::Tag { tag, mode: TagMode::All } => write!(f, "tag:{tag}"),
            Self::Tag { tag, mode: TagMode::Any } => write!(f, "any-tag:{tag}"),
            Self::Tool(tool) => write!(f, "tool:{tool}"),
        }
    }
}

/// A resolved relationship.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Relationship {
    /// Stable id derived from kind, ends and group.
    pub id: String,
    /// What it means.
    pub kind: RelationshipKind,
    /// Source end.
    pub source: Endpoint,
    /// Target end.
    pub target: Endpoint,
    /// Group of a `dependency_any` relationship: OR inside a group, AND across groups.
    pub group: Option<String>,
}
