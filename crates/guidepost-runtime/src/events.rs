//! The events a turn emits, in the vocabulary of the Parlant wire format, and where they
//! go.
//!
//! Status events nest their payload (`{"status": "processing", "data": {"stage":
//! "Interpreting"}}`); the last `ready` status of a turn carries `stage: "completed"`
//! with the matched guidelines, journeys and journey states, and clients wait for it.

use std::sync::Mutex;

use async_trait::async_trait;
use chrono::Utc;
use guidepost_core::session::{ProcessingStage, Status};
use guidepost_core::{Event, EventKind, EventSource};
use serde::Serialize;
use serde_json::{Value, json};

/// An event a turn wants to append to its session (the store assigns id and offset).
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// Who produced it.
    pub source: EventSource,
    /// What it carries.
    pub kind: EventKind,
    /// The payload.
    pub data: Value,
    /// The turn's trace id.
    pub trace_id: String,
}

impl NewEvent {
    /// The event a sink appends for `event`, emitted by the agent in turn `trace_id`.
    pub fn from_turn(trace_id: &str, event: TurnEvent) -> Self {
        let (kind, data) = match &event {
            TurnEvent::Status(e) => (EventKind::Status, serde_json::to_value(e)),
            TurnEvent::Message(e) => (EventKind::Message, serde_json::to_value(e)),
            TurnEvent::Tool(e) => (EventKind::Tool, serde_json::to_value(e)),
        };
        // These types hold strings, numbers and JSON values only: they always serialize.
        let data = data.unwrap_or(Value::Null);
        Self { source: EventSource::AiAgent, kind, data, trace_id: trace_id.into() }
    }

    /// A status event with no details.
    pub fn status(trace_id: &str, status: Status) -> Self {
        Self::from_turn(trace_id, TurnEvent::Status(StatusEvent { status, data: StatusDetail::default() }))
    }

    /// A `processing` status with its stage.
    pub fn processing(trace_id: &str, stage: ProcessingStage) -> Self {
        let data = StatusDetail { stage: Some(stage.as_str().to_string()), ..StatusDetail::default() };
        Self::from_turn(trace_id, TurnEvent::Status(StatusEvent { status: Status::Processing, data }))
    }

    /// An agent message.
    pub fn message(trace_id: &str, agent_id: &str, agent_name: &str, text: &str) -> Self {
        Self::from_turn(trace_id, TurnEvent::Message(MessageEvent::new(agent_id, agent_name, text)))
    }
}

/// What a turn emits, typed. Serialized (through [`NewEvent::from_turn`]), each is the
/// `data` of an event of the sessions API.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
    /// The turn's status changed.
    Status(StatusEvent),
    /// The agent's message: whole, or growing while it is streamed.
    Message(MessageEvent),
    /// Tools ran.
    Tool(ToolEvent),
}

/// A status event: `{"status": "processing", "data": {"stage": "Interpreting"}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusEvent {
    /// The new status.
    pub status: Status,
    /// What goes with it.
    pub data: StatusDetail,
}

/// The details of a status event; each is present only where it applies.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct StatusDetail {
    /// `processing`: what the engine works on; the turn's last `ready`: `completed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// `error`: why the turn failed, without secrets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exception: Option<String>,
    /// The last `ready`: the guidelines the reply followed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_guidelines: Option<Vec<IdRef>>,
    /// The last `ready`: the journeys active after the turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_journeys: Option<Vec<IdRef>>,
    /// The last `ready`: their states, as `journey.state`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_journey_states: Option<Vec<IdRef>>,
    /// The last `ready` of a degraded turn: the stages that lost work.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded: Option<Value>,
}

/// `{"id": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdRef {
    /// The id.
    pub id: String,
}

/// Who wrote a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Participant {
    /// The agent's id.
    pub id: String,
    /// Its name.
    pub display_name: String,
}

/// An agent message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageEvent {
    /// The text (so far, while streamed).
    pub message: String,
    /// The agent.
    pub participant: Participant,
    /// While streamed: the pieces so far; the last is `null` once the message is whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunks: Option<Vec<Option<String>>>,
    /// Tags, such as `__preamble__` for an acknowledgement sent before the reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// The canned response sent, as `[[id, text]]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canned_responses: Option<Vec<(String, String)>>,
    /// The draft the reply was corrected from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draft: Option<String>,
    /// What the reply checks refused on the way, and whether the fallback reply went out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_checks: Option<Value>,
    /// The stages that lost work, when the turn is degraded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded: Option<Value>,
}

impl MessageEvent {
    /// A whole message `text` by the agent.
    pub fn new(agent_id: &str, agent_name: &str, text: &str) -> Self {
        Self {
            message: text.to_string(),
            participant: Participant { id: agent_id.to_string(), display_name: agent_name.to_string() },
            chunks: None,
            tags: None,
            canned_responses: None,
            draft: None,
            reply_checks: None,
            degraded: None,
        }
    }
}

/// Tools that ran, with what they were given and what they returned.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolEvent {
    /// The calls, in order.
    pub tool_calls: Vec<ToolCallEvent>,
}

/// One tool call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallEvent {
    /// `service:name`.
    pub tool_id: String,
    /// The arguments.
    pub arguments: serde_json::Map<String, Value>,
    /// The result envelope (data, metadata, control, canned fields).
    pub result: Value,
}

