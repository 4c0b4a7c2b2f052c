//! A time budget per call. Placed inside the retries, so a call that times out is retried.

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;

use crate::error::LlmError;
use crate::ports::{ChatModel, Embedder, TextStream};
use crate::request::{ChatRequest, ChatResponse};

/// Fails a call with [`LlmError::Timeout`] when it takes longer than `after`. For streams, the
/// budget applies to opening the stream and to each wait for the next piece.
#[derive(Debug)]
pub struct Timeout<M> {
    inner: M,
    after: Duration,
}

impl<M> Timeout<M> {
    /// Wraps `inner`.
    pub fn new(inner: M, after: Duration) -> Self {
        Self { inner, after }
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for Timeout<M> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        let after = self.after;
        tokio::time::timeout(after, self.inner.complete(req)).await.map_err(|_| LlmError::Timeout { after })?
    }

    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        let after = self.after;
        let mut inner =
            tokio::time::timeout(after, self.inner.stream(req)).await.map_err(|_| LlmError::Timeout { after })??;
        let guarded = async_stream::stream! {
            loop {
                match tokio::time::timeout(after, inner.next()).await {
                    Ok(Some(item)) => yield item,
                    Ok(None) => break,
                    Err(_) => {
                        yield Err(LlmError::Timeout { after });
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
