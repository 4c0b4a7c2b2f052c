//! Wake-ups for what waits on a session: long polls and event streams subscribe before they
//! read, and every committed change to the session's events bumps a counter they watch; a
//! running turn watches a second counter, bumped only when the session's unfinished turns
//! are asked to stop (a newer message, a cancellation, the session deleted), so the events a
//! turn itself writes do not wake its own watch. No polling loop anywhere.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use tokio::sync::watch;

/// Per-session counters of one kind of change.
#[derive(Debug, Default)]
struct Counters {
    sessions: Mutex<HashMap<String, watch::Sender<u64>>>,
}

impl Counters {
    fn subscribe(&self, session_id: &str) -> watch::Receiver<u64> {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.entry(session_id.to_string()).or_insert_with(|| watch::channel(0).0).subscribe()
    }

    fn notify(&self, session_id: &str) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = sessions.get(session_id) {
            if sender.receiver_count() == 0 {
                sessions.remove(session_id);
            } else {
                sender.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }

    fn notify_all(&self) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|_, s| s.receiver_count() > 0);
        for sender in sessions.values() {
            sender.send_modify(|n| *n = n.wrapping_add(1));
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
    events: Counters,
    stops: Counters,
}

impl SessionHub {
    /// A receiver that changes whenever the session's events do. Subscribe before reading,
    /// so a change between the read and the wait is not missed.
    pub fn subscribe(&self, session_id: &str) -> watch::Receiver<u64> {
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
