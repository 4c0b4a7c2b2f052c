//! Where a turn's events go while it runs, and the one door through which they leave the
//! service: [`stored`] makes each the store's record, without the deployment's secrets.
//!
//! [`TurnSink`] serves a turn the scheduler runs. Events the runtime emits
//! [`Visibility::Live`] (progress statuses, a reply streamed while it is written) are
//! appended as they happen, so clients see the agent working and the reply growing; those it
//! emits [`Visibility::Held`] (its messages, tool results, final statuses) are held back and
//! committed with the end of the turn in one transaction, only if this worker still holds
//! the turn: a process that dies mid-turn leaves no half reply, and the worker that runs the
//! turn again writes it once. [`StoreSink`] appends everything at once (an utterance, which
//! has no turn to commit with).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use guidepost_core::session::Status;
use guidepost_runtime::events::{EventSink, NewEvent, Visibility};
use guidepost_store::{NewEventRecord, Store};

use crate::redaction::Redactor;

/// A progress status a turn showed: the status and its stage.
pub type Progress = (Status, Option<String>);

/// The store's record of `event`, without secrets.
pub fn stored(event: &NewEvent, redactor: &Redactor) -> NewEventRecord {
    let mut data = event.data();
    redactor.json(&mut data);
    NewEventRecord {
        source: event.source,
        kind: event.kind(),
        trace_id: event.trace_id.clone(),
        data,
        metadata: Default::default(),
    }
}

/// Events appended to a session in the store as they come (waking the session's long polls
/// and streams).
pub struct StoreSink {
    store: Store,
    session_id: String,
    redactor: Arc<Redactor>,
}

impl StoreSink {
    /// Events of `session_id`, without `redactor`'s secrets.
    pub fn new(store: Store, session_id: &str, redactor: Arc<Redactor>) -> Self {
        Self { store, session_id: session_id.to_string(), redactor }
    }

    /// Appends `record`. A busy or briefly unreachable database gets a few tries: losing a
    /// turn's `ready` or its message would leave the customer waiting.
    async fn append(&self, record: NewEventRecord) -> Option<String> {
        let mut delay = std::time::Duration::from_millis(50);
        for attempt in 1..=5 {
            match self.store.append_event(&self.session_id, record.clone()).await {
                Ok(stored) => return Some(stored.id),
                Err(error) if error.is_client_error() || attempt == 5 => {
                    tracing::error!(session = %self.session_id, %error, "an event of the turn could not be stored");
                    break;
                }
                Err(error) => {
                    tracing::warn!(session = %self.session_id, %error, attempt, "storing an event failed; trying again");
                    tokio::time::sleep(delay).await;
                    delay *= 3;
                }
            }
        }
        None
    }
}

#[async_trait]
impl EventSink for StoreSink {
    async fn emit(&self, event: NewEvent, _visibility: Visibility) -> Option<String> {
        self.append(stored(&event, &self.redactor)).await
    }

    async fn update(&self, event_id: &str, event: NewEvent) {
        let data = stored(&event, &self.redactor).data;
        if let Err(error) = self.store.update_event_data(&self.session_id, event_id, &data).await {
            tracing::error!(session = %self.session_id, event = event_id, %error, "a streamed message could not be updated");
        }
    }
}

/// The sink of one turn the scheduler runs.
pub struct TurnSink {
    live: StoreSink,
    held: Mutex<Vec<NewEventRecord>>,
    shown: Mutex<HashSet<Progress>>,
}

impl TurnSink {
    /// A sink for a turn of `session_id`. `shown` are the progress statuses an earlier
    /// attempt of the turn already emitted: a turn run again after a crash does not repeat
    /// them.
    pub fn new(store: Store, session_id: &str, redactor: Arc<Redactor>, shown: HashSet<Progress>) -> Self {
        Self {
            live: StoreSink::new(store, session_id, redactor),
            held: Mutex::new(Vec::new()),
            shown: Mutex::new(shown),
        }
    }

    /// Holds back `event` (already the store's record) with the others.
    pub fn hold(&self, record: NewEventRecord) {
        self.held.lock().unwrap_or_else(PoisonError::into_inner).push(record);
    }

