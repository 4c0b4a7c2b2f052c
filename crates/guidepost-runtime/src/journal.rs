//! [`CallJournal`]: where a turn's tool calls are recorded, so that a turn that runs again
//! (its process died, it was handed back at shutdown, another replica took it over) finds
//! what an earlier attempt did instead of doing it twice.
//!
//! # What "the same call" is
//!
//! A call is identified by its turn, its tool and its **occurrence**: how many calls of that
//! tool the turn decided before it ([`call_id`]). The arguments are not part of it. A turn
//! that runs again answers the same customer messages, but its model may phrase an argument
//! differently ("12 Main St" for "12 Main Street", another rounding of a time); were the
//! arguments part of the identity, such a rerun would miss the record and book a second
//! time, the very thing the record is for. So the k-th call of a tool in the rerun stands
//! for the k-th call of the earlier attempt, and the earlier attempt's decision stands: a
//! recorded call is reused (or sent again) with the arguments it was first sent with, and
//! the turn reports what was actually done. A recorded consequential call the rerun does
//! not decide at all is still reported (see `runtime/calls.rs`): the world changed.
//!
//! # What a rerun does with a recorded call
//!
//! - it **returned**: its recorded outcome is used; nothing is sent;
//! - it was **sent and never returned** (the process died during the call): a call that
//!   changes nothing (not consequential) is sent again; a consequential one is sent again
//!   only to a tool that performs each idempotency key once or whose repeats have no further
//!   effect ([`guidepost_core::tool::Idempotency`]), with the same key; otherwise it is not
//!   sent, is marked **unconfirmed**, and the turn tells the customer its outcome is being
//!   checked.
//!
//! The call id is also the call's idempotency key, a UUID (version 8, from SHA-256), the
//! same in every attempt of the turn and different for every other call.

use async_trait::async_trait;
use guidepost_core::ToolId;
use guidepost_tools::{ToolErrorKind, ToolOutcome, ToolResult};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The id of the `occurrence`-th call (from 0) of `tool` that turn `turn_id` decided: its
/// idempotency key.
///
/// ```
/// use guidepost_core::ToolId;
/// use guidepost_runtime::journal::call_id;
///
/// let book = ToolId::new("rides", "book_taxi");
/// assert_eq!(call_id("trace-1", &book, 0), call_id("trace-1", &book, 0));
/// assert_ne!(call_id("trace-1", &book, 0), call_id("trace-1", &book, 1));
/// assert_ne!(call_id("trace-1", &book, 0), call_id("trace-2", &book, 0));
/// assert_eq!(call_id("trace-1", &book, 0).len(), 36);
/// ```
pub fn call_id(turn_id: &str, tool: &ToolId, occurrence: u32) -> String {
    let digest = Sha256::digest(format!("guidepost tool call\0{turn_id}\0{tool}\0{occurrence}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid().hyphenated().to_string()
}

/// A tool call's outcome as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordedOutcome {
    /// It succeeded.
    Ok(Box<ToolResult>),
    /// It failed.
    Error {
        /// What happened.
        message: String,
        /// The kind of failure.
        kind: ToolErrorKind,
    },
}

impl From<&ToolOutcome> for RecordedOutcome {
    fn from(outcome: &ToolOutcome) -> Self {
        match outcome {
            ToolOutcome::Ok(result) => Self::Ok(Box::new(result.clone())),
            ToolOutcome::Error { message, kind } => Self::Error { message: message.clone(), kind: kind.clone() },
        }
    }
}

impl From<RecordedOutcome> for ToolOutcome {
    fn from(outcome: RecordedOutcome) -> Self {
        match outcome {
            RecordedOutcome::Ok(result) => Self::Ok(*result),
            RecordedOutcome::Error { message, kind } => Self::Error { message, kind },
        }
    }
}

/// Where a recorded call stands.
#[derive(Debug, Clone, PartialEq)]
pub enum EntryState {
    /// Sent; no outcome recorded.
    Started,
    /// What it returned.
    Returned(RecordedOutcome),
    /// Sent by an earlier attempt whose outcome was lost, and not sent again (its tool
    /// cannot tell a repeat from a new call): to be checked.
    Unconfirmed,
}

/// One call as the journal keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalEntry {
    /// Its id ([`call_id`]), which is also its idempotency key.
    pub call_id: String,
    /// The turn (trace id) that decided it.
    pub turn_id: String,
    /// The tool.
    pub tool: ToolId,
    /// How many calls of the tool the turn decided before it.
    pub occurrence: u32,
    /// The arguments it is (or was) sent with.
    pub arguments: Map<String, Value>,
    /// Whether the tool acts on the world.
    pub consequential: bool,
    /// Where it stands.
    pub state: EntryState,
}

