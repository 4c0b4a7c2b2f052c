//! The tool calls of a turn, through its [`CallJournal`]: each call the turn decides is
//! looked up among what earlier attempts of the turn recorded (by its tool and occurrence,
//! see [`crate::journal`]) and reused, sent again or reported unconfirmed; a new call is
//! recorded before it is sent and its outcome when it returns. Each send runs in a task of
//! its own that records the outcome itself, so a turn stopped while its calls run
//! (shutdown, a lost lease) still leaves their outcomes for the attempt that follows.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use guidepost_core::ToolId;
use guidepost_tools::{ToolCallRecord, ToolCallRequest, ToolOutcome};

use super::AgentRuntime;
use super::turn::Turn;
use crate::journal::{CallSource, EntryState, JournalEntry, Sending, call_id, unconfirmed_outcome};

/// The calls a turn decided so far, and what earlier attempts of it recorded.
#[derive(Debug, Default)]
pub(crate) struct CallBook {
    recorded: Vec<JournalEntry>,
    /// Ids of the recorded calls this attempt decided too.
    reached: HashSet<String>,
    /// Calls decided so far, per tool.
    counts: HashMap<ToolId, u32>,
}

impl CallBook {
    /// A book for a turn whose earlier attempts recorded `recorded`.
    pub(crate) fn new(recorded: Vec<JournalEntry>) -> Self {
        Self { recorded, ..Self::default() }
    }

    /// Whether an earlier attempt sent a consequential call.
    pub(crate) fn acted_before(&self) -> bool {
        self.recorded.iter().any(|e| e.consequential)
    }

    /// The occurrence and id of the next call of `tool`, and what an earlier attempt
    /// recorded of it.
    fn next(&mut self, turn_id: &str, tool: &ToolId) -> (u32, String, Option<JournalEntry>) {
        let count = self.counts.entry(tool.clone()).or_default();
        let occurrence = *count;
        *count += 1;
        let id = call_id(turn_id, tool, occurrence);
        let recorded = self.recorded.iter().find(|e| e.call_id == id).cloned();
        if recorded.is_some() {
            self.reached.insert(id.clone());
        }
        (occurrence, id, recorded)
    }

    /// The consequential calls earlier attempts recorded that this one did not decide,
    /// marked as reached.
    fn take_unreached_consequential(&mut self) -> Vec<JournalEntry> {
        let unreached: Vec<JournalEntry> =
            self.recorded.iter().filter(|e| e.consequential && !self.reached.contains(&e.call_id)).cloned().collect();
        self.reached.extend(unreached.iter().map(|e| e.call_id.clone()));
        unreached
    }
}

/// What to do with one decided call.
#[derive(Debug)]
enum Plan {
    /// An earlier attempt recorded its outcome: use it.
    Reuse(JournalEntry),
    /// Its outcome is lost, and it may not be sent again: report it unconfirmed.
    Unconfirmed(JournalEntry),
    /// Send it (again, with the same key, when `source` is [`CallSource::Resent`]).
    Send(JournalEntry, CallSource),
}

/// One call as the turn reports it.
pub(super) struct Made {
    pub(super) record: ToolCallRecord,
    pub(super) source: CallSource,
    pub(super) call_id: String,
}

impl AgentRuntime {
    /// Runs the calls the turn decided, in parallel; their outcomes in request order.
    pub(super) async fn make_calls(&self, turn: &mut Turn<'_>, requests: Vec<ToolCallRequest>) -> Vec<Made> {
        let plans: Vec<Plan> = requests.into_iter().map(|r| self.plan(turn, r)).collect();
        let turn = &*turn;
        futures::future::join_all(plans.into_iter().map(|p| self.carry_out(turn, p))).await
    }

    /// The consequential calls earlier attempts of the turn recorded and this attempt did not
    /// decide (its model answered differently): reported as they stand (a lost outcome is
    /// resent or left unconfirmed by the same rules), since they changed the world whatever
    /// this attempt decided.
    pub(super) async fn make_unreached_calls(&self, turn: &mut Turn<'_>) -> Vec<Made> {
        let unreached = turn.calls.take_unreached_consequential();
        if unreached.is_empty() {
            return Vec::new();
        }
        tracing::info!(
            trace_id = turn.trace_id(),
            calls = unreached.len(),
            "reporting consequential calls an earlier attempt of the turn made and this one did not decide"
        );
        let plans: Vec<Plan> = unreached.into_iter().map(|e| self.plan_recorded(e)).collect();
        let turn = &*turn;
        futures::future::join_all(plans.into_iter().map(|p| self.carry_out(turn, p))).await
    }

    fn plan(&self, turn: &mut Turn<'_>, request: ToolCallRequest) -> Plan {
        let turn_id = turn.input.trace_id.clone();
        let (occurrence, id, recorded) = turn.calls.next(&turn_id, &request.tool);
        match recorded {
            Some(entry) => {
                if entry.arguments != request.arguments {
                    tracing::info!(
                        trace_id = %turn_id,
                        tool = %entry.tool,
                        occurrence,
                        "this attempt decided other arguments than the earlier one; the earlier decision stands"
                    );
                }
                self.plan_recorded(entry)
            }
            None => {
                let consequential = self.tools.tool(&request.tool).is_some_and(|t| t.consequential);
                let entry = JournalEntry {
                    call_id: id,
                    turn_id,
                    tool: request.tool,
                    occurrence,
                    arguments: request.arguments,
                    consequential,
                    state: EntryState::Started,
                };
                Plan::Send(entry, CallSource::Sent)
            }
        }
    }

