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
    /// A status event.
    pub fn status(trace_id: &str, status: Status, data: Value) -> Self {
        let status = serde_json::to_value(status).unwrap_or(Value::Null);
        Self {
            source: EventSource::AiAgent,
            kind: EventKind::Status,
            data: json!({"status": status, "data": data}),
            trace_id: trace_id.into(),
        }
    }

    /// A `processing` status with its stage.
    pub fn processing(trace_id: &str, stage: ProcessingStage) -> Self {
        Self::status(trace_id, Status::Processing, json!({"stage": stage.as_str()}))
    }

    /// An agent message.
    pub fn message(trace_id: &str, agent_id: &str, agent_name: &str, text: &str) -> Self {
        Self {
            source: EventSource::AiAgent,
            kind: EventKind::Message,
            data: json!({"message": text, "participant": {"id": agent_id, "display_name": agent_name}}),
            trace_id: trace_id.into(),
        }
    }
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
