//! Context for a turn: context variable values (customer, tag and global scopes;
//! tool-backed values refreshed when stale) and the glossary terms and capabilities that
//! are relevant to the conversation.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};
use guidepost_core::vectors::cosine;
use guidepost_core::{AgentDefinition, Capability, ContextVariable, Term};
use guidepost_llm::Embedder;
use guidepost_tools::context::ToolContext;
use guidepost_tools::registry::ToolRegistry;
use guidepost_tools::result::ToolOutcome;
use indexmap::IndexMap;
use serde_json::Value;

/// The current time. Freshness is always judged against the time of the turn, never a
/// time captured at start-up.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A stored variable value.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredValue {
    /// The value.
    pub value: Value,
    /// When it was set.
    pub updated: DateTime<Utc>,
}

/// Which values a key addresses: one customer, customers with a tag, or everyone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// One customer, by id.
    Customer(String),
    /// Customers carrying a tag.
    Tag(String),
    /// Everyone.
    Global,
}

/// Where variable values live. A store that fails to read answers `None` (the
/// definition's default is used) and logs why; one that fails to write logs why (the
/// value is used for this turn and refreshed again on the next).
#[async_trait::async_trait]
pub trait VariableStore: Send + Sync {
    /// The value of `variable` for `scope`.
    async fn get(&self, variable: &str, scope: &Scope) -> Option<StoredValue>;
    /// Sets the value of `variable` for `scope`.
    async fn set(&self, variable: &str, scope: Scope, value: StoredValue);
}

/// Variable values in memory.
#[derive(Debug, Default)]
pub struct MemoryVariables {
    values: Mutex<HashMap<(String, Scope), StoredValue>>,
}

#[async_trait::async_trait]
impl VariableStore for MemoryVariables {
    async fn get(&self, variable: &str, scope: &Scope) -> Option<StoredValue> {
        self.values.lock().unwrap_or_else(PoisonError::into_inner).get(&(variable.to_string(), scope.clone())).cloned()
    }

    async fn set(&self, variable: &str, scope: Scope, value: StoredValue) {
        self.values.lock().unwrap_or_else(PoisonError::into_inner).insert((variable.to_string(), scope), value);
    }
}

/// Who the turn is for.
#[derive(Debug, Clone, Default)]
pub struct CustomerRef {
    /// Customer id.
    pub id: String,
    /// Tag ids of the customer.
    pub tags: Vec<String>,
}

async fn lookup(store: &dyn VariableStore, variable: &ContextVariable, customer: &CustomerRef) -> Option<StoredValue> {
    if let Some(v) = store.get(&variable.id, &Scope::Customer(customer.id.clone())).await {
        return Some(v);
    }
    for tag in &customer.tags {
        if let Some(v) = store.get(&variable.id, &Scope::Tag(tag.clone())).await {
            return Some(v);
        }
    }
    store.get(&variable.id, &Scope::Global).await
}

/// Loads the values of every variable: customer value, else a value for one of the
/// customer's tags, else the global value, else the definition's default. A tool-backed
/// variable whose value is missing or older than its freshness is refreshed by calling
/// its tool (and stored for the customer); if that fails, the stale value is kept.
pub async fn load_variables(
    definition: &AgentDefinition,
    store: &dyn VariableStore,
    clock: &dyn Clock,
    tools: &ToolRegistry,
    customer: &CustomerRef,
    ctx: &ToolContext,
) -> IndexMap<String, Value> {
    let now = clock.now();
    let mut out = IndexMap::new();
    for variable in &definition.variables {
        let stored = lookup(store, variable, customer).await;
        let stale = match (&variable.tool, &stored, &variable.freshness) {
            (Some(_), None, _) => true,
            (Some(_), Some(s), Some(fresh)) => fresh.is_stale(s.updated, now),
            _ => false,
        };
        let mut value = stored.map(|s| s.value).or_else(|| variable.value.clone());
        if stale && let Some(tool) = &variable.tool {
            let record = tools.call(tool, serde_json::Map::new(), ctx, None).await;
            match record.outcome {
                ToolOutcome::Ok(result) => {
                    store
                        .set(
                            &variable.id,
                            Scope::Customer(customer.id.clone()),
                            StoredValue { value: result.data.clone(), updated: now },
                        )
                        .await;
                    value = Some(result.data);
                }
                ToolOutcome::Error { message, .. } => {
                    tracing::warn!(variable = %variable.name, %message, "could not refresh context variable")
                }
            }
        }
        if let Some(v) = value {
            out.insert(variable.name.clone(), v);
        }
    }
    out
}

