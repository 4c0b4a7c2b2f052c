//! An in-memory cache of embeddings by text, so that texts embedded on every turn (guideline
//! conditions, journey titles, glossary terms) cost one call per process.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;

use crate::error::LlmError;
use crate::ports::Embedder;

/// Caches the inner embedder's vectors by text, up to `capacity` texts (when full, the
/// cache is cleared and refilled, which keeps memory bounded without bookkeeping). Only the
/// texts not in the cache are sent, in one batch.
#[derive(Debug)]
pub struct CachedEmbedder<E> {
    inner: E,
    capacity: usize,
    vectors: Mutex<HashMap<String, Vec<f32>>>,
}

impl<E> CachedEmbedder<E> {
    /// Wraps `inner`, keeping at most `capacity` vectors.
    pub fn new(inner: E, capacity: usize) -> Self {
        Self { inner, capacity: capacity.max(1), vectors: Mutex::new(HashMap::new()) }
    }

    /// How many vectors are cached.
    pub fn len(&self) -> usize {
        self.vectors.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait]
impl<E: Embedder> Embedder for CachedEmbedder<E> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let mut found: Vec<Option<Vec<f32>>> = {
            let cache = self.vectors.lock().unwrap_or_else(PoisonError::into_inner);
            texts.iter().map(|t| cache.get(t).cloned()).collect()
        };
        let mut missing: Vec<String> = Vec::new();
        for (text, vector) in texts.iter().zip(&found) {
            if vector.is_none() && !missing.contains(text) {
                missing.push(text.clone());
            }
        }
        if !missing.is_empty() {
            let fresh = self.inner.embed(&missing).await?;
            if fresh.len() != missing.len() {
                return Err(LlmError::InvalidResponse {
                    detail: format!("{} vectors for {} texts", fresh.len(), missing.len()),
                    body: String::new(),
                });
            }
            let fresh: HashMap<String, Vec<f32>> = missing.into_iter().zip(fresh).collect();
            for (slot, text) in found.iter_mut().zip(texts) {
                if slot.is_none() {
                    *slot = fresh.get(text).cloned();
                }
            }
            let mut cache = self.vectors.lock().unwrap_or_else(PoisonError::into_inner);
            if cache.len() + fresh.len() > self.capacity {
                cache.clear();
            }
            cache.extend(fresh);
        }
        Ok(found.into_iter().map(Option::unwrap_or_default).collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::providers::hashing::HashingEmbedder;

    #[tokio::test]
    async fn only_misses_are_embedded_once() {
        let cached = CachedEmbedder::new(HashingEmbedder::new(8), 100);
        let texts = |list: &[&str]| list.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
        let first = cached.embed(&texts(&["a", "b", "a"])).await.unwrap();
        assert_eq!(first.len(), 3);
        assert_eq!(first[0], first[2]);
        let second = cached.embed(&texts(&["b", "c"])).await.unwrap();
        assert_eq!(second[0], first[1]);
        assert_eq!(cached.inner.calls(), 2);
        cached.embed(&texts(&["a", "b", "c"])).await.unwrap();
        assert_eq!(cached.inner.calls(), 2, "all cached");
        assert_eq!(cached.len(), 3);
    }

    #[tokio::test]
    async fn capacity_bounds_memory() {
        let cached = CachedEmbedder::new(HashingEmbedder::new(4), 2);
        cached.embed(&["a".into(), "b".into()]).await.unwrap();
        cached.embed(&["c".into()]).await.unwrap();
        assert_eq!(cached.len(), 1);
    }
}
