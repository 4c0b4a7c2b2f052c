//! What the agent is doing while a turn runs, shown on standard error.
//!
//! On the local model a turn takes tens of seconds to minutes; a silent terminal looks hung.
//! [`TurnProgress`] follows the turn's status events (interpreting, considering tools,
//! articulating, typing) and the model calls in flight (from the stack's
//! [`UsageLedger`]), and how far the model is with the call under way when the turn's pulses
//! say so (reading the prompt, writing), and shows them with the elapsed time: one line
//! rewritten in place on a terminal, a new line whenever the activity changes when standard
//! error is a file or pipe.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use guidepost_core::payload::{EventPayload, StatusPayload};
use guidepost_core::session::Status;
use guidepost_llm::UsageLedger;
use guidepost_runtime::events::Visibility;
use guidepost_runtime::{EventSink, NewEvent};

/// What the turn's status events last said, in words.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Activity {
    /// The status and stage (`interpreting`, `writing the reply` ...); empty before the first.
    status: String,
    /// How far the model is with the call under way, when the last status said so.
    model: Option<String>,
}

/// A sink that passes events on and remembers the turn's latest status.
pub struct ObservedSink<'a> {
    inner: &'a dyn EventSink,
    status: Arc<Mutex<Activity>>,
    live: Option<Arc<LiveReply>>,
}

impl<'a> ObservedSink<'a> {
    /// Wraps `inner`; `status` receives a description of each status event.
    pub fn new(inner: &'a dyn EventSink, status: Arc<Mutex<Activity>>) -> Self {
        Self { inner, status, live: None }
    }

    /// Also prints the reply while it is written (see [`LiveReply`]).
    pub fn with_live_reply(mut self, live: Arc<LiveReply>) -> Self {
        self.live = Some(live);
        self
    }
}

/// The reply printed on standard output while it is written, as `Name> text`.
///
/// The reply grows in place; a reply withdrawn (a check refused it, or its stream broke
/// off) is left as printed, marked, and the new one is printed on a line of its own. While it prints, the progress line pauses.
pub struct LiveReply {
    name: String,
    /// What is printed of the current reply; `None` before its first words.
    printed: Mutex<Option<String>>,
    /// Set once the first words are printed: the progress line stops. The progress line is
    /// drawn holding this lock, so the two never write over each other.
    pub started: Arc<Mutex<bool>>,
}

impl LiveReply {
    /// A live reply for the agent `name`.
    pub fn new(name: &str) -> Self {
        Self { name: name.to_string(), printed: Mutex::new(None), started: Arc::default() }
    }

    /// Shows `text`, the reply so far (empty: the reply was refused and is written anew).
    fn show(&self, text: &str) {
        let mut printed = self.printed.lock().unwrap_or_else(PoisonError::into_inner);
        match printed.as_mut() {
            Some(shown) if text.starts_with(shown.as_str()) => {
                out!("{}", &text[shown.len()..]);
                *shown = text.to_string();
            }
            Some(_) => {
                outln!("  (withdrawn: a check refused it or it broke off; writing again)");
                *printed = None;
                if !text.is_empty() {
                    drop(printed);
                    self.show(text);
                    return;
                }
            }
            None if text.is_empty() => {}
            None => {
                let mut started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
                if !*started {
                    // The progress line goes; the reply takes its place.
                    *started = true;
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r\x1b[2K");
                    let _ = err.flush();
                }
                out!("{}> {text}", self.name);
                *printed = Some(text.to_string());
            }
        }
        let _ = std::io::stdout().flush();
    }

    /// Ends the printed reply's line. Returns the text printed last, if any.
    pub fn finish(&self) -> Option<String> {
        let printed = self.printed.lock().unwrap_or_else(PoisonError::into_inner).take();
        if printed.is_some() {
            outln!();
        }
        printed
    }
}

/// The activity a status event stands for, in words.
fn describe_status(status: &StatusPayload) -> String {
    match (status.status, status.data.stage.as_deref()) {
        (Status::Acknowledged, _) => "received".into(),
        (Status::Processing, Some(stage)) => stage.to_lowercase(),
        (Status::Processing, None) => "processing".into(),
        (Status::Typing, _) => "writing the reply".into(),
        (other, _) => serde_json::to_value(other).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
    }
}

/// The activity a status event stands for, with how far the model is when it says so.
fn describe_activity(status: &StatusPayload) -> Activity {
    let model = status.data.progress.as_ref().and_then(|p| p.model).map(|work| work.describe());
    Activity { status: describe_status(status), model }
}

/// The line shown for `activity` while `calls` (in words) are in flight.
fn activity_line(activity: &Activity, calls: &str) -> String {
    let status = activity.status.as_str();
    let line = match (status.is_empty(), calls.is_empty()) {
        (true, true) => "starting".to_string(),
        (false, true) => status.to_string(),
        (true, false) => calls.to_string(),
        (false, false) if status == calls => status.to_string(),
        (false, false) => format!("{status}: {calls}"),
    };
    match &activity.model {
        Some(model) => format!("{line} — {model}"),
        None => line,
    }
}

#[async_trait]
impl EventSink for ObservedSink<'_> {
    async fn emit(&self, event: NewEvent, visibility: Visibility) -> Option<String> {
        if let EventPayload::Status(status) = &event.payload {
            *self.status.lock().unwrap_or_else(PoisonError::into_inner) = describe_activity(status);
        }
        self.inner.emit(event, visibility).await
    }