/// Where a turn's events go: a session store, a terminal, a test.
#[async_trait]
pub trait EventSink: Send + Sync {
    /// Appends an event and returns its id.
    async fn emit(&self, event: NewEvent) -> String;
    /// Replaces the data of an emitted event (streamed messages grow `chunks`).
    async fn update(&self, event_id: &str, data: Value);
    /// The reply of turn `trace_id` so far, while it is written, in `block` output mode:
    /// before its checks decide whether it is sent, so it is not part of the session. Called
    /// again with the longer text as it grows; empty when a refused reply is written anew.
    /// Nothing by default.
    async fn preview(&self, trace_id: &str, text: &str) {
        let _ = (trace_id, text);
    }
    /// Whether [`preview`](Self::preview) shows the reply to someone. When nobody watches, a
    /// `block` reply is asked for whole, which costs less than a stream. `false` by default.
    fn wants_preview(&self) -> bool {
        false
    }
}

/// An in-memory session: events with dense offsets. Used by `guidepost chat`, the
/// simulator's in-process agent and tests.
#[derive(Debug, Default)]
pub struct MemorySession {
    events: Mutex<Vec<Event>>,
}

impl MemorySession {
    /// An empty session.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends the customer's `text` under a new trace id and returns the input of the turn
    /// that answers it, continuing from `previous_state`.
    pub fn customer_turn(
        &self,
        session_id: &str,
        customer: crate::variables::CustomerRef,
        text: &str,
        previous_state: &guidepost_core::AgentState,
    ) -> crate::TurnInput {
        let trace_id = uuid::Uuid::new_v4().simple().to_string();
        self.customer_message(text, &trace_id);
        crate::TurnInput {
            session_id: session_id.to_string(),
            customer,
            customer_name: None,
            events: self.events(),
            previous_state: previous_state.clone(),
            trace_id,
        }
    }

    /// Appends a customer message and returns it.
    pub fn customer_message(&self, text: &str, trace_id: &str) -> Event {
        self.push(NewEvent {
            source: EventSource::Customer,
            kind: EventKind::Message,
            data: json!({"message": text, "participant": {"display_name": "Customer"}}),
            trace_id: trace_id.into(),
        })
    }

    fn push(&self, event: NewEvent) -> Event {
        let mut events = self.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let offset = events.len() as u64;
        let e = Event {
            id: format!("evt_{}", uuid::Uuid::new_v4().simple()),
            source: event.source,
            kind: event.kind,
            offset,
            creation_utc: Utc::now(),
            trace_id: event.trace_id,
            data: event.data,
            metadata: Default::default(),
            deleted: false,
        };
        events.push(e.clone());
        e
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Events of one turn.
    pub fn events_of(&self, trace_id: &str) -> Vec<Event> {
        self.events().into_iter().filter(|e| e.trace_id == trace_id).collect()
    }
}

#[async_trait]
impl EventSink for MemorySession {
    async fn emit(&self, event: NewEvent) -> String {
        self.push(event).id
    }

    async fn update(&self, event_id: &str, data: Value) {
        let mut events = self.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(e) = events.iter_mut().find(|e| e.id == event_id) {
            e.data = data;
        }
    }
}

/// The text of a message event, if it is one.
pub fn message_text(event: &Event) -> Option<&str> {
    (event.kind == EventKind::Message).then(|| event.data.get("message").and_then(Value::as_str)).flatten()
}

/// The status of a status event, and its stage when it has one.
pub fn status_of(event: &Event) -> Option<(String, Option<String>)> {
    if event.kind != EventKind::Status {
        return None;
    }
    let status = event.data.get("status")?.as_str()?.to_string();
    let stage = event.data.get("data").and_then(|d| d.get("stage")).and_then(Value::as_str).map(str::to_string);
    Some((status, stage))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_events_serialize_to_the_sessions_api_shape() {
        let acknowledged = NewEvent::status("t", Status::Acknowledged);
        assert_eq!(
            (acknowledged.kind, &acknowledged.data),
            (EventKind::Status, &json!({"status": "acknowledged", "data": {}}))
        );
        let processing = NewEvent::processing("t", ProcessingStage::Interpreting);
        assert_eq!(processing.data, json!({"status": "processing", "data": {"stage": "Interpreting"}}));
        let ready = StatusDetail {
            stage: Some("completed".into()),
            matched_guidelines: Some(vec![IdRef { id: "refund".into() }]),
            matched_journeys: Some(Vec::new()),
            matched_journey_states: Some(Vec::new()),
            ..StatusDetail::default()
        };
        let ready = NewEvent::from_turn("t", TurnEvent::Status(StatusEvent { status: Status::Ready, data: ready }));
        assert_eq!(
            ready.data,
            json!({"status": "ready", "data": {"stage": "completed", "matched_guidelines": [{"id": "refund"}], "matched_journeys": [], "matched_journey_states": []}})
        );
        let message = NewEvent::message("t", "otto", "Otto", "Hello!");
        assert_eq!((message.source, message.kind), (EventSource::AiAgent, EventKind::Message));
        assert_eq!(message.data, json!({"message": "Hello!", "participant": {"id": "otto", "display_name": "Otto"}}));
        let mut streamed = MessageEvent::new("otto", "Otto", "Hel");
        streamed.chunks = Some(vec![Some("Hel".into()), None]);
        let streamed = NewEvent::from_turn("t", TurnEvent::Message(streamed));
        assert_eq!(streamed.data["chunks"], json!(["Hel", null]));
        let mut arguments = serde_json::Map::new();
        arguments.insert("city".into(), json!("Paris"));
        let call = ToolCallEvent { tool_id: "fixtures:get_weather".into(), arguments, result: json!({"data": 12}) };
        let tool = NewEvent::from_turn("t", TurnEvent::Tool(ToolEvent { tool_calls: vec![call] }));
        assert_eq!(tool.kind, EventKind::Tool);
        assert_eq!(
            tool.data,
            json!({"tool_calls": [{"tool_id": "fixtures:get_weather", "arguments": {"city": "Paris"}, "result": {"data": 12}}]})
        );
    }
}
