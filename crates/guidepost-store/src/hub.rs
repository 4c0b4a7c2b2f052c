//! Wake-ups for clients waiting on a session: long polls and event streams subscribe
//! before they read, and every committed change to the session's events bumps a counter
//! they watch. No polling loop anywhere.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use tokio::sync::watch;

/// Per-session change counters.
#[derive(Debug, Default)]
pub struct SessionHub {
    sessions: Mutex<HashMap<String, watch::Sender<u64>>>,
}

impl SessionHub {
    /// A receiver that changes whenever the session's events do. Subscribe before reading,
    /// so a change between the read and the wait is not missed.
    pub fn subscribe(&self, session_id: &str) -> watch::Receiver<u64> {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.entry(session_id.to_string()).or_insert_with(|| watch::channel(0).0).subscribe()
    }

    /// Tells the session's waiters that its events changed. Sessions nobody waits on are
    /// forgotten, so the map holds only sessions with live waiters.
    pub fn notify(&self, session_id: &str) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = sessions.get(session_id) {
            if sender.receiver_count() == 0 {
                sessions.remove(session_id);
            } else {
                sender.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }

    /// Wakes every waiter (after a gap in cross-process notifications, when any session may
    /// have changed).
    pub fn notify_all(&self) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|_, s| s.receiver_count() > 0);
        for sender in sessions.values() {
            sender.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Sessions with live waiters.
    pub fn watched(&self) -> usize {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|_, s| s.receiver_count() > 0);
        sessions.len()
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
}
