//! [`TurnScheduler`]: runs the turns of every session, one at a time per session.
//!
//! A customer message is committed with its turn row before any work starts. The turn is
//! claimed through the store (a lease the worker renews while it runs), so a turn whose
//! process died is taken again once its lease expires. A newer message cancels a turn that
//! has not started emitting its reply; the newer turn answers both messages. When the
//! server shuts down, turns still preparing are handed back (their rows return to
//! `pending`) and turns already replying finish.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use guidepost_core::session::Status;
use guidepost_core::{Customer, EventKind, EventSource};
use guidepost_runtime::events::{EventSink, NewEvent};
use guidepost_runtime::knowledge::CustomerRef;
use guidepost_runtime::{EmittingLatch, TurnInput, TurnOutcome, TurnStatus};
use guidepost_store::{EventFilter, Store, TurnState};
use serde_json::json;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::adapters::StoreSink;
use crate::metrics::Metrics;
use crate::pool::AgentPool;

/// How long a claim on a turn lasts without renewal.
pub const LEASE: Duration = Duration::from_secs(30);

type Done = Shared<BoxFuture<'static, ()>>;

struct Running {
    trace_id: String,
    cancel: CancellationToken,
    latch: EmittingLatch,
    done: Done,
}

#[derive(Default)]
struct Slot {
    latest: String,
    running: Option<Running>,
}

/// Runs turns.
pub struct TurnScheduler {
    store: Store,
    pool: Arc<AgentPool>,
    metrics: Arc<Metrics>,
    worker: String,
    slots: Mutex<HashMap<String, Slot>>,
    /// Turns scheduled in this process and not yet over (the sweeper leaves them alone).
    known: Mutex<std::collections::HashSet<String>>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl TurnScheduler {
    /// A scheduler over `store`, running agents from `pool`.
    pub fn new(store: Store, pool: Arc<AgentPool>, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Self {
            store,
            pool,
            metrics,
            worker: format!("worker-{}", uuid::Uuid::new_v4().simple()),
            slots: Mutex::default(),
            known: Mutex::default(),
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
        })
    }

    /// Whether the scheduler stopped taking turns.
    pub fn is_shut_down(&self) -> bool {
        self.shutdown.is_cancelled()
    }

    /// This process's worker id (the owner of its leases).
    pub fn worker(&self) -> &str {
        &self.worker
    }

    /// Starts the turn `trace_id` of `session_id` (already stored as pending). A turn of the
    /// session that has not started emitting is cancelled; this one runs after it ended.
    pub async fn schedule(self: &Arc<Self>, session_id: &str, trace_id: &str) {
        if self.shutdown.is_cancelled() {
            return;
        }
        if !self.known.lock().await.insert(trace_id.to_string()) {
            return;
        }
        let mut slots = self.slots.lock().await;
        let slot = slots.entry(session_id.to_string()).or_default();
        slot.latest = trace_id.to_string();
        let previous = slot.running.take();
        if let Some(p) = &previous
            && !p.latch.is_set()
        {
            p.cancel.cancel();
        }
        let cancel = CancellationToken::new();
        let latch = EmittingLatch::default();
        let this = self.clone();
        let (session, trace, task_cancel, task_latch) =
            (session_id.to_string(), trace_id.to_string(), cancel.clone(), latch.clone());
        let handle = self.tasks.spawn(async move {
            if let Some(p) = previous {
                p.done.await;
            }
            this.run(&session, &trace, task_cancel, task_latch).await;
            this.release(&session, &trace).await;
            this.known.lock().await.remove(&trace);
        });
        let done: Done = async move {
            let _ = handle.await;
        }
        .boxed()
        .shared();
        slot.running = Some(Running { trace_id: trace_id.to_string(), cancel, latch, done });
    }

    async fn release(&self, session_id: &str, trace_id: &str) {
        let mut slots = self.slots.lock().await;
        if slots.get(session_id).and_then(|s| s.running.as_ref()).is_some_and(|r| r.trace_id == trace_id) {
            slots.remove(session_id);
        }
    }

    async fn superseded(&self, session_id: &str, trace_id: &str) -> bool {
        self.slots.lock().await.get(session_id).is_some_and(|s| s.latest != trace_id)
    }

