//! Embedders for tests about when embedding calls are made.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use guidepost_llm::{Embedder, LlmError};

/// Wraps an embedder: every call takes `delay` longer, and the wrapper counts the calls and
/// remembers how many were in flight at once (2 means two calls overlapped: one wave).
pub struct InFlightEmbedder<E> {
    inner: E,
    delay: Duration,
    now: AtomicUsize,
    most: AtomicUsize,
    calls: AtomicUsize,
}

impl<E: Embedder> InFlightEmbedder<E> {
    /// `inner`, slowed by `delay` per call.
    pub fn new(inner: E, delay: Duration) -> Self {
        Self { inner, delay, now: AtomicUsize::new(0), most: AtomicUsize::new(0), calls: AtomicUsize::new(0) }
    }

    /// The most calls that were in flight at the same time.
    pub fn most_in_flight(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }

    /// Calls made so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl<E: Embedder> Embedder for InFlightEmbedder<E> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        let vectors = self.inner.embed(texts).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        vectors
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use guidepost_llm::providers::hashing::HashingEmbedder;

    #[tokio::test]
    async fn overlapping_calls_are_counted_as_in_flight_together() {
        let embedder = InFlightEmbedder::new(HashingEmbedder::new(8), Duration::from_millis(20));
        let texts = vec!["a".to_string()];
        embedder.embed(&texts).await.ok();
        assert_eq!(embedder.most_in_flight(), 1);
        let (a, b) = futures::join!(embedder.embed(&texts), embedder.embed(&texts));
        assert!(a.is_ok() && b.is_ok());
        assert_eq!((embedder.most_in_flight(), embedder.calls()), (2, 3));
    }
}
