//! Waiting for what a session's turns write: until events come, until a streamed message is
//! whole, or following either as it grows. Every wait wakes the moment a change is committed
//! (no polling loop) and ends at once when the service stops.

use std::time::Duration;

use futures::Stream;
use guidepost_core::Event;
use guidepost_store::{EventFilter, EventPage, EventsChange, StoreError};
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::Conversations;
use crate::error::{ConversationError, Result};

/// Waits for `changes` to move, until `deadline`; `false` when the deadline passed or the
/// service is stopping (a waiter then answers as it would on its timeout).
pub(crate) async fn changed<T>(
    changes: &mut watch::Receiver<T>,
    deadline: Instant,
    stopping: &CancellationToken,
) -> bool {
    tokio::select! {
        r = tokio::time::timeout_at(deadline, changes.changed()) => matches!(r, Ok(Ok(()))),
        () = stopping.cancelled() => false,
    }
}

/// What a waiter knows of the session's events since its last read: the change count it
/// had seen then.
struct Seen(u64);

impl Seen {
    /// Marks what `changes` holds now as seen, before a read of the store.
    fn now(changes: &mut watch::Receiver<EventsChange>) -> Self {
        Self(changes.borrow_and_update().count)
    }

    /// After a wake-up: the page the change itself gives, when it was the only change since
    /// the last read and it appended, in this process, events the filter starts within (see
    /// [`EventPage::of_appended`]); `None` when the store must be read. Marks it seen.
    fn page(
        &mut self,
        changes: &mut watch::Receiver<EventsChange>,
        filter: &EventFilter,
        (max_events, max_bytes): (usize, usize),
    ) -> Option<EventPage> {
        let change = changes.borrow_and_update();
        let only = change.count == self.0.wrapping_add(1);
        self.0 = change.count;
        let appended = change.appended.as_ref().filter(|_| only)?;
        EventPage::of_appended(appended, filter, max_events, max_bytes)
    }
}

/// Whether an event is whole: anything but a message still being streamed (its `chunks`
/// end with `null` once the message is whole).
pub fn is_whole(event: &Event) -> bool {
    match event.data.get("chunks").and_then(Value::as_array) {
        Some(chunks) => chunks.last().is_some_and(Value::is_null),
        None => true,
    }
}

impl Conversations {
    /// The session's events the filter keeps, waiting up to `wait` for one to come when
    /// there is none yet. With no wait, answers at once (possibly with none); after a wait in
    /// vain, [`ConversationError::Timeout`].
    pub async fn wait_for_events(&self, session_id: &str, filter: &EventFilter, wait: Duration) -> Result<Vec<Event>> {
        let all = filter.limit.unwrap_or(usize::MAX);
        Ok(self.wait_for_page(session_id, filter, (all, usize::MAX), wait).await?.events)
    }

    /// The first page of the session's events the filter keeps (at most `max_events`, and
    /// no more once `max_bytes` of data were read; see [`guidepost_store::Store::events_page`]),
    /// waiting up to `wait` for one to come when there is none yet, as
    /// [`Self::wait_for_events`] does. A listing sent page by page starts from it: one read
    /// of the store where a wait and then a listing would take two.
    pub async fn wait_for_page(
        &self,
        session_id: &str,
        filter: &EventFilter,
        (max_events, max_bytes): (usize, usize),
        wait: Duration,
    ) -> Result<EventPage> {
        let mut changes = self.store.hub().subscribe(session_id);
        let mut seen = Seen::now(&mut changes);
        let deadline = Instant::now() + wait;
        let mut known = false;
        let mut events = self.store.events_page(session_id, filter, max_events, max_bytes).await?;
        loop {
            // Events found say the session exists (they go with it); none found, it may not.
            if !events.events.is_empty() {
                return Ok(events);
            }
            if !known {
                self.store.require_session(session_id).await?;
                known = true;
            }
            if wait.is_zero() {
                return Ok(events);
            }
            if !changed(&mut changes, deadline, self.scheduler.stopping()).await {
                // A session deleted meanwhile answers as missing.
                self.store.require_session(session_id).await?;
                return Err(ConversationError::Timeout);
            }
            events = match seen.page(&mut changes, filter, (max_events, max_bytes)) {
                Some(page) => page,
                None => self.store.events_page(session_id, filter, max_events, max_bytes).await?,
            };
        }
    }

    /// The session's events the filter keeps, as they come, from its `min_offset` on. The
    /// stream ends when nothing came for `wait` (at least a second), on a store error, or
    /// when the service stops.
    pub fn follow_events(
        &self,
        session_id: &str,
        mut filter: EventFilter,
        wait: Duration,
    ) -> impl Stream<Item = Event> + Send + 'static {
        let (store, stopping, session_id) =
            (self.store.clone(), self.scheduler.stopping().clone(), session_id.to_string());
        async_stream::stream! {
            let mut changes = store.hub().subscribe(&session_id);
            let mut seen = Seen::now(&mut changes);
            let mut from_change = None;
            loop {
                let batch = match from_change.take() {
                    Some(EventPage { events, .. }) => events,
                    None => match store.list_events(&session_id, &filter).await {
                        Ok(b) => b,
                        Err(error) => {
                            tracing::warn!(%error, session_id, "an event stream ended on a store error");
                            break;
                        }
                    },
                };
                for e in batch {
                    filter.min_offset = e.offset + 1;
                    yield e;
                }
                // What came after the read (or the change) moved `changes`: the wait ends at
                // once for it.
                let deadline = Instant::now() + wait.max(Duration::from_secs(1));
                if !changed(&mut changes, deadline, &stopping).await {
                    break;
                }
                from_change = seen.page(&mut changes, &filter, (usize::MAX, usize::MAX));
            }
        }
    }

    /// The event, once whole (see [`is_whole`]): at once when it is, else when its last
    /// chunk comes, waiting up to `wait` ([`ConversationError::Timeout`] after that).
    pub async fn wait_until_whole(&self, session_id: &str, event_id: &str, wait: Duration) -> Result<Event> {
        let not_found = || StoreError::NotFound { kind: "event", id: event_id.to_string() };
        let mut changes = self.store.hub().subscribe(session_id);
        let deadline = Instant::now() + wait;
        loop {
            let event = self.store.get_event(session_id, event_id).await?.ok_or_else(not_found)?;
            if is_whole(&event) {
                return Ok(event);
            }
            if !changed(&mut changes, deadline, self.scheduler.stopping()).await {
                return Err(ConversationError::Timeout);
            }
        }
    }

    /// The event each time it changes, until it is whole (see [`is_whole`]), it is gone,
    /// nothing changed for `wait` (at least a second), or the service stops.
    pub fn follow_event(
        &self,
        session_id: &str,
        event_id: &str,
        wait: Duration,
    ) -> impl Stream<Item = Event> + Send + 'static {
        let (store, stopping) = (self.store.clone(), self.scheduler.stopping().clone());
        let (session_id, event_id) = (session_id.to_string(), event_id.to_string());
        async_stream::stream! {
            let mut changes = store.hub().subscribe(&session_id);
            let mut last: Option<Value> = None;
            loop {
                let Ok(Some(e)) = store.get_event(&session_id, &event_id).await else { break };
                let whole = is_whole(&e);
                if last.as_ref() != Some(&e.data) {
                    last = Some(e.data.clone());
                    yield e;
                }
                if whole {
                    break;
                }
                let deadline = Instant::now() + wait.max(Duration::from_secs(1));
                if !changed(&mut changes, deadline, &stopping).await {
                    break;
                }
            }
        }
    }
}
