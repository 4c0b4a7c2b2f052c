//! Guidelines: condition-action rules, and observations (a condition without an action).

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::agent::CompositionMode;
use crate::tool::ToolId;

/// How much care the engine spends on a guideline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Criticality {
    /// Nice to have: evaluated in a cheap batch, may be pruned under pressure.
    Low,
    /// The default.
    #[default]
    Medium,
    /// Compliance or safety: always evaluated thoroughly and called out when composing.
    High,
}

/// A labelled customer message: whether a guideline's condition holds when the customer says
/// it. The checks show a guideline's examples to the model beside its condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GuidelineExample {
    /// What the customer says.
    pub message: String,
    /// Whether the condition holds for that message.
    pub applies: bool,
}

/// A condition-action rule. Without an action it is an observation: it records that a
/// condition holds, typically as a dependency or disambiguation head for other guidelines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Guideline {
    /// Stable id.
    pub id: String,
    /// When the guideline applies, in natural language.
    pub condition: String,
    /// What the agent should do; `None` makes this an observation.
    pub action: Option<String>,
    /// Extra context for the model.
    pub description: Option<String>,
    /// Evaluation care.
    pub criticality: Criticality,
    /// Disabled guidelines are never matched.
    pub enabled: bool,
    /// Tag ids.
    pub tags: Vec<String>,
    /// Free-form labels copied onto sessions where the guideline matched.
    pub labels: Vec<String>,
    /// Free-form metadata.
    pub metadata: IndexMap<String, serde_json::Value>,
    /// Numeric priority; among matches only the highest values survive when an author
    /// uses priorities (see the engine's relational resolution).
    pub priority: i32,
    /// `false`: never treat the guideline as previously applied.
    pub track: bool,
    /// Tools the agent may call when the guideline matches.
    pub tools: Vec<ToolId>,
    /// Composition mode override while this guideline is matched.
    pub composition_mode: Option<CompositionMode>,
    /// The journey this guideline is scoped to: it applies only while that journey is active.
    pub journey: Option<String>,
    /// Canned responses tied to this guideline.
    pub canned_responses: Vec<String>,
    /// Labelled customer messages the checks show the model beside the condition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<GuidelineExample>,
}

impl Guideline {
    /// Whether this is an observation (no action).
    pub fn is_observation(&self) -> bool {
        self.action.is_none()
    }

    /// Whether carrying out its action makes it applied: it has an action and is tracked.
    pub fn is_tracked(&self) -> bool {
        self.track && self.action.is_some()
    }
}
