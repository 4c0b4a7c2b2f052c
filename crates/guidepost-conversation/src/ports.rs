//! The runtime's ports backed by the store: where context variable values live, and the
//! embedding cache that outlives the process.

use std::sync::Arc;

use async_trait::async_trait;
use guidepost_llm::{Embedder, LlmError};
use guidepost_runtime::variables::{Scope, StoredValue, VariableStore};
use guidepost_store::Store;
use guidepost_store::values::DEFAULT_KEY;

/// The wire key of a variable scope.
pub fn scope_key(scope: &Scope) -> String {
    match scope {
        Scope::Customer(id) => id.clone(),
        Scope::Tag(tag) => format!("tag:{tag}"),
        Scope::Global => DEFAULT_KEY.to_string(),
    }
}

/// Context variable values in the store, under the wire's keys.
pub struct StoreVariables {
    store: Store,
}

impl StoreVariables {
    /// Values in `store`.
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

#[async_trait]
impl VariableStore for StoreVariables {
    async fn get(&self, variable: &str, scope: &Scope) -> Option<StoredValue> {
        match self.store.get_value(variable, &scope_key(scope)).await {
            Ok(value) => value.map(|v| StoredValue { value: v.data, updated: v.last_modified }),
            Err(error) => {
                tracing::error!(variable, %error, "a context variable value could not be read; using the default");
                None
            }
        }
    }

    async fn set(&self, variable: &str, scope: Scope, value: StoredValue) {
        if let Err(error) = self.store.set_value(variable, &scope_key(&scope), &value.value, value.updated).await {
            tracing::error!(variable, %error, "a refreshed context variable value could not be stored");
        }
    }
}

/// An embedder whose vectors are cached in the store: computed once per model and text,
/// across restarts and replicas.
pub struct StoreEmbeddings {
    inner: Arc<dyn Embedder>,
    store: Store,
}

impl StoreEmbeddings {
    /// Caches `inner`'s vectors in `store`.
    pub fn new(inner: Arc<dyn Embedder>, store: Store) -> Self {
        Self { inner, store }
    }
}

#[async_trait]
impl Embedder for StoreEmbeddings {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let model = self.inner.model_id().to_string();
        let cached = match self.store.cached_embeddings(&model, texts).await {
            Ok(c) => c,
            Err(error) => {
                tracing::warn!(%error, "the embedding cache could not be read");
                vec![None; texts.len()]
            }
        };
        let missing: Vec<String> =
            texts.iter().zip(&cached).filter(|(_, c)| c.is_none()).map(|(t, _)| t.clone()).collect();
        let mut fresh = if missing.is_empty() { Vec::new() } else { self.inner.embed(&missing).await? };
        if fresh.len() != missing.len() {
            return Err(LlmError::InvalidResponse {
                detail: format!("the embedder returned {} vectors for {} texts", fresh.len(), missing.len()),
                body: String::new(),
            });
        }
        for (text, vector) in missing.iter().zip(&fresh) {
            if let Err(error) = self.store.cache_embedding(&model, text, vector).await {
                tracing::warn!(%error, "an embedding could not be cached");
            }
        }
        fresh.reverse();
        Ok(cached.into_iter().map(|c| c.or_else(|| fresh.pop()).unwrap_or_default()).collect())
    }
}
