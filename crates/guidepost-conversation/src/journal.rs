//! [`StoreJournal`]: the runtime's [`CallJournal`] kept in the store, so the tool calls of a
//! turn are known to every process and replica that may run it again; and the tool calls
//! of this process still running, which shutdown waits for before handing their turns back.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use guidepost_core::ToolId;
use guidepost_runtime::journal::{CallJournal, EntryState, JournalEntry, JournalError, RecordedOutcome, Sending};
use guidepost_store::Store;
use guidepost_store::tool_calls::{NewToolCall, StoredToolCall, ToolCallState};
use serde_json::Value;
use tokio::sync::Notify;

/// Tool calls recorded in the store, on behalf of one worker (the owner of its leases).
pub struct StoreJournal {
    store: Store,
    worker: String,
    /// The calls this process sent and whose outcome is not recorded yet, by turn.
    running: Mutex<HashMap<String, HashSet<String>>>,
    settled: Notify,
}

impl StoreJournal {
    /// A journal in `store`, recording sends for `worker`.
    pub fn new(store: Store, worker: impl Into<String>) -> Self {
        Self { store, worker: worker.into(), running: Mutex::default(), settled: Notify::new() }
    }

    /// How many calls of turn `turn_id` this process sent whose outcome is not recorded yet.
    pub fn running(&self, turn_id: &str) -> usize {
        self.running.lock().unwrap_or_else(PoisonError::into_inner).get(turn_id).map_or(0, HashSet::len)
    }

    /// Waits until every call of turn `turn_id` this process sent has its outcome recorded,
    /// or `until`; how many are still running then.
    pub async fn wait_for_calls(&self, turn_id: &str, until: tokio::time::Instant) -> usize {
        loop {
            let settled = self.settled.notified();
            let running = self.running(turn_id);
            if running == 0 {
                return 0;
            }
            tokio::select! {
                () = settled => {}
                () = tokio::time::sleep_until(until) => return self.running(turn_id),
            }
        }
    }

    fn track(&self, entry: &JournalEntry, running: bool) {
        let mut all = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if running {
            all.entry(entry.turn_id.clone()).or_default().insert(entry.call_id.clone());
            return;
        }
        if let Some(calls) = all.get_mut(&entry.turn_id) {
            calls.remove(&entry.call_id);
            if calls.is_empty() {
                all.remove(&entry.turn_id);
            }
        }
        drop(all);
        self.settled.notify_waiters();
    }
}

/// The runtime's entry for a stored call.
fn entry(call: StoredToolCall) -> Result<JournalEntry, JournalError> {
    let what = format!("tool call `{}` of turn `{}`", call.id, call.turn_id);
    let tool = ToolId::parse(&call.tool).ok_or_else(|| JournalError(format!("{what} names tool `{}`", call.tool)))?;
    let Value::Object(arguments) = call.arguments else {
        return Err(JournalError(format!("{what} has arguments that are not an object")));
    };
    let state = match call.state {
        ToolCallState::Started => EntryState::Started,
        ToolCallState::Unconfirmed => EntryState::Unconfirmed,
        ToolCallState::Returned => {
            let outcome = call.outcome.ok_or_else(|| JournalError(format!("{what} returned no outcome")))?;
            let outcome: RecordedOutcome = serde_json::from_value(outcome)
                .map_err(|e| JournalError(format!("{what} has an unreadable outcome: {e}")))?;
            EntryState::Returned(outcome)
        }
    };
    Ok(JournalEntry {
        call_id: call.id,
        turn_id: call.turn_id,
        tool,
        occurrence: u32::try_from(call.occurrence).unwrap_or(u32::MAX),
        arguments,
        consequential: call.consequential,
        state,
    })
}

#[async_trait]
impl CallJournal for StoreJournal {
    async fn recorded(&self, turn_id: &str) -> Result<Vec<JournalEntry>, JournalError> {
        let calls = self.store.tool_calls_of_turn(turn_id).await.map_err(|e| JournalError(e.to_string()))?;
        calls.into_iter().map(entry).collect()
    }

    async fn sending(&self, call: &JournalEntry) -> Result<Sending, JournalError> {
        let new = NewToolCall {
            id: call.call_id.clone(),
            turn_id: call.turn_id.clone(),
            tool: call.tool.to_string(),
            occurrence: i64::from(call.occurrence),
            arguments: Value::Object(call.arguments.clone()),
            consequential: call.consequential,
        };
        let sending =
            self.store.record_tool_call_sent(&new, &self.worker).await.map_err(|e| JournalError(e.to_string()))?;
        Ok(match sending {
            guidepost_store::tool_calls::Sending::Recorded => {
                self.track(call, true);
                Sending::Recorded
            }
            guidepost_store::tool_calls::Sending::NotHolder => Sending::NotHolder,
            guidepost_store::tool_calls::Sending::Settled(stored) => Sending::Settled(Box::new(entry(*stored)?)),
        })
    }

    async fn ended(&self, call: &JournalEntry, state: EntryState) -> Result<(), JournalError> {
        let (stored, outcome) = match &state {
            EntryState::Started => return Ok(()),
            EntryState::Unconfirmed => (ToolCallState::Unconfirmed, None),
            EntryState::Returned(outcome) => {
                (ToolCallState::Returned, Some(serde_json::to_value(outcome).map_err(|e| JournalError(e.to_string()))?))
            }
        };
        // An outcome lost to a busy or briefly unreachable database would make the next
        // attempt report the call unconfirmed: it gets a few tries.
        let mut delay = Duration::from_millis(50);
        let mut result = Ok(());
        for attempt in 1..=5 {
            match self.store.record_tool_call_end(&call.call_id, stored, outcome.as_ref()).await {
                Ok(_) => {
                    result = Ok(());
                    break;
                }
                Err(error) if error.is_client_error() || attempt == 5 => {
                    result = Err(JournalError(error.to_string()));
                    break;
                }
                Err(error) => {
                    tracing::warn!(%error, call_id = %call.call_id, attempt, "recording a tool call's outcome failed; trying again");
                    tokio::time::sleep(delay).await;
                    delay *= 3;
                }
            }
        }
        if stored == ToolCallState::Returned {
            self.track(call, false);
        }
        result
    }
}
