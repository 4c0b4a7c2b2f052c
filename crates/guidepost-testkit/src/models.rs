//! [`Held`]: a chat model that holds back some calls of the model it wraps (for a while,
//! forever, or with an error) to put a turn in a given state: a stage that hangs, a wave that
//! is slow, a call that fails.

use std::sync::Arc;
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

#[cfg(test)]
mod tests {
    use super::*;
    use guidepost_llm::TaskKind;
    use guidepost_llm::providers::scripted::ScriptedModel;

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
