//! The runtime's ports, backed by the store: where a turn's events go, where context
//! variable values live, and the embedding cache that outlives the process.

use async_trait::async_trait;
use guidepost_llm::{Embedder, LlmError};
use guidepost_runtime::events::{EventSink, NewEvent};
use guidepost_runtime::variables::{Scope, StoredValue, VariableStore};
use guidepost_store::values::DEFAULT_KEY;
use guidepost_store::{NewEventRecord, Store};
use serde_json::Value;
use std::sync::Arc;

/// A turn's events, appended to its session in the store (waking the session's long
/// polls and streams).
pub struct StoreSink {
    store: Store,
    session_id: String,
    redactor: Option<std::sync::Arc<crate::access::Redactor>>,
}

impl StoreSink {
    /// Events of `session_id`.
    pub fn new(store: Store, session_id: &str) -> Self {
        Self { store, session_id: session_id.to_string(), redactor: None }
    }

    /// Takes these secrets out of every event before it is stored.
    pub fn with_redactor(mut self, redactor: std::sync::Arc<crate::access::Redactor>) -> Self {
        self.redactor = Some(redactor);
        self
    }

    fn clean(&self, data: Value) -> Value {
        match &self.redactor {
            Some(r) if !r.is_empty() => serde_json::from_str(&r.redact(&data.to_string())).unwrap_or(data),
            _ => data,
        }
    }
}

#[async_trait]
impl EventSink for StoreSink {
    async fn emit(&self, event: NewEvent) -> String {
        let record = NewEventRecord {
            source: event.source,
            kind: event.kind,
            trace_id: event.trace_id,
            data: self.clean(event.data),
            metadata: Default::default(),
        };
        // A busy or briefly unreachable database gets a few tries: losing a turn's `ready`
        // or its message would leave the customer waiting.
        let mut delay = std::time::Duration::from_millis(50);
        for attempt in 1..=5 {
            match self.store.append_event(&self.session_id, record.clone()).await {
                Ok(stored) => return stored.id,
                Err(error) if error.is_client_error() || attempt == 5 => {
                    tracing::error!(session = %self.session_id, %error, "an event of the turn could not be stored");
                    break;
                }
                Err(error) => {
                    tracing::warn!(session = %self.session_id, %error, attempt, "storing an event failed; trying again");
                    tokio::time::sleep(delay).await;
                    delay *= 3;
                }
            }
        }
        String::new()
    }

    async fn update(&self, event_id: &str, data: Value) {
        if event_id.is_empty() {
            return;
        }
        let data = self.clean(data);
        if let Err(error) = self.store.update_event_data(&self.session_id, event_id, &data).await {
            tracing::error!(session = %self.session_id, event = event_id, %error, "a streamed message could not be updated");
        }
    }
}

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
