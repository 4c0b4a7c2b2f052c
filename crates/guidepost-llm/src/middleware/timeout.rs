//! Time budgets. [`Timeout`] bounds one attempt and sits inside the retries, so an attempt
//! that times out is retried; it also bounds streams, by their silence between two pieces
//! ([`Limit::StreamIdle`]) and by their whole duration ([`Limit::StreamDuration`]).
//! [`Deadline`] bounds a whole call, retries and re-asks included ([`Limit::ModelCallTime`]),
//! so a model that hangs costs a known time, not attempts × per-attempt budget; and a whole
//! stream, its opening attempts included ([`Limit::StreamDuration`]), so a server that never
//! sends its headers costs the stream budget, not attempts × per-attempt budget.

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use guidepost_core::limits::{Limit, Limits};

use crate::error::LlmError;
use crate::ports::{ChatModel, Embedder, TextStream};
use crate::request::{ChatRequest, ChatResponse};

/// Fails a call with [`LlmError::Timeout`] when it takes longer than `after`. For streams,
/// `after` bounds opening the stream; then each wait for the next piece is bounded by the
/// idle budget and the whole stream by the total budget (both [`LlmError::Limit`] errors
/// that name the limit and how to raise it).
#[derive(Debug)]
pub struct Timeout<M> {
    inner: M,
    after: Duration,
    idle: Duration,
    total: Duration,
}

impl<M> Timeout<M> {
    /// Wraps `inner`, with the stream budgets of [`Limits::global`].
    pub fn new(inner: M, after: Duration) -> Self {
        let limits = Limits::global();
        Self { inner, after, idle: limits.stream_idle, total: limits.stream_duration }
    }

    /// Sets the stream budgets: longest silence between two pieces, and whole duration.
    pub fn with_stream_budgets(mut self, idle: Duration, total: Duration) -> Self {
        self.idle = idle;
        self.total = total;
        self
    }
}

fn exceeded(limit: Limit, model: &str, budget: Duration, what: String) -> LlmError {
    let mut limits = Limits::global().clone();
    limits.set(limit, budget.as_secs().max(1));
    let mut error = limits.exceeded(limit, format!("model {model}"), what);
    if budget < Duration::from_secs(1) {
        error.allowed = format!("{budget:?}");
    }
    error.into()
}

#[async_trait]
impl<M: ChatModel> ChatModel for Timeout<M> {
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
        let after = self.after;
        tokio::time::timeout(after, self.inner.complete(req)).await.map_err(|_| LlmError::Timeout { after })?
    }

    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        let (after, idle, total) = (self.after, self.idle, self.total);
        let model = self.inner.model_id().to_string();
        let started = tokio::time::Instant::now();
        let mut inner =
            tokio::time::timeout(after, self.inner.stream(req)).await.map_err(|_| LlmError::Timeout { after })??;
        let deadline = started.checked_add(total).unwrap_or_else(|| started + Duration::from_secs(100 * 365 * 86_400));
        let guarded = async_stream::stream! {
            loop {
                let now = tokio::time::Instant::now();
                let wait = idle.min(deadline.saturating_duration_since(now));
                match tokio::time::timeout(wait, inner.next()).await {
                    Ok(Some(item)) => yield item,
                    Ok(None) => break,
                    Err(_) if tokio::time::Instant::now() >= deadline => {
                        let what = format!("a stream still going after {:?}", started.elapsed());
                        yield Err(exceeded(Limit::StreamDuration, &model, total, what));
                        break;
                    }
                    Err(_) => {
                        let what = format!("no piece of the reply for {idle:?}");
                        yield Err(exceeded(Limit::StreamIdle, &model, idle, what));
                        break;
                    }
                }
            }
        };
        Ok(Box::pin(guarded))
    }
}

#[async_trait]
impl<M: Embedder> Embedder for Timeout<M> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let after = self.after;
        tokio::time::timeout(after, self.inner.embed(texts)).await.map_err(|_| LlmError::Timeout { after })?
    }
}

/// Bounds a whole call, whatever happens inside (attempts, back-off, re-asks), by
/// [`Limit::ModelCallTime`]; a stream, from the request to its last piece (its opening
/// attempts, headers included, and back-off among them), by [`Limit::StreamDuration`].
#[derive(Debug)]
pub struct Deadline<M> {
    inner: M,
    budget: Duration,
    stream_total: Duration,
}

impl<M> Deadline<M> {
    /// Wraps `inner` with a budget per call, and the stream budget of [`Limits::global`].
    pub fn new(inner: M, budget: Duration) -> Self {
        Self { inner, budget, stream_total: Limits::global().stream_duration }
    }

    /// Sets the whole duration a stream may take, its opening included.
    pub fn with_stream_total(mut self, total: Duration) -> Self {
        self.stream_total = total;
        self
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for Deadline<M> {
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
        let budget = self.budget;
        match tokio::time::timeout(budget, self.inner.complete(req)).await {
            Ok(result) => result,
            Err(_) => {
                let what = format!("a call (retries and re-asks included) still going after {budget:?}");
                Err(exceeded(Limit::ModelCallTime, self.inner.model_id(), budget, what))
            }
        }
    }

    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        let total = self.stream_total;
        let model = self.inner.model_id().to_string();
        let started = tokio::time::Instant::now();
        let deadline = started.checked_add(total).unwrap_or_else(|| started + Duration::from_secs(100 * 365 * 86_400));
        let mut inner = match tokio::time::timeout_at(deadline, self.inner.stream(req)).await {
            Ok(opened) => opened?,
            Err(_) => {
                let what = format!("no reply stream (not even its headers) after {:?}", started.elapsed());
                return Err(exceeded(Limit::StreamDuration, &model, total, what));
            }
        };
        let guarded = async_stream::stream! {
            loop {
                match tokio::time::timeout_at(deadline, inner.next()).await {
                    Ok(Some(item)) => yield item,
                    Ok(None) => break,
                    Err(_) => {
                        let what = format!("a stream still going after {:?}", started.elapsed());
                        yield Err(exceeded(Limit::StreamDuration, &model, total, what));
                        break;
                    }
                }
            }
        };
        Ok(Box::pin(guarded))
    }
}
