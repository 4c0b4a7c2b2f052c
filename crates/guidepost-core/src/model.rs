//! The resolved agent definition: what the engine runs.

use serde::{Deserialize, Serialize};

use crate::agent::Agent;
use crate::guideline::Guideline;
use crate::journey::Journey;
use crate::knowledge::{CannedResponse, Capability, ContextVariable, Tag, Term};
use crate::relationship::Relationship;
use crate::tool::{Tool, ToolId, ToolService};

/// A complete, validated agent definition with every reference resolved to an id.
///
/// Produced by [`crate::definition::load_agent`] from definition files (or by the Rust
/// builder API) and written back by [`crate::definition::export`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentDefinition {
    /// Identity and settings.
    pub agent: Agent,
    /// Declared tags.
    pub tags: Vec<Tag>,
    /// Guidelines and observations, global and journey-scoped, in definition order.
    pub guidelines: Vec<Guideline>,
    /// Relationships.
    pub relationships: Vec<Relationship>,
    /// Journeys.
    pub journeys: Vec<Journey>,
    /// Declared tools.
    pub tools: Vec<Tool>,
    /// Declared tool services (the built-in `fixtures` and `native` services are implicit).
    pub services: Vec<ToolService>,
    /// Context variables.
    pub variables: Vec<ContextVariable>,
    /// Glossary terms.
    pub terms: Vec<Term>,
    /// Capabilities.
    pub capabilities: Vec<Capability>,
    /// Canned responses.
    pub canned_responses: Vec<CannedResponse>,
}

impl AgentDefinition {
    /// The guideline with this id.
    pub fn guideline(&self, id: &str) -> Option<&Guideline> {
        self.guidelines.iter().find(|g| g.id == id)
    }

    /// The journey with this id.
    pub fn journey(&self, id: &str) -> Option<&Journey> {
        self.journeys.iter().find(|j| j.id == id)
    }

    /// The tool with this id.
    pub fn tool(&self, id: &ToolId) -> Option<&Tool> {
        self.tools.iter().find(|t| &t.id == id)
    }

    /// Guidelines scoped to a journey.
    pub fn journey_guidelines<'a>(&'a self, journey: &'a str) -> impl Iterator<Item = &'a Guideline> + 'a {
        self.guidelines.iter().filter(move |g| g.journey.as_deref() == Some(journey))
    }
}
