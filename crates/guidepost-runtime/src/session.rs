//! [`SessionRunner`]: the turns of one session, one at a time.
//!
//! Each customer message is stored, then starts a turn over the whole conversation. A
//! turn still preparing when a newer message arrives is cancelled (it ends with
//! `cancelled` and `ready`), and the new turn answers both messages at once; a turn
//! already emitting its reply finishes first.

use std::sync::Arc;

use guidepost_core::AgentState;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::events::MemorySession;
use crate::knowledge::CustomerRef;
use crate::runtime::{AgentRuntime, EmittingLatch, TurnInput, TurnOutcome, TurnStatus};

struct Running {
    cancel: CancellationToken,
    latch: EmittingLatch,
    handle: JoinHandle<TurnOutcome>,
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

    /// Stores a customer message and starts a turn for it; returns the turn's handle. A
    /// turn of this session that has not started emitting its reply is cancelled.
    pub async fn post(&self, text: &str) -> JoinHandle<TurnOutcome> {
        let trace_id = uuid::Uuid::new_v4().simple().to_string();
        self.session.customer_message(text, &trace_id);
        let mut inner = self.inner.lock().await;
        let previous = inner.running.take();
        if let Some(p) = &previous
            && !p.latch.is_set()
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
        let handle = tokio::spawn(async move {
            if let Some(p) = previous {
                let _ = p.handle.await;
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
            if outcome.status == TurnStatus::Completed {
                *state = outcome.state.clone();
            }
            outcome
        });
        // The handle returned to the caller; the runner keeps a way to cancel and await it.
        let (tx, rx) = tokio::sync::oneshot::channel();
        let watcher = tokio::spawn(async move {
            let outcome = handle.await;
            match outcome {
                Ok(o) => {
                    let _ = tx.send(o.clone());
                    o
                }
                Err(join) => {
                    let o = failed_outcome(&join.to_string());
                    let _ = tx.send(o.clone());
                    o
                }
            }
        });
        inner.running = Some(Running { cancel, latch, handle: watcher });
        tokio::spawn(async move { rx.await.unwrap_or_else(|_| failed_outcome("the turn task ended without a result")) })
    }

    /// Waits for the running turn, if any.
    pub async fn settle(&self) -> Option<TurnOutcome> {
        let running = self.inner.lock().await.running.take()?;
        running.handle.await.ok()
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
