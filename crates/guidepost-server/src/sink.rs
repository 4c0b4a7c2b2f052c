//! [`TurnSink`]: where a turn's events go while it runs.
//!
//! Progress statuses (`acknowledged`, `processing`, `typing`) and streamed messages are
//! appended as they happen, so clients see the agent working and the reply growing. What
//! the turn decides (its messages, tool results, the final statuses) is held back and
//! committed with the end of the turn in one transaction, only if this worker still holds
//! the turn: a process that dies mid-turn leaves no half reply, and the worker that runs
//! the turn again writes it once.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use guidepost_core::{EventKind, EventSource};
use guidepost_runtime::events::{EventSink, NewEvent};
use guidepost_store::{NewEventRecord, Store};
use serde_json::Value;

use crate::adapters::StoreSink;

const HELD: &str = "held:";

/// The sink of one turn.
pub struct TurnSink {
    live: StoreSink,
    held: Mutex<Vec<NewEventRecord>>,
    shown: Mutex<HashSet<(String, Option<String>)>>,
}

impl TurnSink {
    /// A sink for a turn of `session_id`. `shown` are the progress statuses (status and
    /// stage) an earlier attempt of the turn already emitted: a turn run again after a
    /// crash does not repeat them.
    pub fn new(store: Store, session_id: &str, shown: HashSet<(String, Option<String>)>) -> Self {
        Self { live: StoreSink::new(store, session_id), held: Mutex::new(Vec::new()), shown: Mutex::new(shown) }
    }

    /// The events held back, in order, to commit with the end of the turn.
    pub fn take_held(&self) -> Vec<NewEventRecord> {
        std::mem::take(&mut *self.held.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

fn stage(event: &NewEvent) -> Option<String> {
    event.data.get("data").and_then(|d| d.get("stage")).and_then(Value::as_str).map(str::to_string)
}

fn status(event: &NewEvent) -> Option<&str> {
    (event.kind == EventKind::Status).then(|| event.data.get("status").and_then(Value::as_str)).flatten()
}

#[async_trait]
impl EventSink for TurnSink {
    async fn emit(&self, event: NewEvent) -> String {
        let progress = matches!(status(&event), Some("acknowledged" | "processing" | "typing"));
        if progress {
            let key = (status(&event).unwrap_or_default().to_string(), stage(&event));
            if !self.shown.lock().unwrap_or_else(PoisonError::into_inner).insert(key) {
                return String::new();
            }
        }
        let streamed = event.kind == EventKind::Message && event.data.get("chunks").is_some();
        if progress || streamed {
            return self.live.emit(event).await;
        }
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.push(NewEventRecord {
            source: event.source,
            kind: event.kind,
            trace_id: event.trace_id,
            data: event.data,
            metadata: Default::default(),
        });
        format!("{HELD}{}", held.len() - 1)
    }

    async fn update(&self, event_id: &str, data: Value) {
        match event_id.strip_prefix(HELD).and_then(|i| i.parse::<usize>().ok()) {
            Some(i) => {
                if let Some(e) = self.held.lock().unwrap_or_else(PoisonError::into_inner).get_mut(i) {
                    e.data = data;
                }
            }
            None => self.live.update(event_id, data).await,
        }
    }
}

/// A status event of the agent, as the turn would emit it.
pub fn agent_status(trace_id: &str, status: &str, data: Value) -> NewEventRecord {
    NewEventRecord {
        source: EventSource::AiAgent,
        kind: EventKind::Status,
        trace_id: trace_id.to_string(),
        data: serde_json::json!({"status": status, "data": data}),
        metadata: Default::default(),
    }
}
