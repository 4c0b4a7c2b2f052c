//! Customers, sessions and the events of a conversation, with the vocabulary of the
//! Parlant wire format (event kinds, sources, status stages).

use chrono::{DateTime, Utc};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// Id of the customer that owns sessions created without one.
pub const GUEST_CUSTOMER: &str = "guest";

/// The name of the guest customer (not a name to address anyone by).
pub const GUEST_NAME: &str = "Guest";

/// A customer of the business.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Customer {
    /// Id.
    pub id: String,
    /// When the customer was created.
    pub creation_utc: DateTime<Utc>,
    /// Name.
    pub name: String,
    /// Free-form string metadata.
    pub metadata: IndexMap<String, String>,
    /// Tag ids.
    pub tags: Vec<String>,
}

/// Whether the agent answers automatically or a human has taken over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionMode {
    /// The agent replies to customer messages.
    #[default]
    Auto,
    /// A human handles the session; customer messages are stored but not answered.
    Manual,
}

/// A conversation between one customer and one agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// Id.
    pub id: String,
    /// The agent.
    pub agent_id: String,
    /// The customer.
    pub customer_id: String,
    /// When it was created.
    pub creation_utc: DateTime<Utc>,
    /// Optional title.
    pub title: Option<String>,
    /// Auto or manual.
    pub mode: SessionMode,
    /// Offsets consumed by clients (`client` is the one the wire exposes).
    pub consumption_offsets: IndexMap<String, u64>,
    /// Free-form metadata.
    pub metadata: IndexMap<String, serde_json::Value>,
    /// Labels collected from matched guidelines and journeys.
    pub labels: Vec<String>,
}

impl Session {
    /// A session of `agent_id` with `customer_id`, created now: automatic, untitled, with no
    /// metadata, labels or consumed offsets.
    pub fn new(id: &str, agent_id: &str, customer_id: &str) -> Self {
        Self {
            id: id.into(),
            agent_id: agent_id.into(),
            customer_id: customer_id.into(),
            creation_utc: Utc::now(),
            title: None,
            mode: SessionMode::Auto,
            consumption_offsets: IndexMap::new(),
            metadata: IndexMap::new(),
            labels: Vec::new(),
        }
    }
}

/// Who produced an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventSource {
    /// The customer.
    Customer,
    /// The customer's client application (not the customer's words).
    CustomerUi,
    /// A human agent speaking as themselves.
    HumanAgent,
    /// A human agent speaking as the AI agent.
    HumanAgentOnBehalfOfAiAgent,
    /// The AI agent.
    AiAgent,
    /// The system.
    System,
}

/// What an event carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A message (`data.message`).
    Message,
    /// Tool calls and their results (`data.tool_calls`).
    Tool,
    /// A status change (`data.status`, `data.data`).
    Status,
    /// Anything a client wants to store.
    Custom,
}

/// Status values of `status` events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The customer message was received.
    Acknowledged,
    /// The turn was cancelled by a newer message.
    Cancelled,
    /// The engine is working (`data.stage` says on what).
    Processing,
    /// A reply part was emitted; the one with `stage: completed` ends the turn.
    Ready,
    /// The agent is writing.
    Typing,
    /// The turn failed (`data.exception`).
    Error,
}

/// Stages reported by `processing` status events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ProcessingStage {
    /// Reading the message and matching guidelines.
    Interpreting,
    /// Matching is taking longer than usual.
    Thinking,
    /// Deciding and running tool calls.
    #[serde(rename = "Considering tools")]
    ConsideringTools,
    /// Writing the reply.
    Articulating,
}

impl ProcessingStage {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interpreting => "Interpreting",
            Self::Thinking => "Thinking",
            Self::ConsideringTools => "Considering tools",
            Self::Articulating => "Articulating",
        }
    }
}

/// An event of a session. Offsets are dense per session, starting at 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Id.
    pub id: String,
    /// Who produced it.
    pub source: EventSource,
    /// What it carries.
    pub kind: EventKind,
    /// Position in the session.
    pub offset: u64,
    /// When it was created.
    pub creation_utc: DateTime<Utc>,
    /// Shared by every event of one turn (the wire also calls it `correlation_id`).
    pub trace_id: String,
    /// The payload; its shape depends on `kind`.
    pub data: serde_json::Value,
    /// Free-form metadata.
    pub metadata: IndexMap<String, serde_json::Value>,
    /// Soft deletion flag.
    pub deleted: bool,
}

/// The agent's state after a turn: what it applied and where each journey stands.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AgentState {
    /// The turn that produced the state.
    pub trace_id: String,
    /// Guidelines whose action the agent has carried out in this session.
    pub applied_guideline_ids: Vec<String>,
    /// Position in each active journey.
    pub journey_paths: IndexMap<String, crate::path::JourneyPath>,
    /// Per active journey, the transitions ahead of where it stands whose conditions the
    /// customer already met (by id: "I need a taxi to the airport" gives the destination
    /// before the pickup is asked for): when the journey reaches their step, it goes on
    /// without asking again. A transition taken is dropped.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub journey_answers: IndexMap<String, Vec<String>>,
}