    /// What to do with a call an earlier attempt recorded.
    fn plan_recorded(&self, entry: JournalEntry) -> Plan {
        match entry.state {
            EntryState::Returned(_) => Plan::Reuse(entry),
            EntryState::Unconfirmed => Plan::Unconfirmed(entry),
            // A lookup is asked again; an action only of a tool that recognizes a repeat.
            EntryState::Started if !entry.consequential || self.tools.idempotency(&entry.tool).allows_resending() => {
                Plan::Send(entry, CallSource::Resent)
            }
            EntryState::Started => Plan::Unconfirmed(entry),
        }
    }

    async fn carry_out(&self, turn: &Turn<'_>, plan: Plan) -> Made {
        let entry = match &plan {
            Plan::Reuse(e) | Plan::Unconfirmed(e) | Plan::Send(e, _) => e,
        };
        if entry.consequential {
            turn.latch.set_acted();
        }
        match plan {
            Plan::Reuse(entry) => reused(entry),
            Plan::Unconfirmed(entry) => self.unconfirmed(entry).await,
            Plan::Send(entry, source) => self.send(turn, entry, source).await,
        }
    }

    async fn unconfirmed(&self, entry: JournalEntry) -> Made {
        if entry.state == EntryState::Started {
            tracing::warn!(
                tool = %entry.tool,
                call_id = %entry.call_id,
                "a consequential call sent by an earlier attempt of the turn has no recorded outcome and its tool \
                 cannot tell a repeat from a new call: not sent again; its outcome must be checked"
            );
            if let Err(error) = self.journal.ended(&entry, EntryState::Unconfirmed).await {
                tracing::error!(%error, call_id = %entry.call_id, "could not record a call as unconfirmed");
            }
        }
        let outcome = unconfirmed_outcome(&entry.tool);
        made(entry, outcome, CallSource::Unconfirmed, Duration::ZERO)
    }

    async fn send(&self, turn: &Turn<'_>, entry: JournalEntry, source: CallSource) -> Made {
        let not_sent = |entry: JournalEntry, why: String| {
            tracing::warn!(tool = %entry.tool, call_id = %entry.call_id, %why, "a tool call was not sent");
            made(entry, ToolOutcome::unavailable(format!("not sent: {why}")), source, Duration::ZERO)
        };
        match self.journal.sending(&entry).await {
            Ok(Sending::Recorded) => {}
            Ok(Sending::NotHolder) => {
                return not_sent(entry, "this process no longer holds the turn (another one took it over)".into());
            }
            Ok(Sending::Settled(settled)) => return reused(*settled),
            Err(error) => return not_sent(entry, error.to_string()),
        }
        let (tools, journal) = (self.tools.clone(), self.journal.clone());
        let ctx = turn.tool_ctx.clone().with_idempotency_key(entry.call_id.clone());
        let (id, tool, arguments) = (entry.call_id.clone(), entry.tool.clone(), entry.arguments.clone());
        // The send and the record of its outcome go together, in a task of their own: a turn
        // stopped meanwhile still leaves the outcome for the attempt that follows.
        let task = tokio::spawn(async move {
            let record = tools.call(&entry.tool, entry.arguments.clone(), &ctx, None).await;
            if let Err(error) = journal.ended(&entry, EntryState::Returned((&record.outcome).into())).await {
                tracing::error!(%error, call_id = %entry.call_id, "the outcome of a tool call could not be recorded");
            }
            record
        });
        match task.await {
            Ok(record) => Made { record, source, call_id: id },
            Err(error) => Made {
                record: ToolCallRecord {
                    tool,
                    arguments,
                    outcome: ToolOutcome::failed(format!("the call stopped: {error}")),
                    emissions: Vec::new(),
                    duration: Duration::ZERO,
                },
                source,
                call_id: id,
            },
        }
    }
}

/// A call an earlier attempt recorded the outcome of.
fn reused(entry: JournalEntry) -> Made {
    let outcome = match &entry.state {
        EntryState::Returned(outcome) => outcome.clone().into(),
        _ => unconfirmed_outcome(&entry.tool),
    };
    let source =
        if matches!(entry.state, EntryState::Returned(_)) { CallSource::Replayed } else { CallSource::Unconfirmed };
    made(entry, outcome, source, Duration::ZERO)
}

fn made(entry: JournalEntry, outcome: ToolOutcome, source: CallSource, duration: Duration) -> Made {
    Made {
        record: ToolCallRecord {
            tool: entry.tool,
            arguments: entry.arguments,
            outcome,
            emissions: Vec::new(),
            duration,
        },
        source,
        call_id: entry.call_id,
    }
}
