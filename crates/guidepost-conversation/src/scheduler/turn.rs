//! One claimed turn, from its claim to its commit: the lease renewed while it runs, a
//! watch for the store asking it to stop, the agent's runtime run on what the session holds,
//! and its end (reply, tool results, final statuses, state and trace) committed together,
//! only if this worker still holds the turn.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::FutureExt;
use guidepost_core::Session;
use guidepost_core::payload::StatusPayload;
use guidepost_core::{EventKind, EventSource};
use guidepost_runtime::{AgentRuntime, EmittingLatch, TurnOutcome, TurnStatus};
use guidepost_store::turns::TurnEnd;
use guidepost_store::{EventFilter, TurnState};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::TurnScheduler;
use crate::error::ConversationError;
use crate::sink::{Progress, TurnSink};

/// A turn the runtime ran to an end: how it ended, the session as the turn read it and the
/// agent that ran it.
struct Ran {
    outcome: TurnOutcome,
    session: Session,
    runtime: Arc<AgentRuntime>,
}

/// How running a turn ended.
enum Processed {
    /// The runtime ran it to an end (replied, cancelled or failed).
    Done(Box<Ran>),
    /// Shutdown came while it was still preparing: it runs again on the next start.
    HandedBack,
    /// It could not run (its session, customer or agent could not be read, it took too
    /// long, or it stopped on an internal error).
    NotRun(String),
}

impl TurnScheduler {
    /// Claims and runs the turn, then commits its end (or hands it back at shutdown).
    pub(super) async fn run(
        self: &Arc<Self>,
        session_id: &str,
        trace_id: &str,
        cancel: CancellationToken,
        latch: EmittingLatch,
    ) {
        let Ok(_permit) = self.in_flight.clone().acquire_owned().await else { return };
        let Some(stops) = self.claim(session_id, trace_id, &cancel).await else { return };
        let attempts = self.store.get_turn(trace_id).await.ok().flatten().map_or(1, |t| t.attempts);
        let shown = if attempts > 1 { self.resume(session_id, trace_id).await } else { HashSet::new() };
        let sink = TurnSink::new(self.store.clone(), session_id, self.redactor.clone(), shown);
        let lost = Arc::new(AtomicBool::new(false));
        let _renewer = self.renew_while_running(trace_id, cancel.clone(), lost.clone()).drop_guard();
        let _watcher = self.watch_for_cancellation(stops, trace_id, cancel.clone()).drop_guard();
        let started = std::time::Instant::now();
        let processing = std::panic::AssertUnwindSafe(self.process(session_id, trace_id, &sink, cancel, latch));
        let result = match processing.catch_unwind().await {
            Ok(result) => result,
            Err(_) => Processed::NotRun("the turn stopped on an internal error".into()),
        };
        let mut next = None;
        let end = match result {
            Processed::HandedBack => {
                sink.flush().await;
                if let Err(error) = self.store.hand_back_turn(trace_id, &self.worker).await {
                    tracing::error!(%error, trace_id, "could not hand a turn back");
                }
                return;
            }
            Processed::NotRun(error) => {
                let mut events = sink.take_held();
                events.extend(self.closing(trace_id, Some(&error)));
                let error = self.redactor.text(&error);
                TurnEnd { status: Some(TurnState::Failed), events, error: Some(error), ..TurnEnd::default() }
            }
            Processed::Done(ran) => {
                let end = self.end_of(&ran, sink.take_held()).await;
                next = Some(ran);
                end
            }
        };
        let status = end.status.unwrap_or(TurnState::Failed);
        match self.store.commit_turn(trace_id, &self.worker, end).await {
            Ok(true) => {
                self.observer.turn_finished(status, started.elapsed());
                if let Some(ran) = next.filter(|_| status == TurnState::Completed) {
                    self.read_ahead_after(*ran, trace_id);
                }
            }
            Ok(false) => tracing::warn!(
                trace_id,
                lease_lost = lost.load(Ordering::SeqCst),
                "this worker no longer holds the turn; its result is dropped (the holder answers)"
            ),
            Err(error) => tracing::error!(%error, trace_id, "could not commit the end of a turn; it runs again"),
        }
    }

    /// While the customer reads the reply and writes back, the models read ahead what the
    /// next turn's first calls begin with: the session as turn `trace_id` left it (see
    /// [`AgentRuntime::read_ahead_after`]), in the background. Nothing waits for it and
    /// nothing depends on it: it only saves time on a model that keeps prompt prefixes and
    /// is idle (a turn that comes meanwhile waits for at most one piece of the reading).
    fn read_ahead_after(&self, ran: Ran, trace_id: &str) {
        if !ran.runtime.reads_ahead_after() {
            return;
        }
        let (store, trace_id) = (self.store.clone(), trace_id.to_string());
        tokio::spawn(async move {
            match crate::input::turn_input(&store, &ran.session, &trace_id).await {
                Ok(input) => {
                    let read = ran.runtime.read_ahead_after(&input).await;
                    tracing::debug!(session = %ran.session.id, read, "read ahead for the next turn");
                }
                Err(error) => tracing::debug!(%error, "nothing to read ahead for the next turn"),
            }
        });
    }