/// What recording a send found.
#[derive(Debug, Clone, PartialEq)]
pub enum Sending {
    /// Recorded: send it now.
    Recorded,
    /// This process no longer holds the turn (another took it over): do not send.
    NotHolder,
    /// The call already has an outcome: use it instead.
    Settled(Box<JournalEntry>),
}

/// A journal that could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the record of the turn's tool calls: {0}")]
pub struct JournalError(pub String);

/// Where a turn's tool calls are recorded. The conversation service keeps them in its store
/// (across processes and replicas); `guidepost chat`, the simulator and the evaluations run
/// turns once and use [`NoJournal`].
#[async_trait]
pub trait CallJournal: Send + Sync {
    /// The calls earlier attempts of the turn recorded, in the order they were first sent.
    async fn recorded(&self, turn_id: &str) -> Result<Vec<JournalEntry>, JournalError>;

    /// Records that `entry` is sent now (its state is ignored): before the call leaves the
    /// process. See [`Sending`].
    async fn sending(&self, entry: &JournalEntry) -> Result<Sending, JournalError>;

    /// Records how a call ended: [`EntryState::Returned`] once it answered (also when the
    /// turn that sent it was stopped meanwhile), or [`EntryState::Unconfirmed`].
    async fn ended(&self, entry: &JournalEntry, state: EntryState) -> Result<(), JournalError>;
}

/// A journal that keeps nothing: every call is sent, nothing is found again.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoJournal;

#[async_trait]
impl CallJournal for NoJournal {
    async fn recorded(&self, _turn_id: &str) -> Result<Vec<JournalEntry>, JournalError> {
        Ok(Vec::new())
    }

    async fn sending(&self, _entry: &JournalEntry) -> Result<Sending, JournalError> {
        Ok(Sending::Recorded)
    }

    async fn ended(&self, _entry: &JournalEntry, _state: EntryState) -> Result<(), JournalError> {
        Ok(())
    }
}

/// How the call a turn reports came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallSource {
    /// Sent in this attempt of the turn.
    #[default]
    Sent,
    /// An earlier attempt of the turn sent it and recorded its outcome, which is reused.
    Replayed,
    /// An earlier attempt sent it and its outcome was lost; sent again with the same
    /// idempotency key (its tool performs each key once, or its repeats change nothing).
    Resent,
    /// An earlier attempt sent it and its outcome was lost; not sent again (its tool cannot
    /// tell a repeat from a new call): its outcome is being checked.
    Unconfirmed,
}

impl CallSource {
    /// Whether this is [`CallSource::Sent`] (left out of traces).
    pub fn is_sent(&self) -> bool {
        *self == Self::Sent
    }
}

/// The outcome of a call whose outcome is lost and that was not sent again.
pub fn unconfirmed_outcome(tool: &ToolId) -> ToolOutcome {
    ToolOutcome::Error {
        message: format!(
            "the outcome of `{tool}` is being checked: it was sent once and its answer was lost, and it was not \
             sent again so as not to act twice. Do not say it succeeded or failed"
        ),
        kind: ToolErrorKind::Unconfirmed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn call_ids_are_uuids_stable_per_turn_tool_and_occurrence() {
        let id = call_id("t", &ToolId::new("s", "book"), 0);
        let parsed = uuid::Uuid::parse_str(&id).unwrap();
        assert_eq!(parsed.get_version_num(), 8);
        assert_ne!(id, call_id("t", &ToolId::new("s", "pay"), 0));
    }

    #[test]
    fn outcomes_round_trip_through_their_record() {
        let ok = ToolOutcome::Ok(ToolResult::new(json!({"booking": 7})));
        let failed = ToolOutcome::failed("HTTP 409");
        for outcome in [ok, failed] {
            let recorded = serde_json::to_value(RecordedOutcome::from(&outcome)).unwrap();
            let back: RecordedOutcome = serde_json::from_value(recorded).unwrap();
            assert_eq!(ToolOutcome::from(back), outcome);
        }
    }
}