    /// Turns that are pending or whose lease expired: scheduled again (the newest of each
    /// session; older ones are closed as cancelled, the newest answers them all).
    pub async fn recover(self: &Arc<Self>) -> usize {
        let turns = match self.store.claimable_turns().await {
            Ok(t) => t,
            Err(error) => {
                tracing::error!(%error, "could not look for turns to resume");
                return 0;
            }
        };
        let known = self.known.lock().await.clone();
        let mut newest: HashMap<String, String> = HashMap::new();
        for turn in turns.iter().filter(|t| !known.contains(&t.id)) {
            if let Some(older) = newest.insert(turn.session_id.clone(), turn.id.clone()) {
                let sink = StoreSink::new(self.store.clone(), &turn.session_id);
                self.close_unstarted(&turn.session_id, &older, &sink).await;
            }
        }
        for (session, trace) in &newest {
            tracing::info!(session, trace, "resuming a turn left unfinished");
            self.schedule(session, trace).await;
        }
        newest.len()
    }

    /// Stops taking turns, hands back those still preparing and waits (up to `grace`) for
    /// those already replying.
    pub async fn shutdown(&self, grace: Duration) {
        self.shutdown.cancel();
        self.tasks.close();
        if tokio::time::timeout(grace, self.tasks.wait()).await.is_err() {
            tracing::warn!("some turns were still running at shutdown; they resume on the next start");
        }
    }

