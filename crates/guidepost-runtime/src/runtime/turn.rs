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

/// A flag that tells a running turn's owner whether it can still be cancelled: once the
/// reply is being emitted the turn finishes.
#[derive(Debug, Default, Clone)]
pub struct EmittingLatch(Arc<AtomicBool>);

impl EmittingLatch {
    /// Whether the reply is being emitted.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    pub(super) fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
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

/// `fut`, unless `cancel` fires first.
pub(super) async fn cancellable<T>(cancel: &CancellationToken, fut: impl std::future::Future<Output = T>) -> Step<T> {
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Step::Cancelled,
        v = fut => Step::Done(v),
    }
}