    /// The events held back, in order, to commit with the end of the turn.
    pub fn take_held(&self) -> Vec<NewEventRecord> {
        std::mem::take(&mut *self.held.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether `event` may be shown: anything but a progress status this turn showed before
    /// (a pulse, which says how far the turn has come, is shown as often as it is sent).
    fn first_showing(&self, event: &NewEvent) -> bool {
        if event.payload.is_pulse() {
            return true;
        }
        match event.payload.progress() {
            Some((status, stage)) => {
                let key = (status, stage.map(str::to_string));
                self.shown.lock().unwrap_or_else(PoisonError::into_inner).insert(key)
            }
            None => true,
        }
    }
}

#[async_trait]
impl EventSink for TurnSink {
    async fn emit(&self, event: NewEvent, visibility: Visibility) -> Option<String> {
        match visibility {
            Visibility::Live if self.first_showing(&event) => self.live.emit(event, visibility).await,
            Visibility::Live => None,
            Visibility::Held => {
                self.hold(stored(&event, &self.live.redactor));
                None
            }
        }
    }

    async fn update(&self, event_id: &str, event: NewEvent) {
        self.live.update(event_id, event).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use guidepost_core::payload::{EventPayload, ModelStep, ModelWork, TurnProgress};
    use guidepost_core::session::ProcessingStage;
    use guidepost_store::EventFilter;

    async fn session(store: &Store) -> String {
        let session = guidepost_core::Session {
            id: "s1".into(),
            agent_id: "a".into(),
            customer_id: "guest".into(),
            creation_utc: chrono::Utc::now(),
            title: None,
            mode: Default::default(),
            consumption_offsets: Default::default(),
            metadata: Default::default(),
            labels: vec![],
        };
        store.create_session(&session).await.unwrap();
        session.id
    }

    #[tokio::test]
    async fn live_events_are_stored_at_once_held_ones_kept_for_the_end_progress_shown_once() {
        let store = Store::ephemeral().await.unwrap();
        let id = session(&store).await;
        let redactor = Arc::new(Redactor::new(["sk-planted-0123456789".to_string()]));
        let earlier: HashSet<Progress> = [(Status::Acknowledged, None)].into();
        let sink = TurnSink::new(store.clone(), &id, redactor, earlier);
        assert_eq!(sink.emit(NewEvent::status("t", Status::Acknowledged), Visibility::Live).await, None);
        let processing = NewEvent::processing("t", ProcessingStage::Interpreting);
        assert!(sink.emit(processing.clone(), Visibility::Live).await.is_some());
        assert_eq!(sink.emit(processing.clone(), Visibility::Live).await, None, "shown once");
        let pulse = |done| {
            let EventPayload::Status(status) = &processing.payload else { unreachable!() };
            let work = ModelWork { step: ModelStep::Reading, done, total: 400 };
            let progress = TurnProgress { elapsed_ms: 2_000, model_calls: 0, model: Some(work) };
            NewEvent::agent("t", EventPayload::Status(status.with_progress(progress)))
        };
        assert!(sink.emit(pulse(100), Visibility::Live).await.is_some(), "a pulse is shown");
        assert!(sink.emit(pulse(200), Visibility::Live).await.is_some(), "and the next one too");
        let streamed =
            sink.emit(NewEvent::message("t", "a", "A", "key sk-planted-0123456789"), Visibility::Live).await.unwrap();
        sink.update(&streamed, NewEvent::message("t", "a", "A", "whole, sk-planted-0123456789")).await;
        assert_eq!(sink.emit(NewEvent::message("t", "a", "A", "sk-planted-0123456789"), Visibility::Held).await, None);
        let stored = store.list_events(&id, &EventFilter::default()).await.unwrap();
        assert_eq!(stored.len(), 4, "{stored:?}");
        assert_eq!(stored[2].data["data"]["progress"]["model"]["done"], 200);
        assert_eq!(stored[3].data["message"], "whole, ***");
        let held = sink.take_held();
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].data["message"], "***");
        assert!(sink.take_held().is_empty());
    }
}
