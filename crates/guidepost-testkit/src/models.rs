//! [`Held`]: a chat model that holds back some calls of the model it wraps (for a while,
//! forever, or with an error) to put a turn in a given state: a stage that hangs, a wave that
//! is slow, a call that fails. [`InFlight`]: one that counts the calls in flight at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use guidepost_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, ModelCapabilities, TextStream};
use tokio::sync::Notify;

/// What [`Held`] does with one call.
#[derive(Debug)]
pub enum Hold {
    /// Passes it on at once.
    Pass,
    /// Passes it on after this long.
    Delay(Duration),
    /// Never answers it (and notifies [`Held::entered`]).
    Forever,
    /// Answers it with this error.
    Fail(LlmError),
}

/// A model that asks `hold` what to do with each call before passing it to `inner`.
pub struct Held {
    inner: Arc<dyn ChatModel>,
    hold: Box<dyn Fn(&ChatRequest) -> Hold + Send + Sync>,
    /// Notified whenever a call is held forever.
    pub entered: Arc<Notify>,
}

impl Held {
    /// Wraps `inner`; `hold` decides about each call.
    pub fn new(inner: Arc<dyn ChatModel>, hold: impl Fn(&ChatRequest) -> Hold + Send + Sync + 'static) -> Self {
        Self { inner, hold: Box::new(hold), entered: Arc::new(Notify::new()) }
    }

    async fn gate(&self, req: &ChatRequest) -> Result<(), LlmError> {
        match (self.hold)(req) {
            Hold::Pass => Ok(()),
            Hold::Delay(delay) => {
                tokio::time::sleep(delay).await;
                Ok(())
            }
            Hold::Forever => {
                self.entered.notify_one();
                std::future::pending().await
            }
            Hold::Fail(error) => Err(error),
        }
    }
}

#[async_trait]
impl ChatModel for Held {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn capabilities(&self) -> ModelCapabilities {
        self.inner.capabilities()
    }

    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.gate(&req).await?;
        self.inner.complete(req).await
    }

    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        self.gate(&req).await?;
        self.inner.stream(req).await
    }

    async fn read_ahead(&self, req: ChatRequest) -> Result<bool, LlmError> {
        self.inner.read_ahead(req).await
    }
    fn reads_ahead(&self) -> bool {
        self.inner.reads_ahead()
    }
}

/// Wraps a chat model and remembers how many of the calls it counts were in flight at once:
/// each call gives way once before it is passed on, so calls asked together (joined futures)
/// are all in before any is answered, whatever the clock. 1 means one at a time.
pub struct InFlight {
    inner: Arc<dyn ChatModel>,
    counts: Box<dyn Fn(&ChatRequest) -> bool + Send + Sync>,
    reads_ahead: bool,
    now: AtomicUsize,
    most: AtomicUsize,
}

impl InFlight {
    /// Wraps `inner`, counting the calls `counts` picks; it says it reads ahead as `inner` does.
    pub fn new(inner: Arc<dyn ChatModel>, counts: impl Fn(&ChatRequest) -> bool + Send + Sync + 'static) -> Self {
        let reads_ahead = inner.reads_ahead();
        Self { inner, counts: Box::new(counts), reads_ahead, now: AtomicUsize::new(0), most: AtomicUsize::new(0) }
    }

    /// Says it reads ahead (or not) whatever `inner` says.
    pub fn reading_ahead(mut self, reads_ahead: bool) -> Self {
        self.reads_ahead = reads_ahead;
        self
    }

    /// The most counted calls that were in flight at the same time.
    pub fn most_in_flight(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl ChatModel for InFlight {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn capabilities(&self) -> ModelCapabilities {
        self.inner.capabilities()
    }

    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        let counted = (self.counts)(&req);
        if counted {
            let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
        }
        tokio::task::yield_now().await;
        let answer = self.inner.complete(req).await;
        if counted {
            self.now.fetch_sub(1, Ordering::SeqCst);
        }
        answer
    }

    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        self.inner.stream(req).await
    }

    async fn read_ahead(&self, req: ChatRequest) -> Result<bool, LlmError> {
        self.inner.read_ahead(req).await
    }

    fn reads_ahead(&self) -> bool {
        self.reads_ahead
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use guidepost_llm::TaskKind;
    use guidepost_llm::providers::scripted::ScriptedModel;

    #[tokio::test]
    async fn calls_asked_together_are_counted_in_flight_together() {
        let inner: Arc<dyn ChatModel> =
            Arc::new(ScriptedModel::new().on_text(TaskKind::Generation, |_| Ok("hi".into())));
        let model = InFlight::new(inner, |req| req.last_user_message() != "not counted");
        let ask = |text: &str| ChatRequest::new(TaskKind::Generation).user(text);
        assert!(model.complete(ask("a")).await.is_ok());
        assert_eq!(model.most_in_flight(), 1);
        let (a, b, c) =
            futures::join!(model.complete(ask("a")), model.complete(ask("b")), model.complete(ask("not counted")));
        assert!(a.is_ok() && b.is_ok() && c.is_ok());
        assert_eq!(model.most_in_flight(), 2);
        assert!(model.reads_ahead(), "as the scripted model says");
        assert!(!model.reading_ahead(false).reads_ahead());
    }

    #[tokio::test]
    async fn calls_are_passed_delayed_failed_or_held_as_told() {
        let inner: Arc<dyn ChatModel> =
            Arc::new(ScriptedModel::new().on_text(TaskKind::Generation, |_| Ok("hi".into())));
        let held = Held::new(inner, |req| match req.last_user_message() {
            "slow" => Hold::Delay(Duration::from_millis(30)),
            "fail" => Hold::Fail(LlmError::Connection("down".into())),
            "never" => Hold::Forever,
            _ => Hold::Pass,
        });
        let ask = |text: &str| ChatRequest::new(TaskKind::Generation).user(text);
        assert_eq!(held.complete(ask("now")).await.unwrap().output.to_text(), "hi");
        let started = std::time::Instant::now();
        assert!(held.complete(ask("slow")).await.is_ok());
        assert!(started.elapsed() >= Duration::from_millis(30));
        assert!(matches!(held.complete(ask("fail")).await, Err(LlmError::Connection(_))));
        let entered = held.entered.clone();
        let waited = tokio::time::timeout(Duration::from_millis(50), async {
            tokio::join!(held.complete(ask("never")), entered.notified()).0
        })
        .await;
        assert!(waited.is_err(), "a call held forever is never answered");
    }
}
