//! Wake-ups for what waits on a session: long polls and event streams subscribe before they
//! read, and every committed change to the session's events bumps a counter they watch; a
//! running turn watches a second counter, bumped only when the session's unfinished turns
//! are asked to stop (a newer message, a cancellation, the session deleted), so the events a
//! turn itself writes do not wake its own watch. No polling loop anywhere.
//!
//! A change that appended events in this process carries them: a waiter that saw nothing
//! else change since its last read answers from them instead of reading the store again
//! (see [`crate::EventPage::of_appended`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use guidepost_core::Event;
use tokio::sync::watch;

/// An event one commit appended, with the size a page counts for it (the characters of
/// its data and metadata as stored).
#[derive(Debug, Clone, PartialEq)]
pub struct AppendedEvent {
    /// The event as stored.
    pub event: Event,
    /// What it counts towards a page's bytes.
    pub size: usize,
}

/// The latest change to a session's events.
#[derive(Debug, Clone, Default)]
pub struct EventsChange {
    /// How many changes the session's events had since anyone watched them (wraps).
    pub count: u64,
    /// The events this change appended, in offset order, when it was one commit of this
    /// process that only appended; `None` for any other change (an update, a deletion,
    /// another process's commit, a wake-up of everything).
    pub appended: Option<Arc<[AppendedEvent]>>,
}

/// A change counter: what [`Counters`] keeps per session.
trait Change: Default {
    fn bump(&mut self);
}

impl Change for u64 {
    fn bump(&mut self) {
        *self = self.wrapping_add(1);
    }
}

impl Change for EventsChange {
    fn bump(&mut self) {
        self.count = self.count.wrapping_add(1);
        self.appended = None;
    }
}

/// Per-session counters of one kind of change.
#[derive(Debug)]
struct Counters<T> {
    sessions: Mutex<HashMap<String, watch::Sender<T>>>,
}

impl<T> Default for Counters<T> {
    fn default() -> Self {
        Self { sessions: Mutex::default() }
    }
}

impl<T: Change> Counters<T> {
    fn subscribe(&self, session_id: &str) -> watch::Receiver<T> {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.entry(session_id.to_string()).or_insert_with(|| watch::channel(T::default()).0).subscribe()
    }

    fn notify(&self, session_id: &str) {
        self.notify_with(session_id, T::bump);
    }

    /// Applies `change` to the session's value when someone watches it.
    fn notify_with(&self, session_id: &str, change: impl FnOnce(&mut T)) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = sessions.get(session_id) {
            if sender.receiver_count() == 0 {
                sessions.remove(session_id);
            } else {
                sender.send_modify(change);
            }
        }
    }

    fn notify_all(&self) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|_, s| s.receiver_count() > 0);
        for sender in sessions.values() {
            sender.send_modify(T::bump);
        }
    }

    fn watched(&self) -> usize {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|_, s| s.receiver_count() > 0);
        sessions.len()
    }
}

/// Per-session change counters: one for the session's events, one for requests that its
/// unfinished turns stop.
#[derive(Debug, Default)]
pub struct SessionHub {
    events: Counters<EventsChange>,
    stops: Counters<u64>,
}

impl SessionHub {
    /// A receiver that changes whenever the session's events do. Subscribe before reading,
    /// so a change between the read and the wait is not missed.
    pub fn subscribe(&self, session_id: &str) -> watch::Receiver<EventsChange> {
        self.events.subscribe(session_id)
    }

    /// A receiver that changes whenever the session's unfinished turns are asked to stop.
    /// Subscribe before reading the turn's flag.
    pub fn subscribe_stops(&self, session_id: &str) -> watch::Receiver<u64> {
        self.stops.subscribe(session_id)
    }

    /// Tells the session's waiters that its events changed. Sessions nobody waits on are
    /// forgotten, so the map holds only sessions with live waiters.
    pub fn notify(&self, session_id: &str) {
        self.events.notify(session_id);
    }

    /// Tells the session's waiters that one commit appended `events` (in offset order) and
    /// changed nothing else, and hands them the events. Nothing is copied when nobody waits.
    pub fn notify_appended(&self, session_id: &str, events: &[AppendedEvent]) {
        self.events.notify_with(session_id, |change| {
            change.bump();
            change.appended = Some(events.into());
        });
    }

    /// Tells the session's running turns that they were asked to stop.
    pub fn notify_stop(&self, session_id: &str) {
        self.stops.notify(session_id);
    }

    /// Wakes every waiter of either kind (after a gap in cross-process notifications, when
    /// any session may have changed).
    pub fn notify_all(&self) {
        self.events.notify_all();
        self.stops.notify_all();
    }

    /// Sessions with live waiters on their events.
    pub fn watched(&self) -> usize {
        self.events.watched()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_waiter_wakes_on_notify_and_idle_sessions_are_forgotten() {
        let hub = SessionHub::default();
        let mut rx = hub.subscribe("s1");
        hub.notify("s1");
        assert!(rx.has_changed().unwrap());
        rx.borrow_and_update();
        hub.notify("s2");
        assert_eq!(hub.watched(), 1);
        drop(rx);
        hub.notify("s1");
        assert_eq!(hub.watched(), 0);
    }

    #[tokio::test]
    async fn events_do_not_wake_a_stop_watch_and_stops_do_not_wake_event_waiters() {
        let hub = SessionHub::default();
        let mut events = hub.subscribe("s1");
        let mut stops = hub.subscribe_stops("s1");
        hub.notify("s1");
        assert!(events.has_changed().unwrap());
        assert!(!stops.has_changed().unwrap());
        events.borrow_and_update();
        hub.notify_stop("s1");
        assert!(stops.has_changed().unwrap());
        assert!(!events.has_changed().unwrap());
        stops.borrow_and_update();
        hub.notify_all();
        assert!(stops.has_changed().unwrap() && events.has_changed().unwrap());
    }
}
