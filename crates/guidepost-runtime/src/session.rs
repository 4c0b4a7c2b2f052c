//! [`SessionRunner`]: the turns of one session, one at a time.
//!
//! Each customer message is stored, then starts a turn over the whole conversation. A
//! turn still preparing when a newer message arrives is cancelled (it ends with
//! `cancelled` and `ready`), and the new turn answers both messages at once; a turn
//! already emitting its reply finishes first.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use guidepost_core::AgentState;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::events::MemorySession;
use crate::runtime::{AgentRuntime, EmittingLatch, TurnInput, TurnOutcome, TurnStatus};
use crate::variables::CustomerRef;

/// A turn that is running or done; await it (from as many places as needed) for its
/// outcome.
pub type TurnHandle = Shared<BoxFuture<'static, TurnOutcome>>;

struct Running {
    cancel: CancellationToken,
    latch: EmittingLatch,
    done: TurnHandle,
}

struct Inner {
    running: Option<Running>,
    state: Arc<Mutex<AgentState>>,
}

/// Runs the turns of one in-memory session.
pub struct SessionRunner {
    runtime: Arc<AgentRuntime>,
    session: Arc<MemorySession>,
    session_id: String,
    customer: CustomerRef,
    inner: Mutex<Inner>,
}

impl SessionRunner {
    /// A new session with `runtime`'s agent.
    pub fn new(runtime: Arc<AgentRuntime>, customer: CustomerRef) -> Self {
        Self {
            runtime,
            session: Arc::new(MemorySession::new()),
            session_id: format!("ses_{}", uuid::Uuid::new_v4().simple()),
            customer,
            inner: Mutex::new(Inner { running: None, state: Arc::new(Mutex::new(AgentState::default())) }),
        }
    }

    /// The session's events.
    pub fn session(&self) -> &Arc<MemorySession> {
        &self.session
    }

    /// Stores a customer message and starts a turn for it. A turn of this session that has
    /// not started emitting its reply is cancelled; the new turn starts once it ended.
    pub async fn post(&self, text: &str) -> TurnHandle {
        let trace_id = uuid::Uuid::new_v4().simple().to_string();
        self.session.customer_message(text, &trace_id);
        let mut inner = self.inner.lock().await;
        let previous = inner.running.take();
        if let Some(p) = &previous
            && p.latch.can_cancel()
        {
            p.cancel.cancel();
        }
        let cancel = CancellationToken::new();
        let latch = EmittingLatch::default();
        let runtime = self.runtime.clone();
        let session = self.session.clone();
        let state = inner.state.clone();
        let session_id = self.session_id.clone();
        let customer = self.customer.clone();
        let (task_cancel, task_latch) = (cancel.clone(), latch.clone());
        let task = tokio::spawn(async move {
            if let Some(p) = previous {
                let _ = p.done.await;
            }
            let mut state = state.lock().await;
            let input = TurnInput {
                session_id,
                customer,
                customer_name: None,
                events: session.events(),
                previous_state: state.clone(),
                trace_id,
            };
            let outcome = runtime.process(input, session.as_ref(), task_cancel, task_latch).await;
            if outcome.status.replied() {
                *state = outcome.state.clone();
            }
            outcome
        });
        let done: TurnHandle =
            async move { task.await.unwrap_or_else(|join| failed_outcome(&join.to_string())) }.boxed().shared();
        inner.running = Some(Running { cancel, latch, done: done.clone() });
        done
    }

    /// Waits for the running turn, if any.
    pub async fn settle(&self) -> Option<TurnOutcome> {
        let running = self.inner.lock().await.running.take()?;
        Some(running.done.await)
    }
}

fn failed_outcome(error: &str) -> TurnOutcome {
    TurnOutcome {
        status: TurnStatus::Failed,
        messages: Vec::new(),
        state: AgentState::default(),
        trace: crate::trace::TurnTrace { error: Some(error.to_string()), ..Default::default() },
    }
}
