//! A deterministic embedder for tests: words are hashed into a fixed number of signed buckets
//! and the vector is L2-normalized, so texts sharing words are similar and nothing is loaded.

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;

use crate::error::LlmError;
use crate::ports::Embedder;

/// Bag-of-words hashing embedder (`scripted` embedder spec).
#[derive(Debug)]
pub struct HashingEmbedder {
    dimensions: usize,
    calls: AtomicUsize,
}

impl Default for HashingEmbedder {
    fn default() -> Self {
        Self::new(64)
    }
}

impl HashingEmbedder {
    /// An embedder producing vectors of `dimensions` (at least 1).
    pub fn new(dimensions: usize) -> Self {
        Self { dimensions: dimensions.max(1), calls: AtomicUsize::new(0) }
    }

    /// How many `embed` calls were made.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The vector of one text.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0f32; self.dimensions];
        for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            // FNV-1a: stable across platforms and runs.
            let hash = word
                .to_lowercase()
                .bytes()
                .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
            let bucket = usize::try_from(hash % self.dimensions as u64).unwrap_or(0);
            vector[bucket] += if hash >> 63 == 0 { 1.0 } else { -1.0 };
        }
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            vector.iter_mut().for_each(|x| *x /= norm);
        }
        vector
    }
}

#[async_trait]
impl Embedder for HashingEmbedder {
    fn model_id(&self) -> &str {
        "scripted"
    }
    fn dimensions(&self) -> usize {
        self.dimensions
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedders return unit vectors: their dot product is their cosine.
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn shared_words_are_closer() {
        let e = HashingEmbedder::default();
        let a = e.vector("cancel my subscription");
        let b = e.vector("I want to cancel the subscription");
        let c = e.vector("weather in Paris tomorrow");
        assert!(dot(&a, &b) > dot(&a, &c));
        assert!((dot(&a, &a) - 1.0).abs() < 1e-5);
        assert_eq!(e.vector(""), vec![0.0; 64]);
    }
}
