//! The time of a turn: freshness of context variables and the date a reply may mention are
//! judged against it.

use chrono::{DateTime, Utc};

/// The current time. Freshness is always judged against the time of the turn, never a
/// time captured at start-up.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}