/// Retrieves glossary terms and capabilities relevant to a query, by embedding similarity.
/// Entity embeddings are computed once per runtime.
#[derive(Default)]
pub struct KnowledgeIndex {
    terms: tokio::sync::OnceCell<Vec<Vec<f32>>>,
    capabilities: tokio::sync::OnceCell<Vec<Vec<f32>>>,
}

/// Up to this many glossary terms go into a prompt.
pub const MAX_TERMS: usize = 20;
/// Up to this many capabilities go into a prompt.
pub const MAX_CAPABILITIES: usize = 3;

impl KnowledgeIndex {
    /// Terms relevant to `query`: all of them when there are few, else the most similar.
    pub async fn terms(&self, definition: &AgentDefinition, embedder: Option<&dyn Embedder>, query: &str) -> Vec<Term> {
        let texts: Vec<String> = definition
            .terms
            .iter()
            .map(|t| format!("{}: {} {}", t.name, t.description, t.synonyms.join(", ")))
            .collect();
        let picked = self.top(&self.terms, &texts, embedder, query, MAX_TERMS).await;
        picked.into_iter().filter_map(|i| definition.terms.get(i).cloned()).collect()
    }

    /// Capabilities relevant to `query`.
    pub async fn capabilities(
        &self,
        definition: &AgentDefinition,
        embedder: Option<&dyn Embedder>,
        query: &str,
    ) -> Vec<Capability> {
        let texts: Vec<String> = definition
            .capabilities
            .iter()
            .map(|c| format!("{}: {} {}", c.title, c.description, c.signals.join("; ")))
            .collect();
        let picked = self.top(&self.capabilities, &texts, embedder, query, MAX_CAPABILITIES).await;
        picked.into_iter().filter_map(|i| definition.capabilities.get(i).cloned()).collect()
    }

    async fn top(
        &self,
        cell: &tokio::sync::OnceCell<Vec<Vec<f32>>>,
        texts: &[String],
        embedder: Option<&dyn Embedder>,
        query: &str,
        k: usize,
    ) -> Vec<usize> {
        let Some(embedder) = embedder.filter(|_| texts.len() > k) else {
            return (0..texts.len().min(k)).collect();
        };
        // A failed embedding is not kept: the next turn tries again, and this one takes the
        // first `k` entries, as an agent without an embedder does.
        let vectors = match cell.get_or_try_init(|| async { embedder.embed(texts).await }).await {
            Ok(vectors) if vectors.len() == texts.len() => vectors,
            Ok(vectors) => {
                tracing::warn!(
                    expected = texts.len(),
                    got = vectors.len(),
                    "the embedder returned too few vectors; retrieval took the first entries"
                );
                return (0..k).collect();
            }
            Err(error) => {
                tracing::warn!(%error, "embedding the agent's entries failed; retrieval took the first entries and tries again next turn");
                return (0..k).collect();
            }
        };
        let query_vec = match embedder.embed(&[query.to_string()]).await {
            Ok(v) => v,
            Err(error) => {
                tracing::warn!(%error, "embedding the customer's message failed; retrieval took the first entries");
                return (0..k).collect();
            }
        };
        let Some(q) = query_vec.first() else { return (0..k).collect() };
        let mut scored: Vec<(usize, f32)> = vectors.iter().enumerate().map(|(i, v)| (i, cosine(q, v))).collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored.into_iter().take(k).map(|(i, _)| i).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use guidepost_llm::LlmError;

    use super::*;

    /// Fails its first call, then embeds each text as its length and a constant.
    struct FlakyEmbedder {
        calls: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Embedder for FlakyEmbedder {
        fn model_id(&self) -> &str {
            "test:flaky"
        }

        fn dimensions(&self) -> usize {
            2
        }

        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
            if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err(LlmError::Connection("embedding service down".into()));
            }
            Ok(texts.iter().map(|t| vec![t.len() as f32, 1.0]).collect())
        }
    }

    #[tokio::test]
    async fn a_failed_embedding_is_not_kept_for_later_turns() {
        let index = KnowledgeIndex::default();
        let embedder = FlakyEmbedder { calls: AtomicUsize::new(0) };
        let texts: Vec<String> = ["a", "bbbbbbbbbbbbbbbbbbbb", "cc", "ddd"].iter().map(|t| t.to_string()).collect();
        // The outage: the first entries, nothing cached.
        assert_eq!(index.top(&index.terms, &texts, Some(&embedder), "x", 1).await, [0]);
        assert!(index.terms.get().is_none(), "a failed embedding must not be cached");
        // The service is back: the entries are embedded and ranked by similarity.
        let long_query = "q".repeat(20);
        assert_eq!(index.top(&index.terms, &texts, Some(&embedder), &long_query, 1).await, [1]);
        assert_eq!(index.terms.get().map(Vec::len), Some(4));
    }
}