    async fn run(self: &Arc<Self>, session_id: &str, trace_id: &str, cancel: CancellationToken, latch: EmittingLatch) {
        let sink = StoreSink::new(self.store.clone(), session_id);
        if self.shutdown.is_cancelled() {
            return;
        }
        if cancel.is_cancelled() || self.superseded(session_id, trace_id).await {
            self.close_unstarted(session_id, trace_id, &sink).await;
            return;
        }
        match self.store.claim_turn(trace_id, &self.worker, LEASE.as_millis() as i64).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(error) => {
                tracing::error!(%error, trace_id, "could not claim a turn");
                return;
            }
        }
        let renewer = self.renew_while_running(trace_id).drop_guard();
        let started = std::time::Instant::now();
        let result = match std::panic::AssertUnwindSafe(self.process(session_id, trace_id, &sink, cancel, latch))
            .catch_unwind()
            .await
        {
            Ok(result) => result,
            Err(_) => Processed::NotRun("the turn stopped on an internal error".into()),
        };
        drop(renewer);
        let (status, outcome) = match result {
            Processed::Done(outcome) => (
                match outcome.status {
                    TurnStatus::Completed => TurnState::Completed,
                    TurnStatus::Cancelled => TurnState::Cancelled,
                    TurnStatus::Failed => TurnState::Failed,
                },
                Some(outcome),
            ),
            Processed::HandedBack => {
                if let Err(error) = self.store.hand_back_turn(trace_id, &self.worker).await {
                    tracing::error!(%error, trace_id, "could not hand a turn back");
                }
                return;
            }
            Processed::NotRun(error) => {
                sink.emit(NewEvent::status(trace_id, Status::Error, json!({"exception": error}))).await;
                sink.emit(NewEvent::status(trace_id, Status::Ready, json!({"stage": "completed", "matched_guidelines": [], "matched_journeys": [], "matched_journey_states": []}))).await;
                let _ = self.store.finish_turn(trace_id, TurnState::Failed, None, None, Some(&error)).await;
                self.metrics.turn_finished("failed", started.elapsed());
                return;
            }
        };
        self.metrics.turn_finished(status.as_str(), started.elapsed());
        if let Some(outcome) = outcome {
            if let Some(usage) = Some(&outcome.trace.usage) {
                self.metrics.model_usage(usage.calls, usage.prompt_tokens, usage.completion_tokens);
            }
            let trace = serde_json::to_value(&outcome.trace).ok();
            let state = (status == TurnState::Completed).then_some(&outcome.state);
            if let Err(error) =
                self.store.finish_turn(trace_id, status, state, trace.as_ref(), outcome.trace.error.as_deref()).await
            {
                tracing::error!(%error, trace_id, "could not record the end of a turn");
            }
            if status == TurnState::Completed {
                self.add_labels(session_id, &outcome).await;
            }
        }
    }

    /// A turn replaced by a newer message before it started: closed with `cancelled` and
    /// `ready`, so a client waiting on its trace is not left hanging.
    async fn close_unstarted(&self, session_id: &str, trace_id: &str, sink: &StoreSink) {
        sink.emit(NewEvent::status(trace_id, Status::Cancelled, json!({}))).await;
        sink.emit(NewEvent::status(trace_id, Status::Ready, json!({"stage": "completed", "matched_guidelines": [], "matched_journeys": [], "matched_journey_states": []}))).await;
        if let Err(error) = self.store.finish_turn(trace_id, TurnState::Cancelled, None, None, None).await {
            tracing::error!(%error, session_id, trace_id, "could not close a replaced turn");
        }
    }

    fn renew_while_running(&self, trace_id: &str) -> CancellationToken {
        let stop = CancellationToken::new();
        let (store, worker, trace, token) =
            (self.store.clone(), self.worker.clone(), trace_id.to_string(), stop.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = tokio::time::sleep(LEASE / 3) => {}
                }
                match store.renew_turn(&trace, &worker, LEASE.as_millis() as i64).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(trace, "lost the lease of a running turn");
                        return;
                    }
                    Err(error) => tracing::warn!(%error, trace, "could not renew a turn's lease"),
                }
            }
        });
        stop
    }

    async fn process(
        &self,
        session_id: &str,
        trace_id: &str,
        sink: &StoreSink,
        cancel: CancellationToken,
        latch: EmittingLatch,
    ) -> Processed {
        let session = match self.store.require_session(session_id).await {
            Ok(s) => s.session,
            Err(e) => return Processed::NotRun(format!("the session cannot be read: {e}")),
        };
        let customer = match self.store.get::<Customer>(&session.customer_id).await {
            Ok(c) => c.map(|c| c.entity),
            Err(e) => return Processed::NotRun(format!("the customer cannot be read: {e}")),
        };
        let events = match self.store.list_events(session_id, &EventFilter::default()).await {
            Ok(e) => e,
            Err(e) => return Processed::NotRun(format!("the session's events cannot be read: {e}")),
        };
        let previous_state = match self.store.latest_agent_state(session_id).await {
            Ok(s) => s,
            Err(e) => return Processed::NotRun(format!("the agent state cannot be read: {e}")),
        };
        let runtime = match self.pool.runtime(&session.agent_id).await {
            Ok(r) => r,
            Err(e) => return Processed::NotRun(format!("agent `{}` cannot run: {e}", session.agent_id)),
        };
        let input = TurnInput {
            session_id: session_id.to_string(),
            customer: CustomerRef {
                id: session.customer_id.clone(),
                tags: customer.as_ref().map(|c| c.tags.clone()).unwrap_or_default(),
            },
            customer_name: customer.as_ref().map(|c| c.name.clone()).filter(|n| !n.is_empty() && n != "Guest"),
            events,
            previous_state,
            trace_id: trace_id.to_string(),
        };
        let mut processing = std::pin::pin!(runtime.process(input, sink, cancel, latch.clone()));
        tokio::select! {
            outcome = &mut processing => Processed::Done(Box::new(outcome)),
            _ = self.shutdown.cancelled() => {
                // A reply already being emitted is finished; a turn still preparing is
                // handed back, to run again from its start on the next process.
                if latch.is_set() {
                    Processed::Done(Box::new(processing.await))
                } else {
                    Processed::HandedBack
                }
            }
        }
    }

    async fn add_labels(&self, session_id: &str, outcome: &TurnOutcome) {
        let Ok(session) = self.store.require_session(session_id).await else { return };
        let Ok(runtime) = self.pool.runtime(&session.session.agent_id).await else { return };
        let definition = runtime.definition();
        let mut labels: Vec<String> = Vec::new();
        for id in &outcome.trace.matched {
            if let Some(g) = definition.guideline(id) {
                labels.extend(g.labels.iter().cloned());
            }
        }
        for (journey, path) in &outcome.state.journey_paths {
            if let Some(j) = definition.journey(journey) {
                labels.extend(j.labels.iter().cloned());
                if let Some(s) = j.state(path.current()) {
                    labels.extend(s.labels.iter().cloned());
                }
            }
        }
        if labels.iter().all(|l| session.session.labels.contains(l)) {
            return;
        }
        let result = self
            .store
            .update_session(session_id, |s| {
                for l in &labels {
                    if !s.labels.contains(l) {
                        s.labels.push(l.clone());
                    }
                }
                Ok(())
            })
            .await;
        if let Err(error) = result {
            tracing::warn!(%error, session_id, "could not add the turn's labels to the session");
        }
    }
}

enum Processed {
    Done(Box<TurnOutcome>),
    HandedBack,
    NotRun(String),
}

/// Whether an event is one that starts a turn: a customer's message.
pub fn starts_turn(source: EventSource, kind: EventKind) -> bool {
    source == EventSource::Customer && kind == EventKind::Message
}
