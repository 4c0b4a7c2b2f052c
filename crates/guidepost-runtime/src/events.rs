//! The events a turn emits and where they go.
//!
//! What an event carries is typed ([`guidepost_core::payload`]); the turn says when each is
//! shown ([`Visibility`]): progress statuses and a streamed reply at once, what the turn
//! decided with its end. The last `ready` status of a turn carries `stage: "completed"`
//! with the matched guidelines, journeys and journey states, and clients wait for it.

use std::sync::Mutex;

use async_trait::async_trait;
use chrono::Utc;
use guidepost_core::payload::{EventPayload, MessagePayload, Participant, StatusPayload};
use guidepost_core::session::{ProcessingStage, Status};
use guidepost_core::{Event, EventKind, EventSource};
use serde_json::Value;

/// An event a turn wants to append to its session (the store assigns id and offset).
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// Who produced it.
    pub source: EventSource,
    /// What it carries.
    pub payload: EventPayload,
    /// The turn's trace id.
    pub trace_id: String,
}

impl NewEvent {
    /// An event of the agent in turn `trace_id`.
    pub fn agent(trace_id: &str, payload: EventPayload) -> Self {
        Self { source: EventSource::AiAgent, payload, trace_id: trace_id.into() }
    }

    /// A status event with no details.
    pub fn status(trace_id: &str, status: Status) -> Self {
        Self::agent(trace_id, EventPayload::Status(StatusPayload::new(status)))
    }

    /// A `processing` status with its stage.
    pub fn processing(trace_id: &str, stage: ProcessingStage) -> Self {
        Self::agent(trace_id, EventPayload::Status(StatusPayload::processing(stage)))
    }

    /// An agent message.
    pub fn message(trace_id: &str, agent_id: &str, agent_name: &str, text: &str) -> Self {
        Self::agent(trace_id, EventPayload::Message(MessagePayload::agent(agent_id, agent_name, text)))
    }

    /// What it carries.
    pub fn kind(&self) -> EventKind {
        self.payload.kind()
    }

    /// Its `data`, as the sessions API shows it.
    pub fn data(&self) -> Value {
        self.payload.to_data()
    }
}

/// When an emitted event is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// At once: a progress status, or a reply streamed while it is written. A turn run
    /// again after its process died may show it again (progress statuses once per turn).
    Live,
    /// With the end of the turn: what the turn decided (its messages, tool results, final
    /// statuses). A sink that commits turns holds it back and stores it with the turn's
    /// end, so a turn that dies leaves none of it behind.
    Held,
}

/// Where a turn's events go: a session store, a terminal, a test.
#[async_trait]
pub trait EventSink: Send + Sync {
    /// Emits an event; returns its id when it was stored at once (a [`Visibility::Live`]
    /// event), which [`update`](Self::update) takes.
    async fn emit(&self, event: NewEvent, visibility: Visibility) -> Option<String>;
    /// Replaces an event emitted live (a streamed message growing its `chunks`).
    async fn update(&self, event_id: &str, event: NewEvent);
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
        let participant = Participant { id: None, display_name: "Customer".into() };
        self.push(NewEvent {
            source: EventSource::Customer,
            payload: EventPayload::Message(MessagePayload::new(participant, text)),
            trace_id: trace_id.into(),
        })
    }

    fn push(&self, event: NewEvent) -> Event {
        let mut events = self.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let offset = events.len() as u64;
        let e = Event {
            id: format!("evt_{}", uuid::Uuid::new_v4().simple()),
            source: event.source,
            kind: event.kind(),
            offset,
            creation_utc: Utc::now(),
            data: event.data(),
            trace_id: event.trace_id,
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
    async fn emit(&self, event: NewEvent, _visibility: Visibility) -> Option<String> {
        Some(self.push(event).id)
    }

    async fn update(&self, event_id: &str, event: NewEvent) {
        let mut events = self.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(e) = events.iter_mut().find(|e| e.id == event_id) {
            e.data = event.data();
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
    use serde_json::json;

    #[tokio::test]
    async fn a_memory_session_keeps_what_is_emitted_live_or_held_and_its_updates() {
        let session = MemorySession::new();
        session.customer_message("Hi", "t");
        let ack = session.emit(NewEvent::status("t", Status::Acknowledged), Visibility::Live).await;
        assert!(ack.is_some());
        let id = session.emit(NewEvent::message("t", "otto", "Otto", "Hel"), Visibility::Live).await.unwrap();
        session.update(&id, NewEvent::message("t", "otto", "Otto", "Hello!")).await;
        session.emit(NewEvent::status("t", Status::Ready), Visibility::Held).await;
        let events = session.events_of("t");
        assert_eq!(events.iter().map(|e| e.offset).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!(events.iter().filter_map(message_text).collect::<Vec<_>>(), ["Hi", "Hello!"]);
        assert_eq!(events[1].data, json!({"status": "acknowledged", "data": {}}));
        assert_eq!(status_of(&events[3]), Some(("ready".into(), None)));
    }
}
