//! [`TurnScheduler`]: runs the turns of every session, one at a time per session, across
//! every process that shares the store.
//!
//! A customer message is committed with its turn row before any work starts; storing it
//! also asks the session's unfinished turns to stop. A worker claims a turn through the
//! store (a lease it renews while the turn runs), and only while no other turn of the
//! session holds a live lease; a turn whose process died is claimed again once its lease
//! expires. The turn's reply, tool results and final statuses are committed together with
//! its end, only if the worker still holds it, so every message gets exactly one reply.
//! A running turn stops when the store says it should (a newer message came, or someone
//! cancelled the session's turns; watched through the session's notifications, so it works
//! across processes) unless it is already replying. At shutdown, turns still preparing are
//! handed back and turns replying finish. Running one claimed turn is `turn.rs`'s part.

mod turn;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use guidepost_core::payload::{EventPayload, StatusPayload};
use guidepost_core::session::Status;
use guidepost_llm::UsageTotals;
use guidepost_runtime::EmittingLatch;
use guidepost_runtime::events::NewEvent;
use guidepost_store::turns::{Claim, TurnEnd};
use guidepost_store::{NewEventRecord, Store, TurnState};
use tokio::sync::{Mutex, Semaphore, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agents::AgentPool;
use crate::journal::StoreJournal;
use crate::redaction::Redactor;
use crate::sink::stored;

/// How the scheduler runs turns.
#[derive(Debug, Clone)]
pub struct TurnSettings {
    /// How long a claim on a turn lasts without renewal (renewed every third of it).
    pub lease: Duration,
    /// Turns running at once in this process; more wait their turn (back-pressure).
    pub max_in_flight: usize,
    /// A turn still preparing after this long is stopped and fails.
    pub turn_timeout: Duration,
    /// How long a stopping server waits for its turns' running tool calls before it hands
    /// the turns back.
    pub shutdown_grace: Duration,
}

impl Default for TurnSettings {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(30),
            max_in_flight: 256,
            turn_timeout: Duration::from_secs(900),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// What the scheduler reports as the turns of this process end (the HTTP server counts
/// them for `/metrics`). Every method does nothing by default.
pub trait TurnObserver: Send + Sync {
    /// A turn ran to its end and was committed with `status`, `took` after it was claimed.
    fn turn_finished(&self, status: TurnState, took: Duration) {
        let _ = (status, took);
    }
    /// A turn that ran used the models this much (reported whether or not its end could be
    /// committed: the calls were made).
    fn model_usage(&self, usage: &UsageTotals) {
        let _ = usage;
    }
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct Unobserved;

impl TurnObserver for Unobserved {}

type Done = Shared<BoxFuture<'static, ()>>;

/// A turn of this process that has not ended.
struct Running {
    trace_id: String,
    cancel: CancellationToken,
    latch: EmittingLatch,
    done: Done,
}

/// Runs turns.
pub struct TurnScheduler {
    store: Store,
    redactor: Arc<Redactor>,
    agents: Arc<AgentPool>,
    observer: Arc<dyn TurnObserver>,
    settings: TurnSettings,
    worker: String,
    /// The latest turn of each session this process runs or waits to run.
    slots: Mutex<HashMap<String, Running>>,
    /// Turns scheduled in this process and not yet over (the sweeper leaves them alone).
    known: Mutex<HashSet<String>>,
    in_flight: Arc<Semaphore>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
    /// The tool calls of this process's turns, recorded in the store.
    journal: Arc<StoreJournal>,
    /// Until when a turn stopped by shutdown waits for its running tool calls before it is
    /// handed back (set when shutdown starts).
    calls_deadline: std::sync::OnceLock<tokio::time::Instant>,
}

/// The part of the shutdown grace kept for handing turns back once their tool calls
/// returned (at most half of it).
const HAND_BACK_RESERVE: Duration = Duration::from_secs(1);

impl TurnScheduler {
    /// A scheduler over `store`, running agents from `agents`, taking `redactor`'s secrets
    /// out of what turns write, telling `observer` how turns end. `worker` owns its leases;
    /// `journal` records its turns' tool calls for that worker.
    pub fn new(
        store: Store,
        agents: Arc<AgentPool>,
        settings: TurnSettings,
        redactor: Arc<Redactor>,
        observer: Arc<dyn TurnObserver>,
        worker: String,
        journal: Arc<StoreJournal>,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            redactor,
            agents,
            observer,
            in_flight: Arc::new(Semaphore::new(settings.max_in_flight.max(1))),
            settings,
            worker,
            slots: Mutex::default(),
            known: Mutex::default(),
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
            journal,
            calls_deadline: std::sync::OnceLock::new(),
        })
    }

    /// Cancelled when the scheduler stops taking turns.
    pub fn stopping(&self) -> &CancellationToken {
        &self.shutdown
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
        // was stored, so the two cannot pass each other. A turn that already acted on the
        // world (an earlier attempt sent a consequential call) runs all the same: the
        // customer must hear what it did.
        if self.store.newer_turn_exists(trace_id).await.unwrap_or(false) && !self.acted(trace_id).await {
            drop(slots);
            self.close(trace_id, TurnState::Cancelled, None).await;
            self.known.lock().await.remove(trace_id);
            return;
        }
        let previous = slots.remove(session_id);
        if let Some(p) = &previous
            && p.latch.can_cancel()
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

    /// Asks the unfinished turns of `session_id` to stop, in every process: a pending one
    /// will not start, a running one stops unless it is already replying. How many were
    /// asked.
    pub async fn cancel(&self, session_id: &str) -> Result<u64, guidepost_store::StoreError> {
        let asked = self.store.cancel_turns(session_id).await?;
        if let Some(running) = self.slots.lock().await.get(session_id)
            && running.latch.can_cancel()
        {
            running.cancel.cancel();
        }
        Ok(asked)
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

    /// Stops taking turns, hands back those still preparing once their running tool calls
    /// returned (up to `grace` less a moment kept for handing back) and waits (up to
    /// `grace`) for those already replying.
    pub async fn shutdown(&self, grace: Duration) {
        let reserve = HAND_BACK_RESERVE.min(grace / 2);
        let _ = self.calls_deadline.set(tokio::time::Instant::now() + grace.saturating_sub(reserve));
        self.shutdown.cancel();
        self.tasks.close();
        if tokio::time::timeout(grace, self.tasks.wait()).await.is_err() {
            tracing::warn!("some turns were still running at shutdown; they resume on the next start");
        }
    }

    /// The records of the events that end a turn that did not run or failed: `cancelled`
    /// (or `error` with why) and the `ready` status a client waiting on the trace watches for.
    fn closing(&self, trace_id: &str, error: Option<&str>) -> Vec<NewEventRecord> {
        let status = match error {
            Some(e) => StatusPayload::error(e),
            None => StatusPayload::new(Status::Cancelled),
        };
        [status, StatusPayload::completed_empty()]
            .into_iter()
            .map(|s| stored(&NewEvent::agent(trace_id, EventPayload::Status(s)), &self.redactor))
            .collect()
    }

    /// Closes a turn that will not run: with `cancelled` (or `error`) and `ready`, so a
    /// client waiting on its trace is not left hanging. Only if it is still pending.
    async fn close(&self, trace_id: &str, status: TurnState, error: Option<String>) {
        let events = self.closing(trace_id, error.as_deref());
        let end = TurnEnd {
            status: Some(status),
            events,
            error: error.map(|e| self.redactor.text(&e)),
            ..TurnEnd::default()
        };
        if let Err(error) = self.store.close_unheld_turn(trace_id, end).await {
            tracing::error!(%error, trace_id, "could not close a turn");
        }
    }

    /// Whether an earlier attempt of the turn sent a consequential tool call (when the store
    /// cannot say, it did: closing a turn that acted would hide what it did).
    async fn acted(&self, trace_id: &str) -> bool {
        self.store.turn_has_acted(trace_id).await.unwrap_or(true)
    }

    /// Waits until this worker holds the turn; `None` when the turn should not run here. Once
    /// held, the session's requests to stop made since the turn's flag was last read (none
    /// unless the receiver changed), for the turn to watch from then on.
    async fn claim(
        &self,
        session_id: &str,
        trace_id: &str,
        cancel: &CancellationToken,
    ) -> Option<watch::Receiver<u64>> {
        let mut changes = self.store.hub().subscribe(session_id);
        // Before the flag is read, so that a request to stop made after the last reading
        // shows on the receiver.
        let stops = self.store.hub().subscribe_stops(session_id);
        loop {
            if self.shutdown.is_cancelled() {
                return None;
            }
            // A newer message, or a cancellation, asked the turn to stop before it started,
            // unless an earlier attempt of it acted on the world (it runs to tell of it).
            let stop = self.store.turn_cancel_requested(trace_id).await.unwrap_or(false);
            if (cancel.is_cancelled() || stop) && !self.acted(trace_id).await {
                self.close(trace_id, TurnState::Cancelled, None).await;
                return None;
            }
            match self.store.try_claim_turn(trace_id, &self.worker, self.settings.lease.as_millis() as i64).await {
                Ok(Claim::Claimed) => return Some(stops),
                Ok(Claim::Gone) => return None,
                Ok(Claim::Busy) => {}
                Err(error) => tracing::warn!(%error, trace_id, "could not claim a turn; trying again"),
            }
            // The session's other turn ends with a commit, which wakes this; the timeout
            // covers a holder that died (its lease expires).
            let wait = tokio::time::sleep(self.settings.lease / 3);
            tokio::select! {
                _ = changes.changed() => {}
                () = wait => {}
                () = self.shutdown.cancelled() => return None,
                // Once cancelled (a turn that acted waits its turn all the same), this no
                // longer wakes the loop.
                () = cancel.cancelled(), if !cancel.is_cancelled() => {}
            }
        }
    }
}
