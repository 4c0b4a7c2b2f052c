//! Retries with exponential backoff and jitter for transient failures (429, 5xx, timeouts,
//! connection errors), honouring the server's `Retry-After`.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use rand::RngExt;

use crate::error::LlmError;
use crate::ports::{ChatModel, Embedder, TextStream};
use crate::request::{ChatRequest, ChatResponse};

/// When and how long to wait before trying again.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (1 = no retries).
    pub max_attempts: u32,
    /// Delay before the first retry; doubled for each further one.
    pub base_delay: Duration,
    /// Upper bound of a computed delay.
    pub max_delay: Duration,
    /// Upper bound of a delay the server asks for with `Retry-After`; a longer request ends
    /// the retries with the server's error rather than stalling a turn.
    pub max_retry_after: Duration,
    /// Randomize delays between half and all of the computed value, so that concurrent
    /// callers do not retry in lockstep.
    pub jitter: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// The delay before retry number `retry` (1-based) after `error`, or `None` to give up.
    pub fn delay(&self, retry: u32, error: &LlmError) -> Option<Duration> {
        if !error.is_retryable() || retry >= self.max_attempts {
            return None;
        }
        if let Some(asked) = error.retry_after() {
            return (asked <= self.max_retry_after).then_some(asked);
        }
        let factor = 2u32.saturating_pow(retry.saturating_sub(1));
        let delay = self.base_delay.saturating_mul(factor).min(self.max_delay);
        if self.jitter && !delay.is_zero() {
            let low = delay / 2;
            Some(rand::rng().random_range(low..=delay))
        } else {
            Some(delay)
        }
    }

    async fn run<T, F, Fut>(&self, what: &str, mut call: F) -> Result<(T, u32, Duration), LlmError>
    where
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, LlmError>> + Send,
        T: Send,
    {
        let started = Instant::now();
        let mut attempt = 1;
        loop {
            match call().await {
                Ok(value) => return Ok((value, attempt, started.elapsed())),
                Err(error) => match self.delay(attempt, &error) {
                    Some(delay) => {
                        tracing::warn!(%error, attempt, ?delay, what, "model call failed; retrying");
                        tokio::time::sleep(delay).await;
                        attempt += 1;
                    }
                    None => return Err(error),
                },
            }
        }
    }
}

/// Retries the inner model according to a [`RetryPolicy`]. The answer's
/// [`Usage::calls`](crate::Usage::calls) and latency include the failed attempts. After the
/// last attempt the last error is returned as is (it carries the provider's status and body).
#[derive(Debug)]
pub struct Retry<M> {
    inner: M,
    policy: RetryPolicy,
}

impl<M> Retry<M> {
    /// Wraps `inner`.
    pub fn new(inner: M, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for Retry<M> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn capabilities(&self) -> crate::ModelCapabilities {
        self.inner.capabilities()
    }

    async fn read_ahead(&self, req: ChatRequest) -> Result<bool, LlmError> {
        self.inner.read_ahead(req).await
    }
    fn reads_ahead(&self) -> bool {
        self.inner.reads_ahead()
    }

    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        let (mut response, attempts, elapsed) =
            self.policy.run("complete", || self.inner.complete(req.clone())).await?;
        response.usage.calls += attempts - 1;
        response.usage.latency = response.usage.latency.max(elapsed);
        Ok(response)
    }

    /// Retries opening the stream; once text has started to flow, errors are passed on.
    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        let (stream, _, _) = self.policy.run("stream", || self.inner.stream(req.clone())).await?;
        Ok(stream)
    }
}

#[async_trait]
impl<M: Embedder> Embedder for Retry<M> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let (vectors, _, _) = self.policy.run("embed", || self.inner.embed(texts)).await?;
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;
    use crate::providers::scripted::ScriptedModel;
    use crate::request::TaskKind;

    fn http(status: u16, retry_after: Option<Duration>) -> LlmError {
        LlmError::Http { status, body: "busy".into(), retry_after }
    }

    #[test]
    fn delays_grow_and_respect_retry_after() {
        let policy = RetryPolicy { jitter: false, ..RetryPolicy::default() };
        assert_eq!(policy.delay(1, &http(500, None)), Some(Duration::from_millis(500)));
        assert_eq!(policy.delay(2, &http(500, None)), Some(Duration::from_secs(1)));
        assert_eq!(policy.delay(3, &http(429, Some(Duration::from_secs(7)))), Some(Duration::from_secs(7)));
        assert_eq!(policy.delay(4, &http(500, None)), None, "attempts exhausted");
        assert_eq!(policy.delay(1, &http(400, None)), None, "not retryable");
        assert_eq!(policy.delay(1, &http(429, Some(Duration::from_secs(3600)))), None);
        let jittered = RetryPolicy::default().delay(2, &http(503, None)).unwrap();
        assert!(jittered >= Duration::from_millis(500) && jittered <= Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn retries_transient_errors_then_succeeds_and_counts_calls() {
        let model = ScriptedModel::new()
            .when_task(TaskKind::Matching)
            .times(2)
            .fail(http(503, None))
            .on(TaskKind::Matching, |_| Ok(json!({"ok": true})));
        let retry = Retry::new(model, RetryPolicy::default());
        let req = ChatRequest::new(TaskKind::Matching).user("x").json_output("A", json!({}));
        let answer = retry.complete(req).await.unwrap();
        assert_eq!(answer.usage.calls, 3);
        assert_eq!(retry.inner.total_calls(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_max_attempts_with_the_last_error() {
        let model = ScriptedModel::new().when_task(TaskKind::Judge).fail(http(500, None));
        let retry = Retry::new(model, RetryPolicy { max_attempts: 3, ..RetryPolicy::default() });
        let err = retry.complete(ChatRequest::new(TaskKind::Judge).user("x")).await.unwrap_err();
        assert_eq!(err, http(500, None));
        assert_eq!(retry.inner.total_calls(), 3);
    }
}
