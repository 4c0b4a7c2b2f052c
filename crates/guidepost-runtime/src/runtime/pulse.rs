//! Pulses: while a model works on the turn, a status that says how far the turn has come,
//! whenever it has shown nothing for a while.
//!
//! A model on the CPU can take a minute to read a long prompt on a busy machine; without
//! pulses a customer watching the page would see nothing happen. Every event the turn emits
//! goes through [`Paced`], which remembers when the turn last showed something and which
//! status it is in; [`pulse`] repeats that status with the turn's [`TurnProgress`] once the
//! turn has been silent for the pulse interval, as long as a model reports work under way
//! (the local models do: waiting for the model, the prompt tokens read, the tokens written).
//! A model that reports nothing (a hosted one, a scripted one in tests) never causes one.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use guidepost_core::payload::{EventPayload, StatusPayload, TurnProgress};
use guidepost_llm::progress::ModelProgress;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::events::{EventSink, NewEvent, Visibility};

/// How long a turn a model works on stays silent before it sends a pulse, unless
/// [`RuntimeConfig::pulse_every`](crate::RuntimeConfig::pulse_every) says otherwise.
pub const PULSE_EVERY: Duration = Duration::from_secs(2);

/// A sink that passes a turn's events on and remembers when it last showed one and the
/// last status it showed. Time is tokio's clock, so a test can drive it.
pub(super) struct Paced<'a> {
    inner: &'a dyn EventSink,
    seen: Mutex<Seen>,
}

struct Seen {
    /// When the turn last showed something.
    at: Instant,
    /// The last progress status shown (without its progress).
    status: Option<StatusPayload>,
}

impl<'a> Paced<'a> {
    pub(super) fn new(inner: &'a dyn EventSink) -> Self {
        Self { inner, seen: Mutex::new(Seen { at: Instant::now(), status: None }) }
    }

    fn shown(&self, event: Option<&NewEvent>) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.at = Instant::now();
        if let Some(EventPayload::Status(status)) = event.map(|e| &e.payload)
            && status.progress().is_some()
            && !status.is_pulse()
        {
            seen.status = Some(status.clone());
        }
    }

    /// How long the turn has shown nothing, and the status it is in.
    fn silence(&self) -> (Duration, Option<StatusPayload>) {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        (seen.at.elapsed(), seen.status.clone())
    }
}

#[async_trait]
impl EventSink for Paced<'_> {
    async fn emit(&self, event: NewEvent, visibility: Visibility) -> Option<String> {
        if visibility == Visibility::Live {
            self.shown(Some(&event));
        }
        self.inner.emit(event, visibility).await
    }

    async fn update(&self, event_id: &str, event: NewEvent) {
        self.shown(None);
        self.inner.update(event_id, event).await;
    }

    async fn preview(&self, trace_id: &str, text: &str) {
        self.inner.preview(trace_id, text).await;
    }

    fn wants_preview(&self) -> bool {
        self.inner.wants_preview()
    }
}

/// Sends pulses through `sink` for turn `trace_id` (started at `started`) until `stop`: one
/// whenever the turn has been silent for `every` while `meter` shows a model call at work.
pub(super) async fn pulse(
    sink: &Paced<'_>,
    meter: &ModelProgress,
    trace_id: &str,
    started: Instant,
    every: Duration,
    stop: &CancellationToken,
) {
    // While no model reports work, look again this often.
    let glance = every / 4;
    loop {
        let (silent, status) = sink.silence();
        let left = every.checked_sub(silent).filter(|left| !left.is_zero());
        let wait = match (left, meter.snapshot(), status) {
            (None, (model_calls, Some(work)), Some(status)) => {
                let progress = TurnProgress {
                    elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    model_calls,
                    model: Some(work),
                };
                let event = NewEvent::agent(trace_id, EventPayload::Status(status.with_progress(progress)));
                sink.emit(event, Visibility::Live).await;
                every
            }
            (None, _, _) => glance,
            (Some(left), _, _) => left,
        };
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use guidepost_core::payload::ModelStep;
    use guidepost_core::session::{ProcessingStage, Status};

    use super::*;
    use crate::events::{MemorySession, status_of};

    #[tokio::test(start_paused = true)]
    async fn a_silent_turn_pulses_its_status_with_progress_while_a_model_reports_work() {
        let session = MemorySession::new();
        let sink = Paced::new(&session);
        let meter = Arc::new(ModelProgress::default());
        let stop = CancellationToken::new();
        let started = Instant::now();
        let every = Duration::from_secs(2);
        let work = async {
            sink.emit(NewEvent::processing("t", ProcessingStage::Interpreting), Visibility::Live).await;
            // No model reports work: silence, however long.
            tokio::time::sleep(Duration::from_secs(5)).await;
            let call = meter.call();
            call.reading(100, 400);
            tokio::time::sleep(Duration::from_secs(3)).await;
            sink.emit(NewEvent::status("t", Status::Typing), Visibility::Live).await;
            call.writing(7, 300);
            tokio::time::sleep(Duration::from_millis(2_100)).await;
            drop(call);
            stop.cancel();
        };
        futures::join!(work, pulse(&sink, &meter, "t", started, every, &stop));
        let events = session.events();
        let shown: Vec<_> = events.iter().filter_map(status_of).collect();
        let processing = Some(("processing".to_string(), Some("Interpreting".to_string())));
        assert_eq!(shown.len(), 5, "{events:#?}");
        assert_eq!([&shown[1], &shown[2]], [&processing.clone().unwrap(); 2]);
        let progress =
            |i: usize| serde_json::from_value::<TurnProgress>(events[i].data["data"]["progress"].clone()).unwrap();
        assert!(events[0].data["data"].get("progress").is_none());
        let first = progress(1);
        assert_eq!(first.model.map(|w| (w.step, w.done, w.total)), Some((ModelStep::Reading, 100, 400)));
        assert!(first.elapsed_ms >= 5_000, "{first:?}");
        assert!(progress(2).elapsed_ms >= first.elapsed_ms + 2_000, "then every 2 s of silence");
        assert_eq!(shown[3], ("typing".to_string(), None));
        assert_eq!(shown[4], ("typing".to_string(), None), "the pulse repeats the status it is in");
        assert_eq!(progress(4).model.map(|w| (w.step, w.done)), Some((ModelStep::Writing, 7)));
    }
}
