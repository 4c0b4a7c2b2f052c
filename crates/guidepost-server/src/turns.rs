//! [`TurnScheduler`]: runs the turns of every session, one at a time per session, across
//! every process that shares the store.
//!
//! A customer message is committed with its turn row before any work starts; storing it
//! also asks the session's unfinished turns to stop. A worker claims a turn through the
//! store (a lease it renews while the turn runs), and only while no other turn of the
//! session holds a live lease; a turn whose process died is claimed again once its lease
//! expires. The turn's reply, tool results and final statuses are committed together with
//! its end, only if the worker still holds it, so every message gets exactly one reply.
//! A running turn stops when the store says a newer message came (watched through the
//! session's notifications, so it works across processes) unless it is already replying.
//! At shutdown, turns still preparing are handed back and turns replying finish.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use guidepost_core::{Customer, EventKind, EventSource};
use guidepost_runtime::CustomerRef;
use guidepost_runtime::{EmittingLatch, TurnInput, TurnOutcome, TurnStatus};
use guidepost_store::turns::{Claim, TurnEnd};
use guidepost_store::{EventFilter, Store, TurnState};
use serde_json::json;
use tokio::sync::{Mutex, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::metrics::Metrics;
use crate::pool::AgentPool;
use crate::sink::{TurnSink, agent_status};

/// How the scheduler runs turns.
#[derive(Debug, Clone)]
pub struct TurnSettings {
    /// How long a claim on a turn lasts without renewal (renewed every third of it).
    pub lease: Duration,
    /// Turns running at once in this process; more wait their turn (back-pressure).
    pub max_in_flight: usize,
    /// A turn still preparing after this long is stopped and fails.
    pub turn_timeout: Duration,
}

impl Default for TurnSettings {
    fn default() -> Self {
        Self { lease: Duration::from_secs(30), max_in_flight: 256, turn_timeout: Duration::from_secs(900) }
    }
}

type Done = Shared<BoxFuture<'static, ()>>;

struct Running {
    trace_id: String,
    cancel: CancellationToken,
    latch: EmittingLatch,
    done: Done,
}

/// Runs turns.
pub struct TurnScheduler {
    store: Store,
    redactor: Arc<crate::access::Redactor>,
    pool: Arc<AgentPool>,
    metrics: Arc<Metrics>,
    settings: TurnSettings,
    worker: String,
    slots: Mutex<HashMap<String, Running>>,
    /// Turns scheduled in this process and not yet over (the sweeper leaves them alone).
    known: Mutex<HashSet<String>>,
    in_flight: Arc<Semaphore>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

fn ready_completed(trace_id: &str) -> guidepost_store::NewEventRecord {
    agent_status(
        trace_id,
        "ready",
        json!({"stage": "completed", "matched_guidelines": [], "matched_journeys": [], "matched_journey_states": []}),
    )
}

impl TurnScheduler {
    /// A scheduler over `store`, running agents from `pool`.
    pub fn new(
        store: Store,
        pool: Arc<AgentPool>,
        metrics: Arc<Metrics>,
        settings: TurnSettings,
        redactor: Arc<crate::access::Redactor>,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            redactor,
            pool,
            metrics,
            in_flight: Arc::new(Semaphore::new(settings.max_in_flight.max(1))),
            settings,
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

    /// The lease length.
    pub fn lease(&self) -> Duration {
        self.settings.lease
    }

    /// Runs the turn `trace_id` of `session_id` (already stored as pending). A turn of the
    /// session this process runs that has not started emitting is cancelled at once (the
    /// store's flag reaches other processes); this one runs when the session is free.
    pub async fn schedule(self: &Arc<Self>, session_id: &str, trace_id: &str) {
        if self.shutdown.is_cancelled() || !self.known.lock().await.insert(trace_id.to_string()) {
            return;
        }
        let mut slots = self.slots.lock().await;
        // Two messages to one session can reach this point out of order (the older one's
        // request was slower): a turn whose session already holds a newer turn is superseded
        // and must not cancel that newer one. Checked under the lock, after the newer turn
        // was stored, so the two cannot pass each other.
        if self.store.newer_turn_exists(trace_id).await.unwrap_or(false) {
            drop(slots);
            self.close(trace_id, TurnState::Cancelled, None).await;
            self.known.lock().await.remove(trace_id);
            return;
        }
        let previous = slots.remove(session_id);
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
            let mut slots = this.slots.lock().await;
            if slots.get(&session).is_some_and(|r| r.trace_id == trace) {
                slots.remove(&session);
            }
            drop(slots);
            this.known.lock().await.remove(&trace);
        });
        let done: Done = async move {
            let _ = handle.await;
        }
        .boxed()
        .shared();
        slots.insert(session_id.to_string(), Running { trace_id: trace_id.to_string(), cancel, latch, done });
    }

    /// Schedules the turns that are pending or whose lease expired and that this process
    /// does not already have: turns a stopped process left, or another replica queued.
    pub async fn recover(self: &Arc<Self>) -> usize {
        let turns = match self.store.claimable_turns().await {
            Ok(t) => t,
            Err(error) => {
                tracing::error!(%error, "could not look for turns to resume");
                return 0;
            }
        };
        let known = self.known.lock().await.clone();
        let mut scheduled = 0;
        for turn in turns.iter().filter(|t| !known.contains(&t.id)) {
            tracing::info!(session = %turn.session_id, trace = %turn.id, "taking up a turn no worker holds");
            self.schedule(&turn.session_id, &turn.id).await;
            scheduled += 1;
        }
        scheduled
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

    /// Closes a turn that will not run: with `cancelled` (or `error`) and `ready`, so a
    /// client waiting on its trace is not left hanging. Only if it is still pending.
    async fn close(&self, trace_id: &str, status: TurnState, error: Option<String>) {
        let mut events = Vec::new();
        match &error {
            Some(e) => events.push(agent_status(trace_id, "error", json!({"exception": e}))),
            None => events.push(agent_status(trace_id, "cancelled", json!({}))),
        }
        events.push(ready_completed(trace_id));
        let end = self.redact(TurnEnd { status: Some(status), events, error, ..TurnEnd::default() });
        if let Err(error) = self.store.close_pending_turn(trace_id, end).await {
            tracing::error!(%error, trace_id, "could not close a turn");
        }
    }

    /// Waits until this worker holds the turn; `false` when the turn should not run here.
    async fn claim(&self, session_id: &str, trace_id: &str, cancel: &CancellationToken) -> bool {
        let mut changes = self.store.hub().subscribe(session_id);
        loop {
            if self.shutdown.is_cancelled() {
                return false;
            }
            let newer = self.store.newer_turn_exists(trace_id).await.unwrap_or(false);
            if cancel.is_cancelled() || newer {
                self.close(trace_id, TurnState::Cancelled, None).await;
                return false;
            }
            match self.store.try_claim_turn(trace_id, &self.worker, self.settings.lease.as_millis() as i64).await {
                Ok(Claim::Claimed) => return true,
                Ok(Claim::Gone) => return false,
                Ok(Claim::Busy) => {}
                Err(error) => tracing::warn!(%error, trace_id, "could not claim a turn; trying again"),
            }
            // The session's other turn ends with a commit, which wakes this; the timeout
            // covers a holder that died (its lease expires).
            let wait = tokio::time::sleep(self.settings.lease / 3);
            tokio::select! {
                _ = changes.changed() => {}
                () = wait => {}
                () = self.shutdown.cancelled() => return false,
                () = cancel.cancelled() => {}
            }
        }
    }

    async fn run(self: &Arc<Self>, session_id: &str, trace_id: &str, cancel: CancellationToken, latch: EmittingLatch) {
        let Ok(_permit) = self.in_flight.clone().acquire_owned().await else { return };
        if !self.claim(session_id, trace_id, &cancel).await {
            return;
        }
        let attempts = self.store.get_turn(trace_id).await.ok().flatten().map_or(1, |t| t.attempts);
        let mut shown = HashSet::new();
        if attempts > 1 {
            self.forget_unfinished_stream(session_id, trace_id).await;
            let filter = EventFilter {
                trace_id: Some(trace_id.to_string()),
                kinds: vec![EventKind::Status],
                ..Default::default()
            };
            for e in self.store.list_events(session_id, &filter).await.unwrap_or_default() {
                if let Some((status, stage)) = guidepost_runtime::events::status_of(&e) {
                    shown.insert((status, stage));
                }
            }
        }
        let sink = TurnSink::new(self.store.clone(), session_id, shown);
        let lost = Arc::new(AtomicBool::new(false));
        let _renewer = self.renew_while_running(trace_id, cancel.clone(), lost.clone()).drop_guard();
        let _watcher = self.watch_for_newer_messages(session_id, trace_id, cancel.clone()).drop_guard();
        let started = std::time::Instant::now();
        let processing = std::panic::AssertUnwindSafe(self.process(session_id, trace_id, &sink, cancel, latch));
        let result = match processing.catch_unwind().await {
            Ok(result) => result,
            Err(_) => Processed::NotRun("the turn stopped on an internal error".into()),
        };
        let end = match result {
            Processed::HandedBack => {
                if let Err(error) = self.store.hand_back_turn(trace_id, &self.worker).await {
                    tracing::error!(%error, trace_id, "could not hand a turn back");
                }
                return;
            }
            Processed::NotRun(error) => {
                let mut events = sink.take_held();
                events.push(agent_status(trace_id, "error", json!({"exception": error})));
                events.push(ready_completed(trace_id));
                TurnEnd { status: Some(TurnState::Failed), events, error: Some(error), ..TurnEnd::default() }
            }
            Processed::Done(outcome) => {
                let status = match outcome.status {
                    // A degraded reply went out: the turn is complete, and its `ready`
                    // status and message events carry the `degraded` list.
                    TurnStatus::Completed | TurnStatus::Degraded => TurnState::Completed,
                    TurnStatus::Cancelled => TurnState::Cancelled,
                    TurnStatus::Failed => TurnState::Failed,
                };
                let usage = &outcome.trace.usage;
                self.metrics.model_usage(usage.calls, usage.prompt_tokens, usage.completion_tokens);
                if status == TurnState::Completed {
                    self.add_labels(session_id, &outcome).await;
                }
                TurnEnd {
                    status: Some(status),
                    events: sink.take_held(),
                    state: (status == TurnState::Completed).then(|| outcome.state.clone()),
                    trace: serde_json::to_value(&outcome.trace).ok(),
                    error: outcome.trace.error.clone(),
                }
            }
        };
        let status = end.status.unwrap_or(TurnState::Failed);
        let end = self.redact(end);
        match self.store.commit_turn(trace_id, &self.worker, end).await {
            Ok(true) => self.metrics.turn_finished(status.as_str(), started.elapsed()),
            Ok(false) => tracing::warn!(
                trace_id,
                lease_lost = lost.load(Ordering::SeqCst),
                "this worker no longer holds the turn; its result is dropped (the holder answers)"
            ),
            Err(error) => tracing::error!(%error, trace_id, "could not commit the end of a turn; it runs again"),
        }
    }

    /// The end of a turn with every secret taken out (a provider's error can echo its key,
    /// and the error reaches the session's events and the trace).
    fn redact(&self, mut end: TurnEnd) -> TurnEnd {
        if self.redactor.is_empty() {
            return end;
        }
        let clean = |v: &serde_json::Value| -> serde_json::Value {
            serde_json::from_str(&self.redactor.redact(&v.to_string())).unwrap_or(serde_json::Value::Null)
        };
        for e in &mut end.events {
            e.data = clean(&e.data);
        }
        end.trace = end.trace.as_ref().map(clean);
        end.error = end.error.as_deref().map(|e| self.redactor.redact(e));
        end
    }

    /// A streamed reply a crashed attempt left half-written is withdrawn before the turn
    /// runs again (soft deletion: offsets stay).
    async fn forget_unfinished_stream(&self, session_id: &str, trace_id: &str) {
        let filter =
            EventFilter { trace_id: Some(trace_id.to_string()), kinds: vec![EventKind::Message], ..Default::default() };
        let Ok(events) = self.store.list_events(session_id, &filter).await else { return };
        for e in events.iter().filter(|e| e.source == EventSource::AiAgent) {
            if let Err(error) = self.store.delete_event(session_id, &e.id).await {
                tracing::warn!(%error, trace_id, "could not withdraw a half-streamed message");
            }
        }
    }

    fn renew_while_running(
        &self,
        trace_id: &str,
        cancel: CancellationToken,
        lost: Arc<AtomicBool>,
    ) -> CancellationToken {
        let stop = CancellationToken::new();
        let (store, worker, trace, token, lease) =
            (self.store.clone(), self.worker.clone(), trace_id.to_string(), stop.clone(), self.settings.lease);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tokio::time::sleep(lease / 3) => {}
                }
                match store.renew_turn(&trace, &worker, lease.as_millis() as i64).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(trace, "lost the lease of a running turn; stopping it");
                        lost.store(true, Ordering::SeqCst);
                        cancel.cancel();
                        return;
                    }
                    Err(error) => tracing::warn!(%error, trace, "could not renew a turn's lease"),
                }
            }
        });
        stop
    }

    /// Cancels the turn (unless it is replying) when the store says a newer message came,
    /// whichever process stored it.
    fn watch_for_newer_messages(
        &self,
        session_id: &str,
        trace_id: &str,
        cancel: CancellationToken,
    ) -> CancellationToken {
        let stop = CancellationToken::new();
        let mut changes = self.store.hub().subscribe(session_id);
        let (store, trace, token) = (self.store.clone(), trace_id.to_string(), stop.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = token.cancelled() => return,
                    changed = changes.changed() => if changed.is_err() { return },
                }
                if store.turn_cancel_requested(&trace).await.unwrap_or(false) {
                    cancel.cancel();
                    return;
                }
            }
        });
        stop
    }

    async fn process(
        &self,
        session_id: &str,
        trace_id: &str,
        sink: &TurnSink,
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
        let timeout = self.settings.turn_timeout;
        let timer = {
            let (cancel, latch) = (cancel.clone(), latch.clone());
            let fired = Arc::new(AtomicBool::new(false));
            let f = fired.clone();
            let task = tokio::spawn(async move {
                tokio::time::sleep(timeout).await;
                if !latch.is_set() {
                    f.store(true, Ordering::SeqCst);
                    cancel.cancel();
                }
            });
            (task, fired)
        };
        let mut processing = std::pin::pin!(runtime.process(input, sink, cancel, latch.clone()));
        let result = tokio::select! {
            outcome = &mut processing => Processed::Done(Box::new(outcome)),
            () = self.shutdown.cancelled() => {
                // A reply already being emitted is finished; a turn still preparing is
                // handed back, to run again from its start on the next process.
                if latch.is_set() {
                    Processed::Done(Box::new(processing.await))
                } else {
                    Processed::HandedBack
                }
            }
        };
        timer.0.abort();
        match result {
            Processed::Done(outcome) if timer.1.load(Ordering::SeqCst) && outcome.status == TurnStatus::Cancelled => {
                Processed::NotRun(format!("the turn took longer than {timeout:?} and was stopped"))
            }
            other => other,
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