    async fn update(&self, event_id: &str, event: NewEvent) {
        self.inner.update(event_id, event).await;
    }

    async fn preview(&self, trace_id: &str, text: &str) {
        if let Some(live) = &self.live {
            live.show(text);
        }
        self.inner.preview(trace_id, text).await;
    }

    fn wants_preview(&self) -> bool {
        self.live.is_some() || self.inner.wants_preview()
    }
}

/// Model calls in flight, in words (`checking guidelines`, `writing the reply` ...).
fn describe_calls(in_flight: &std::collections::BTreeMap<String, usize>) -> String {
    in_flight
        .iter()
        .map(|(task, n)| {
            let what = match task.as_str() {
                "matching" => "checking guidelines",
                "journey_selection" => "choosing the journey step",
                "tool_inference" => "deciding on tool calls",
                "generation" => "writing the reply",
                "embedding" => "embedding",
                other => other,
            };
            if *n > 1 { format!("{what} ({n} calls)") } else { what.to_string() }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Writes the activity: over the current line on a terminal, as a new line when it changed
/// otherwise.
fn show(terminal: bool, activity: &str, last: &str, elapsed: f64) {
    let mut err = std::io::stderr().lock();
    if terminal {
        let _ = write!(err, "\r\x1b[2K  … {activity} ({elapsed:.0} s)");
        let _ = err.flush();
    } else if activity != last {
        let _ = writeln!(err, "  … {activity} ({elapsed:.1} s)");
    }
}

/// Shows a turn's progress until [`finish`](Self::finish) is called.
pub struct TurnProgress {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl TurnProgress {
    /// Starts showing the progress of a turn whose statuses land in `status` and whose model
    /// calls are counted in `ledger`, until `paused` is set (the reply is being printed).
    pub fn start(status: Arc<Mutex<Activity>>, ledger: UsageLedger, paused: Arc<Mutex<bool>>) -> Self {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let terminal = std::io::stderr().is_terminal();
        let started = Instant::now();
        let task = tokio::spawn(async move {
            let mut last = String::new();
            let tick = if terminal { Duration::from_millis(250) } else { Duration::from_millis(500) };
            loop {
                let activity = {
                    let shown = status.lock().unwrap_or_else(PoisonError::into_inner).clone();
                    activity_line(&shown, &describe_calls(&ledger.in_flight()))
                };
                let printing = {
                    let printing = paused.lock().unwrap_or_else(PoisonError::into_inner);
                    if !*printing {
                        show(terminal, &activity, &last, started.elapsed().as_secs_f64());
                    }
                    *printing
                };
                if printing {
                    // The reply is printing; the line was cleared for it.
                    let _ = stopped.changed().await;
                    return;
                }
                last = activity;
                tokio::select! {
                    _ = tokio::time::sleep(tick) => {}
                    _ = stopped.changed() => break,
                }
            }
            let printing = paused.lock().unwrap_or_else(PoisonError::into_inner);
            if terminal && !*printing {
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r\x1b[2K");
                let _ = err.flush();
            }
        });
        Self { stop, task }
    }

    /// Stops showing the progress and clears the line.
    pub async fn finish(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use guidepost_core::payload::{ModelStep, ModelWork, TurnProgress};
    use guidepost_core::session::ProcessingStage;

    #[test]
    fn statuses_and_calls_read_as_activities() {
        assert_eq!(describe_status(&StatusPayload::processing(ProcessingStage::Interpreting)), "interpreting");
        assert_eq!(describe_status(&StatusPayload::new(Status::Typing)), "writing the reply");
        assert_eq!(describe_status(&StatusPayload::new(Status::Cancelled)), "cancelled");
        let mut calls = std::collections::BTreeMap::new();
        calls.insert("matching".to_string(), 2);
        calls.insert("journey_selection".to_string(), 1);
        assert_eq!(describe_calls(&calls), "choosing the journey step, checking guidelines (2 calls)");
    }

    #[test]
    fn a_pulse_adds_how_far_the_model_is_to_the_line() {
        let working = StatusPayload::processing(ProcessingStage::ConsideringTools);
        let work = ModelWork { step: ModelStep::Reading, done: 120, total: 537 };
        let pulse = working.with_progress(TurnProgress { elapsed_ms: 4_000, model_calls: 2, model: Some(work) });
        let line = activity_line(&describe_activity(&pulse), "deciding on tool calls");
        assert_eq!(line, "considering tools: deciding on tool calls — reading the prompt: 120 of 537 tokens");
        let after = activity_line(&describe_activity(&StatusPayload::new(Status::Typing)), "writing the reply");
        assert_eq!(after, "writing the reply", "the next status drops what the pulse said");
        assert_eq!(activity_line(&Activity::default(), ""), "starting");
    }
}
