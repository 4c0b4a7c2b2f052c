//! Disambiguation: is the customer's request ambiguous among the targets of a
//! disambiguation observation? If so, the agent asks which one they meant, among the
//! targets the check names plausible (two at least), whatever the targets' own checks say. No
//! ambiguity means no match at all (not even the observation), and the record says why no
//! question was asked.

use guidepost_core::{Endpoint, RelationshipKind};
use guidepost_llm::{ChatModel, TaskKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CallOutcome, call};
use crate::catalog::{CompiledAgent, MatchableGuideline};
use crate::error::BatchError;
use crate::prompt::{ConversationView, PromptItem, RenderedPrompt, render};

/// The answer of a disambiguation check.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DisambiguationAnswer {
    /// Why the request is (not) ambiguous.
    pub rationale: String,
    /// Whether the customer must be asked which option they mean.
    pub ambiguous: bool,
    /// Local ids of the plausible options (empty when not ambiguous).
    pub plausible_options: Vec<String>,
    /// The question to ask, when ambiguous.
    pub question: Option<String>,
}

/// One option of a disambiguation: a guideline or a journey.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DisambiguationTarget {
    /// Guideline id, or `journey:{id}`.
    pub entity: String,
    /// What the option is about.
    pub condition: String,
    /// What the agent would do.
    pub action: Option<String>,
}

/// The targets of the disambiguation observation `head`, in definition order.
pub fn targets_of(agent: &CompiledAgent, head: &str) -> Vec<DisambiguationTarget> {
    let mut out = Vec::new();
    for r in &agent.definition.relationships {
        if r.kind != RelationshipKind::Disambiguation || r.source != Endpoint::Guideline(head.to_string()) {
            continue;
        }
        match &r.target {
            Endpoint::Guideline(g) => {
                if let Some(g) = agent.guideline(g) {
                    out.push(DisambiguationTarget {
                        entity: g.id.clone(),
                        condition: g.condition.clone(),
                        action: g.action.clone(),
                    });
                }
            }
            Endpoint::Journey(j) => {
                if let Some(j) = agent.journey(j) {
                    out.push(DisambiguationTarget {
                        entity: format!("journey:{}", j.id),
                        condition: j.title.clone(),
                        action: j.description.clone(),
                    });
                }
            }
            Endpoint::Tag { tag, .. } => {
                for m in agent.tag_members(tag) {
                    if let crate::catalog::Entity::Guideline(g) = m
                        && let Some(g) = agent.guideline(g)
                    {
                        out.push(DisambiguationTarget {
                            entity: g.id.clone(),
                            condition: g.condition.clone(),
                            action: g.action.clone(),
                        });
                    }
                }
            }
            Endpoint::Tool(_) => {}
        }
    }
    out.dedup_by(|a, b| a.entity == b.entity);
    out
}

#[derive(Serialize)]
struct DisambiguationContext<'a> {
    conversation: &'a ConversationView,
    head: &'a str,
    items: Vec<PromptItem>,
}

/// Renders the disambiguation prompt for `head` and its `targets`.
pub fn render_prompt(
    head: &MatchableGuideline,
    targets: &[DisambiguationTarget],
    conversation: &ConversationView,
) -> Result<RenderedPrompt, BatchError> {
    let items = targets
        .iter()
        .enumerate()
        .map(|(i, t)| PromptItem {
            id: (i + 1).to_string(),
            condition: t.condition.clone(),
            action: t.action.clone(),
            description: None,
            waits: false,
            examples: Vec::new(),
        })
        .collect();
    render("disambiguation.j2", &DisambiguationContext { conversation, head: &head.condition, items })
}

/// What a disambiguation check concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disambiguation {
    /// Ask the customer which of `options` (two or more) they meant.
    Ask {
        /// The plausible targets (entity names).
        options: Vec<String>,
        /// The clarification action.
        question: String,
        /// Why.
        rationale: String,
    },
    /// Nothing to ask.
    Clear {
        /// Why.
        rationale: String,
    },
}

/// The entity names of `targets`, joined for a rationale.
fn names_of(targets: &[&DisambiguationTarget]) -> String {
    targets.iter().map(|t| format!("`{}`", t.entity)).collect::<Vec<_>>().join(", ")
}

/// Runs the check and interprets the answer: an ambiguity needs at least two known,
/// plausible targets; a missing question gets a generated one.
pub async fn evaluate(
    model: &dyn ChatModel,
    head: &MatchableGuideline,
    targets: &[DisambiguationTarget],
    conversation: &ConversationView,
    temperature: f32,
) -> CallOutcome<Disambiguation> {
    let prompt = render_prompt(head, targets, conversation);
    let outcome = call::<DisambiguationAnswer>(model, TaskKind::Matching, prompt, temperature).await;
    let answer = outcome.answer.map(|a| {
        let mut chosen: Vec<&DisambiguationTarget> = Vec::new();
        for id in &a.plausible_options {
            let index = id.trim().trim_start_matches('[').trim_end_matches(']').parse::<usize>().ok();
            if let Some(t) = index.and_then(|i| i.checked_sub(1)).and_then(|i| targets.get(i))
                && !chosen.iter().any(|c| c.entity == t.entity)
            {
                chosen.push(t);
            }
        }
        if !a.ambiguous {
            return Disambiguation::Clear { rationale: format!("no question: not ambiguous ({})", a.rationale) };
        }
        if chosen.len() < 2 {
            let rationale = match chosen.first() {
                None => format!("no question: found ambiguous, but named no known option ({})", a.rationale),
                Some(one) => {
                    format!(
                        "no question: found ambiguous, but named only `{}` as plausible ({})",
                        one.entity, a.rationale
                    )
                }
            };
            return Disambiguation::Clear { rationale };
        }
        let question = a.question.filter(|q| !q.trim().is_empty()).unwrap_or_else(|| {
            let names: Vec<&str> = chosen.iter().map(|t| t.condition.as_str()).collect();
            format!("Ask the customer which one they mean: {}", names.join(" or "))
        });
        Disambiguation::Ask {
            options: chosen.iter().map(|t| t.entity.clone()).collect(),
            question,
            rationale: format!("ambiguous among {}: {}", names_of(&chosen), a.rationale),
        }
    });
    CallOutcome { answer, usage: outcome.usage, estimated_tokens: outcome.estimated_tokens }
}
