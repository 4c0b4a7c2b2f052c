//! Journeys: multi-step flows as directed graphs of states and transitions.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::agent::CompositionMode;
use crate::tool::ToolId;

/// Id of the implicit start state of every journey.
pub const START_STATE: &str = "initial";
/// Id of the special exit state; a transition to it completes the journey.
pub const END_STATE: &str = "end";

/// A condition that activates a journey. It behaves as an observation guideline tagged
/// with the journey.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JourneyCondition {
    /// Stable id of the observation guideline.
    pub id: String,
    /// The condition text.
    pub condition: String,
}

/// What a state does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum StateKind {
    /// The agent says something (asks, confirms, explains).
    Chat {
        /// The instruction for the reply.
        action: String,
    },
    /// The agent calls tools.
    Tool {
        /// Tools to call.
        tools: Vec<ToolId>,
        /// Optional instruction on how to call them.
        instruction: Option<String>,
    },
    /// Routing only: choose among the outgoing transitions.
    Fork,
    /// Runs another journey inline, then continues with this state's transitions.
    Journey {
        /// The sub-journey's id.
        journey: String,
    },
}

impl StateKind {
    /// Short name of the kind.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Chat { .. } => "chat",
            Self::Tool { .. } => "tool",
            Self::Fork => "fork",
            Self::Journey { .. } => "journey",
        }
    }
}

/// A state of a journey.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JourneyState {
    /// Id, unique within the journey.
    pub id: String,
    /// What the state does.
    pub kind: StateKind,
    /// Extra context for the model.
    pub description: Option<String>,
    /// Canned responses tied to this state.
    pub canned_responses: Vec<String>,
    /// Composition mode override while this state is current.
    pub composition_mode: Option<CompositionMode>,
    /// Labels copied onto sessions that reach the state.
    pub labels: Vec<String>,
    /// Free-form metadata.
    pub metadata: IndexMap<String, serde_json::Value>,
}

/// An edge between two states.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// Id, unique within the journey (`edge_001`, ... in definition order unless given).
    pub id: String,
    /// Source state id (`initial` for transitions out of the start).
    pub from: String,
    /// Target state id, or `end`.
    pub to: String,
    /// When the transition is taken; `None` means unconditionally once the source is done.
    pub condition: Option<String>,
}

impl Transition {
    /// Whether the transition exits the journey.
    pub fn ends(&self) -> bool {
        self.to == END_STATE
    }
}

/// A journey.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Journey {
    /// Stable id.
    pub id: String,
    /// Title, shown to the model.
    pub title: String,
    /// What the journey is for.
    pub description: Option<String>,
    /// Conditions that activate the journey (any of them).
    pub conditions: Vec<JourneyCondition>,
    /// Tag ids.
    pub tags: Vec<String>,
    /// Labels copied onto sessions where the journey is active.
    pub labels: Vec<String>,
    /// Numeric priority, as for guidelines.
    pub priority: i32,
    /// Composition mode override while the journey is active.
    pub composition_mode: Option<CompositionMode>,
    /// States in definition order (the implicit start state is not listed).
    pub states: Vec<JourneyState>,
    /// Transitions in definition order: out of the start first, then per state.
    pub transitions: Vec<Transition>,
}

impl Journey {
    /// The state with this id.
    pub fn state(&self, id: &str) -> Option<&JourneyState> {
        self.states.iter().find(|s| s.id == id)
    }

    /// Transitions leaving `state`, in definition order.
    pub fn transitions_from<'a>(&'a self, state: &'a str) -> impl Iterator<Item = &'a Transition> + 'a {
        self.transitions.iter().filter(move |t| t.from == state)
    }

    /// Sub-journeys this journey runs inline.
    pub fn sub_journeys(&self) -> impl Iterator<Item = &str> {
        self.states.iter().filter_map(|s| match &s.kind {
            StateKind::Journey { journey } => Some(journey.as_str()),
            _ => None,
        })
    }
}
