//! Per-provider limits: concurrent calls (a semaphore), requests per minute and prompt tokens
//! per minute (token buckets; prompt tokens estimated offline with `o200k_base`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::error::LlmError;
use crate::ports::{ChatModel, Embedder, TextStream};
use crate::request::{ChatRequest, ChatResponse};
use crate::tokens::{count_message_tokens, count_tokens};

/// Limits of one provider. `None` means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LimitsConfig {
    /// Calls in flight at once.
    pub max_concurrency: Option<usize>,
    /// Requests per minute.
    pub requests_per_minute: Option<u32>,
    /// Prompt tokens per minute.
    pub tokens_per_minute: Option<u32>,
}

/// A token bucket refilled continuously at `capacity` per minute, starting full.
#[derive(Debug)]
pub struct TokenBucket {
    capacity: f64,
    per_second: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A full bucket of `per_minute` tokens.
    pub fn per_minute(per_minute: u32) -> Self {
        let capacity = f64::from(per_minute.max(1));
        Self { capacity, per_second: capacity / 60.0, state: Mutex::new((capacity, Instant::now())) }
    }

    /// Waits until `amount` tokens are available and takes them. Waiters are served in
    /// order. An amount larger than the whole bucket is refused.
    pub async fn acquire(&self, amount: u64, what: &str) -> Result<(), LlmError> {
        #[allow(clippy::cast_precision_loss)]
        let amount = amount as f64;
        if amount > self.capacity {
            return Err(LlmError::RateLimited(format!(
                "a call needs {amount} {what} but the limit is {} per minute",
                self.capacity
            )));
        }
        // The async mutex is held while sleeping on purpose: it queues later callers.
        let mut state = self.state.lock().await;
        let now = Instant::now();
        let (tokens, last) = *state;
        let mut tokens = (tokens + now.duration_since(last).as_secs_f64() * self.per_second).min(self.capacity);
        if tokens < amount {
            let wait = Duration::from_secs_f64((amount - tokens) / self.per_second);
            tracing::debug!(?wait, what, "rate limit reached; waiting");
            tokio::time::sleep(wait).await;
            tokens = amount;
        }
        *state = (tokens - amount, Instant::now());
        Ok(())
    }
}

/// Applies a [`LimitsConfig`] to the inner model.
#[derive(Debug)]
pub struct Limits<M> {
    inner: M,
    semaphore: Option<Arc<Semaphore>>,
    requests: Option<TokenBucket>,
    tokens: Option<TokenBucket>,
}

impl<M> Limits<M> {
    /// Wraps `inner`.
    pub fn new(inner: M, config: LimitsConfig) -> Self {
        Self {
            inner,
            semaphore: config.max_concurrency.map(|n| Arc::new(Semaphore::new(n.max(1)))),
            requests: config.requests_per_minute.map(TokenBucket::per_minute),
            tokens: config.tokens_per_minute.map(TokenBucket::per_minute),
        }
    }

    async fn admit(&self, prompt_tokens: impl FnOnce() -> u64) -> Result<Option<OwnedSemaphorePermit>, LlmError> {
        if let Some(bucket) = &self.requests {
            bucket.acquire(1, "requests").await?;
        }
        if let Some(bucket) = &self.tokens {
            bucket.acquire(prompt_tokens(), "prompt tokens").await?;
        }
        match &self.semaphore {
            Some(semaphore) => Arc::clone(semaphore).acquire_owned().await.map(Some).map_err(|_| LlmError::Cancelled),
            None => Ok(None),
        }
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for Limits<M> {
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
        let _permit = self.admit(|| count_message_tokens(&req.messages) as u64).await?;
        self.inner.complete(req).await
    }

    /// The concurrency permit is held until the stream is dropped or finished.
    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        let permit = self.admit(|| count_message_tokens(&req.messages) as u64).await?;
        let inner = self.inner.stream(req).await?;
        Ok(Box::pin(inner.map(move |item| {
            let _held = &permit;
            item
        })))
    }
}

#[async_trait]
impl<M: Embedder> Embedder for Limits<M> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let _permit = self.admit(|| texts.iter().map(|t| count_tokens(t) as u64).sum()).await?;
        self.inner.embed(texts).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn bucket_starts_full_then_paces() {
        let bucket = TokenBucket::per_minute(2);
        let start = Instant::now();
        bucket.acquire(1, "requests").await.unwrap();
        bucket.acquire(1, "requests").await.unwrap();
        assert!(start.elapsed() < Duration::from_millis(1));
        bucket.acquire(1, "requests").await.unwrap();
        let waited = start.elapsed();
        assert!(waited >= Duration::from_secs(29) && waited <= Duration::from_secs(31), "{waited:?}");
        let err = bucket.acquire(3, "requests").await.unwrap_err();
        assert!(err.to_string().contains("limit is 2 per minute"), "{err}");
    }
}
