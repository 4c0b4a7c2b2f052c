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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use guidepost_core::payload::EventPayload;
use guidepost_core::session::Status;
use guidepost_runtime::events::{EventSink, NewEvent, Visibility};
use guidepost_store::{NewEventRecord, Store};
use tokio::sync::Notify;

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
        self.append_all(vec![record]).await.and_then(|mut ids| ids.pop())
    }

    /// Appends `records` in one transaction, with [`StoreSink::append`]'s tries; their ids.
    async fn append_all(&self, records: Vec<NewEventRecord>) -> Option<Vec<String>> {
        let mut delay = std::time::Duration::from_millis(50);
        for attempt in 1..=5 {
            match self.store.append_events(&self.session_id, records.clone(), None).await {
                Ok(stored) => return Some(stored.into_iter().map(|e| e.id).collect()),
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
///
/// Progress statuses are written behind: [`TurnSink::emit`] queues them and returns at once,
/// and [`TurnSink::keep_writing`], run beside the turn in the same task, stores what is
/// queued in one transaction whenever the turn waits (statuses emitted back to back, such as
/// `processing: articulating` and `typing`, share one). What is still queued when the turn
/// ends is committed with its end. A reply streamed while it is written is stored at once
/// (its id is needed to update it), after what is queued, so offsets keep the order of
/// emission.
pub struct TurnSink {
    live: StoreSink,
    held: Mutex<Vec<NewEventRecord>>,
    shown: Mutex<HashSet<Progress>>,
    /// Progress statuses emitted and not yet stored, in order.
    queued: Mutex<Vec<NewEventRecord>>,
    /// Wakes the writer when something is queued, or when the turn ended.
    wake: Notify,
    /// Set when the turn ended: the writer stops, and what is queued goes with the commit.
    closed: AtomicBool,
    /// Held while storing live events, so two writes never interleave their offsets.
    writing: tokio::sync::Mutex<()>,
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
            queued: Mutex::new(Vec::new()),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            writing: tokio::sync::Mutex::new(()),
        }
    }

    /// Holds back `event` (already the store's record) with the others.
    pub fn hold(&self, record: NewEventRecord) {
        self.held.lock().unwrap_or_else(PoisonError::into_inner).push(record);
    }

    /// The events to commit with the end of the turn, in order: the progress statuses not
    /// stored yet, then the events held back.
    pub fn take_held(&self) -> Vec<NewEventRecord> {
        let mut events = std::mem::take(&mut *self.queued.lock().unwrap_or_else(PoisonError::into_inner));
        events.append(&mut self.held.lock().unwrap_or_else(PoisonError::into_inner));
        events
    }

    /// Stores the queued progress statuses as they come, until [`TurnSink::close`]. Run it
    /// beside the turn (joined, in the same task): it wakes only when something was queued.
    pub async fn keep_writing(&self) {
        loop {
            self.wake.notified().await;
            if self.closed.load(Ordering::SeqCst) {
                return;
            }
            self.flush().await;
        }
    }

    /// Stores what is queued now (a turn handed back keeps the progress it showed).
    pub async fn flush(&self) {
        let _writing = self.writing.lock().await;
        let queued = std::mem::take(&mut *self.queued.lock().unwrap_or_else(PoisonError::into_inner));
        if !queued.is_empty() {
            self.live.append_all(queued).await;
        }
    }

    /// The turn ended: [`TurnSink::keep_writing`] returns once its write in progress is
    /// done, and what is still queued is left for [`TurnSink::take_held`].
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.wake.notify_one();
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
            Visibility::Live if !self.first_showing(&event) => None,
            Visibility::Live if matches!(event.payload, EventPayload::Status(_)) => {
                let record = stored(&event, &self.live.redactor);
                self.queued.lock().unwrap_or_else(PoisonError::into_inner).push(record);
                self.wake.notify_one();
                None
            }
            Visibility::Live => {
                // Stored now, after what is queued, in one transaction.
                let _writing = self.writing.lock().await;
                let mut records = std::mem::take(&mut *self.queued.lock().unwrap_or_else(PoisonError::into_inner));
                records.push(stored(&event, &self.live.redactor));
                self.live.append_all(records).await.and_then(|mut ids| ids.pop())
            }
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
    async fn statuses_are_written_behind_messages_at_once_held_ones_kept_for_the_end_progress_shown_once() {
        let store = Store::ephemeral().await.unwrap();
        let id = session(&store).await;
        let redactor = Arc::new(Redactor::new(["sk-planted-0123456789".to_string()]));
        let earlier: HashSet<Progress> = [(Status::Acknowledged, None)].into();
        let sink = TurnSink::new(store.clone(), &id, redactor, earlier);
        assert_eq!(sink.emit(NewEvent::status("t", Status::Acknowledged), Visibility::Live).await, None);
        let processing = NewEvent::processing("t", ProcessingStage::Interpreting);
        assert_eq!(sink.emit(processing.clone(), Visibility::Live).await, None, "queued, not stored yet");
        assert_eq!(sink.emit(processing.clone(), Visibility::Live).await, None, "shown once");
        let pulse = |done| {
            let EventPayload::Status(status) = &processing.payload else { unreachable!() };
            let work = ModelWork { step: ModelStep::Reading, done, total: 400 };
            let progress = TurnProgress { elapsed_ms: 2_000, model_calls: 0, model: Some(work) };
            NewEvent::agent("t", EventPayload::Status(status.with_progress(progress)))
        };
        assert_eq!(sink.emit(pulse(100), Visibility::Live).await, None, "a pulse is queued to be shown");
        assert_eq!(sink.emit(pulse(200), Visibility::Live).await, None, "and the next one too");
        assert!(store.list_events(&id, &EventFilter::default()).await.unwrap().is_empty());
        // A message goes out at once, after the statuses queued before it.
        let streamed =
            sink.emit(NewEvent::message("t", "a", "A", "key sk-planted-0123456789"), Visibility::Live).await.unwrap();
        sink.update(&streamed, NewEvent::message("t", "a", "A", "whole, sk-planted-0123456789")).await;
        assert_eq!(sink.emit(NewEvent::message("t", "a", "A", "sk-planted-0123456789"), Visibility::Held).await, None);
        let stored = store.list_events(&id, &EventFilter::default()).await.unwrap();
        assert_eq!(stored.len(), 4, "{stored:?}");
        assert_eq!(stored[0].data["data"]["stage"], "Interpreting", "{stored:?}");
        assert_eq!(stored[2].data["data"]["progress"]["model"]["done"], 200);
        assert_eq!(stored[3].data["message"], "whole, ***");
        // A status still queued at the end goes with the held events, before them.
        assert_eq!(sink.emit(NewEvent::status("t", Status::Typing), Visibility::Live).await, None);
        let held = sink.take_held();
        assert_eq!(held.len(), 2, "{held:?}");
        assert_eq!(held[0].data["status"], "typing");
        assert_eq!(held[1].data["message"], "***");
        assert!(sink.take_held().is_empty());
    }

    #[tokio::test]
    async fn the_writer_stores_queued_statuses_while_the_turn_waits_and_stops_when_closed() {
        let store = Store::ephemeral().await.unwrap();
        let id = session(&store).await;
        let sink = TurnSink::new(store.clone(), &id, Arc::new(Redactor::new(Vec::<String>::new())), HashSet::new());
        let turn = async {
            sink.emit(NewEvent::status("t", Status::Acknowledged), Visibility::Live).await;
            sink.emit(NewEvent::processing("t", ProcessingStage::Interpreting), Visibility::Live).await;
            // The turn waits (for a model, say) until both statuses are stored.
            let mut seen = store.hub().subscribe(&id);
            while store.list_events(&id, &EventFilter::default()).await.unwrap().len() < 2 {
                seen.changed().await.unwrap();
            }
            sink.close();
        };
        let ((), ()) = tokio::join!(turn, sink.keep_writing());
        let stored = store.list_events(&id, &EventFilter::default()).await.unwrap();
        assert_eq!(stored.len(), 2, "{stored:?}");
        assert_eq!(stored[0].data["status"], "acknowledged");
        assert_eq!(stored[1].data["data"]["stage"], "Interpreting");
        assert!(sink.take_held().is_empty());
    }
}
