//! One turn: what it starts from ([`TurnInput`]), how it ends ([`TurnStatus`],
//! [`TurnOutcome`]), the latch that says when it can no longer be cancelled
//! ([`EmittingLatch`]), and, inside the runtime, the turn in progress its stages share.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use guidepost_core::{AgentDefinition, AgentState, Event};
use guidepost_llm::UsageLedger;
use guidepost_tools::context::ToolContext;
use tokio_util::sync::CancellationToken;

use crate::events::EventSink;
use crate::history::PromptHistory;
use crate::state::ResponseState;
use crate::trace::TurnTrace;
use crate::variables::CustomerRef;

/// One turn's input.
#[derive(Debug, Clone, Default)]
pub struct TurnInput {
    /// The session.
    pub session_id: String,
    /// Who the customer is.
    pub customer: CustomerRef,
    /// The customer's name, when known.
    pub customer_name: Option<String>,
    /// The session's events so far, the customer's new message(s) included.
    pub events: Vec<Event>,
    /// The state the previous turn left.
    pub previous_state: AgentState,
    /// The turn's trace id (shared by every event it emits).
    pub trace_id: String,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnStatus {
    /// A reply was sent (or deliberately none, when a hook bailed).
    Completed,
    /// A reply was sent, but a stage lost work to failures on the way (guideline matching,
    /// tool-call inference or tool calls; see [`TurnTrace::degraded`]): the reply may miss
    /// what the lost work would have brought. The `ready` status event and the message
    /// event carry the same list under `degraded`.
    Degraded,
    /// A newer customer message cancelled it before the reply was emitted.
    Cancelled,
    /// It failed; an `error` status was emitted.
    Failed,
}

impl TurnStatus {
    /// Whether the turn ran to its end and sent its reply (degraded or not), so its state
    /// carries over to the next turn.
    pub fn replied(self) -> bool {
        matches!(self, Self::Completed | Self::Degraded)
    }
}

/// What a turn produced.
#[derive(Debug, Clone)]
pub struct TurnOutcome {
    /// How it ended.
    pub status: TurnStatus,
    /// Messages sent.
    pub messages: Vec<String>,
    /// The state to give the next turn.
    pub state: AgentState,
    /// What happened and why.
    pub trace: TurnTrace,
}

/// Flags that tell a running turn's owner whether it can still be cancelled: once the reply
/// is being emitted the turn finishes; once it sent a consequential tool call (it booked,
/// paid, sent) it runs to its reply, so the customer hears what was done.
#[derive(Debug, Default, Clone)]
pub struct EmittingLatch {
    emitting: Arc<AtomicBool>,
    acted: Arc<AtomicBool>,
}

impl EmittingLatch {
    /// Whether the reply is being emitted.
    pub fn is_set(&self) -> bool {
        self.emitting.load(Ordering::SeqCst)
    }

    /// Whether the turn sent (or found sent by an earlier attempt) a consequential tool call.
    pub fn has_acted(&self) -> bool {
        self.acted.load(Ordering::SeqCst)
    }

    /// Whether a newer message or a cancellation may still stop the turn: neither replying
    /// nor acted on the world.
    pub fn can_cancel(&self) -> bool {
        !self.is_set() && !self.has_acted()
    }

    pub(super) fn set(&self) {
        self.emitting.store(true, Ordering::SeqCst);
    }

    pub(super) fn set_acted(&self) {
        self.acted.store(true, Ordering::SeqCst);
    }
}

/// How a stage that a newer message can cancel ended.
pub(super) enum Step<T> {
    Done(T),
    Cancelled,
}

/// How the stages of a turn ended, when it did not fail.
pub(super) enum Ending {
    /// These messages were sent (none when a hook bailed, or the reply was empty).
    Sent(Vec<String>),
    /// A newer customer message cancelled the turn before its reply was emitted.
    Cancelled,
}

/// One turn in progress: what its stages read (the input, where events go, cancellation)
/// and what they build (the state, the trace, the model usage).
pub(super) struct Turn<'a> {
    pub(super) input: &'a TurnInput,
    pub(super) sink: &'a dyn EventSink,
    pub(super) cancel: &'a CancellationToken,
    pub(super) latch: &'a EmittingLatch,
    pub(super) tool_ctx: ToolContext,
    /// The tool calls decided so far and what earlier attempts of the turn recorded.
    pub(super) calls: super::calls::CallBook,
    pub(super) ledger: UsageLedger,
    pub(super) state: ResponseState,
    pub(super) trace: TurnTrace,
}

impl<'a> Turn<'a> {
    pub(super) fn new(
        definition: &AgentDefinition,
        input: &'a TurnInput,
        sink: &'a dyn EventSink,
        cancel: &'a CancellationToken,
        latch: &'a EmittingLatch,
        what: &str,
    ) -> Self {
        Self {
            input,
            sink,
            cancel,
            latch,
            tool_ctx: ToolContext::new(&definition.agent.id, &input.session_id, &input.customer.id),
            calls: super::calls::CallBook::default(),
            ledger: UsageLedger::new(format!("{what} {}", input.trace_id)),
            state: ResponseState::default(),
            trace: TurnTrace { trace_id: input.trace_id.clone(), ..TurnTrace::default() },
        }
    }

    pub(super) fn trace_id(&self) -> &str {
        &self.input.trace_id
    }
}

/// What the turn's prompts show of the conversation: all of it (matching has its own
/// window), the part composition and tool inference show, and the text retrieval embeds.
pub(super) struct Seen<'c> {
    pub(super) conversation: &'c [(String, String)],
    pub(super) history: PromptHistory<'c>,
    pub(super) query: String,
}

/// `fut`, unless `cancel` fires first while the turn can still be cancelled (see
/// [`EmittingLatch::can_cancel`]): a turn that acted finishes what it started.
pub(super) async fn cancellable<T>(
    cancel: &CancellationToken,
    latch: &EmittingLatch,
    fut: impl std::future::Future<Output = T>,
) -> Step<T> {
    let mut fut = std::pin::pin!(fut);
    tokio::select! {
        biased;
        _ = cancel.cancelled() => {
            if latch.can_cancel() { Step::Cancelled } else { Step::Done(fut.await) }
        }
        v = &mut fut => Step::Done(v),
    }
}
