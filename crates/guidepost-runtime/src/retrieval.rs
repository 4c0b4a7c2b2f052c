//! Retrieval: the glossary terms and capabilities relevant to the conversation, by
//! embedding similarity.

use guidepost_core::vectors::cosine;
use guidepost_core::{AgentDefinition, Capability, Term};
use guidepost_llm::Embedder;

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
