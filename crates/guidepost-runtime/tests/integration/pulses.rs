//! Pulses: while a model that says how far it has come works on a turn, the turn is never
//! silent for longer than the pulse interval, and never chatters more often than that.
//!
//! Time is tokio's paused clock: the model "works" by sleeping on it, so the order and spacing
//! of the events are exact and do not depend on the machine.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use guidepost_core::payload::{ModelStep, TurnProgress};
use guidepost_llm::middleware::accounting::Accounting;
use guidepost_llm::providers::scripted::ScriptedModel;
use guidepost_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, TextStream, progress};
use guidepost_runtime::events::{EventSink, NewEvent, Visibility, status_of};
use guidepost_runtime::{
    AgentRuntime, CustomerRef, EmittingLatch, MemorySession, PULSE_EVERY, RuntimeConfig, RuntimeModels,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::support::*;

const SHOP: &str = r#"
agent: {name: Otto}
guidelines:
  - {id: refund, condition: The customer asks about refunds, action: Explain the 30-day refund policy}
"#;

/// Reads a prompt of `PROMPT` tokens a hundred a second and writes `WRITTEN` tokens, one a
/// second, on tokio's clock, reporting how far it is the way the local models do; then
/// answers as the scripted model does.
struct Laboring(Arc<ScriptedModel>);

const PROMPT: usize = 400;
const WRITTEN: usize = 3;

impl Laboring {
    async fn work(&self) {
        let Some(call) = progress::call() else { return };
        call.waiting();
        for done in (0..PROMPT).step_by(100) {
            call.reading(done, PROMPT);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        for done in 0..WRITTEN {
            call.writing(done, 200);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

#[async_trait]
impl ChatModel for Laboring {
    fn model_id(&self) -> &str {
        self.0.model_id()
    }
    fn capabilities(&self) -> guidepost_llm::ModelCapabilities {
        self.0.capabilities()
    }
    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.work().await;
        self.0.complete(req).await
    }
    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        self.work().await;
        self.0.stream(req).await
    }
}

/// Passes events on, noting when (on tokio's clock) each was emitted.
struct Timed<'a> {
    inner: &'a MemorySession,
    at: Mutex<Vec<Instant>>,
}

#[async_trait]
impl EventSink for Timed<'_> {
    async fn emit(&self, event: NewEvent, visibility: Visibility) -> Option<String> {
        self.at.lock().unwrap().push(Instant::now());
        self.inner.emit(event, visibility).await
    }
    async fn update(&self, event_id: &str, event: NewEvent) {
        self.inner.update(event_id, event).await;
    }
}

fn shop_reply(prompt: &str) -> String {
    if prompt.contains("30-day refund policy") { "Returns within 30 days.".into() } else { "How can I help?".into() }
}

fn refunds() -> Oracle {
    Arc::new(|c: &str, last: &str, _prompt: &str| c.contains("refunds") && last.contains("refund"))
}

#[tokio::test(start_paused = true)]
async fn a_turn_a_model_labors_on_pulses_its_status_with_how_far_the_model_is() {
    let scripted = Arc::new(with_reply(with_matching(ScriptedModel::new(), refunds()), shop_reply));
    let model: Arc<dyn ChatModel> = Arc::new(Accounting::new(Laboring(scripted.clone()), None));
    let runtime = AgentRuntime::new(
        Arc::new(inline(SHOP)),
        RuntimeModels::single(model, None),
        Arc::new(Default::default()),
        RuntimeConfig::default(),
    );
    let session = MemorySession::new();
    let sink = Timed { inner: &session, at: Mutex::new(Vec::new()) };
    let input =
        session.customer_turn("s1", CustomerRef { id: "guest".into(), tags: vec![] }, "A refund?", &Default::default());
    let outcome = runtime.process(input, &sink, CancellationToken::new(), EmittingLatch::default()).await;
    assert_eq!(outcome.messages, ["Returns within 30 days."]);
    let calls = scripted.total_calls();
    assert!(calls >= 2, "a matching call and the reply");

    let events: Vec<_> = session.events().into_iter().skip(1).collect();
    let at = sink.at.lock().unwrap().clone();
    assert_eq!(events.len(), at.len());
    let progress_of = |i: usize| -> Option<TurnProgress> {
        let progress = events[i].data.get("data")?.get("progress")?;
        Some(serde_json::from_value(progress.clone()).unwrap())
    };

    // Without the pulses, the turn reads as it always does.
    let name = |i: usize| match status_of(&events[i]) {
        Some((s, Some(stage))) => format!("{s}:{stage}"),
        Some((s, None)) => s,
        None => format!("{:?}", events[i].kind).to_lowercase(),
    };
    let plain: Vec<String> = (0..events.len()).filter(|&i| progress_of(i).is_none()).map(name).collect();
    assert_eq!(
        plain,
        ["acknowledged", "processing:Interpreting", "processing:Articulating", "typing", "message", "ready:completed"]
    );

    // Every pulse repeats the status the turn is in, and says how far it has come.
    let pulses: Vec<usize> = (0..events.len()).filter(|&i| progress_of(i).is_some()).collect();
    // Each call works 7 s and is silent all along: a pulse every 2 s of it.
    assert!(pulses.len() >= 3 * calls, "{} pulses for {calls} calls: {plain:?}", pulses.len());
    for &i in &pulses {
        let before = (0..i).rev().find(|&j| progress_of(j).is_none()).unwrap();
        assert_eq!(status_of(&events[i]), status_of(&events[before]), "pulse {i} repeats the status it is in");
        assert_eq!(events[i].trace_id, events[before].trace_id);
    }
    let shown: Vec<TurnProgress> = pulses.iter().map(|&i| progress_of(i).unwrap()).collect();
    for pair in shown.windows(2) {
        assert!(pair[1].elapsed_ms > pair[0].elapsed_ms, "{pair:?}");
        assert!(pair[1].model_calls >= pair[0].model_calls, "{pair:?}");
        let (a, b) = (pair[0].model.unwrap(), pair[1].model.unwrap());
        if pair[0].model_calls == pair[1].model_calls {
            // Within one call: reading, then writing, each further along.
            let order = |w: guidepost_core::payload::ModelWork| (w.step == ModelStep::Writing, w.done);
            assert!(order(b) > order(a), "{pair:?}");
        }
    }
    assert_eq!(shown.first().map(|p| p.model_calls), Some(0));
    assert_eq!(shown.last().map(|p| p.model_calls), Some(calls as u32 - 1), "the reply call is the last one");
    let steps: Vec<ModelStep> = shown.iter().filter_map(|p| p.model.map(|w| w.step)).collect();
    assert!(steps.contains(&ModelStep::Reading) && steps.contains(&ModelStep::Writing), "{steps:?}");
    assert!(shown.iter().filter_map(|p| p.model).all(|w| w.done <= w.total));
    let reading = shown.iter().filter_map(|p| p.model).find(|w| w.step == ModelStep::Reading).unwrap();
    assert_eq!(reading.total, PROMPT as u32);

    // Never silent longer than the pulse interval, and pulses never closer than it.
    for (i, gap) in at.windows(2).map(|w| w[1] - w[0]).enumerate() {
        assert!(gap <= PULSE_EVERY + Duration::from_millis(5), "{gap:?} of silence before event {}", i + 1);
    }
    for pair in pulses.windows(2) {
        assert!(at[pair[1]] - at[pair[0]] >= PULSE_EVERY, "pulses {pair:?} too close");
    }
}

#[tokio::test(start_paused = true)]
async fn a_model_that_reports_nothing_causes_no_pulse() {
    let scripted = Arc::new(with_reply(with_matching(ScriptedModel::new(), refunds()), shop_reply));
    let model = Arc::new(Slow { inner: scripted, delay: Duration::from_secs(7) });
    let runtime = runtime(inline(SHOP), model, Default::default());
    let session = MemorySession::new();
    turn(&runtime, &session, &Default::default(), "A refund?").await;
    let pulses =
        session.events().iter().filter(|e| e.data.get("data").is_some_and(|d| d.get("progress").is_some())).count();
    assert_eq!(pulses, 0, "a model that says nothing of its work is not made to look busy");
}