    /// What a turn the runtime ran to an end commits: its held events, its state (when it
    /// replied), its trace and error without secrets. A completed turn adds the labels of
    /// what it matched to the session.
    async fn end_of(&self, ran: &Ran, events: Vec<guidepost_store::NewEventRecord>) -> TurnEnd {
        let outcome = &ran.outcome;
        let status = match outcome.status {
            // A degraded reply went out: the turn is complete, and its `ready` status and
            // message events carry the `degraded` list.
            TurnStatus::Completed | TurnStatus::Degraded => TurnState::Completed,
            TurnStatus::Cancelled => TurnState::Cancelled,
            TurnStatus::Failed => TurnState::Failed,
        };
        self.observer.model_usage(&outcome.trace.usage);
        if status == TurnState::Completed {
            self.add_labels(&ran.session, &ran.runtime, outcome).await;
        }
        let mut trace = serde_json::to_value(&outcome.trace).ok();
        if let Some(trace) = trace.as_mut() {
            self.redactor.json(trace);
        }
        TurnEnd {
            status: Some(status),
            events,
            state: (status == TurnState::Completed).then(|| outcome.state.clone()),
            trace,
            error: outcome.trace.error.as_deref().map(|e| self.redactor.text(e)),
        }
    }

    /// Prepares a turn that runs again (its process died, or it was handed back): a streamed
    /// reply the earlier attempt left half-written is withdrawn (soft deletion: offsets
    /// stay), and the progress statuses it showed are returned, not to be shown twice.
    async fn resume(&self, session_id: &str, trace_id: &str) -> HashSet<Progress> {
        let of_turn =
            |kind| EventFilter { trace_id: Some(trace_id.to_string()), kinds: vec![kind], ..Default::default() };
        if let Ok(messages) = self.store.list_events(session_id, &of_turn(EventKind::Message)).await {
            for e in messages.iter().filter(|e| e.source == EventSource::AiAgent) {
                if let Err(error) = self.store.delete_event(session_id, &e.id).await {
                    tracing::warn!(%error, trace_id, "could not withdraw a half-streamed message");
                }
            }
        }
        let statuses = self.store.list_events(session_id, &of_turn(EventKind::Status)).await.unwrap_or_default();
        statuses
            .iter()
            .filter_map(StatusPayload::of)
            .filter_map(|s| s.progress().map(|(status, stage)| (status, stage.map(str::to_string))))
            .collect()
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

    /// Cancels the turn (unless it is replying) when the store says it should stop (a newer
    /// message came, or the session's turns were cancelled), whichever process said so.
    /// `changes` are the session's requests to stop, subscribed before the claim last read
    /// the turn's flag: a request made since has already marked them changed.
    fn watch_for_cancellation(
        &self,
        mut changes: watch::Receiver<u64>,
        trace_id: &str,
        cancel: CancellationToken,
    ) -> CancellationToken {
        let stop = CancellationToken::new();
        let (store, trace, token) = (self.store.clone(), trace_id.to_string(), stop.clone());
        tokio::spawn(async move {
            // Only requests to stop wake it: the turn's own events do not.
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

    /// Runs the agent's runtime on the turn: its input read from the store, stopped by
    /// `cancel` unless it is replying, failed when it prepares longer than the turn timeout,
    /// handed back when shutdown comes while it prepares.
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
        let input = match crate::input::turn_input(&self.store, &session, trace_id).await {
            Ok(input) => input,
            Err(e) => return Processed::NotRun(e.to_string()),
        };
        let runtime = match self.agents.runtime(&session.agent_id).await {
            Ok(r) => r,
            Err(e @ ConversationError::AgentCannotRun { .. }) => return Processed::NotRun(e.to_string()),
            Err(e) => return Processed::NotRun(format!("agent `{}` cannot run: {e}", session.agent_id)),
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
        let done =
            |outcome| Processed::Done(Box::new(Ran { outcome, session: session.clone(), runtime: runtime.clone() }));
        let running = async {
            let mut processing = Box::pin(runtime.process(input, sink, cancel, latch.clone()));
            let result = tokio::select! {
                outcome = &mut processing => done(outcome),
                () = self.shutdown.cancelled() => {
                    // A reply already being emitted is finished; a turn still preparing is
                    // stopped and handed back, to run again from its start on the next
                    // process, once the tool calls it sent returned (they record their
                    // outcomes themselves): the next attempt reuses them instead of sending
                    // them again.
                    if latch.is_set() {
                        done(processing.await)
                    } else {
                        drop(processing);
                        self.wait_for_calls(trace_id).await;
                        Processed::HandedBack
                    }
                }
            };
            sink.close();
            result
        };
        // The sink stores progress statuses while the turn waits, in this same task.
        let (result, ()) = tokio::join!(running, sink.keep_writing());
        timer.0.abort();
        match result {
            Processed::Done(ran) if timer.1.load(Ordering::SeqCst) && ran.outcome.status == TurnStatus::Cancelled => {
                Processed::NotRun(format!("the turn took longer than {timeout:?} and was stopped"))
            }
            other => other,
        }
    }

    /// Waits (until the shutdown's deadline) for the tool calls turn `trace_id` sent that
    /// have not returned yet.
    async fn wait_for_calls(&self, trace_id: &str) {
        let running = self.journal.running(trace_id);
        if running == 0 {
            return;
        }
        let until = self.calls_deadline.get().copied().unwrap_or_else(tokio::time::Instant::now);
        tracing::info!(trace_id, running, "waiting for the turn's running tool calls before handing it back");
        let left = self.journal.wait_for_calls(trace_id, until).await;
        if left > 0 {
            tracing::warn!(
                trace_id,
                running = left,
                "tool calls still running at shutdown: the next attempt of the turn finds them without an outcome"
            );
        }
    }

    /// Adds the labels of the guidelines, journeys and journey states the turn matched to
    /// its session (`session` as the turn read it: the update reads it again).
    async fn add_labels(&self, session: &Session, runtime: &AgentRuntime, outcome: &TurnOutcome) {
        let session_id = session.id.as_str();
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
        if labels.iter().all(|l| session.labels.contains(l)) {
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
