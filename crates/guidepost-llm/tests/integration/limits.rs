//! Limits: the concurrency cap and the requests-per-minute pacing, observed on a slow model.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::join_all;
use guidepost_llm::middleware::limits::{Limits, LimitsConfig};
use guidepost_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, Output, TaskKind, Usage};
use tokio::time::Instant;

/// Sleeps `delay` per call and tracks the highest number of calls in flight.
#[derive(Default)]
struct SlowModel {
    delay: Duration,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    started: std::sync::Mutex<Vec<Instant>>,
}

#[async_trait]
impl ChatModel for SlowModel {
    fn model_id(&self) -> &str {
        "slow"
    }
    fn capabilities(&self) -> guidepost_llm::ModelCapabilities {
        guidepost_llm::ModelCapabilities::CAPABLE
    }
    async fn complete(&self, _req: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.started.lock().unwrap().push(Instant::now());
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(ChatResponse::new(Output::Text("ok".into()), Usage::new("slow")))
    }
}

fn req() -> ChatRequest {
    ChatRequest::new(TaskKind::Matching).user("hello")
}

#[tokio::test(start_paused = true)]
async fn concurrency_cap_is_never_exceeded() {
    let slow = Arc::new(SlowModel { delay: Duration::from_millis(100), ..SlowModel::default() });
    let limited =
        Arc::new(Limits::new(Arc::clone(&slow), LimitsConfig { max_concurrency: Some(3), ..LimitsConfig::default() }));
    let started = Instant::now();
    let results = join_all((0..10).map(|_| {
        let limited = Arc::clone(&limited);
        tokio::spawn(async move { limited.complete(req()).await })
    }))
    .await;
    assert!(results.into_iter().all(|r| r.unwrap().is_ok()));
    assert_eq!(slow.max_in_flight.load(Ordering::SeqCst), 3);
    // 10 calls, 3 at a time, 100 ms each: 4 waves.
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(400) && elapsed < Duration::from_millis(500), "{elapsed:?}");
}

#[tokio::test(start_paused = true)]
async fn requests_per_minute_are_paced() {
    let slow = Arc::new(SlowModel::default());
    let limited =
        Limits::new(Arc::clone(&slow), LimitsConfig { requests_per_minute: Some(6), ..LimitsConfig::default() });
    let t0 = Instant::now();
    for _ in 0..8 {
        limited.complete(req()).await.unwrap();
    }
    let starts: Vec<Duration> = slow.started.lock().unwrap().iter().map(|t| *t - t0).collect();
    // A full bucket lets 6 through at once; then one every 10 s.
    assert!(starts[5] < Duration::from_millis(1), "{starts:?}");
    assert!(starts[6] >= Duration::from_secs(10) && starts[6] < Duration::from_millis(10_100), "{starts:?}");
    assert!(starts[7] >= Duration::from_secs(20) && starts[7] < Duration::from_millis(20_100), "{starts:?}");
}

#[tokio::test(start_paused = true)]
async fn tokens_per_minute_are_paced_and_oversized_prompts_refused() {
    let slow = Arc::new(SlowModel::default());
    let limited =
        Limits::new(Arc::clone(&slow), LimitsConfig { tokens_per_minute: Some(60), ..LimitsConfig::default() });
    let t0 = Instant::now();
    // "hello" costs 1 + 4 overhead + 3 primer = 8 tokens: 7 fit in the full bucket of 60.
    for _ in 0..8 {
        limited.complete(req()).await.unwrap();
    }
    let starts: Vec<Duration> = slow.started.lock().unwrap().iter().map(|t| *t - t0).collect();
    assert!(starts[6] < Duration::from_millis(1), "{starts:?}");
    assert!(starts[7] >= Duration::from_secs(4), "{starts:?}");
    let huge = ChatRequest::new(TaskKind::Matching).user("word ".repeat(200));
    let err = limited.complete(huge).await.unwrap_err();
    assert!(matches!(err, LlmError::RateLimited(_)), "{err}");
}
