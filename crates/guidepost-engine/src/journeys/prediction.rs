//! Journey prediction: which journeys a matching pass considers. Active journeys always;
//! of the inactive ones, the `k` most similar to the conversation. Journeys are embedded
//! once per compiled definition, the conversation once per turn; no embedding is needed
//! when there are at most `k` inactive journeys.

use std::sync::atomic::{AtomicU32, Ordering};

use guidepost_core::vectors::cosine;
use guidepost_llm::Embedder;

use crate::catalog::CompiledAgent;
use crate::context::MatchingContext;
use crate::record::{PredictionReason, PredictionRecord};

/// Messages of the conversation embedded for prediction (most recent last).
const EMBEDDED_MESSAGES: usize = 6;

/// The outcome of prediction.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prediction {
    /// One record per journey, in definition order.
    pub records: Vec<PredictionRecord>,
    /// Embedding calls made.
    pub embedding_calls: u32,
}

impl Prediction {
    /// Journeys considered (active or predicted).
    pub fn considered(&self) -> Vec<String> {
        self.records
            .iter()
            .filter(|r| r.reason != PredictionReason::NotPredicted)
            .map(|r| r.journey_id.clone())
            .collect()
    }
}

/// Predicts the journeys a pass considers.
#[derive(Clone, Copy)]
pub struct JourneyPredictor<'a> {
    /// The compiled definition (holds the journey embedding cache).
    pub agent: &'a CompiledAgent,
    /// The embedder; without one every journey is considered.
    pub embedder: Option<&'a dyn Embedder>,
    /// How many inactive journeys to consider.
    pub top_k: usize,
}

impl std::fmt::Debug for JourneyPredictor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JourneyPredictor")
            .field("embedder", &self.embedder.map(|e| e.model_id().to_string()))
            .field("top_k", &self.top_k)
            .finish()
    }
}

/// The text of the conversation embedded for prediction.
pub fn conversation_text(ctx: &MatchingContext) -> String {
    let messages = ctx.messages();
    let skip = messages.len().saturating_sub(EMBEDDED_MESSAGES);
    let mut text: Vec<String> = messages.into_iter().skip(skip).map(|m| m.text).collect();
    for r in &ctx.staged_tool_results {
        text.push(format!("{} {}", r.tool.name, r.result));
    }
    text.join("\n")
}

impl JourneyPredictor<'_> {
    /// Whether [`predict`](Self::predict) would call the embedder: there are more inactive
    /// journeys than `top_k`, and the journeys' or the conversation's vectors are not at hand.
    pub fn needs_embedding(&self, ctx: &MatchingContext, active: &[String]) -> bool {
        let inactive = self.agent.journeys().keys().filter(|j| !active.contains(j)).count();
        self.embedder.is_some()
            && inactive > self.top_k
            && (self.agent.journey_embeddings.get().is_none() || ctx.conversation_embedding.get().is_none())
    }

    /// Predicts over `ctx` with `active` journeys.
    pub async fn predict(&self, ctx: &MatchingContext, active: &[String]) -> Prediction {
        let journeys = self.agent.journeys();
        let inactive: Vec<&String> = journeys.keys().filter(|j| !active.contains(j)).collect();
        let record = |id: &String, reason, similarity| PredictionRecord { journey_id: id.clone(), reason, similarity };
        let mut prediction = Prediction::default();
        let embedder = match self.embedder {
            Some(e) if inactive.len() > self.top_k => e,
            _ => {
                prediction.records = journeys
                    .keys()
                    .map(|j| {
                        let reason = if active.contains(j) { PredictionReason::Active } else { PredictionReason::Few };
                        record(j, reason, None)
                    })
                    .collect();
                return prediction;
            }
        };
        // The journeys' vectors (once per agent) and the conversation's are asked for at once:
        // on an agent's first turn that is one wave of embedding calls, not two.
        let calls = AtomicU32::new(0);
        let (journey_vectors, conversation) = futures::join!(
            self.agent.journey_embeddings.get_or_try_init(|| async {
                calls.fetch_add(1, Ordering::Relaxed);
                let texts: Vec<String> = journeys.values().map(|g| g.embedding_text()).collect();
                embedder.embed(&texts).await
            }),
            ctx.conversation_embedding.get_or_try_init(|| async {
                calls.fetch_add(1, Ordering::Relaxed);
                let vectors = embedder.embed(&[conversation_text(ctx)]).await?;
                Ok::<_, guidepost_llm::LlmError>(vectors.into_iter().next().unwrap_or_default())
            })
        );
        prediction.embedding_calls += calls.into_inner();
        let (Ok(journey_vectors), Ok(conversation)) = (journey_vectors, conversation) else {
            tracing::warn!("journey prediction embedding failed; considering every journey");
            prediction.records = journeys
                .keys()
                .map(|j| {
                    record(j, if active.contains(j) { PredictionReason::Active } else { PredictionReason::Few }, None)
                })
                .collect();
            return prediction;
        };
        let mut scored: Vec<(usize, f32)> = journeys
            .keys()
            .enumerate()
            .filter(|(_, j)| !active.contains(j))
            .map(|(i, _)| (i, journey_vectors.get(i).map_or(0.0, |v| cosine(v, conversation))))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let chosen: Vec<usize> = scored.iter().take(self.top_k).map(|(i, _)| *i).collect();
        prediction.records = journeys
            .keys()
            .enumerate()
            .map(|(i, j)| {
                let similarity = scored.iter().find(|(k, _)| *k == i).map(|(_, s)| *s);
                let reason = if active.contains(j) {
                    PredictionReason::Active
                } else if chosen.contains(&i) {
                    PredictionReason::Similar
                } else {
                    PredictionReason::NotPredicted
                };
                record(j, reason, similarity)
            })
            .collect();
        prediction
    }
}
