//! Unified step selection, in this order:
//!
//! 1. No graph: no step (`none`).
//! 2. First turn: the start step (`start`).
//! 3. Precondition-first: the first open step, in graph order, that has preconditions and all
//!    of them hold (`preconditions-ordered`). Steps already satisfied, failed, skipped or
//!    blocked are never candidates.
//! 4. Ranking: every open step whose preconditions hold (with or without preconditions) is
//!    ranked by the simulator model, which considers both what the agent asked and what the
//!    customer would bring up next (customer-led steps are selectable). Candidates scoring below
//!    [`RANKING_THRESHOLD`] are dropped; the best remaining one is chosen (`llm-ranked`).
//! 5. Graceful continuation: nothing fits, no step (`none`); the customer follows its goal.

use std::sync::Arc;

use guidepost_llm::{ChatModel, ChatRequest, LlmError, TaskKind, UsageLedger, generate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::prompts::render;
use crate::steps::{RunView, StepDefinition, StepGraph};
use crate::trajectory::{Selection, SelectionCandidate, SelectionMethod, Trajectory};
use crate::transcript::render_conversation;

/// The one confidence threshold of ranking: candidates scoring **below 0.5 are dropped**; a
/// candidate at exactly 0.5 is kept.
pub const RANKING_THRESHOLD: f64 = 0.5;

/// The ranker's structured answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepRanking {
    /// Why.
    pub reasoning: String,
    /// Candidates, best first.
    pub candidates: Vec<RankedStep>,
}

/// One ranked step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankedStep {
    /// The step id.
    pub step_id: String,
    /// Confidence in [0, 1].
    pub confidence: f64,
    /// Why it fits.
    pub reason: String,
}

/// The outcome of selection.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectedStep {
    /// The chosen step.
    pub step_id: Option<String>,
    /// How, and the candidates.
    pub selection: Selection,
}

/// Ranks open steps with the simulator model.
#[derive(Debug, Clone)]
pub struct StepRanker {
    model: Arc<dyn ChatModel>,
    ledger: UsageLedger,
    budget_chars: usize,
}

impl StepRanker {
    /// A ranker answering through `model`, recording usage in `ledger`.
    pub fn new(model: Arc<dyn ChatModel>, ledger: UsageLedger) -> Self {
        Self { model, ledger, budget_chars: 12_000 }
    }

    /// The ranking request (exposed for prompt snapshots).
    pub fn request(
        &self,
        goal: &str,
        steps: &[&StepDefinition],
        view: &RunView<'_>,
        preamble: &[String],
    ) -> ChatRequest {
        let steps: Vec<_> = steps
            .iter()
            .map(|s| {
                json!({"id": s.id, "instruction": s.instruction, "hints": s.hints,
                "attempts": view.steps.get(&s.id).map_or(0, |st| st.attempts)})
            })
            .collect();
        let prompt = render(
            "ranker",
            json!({"goal": goal, "steps": steps,
                "conversation": render_conversation(view.traces, preamble, self.budget_chars)}),
        );
        ChatRequest::new(TaskKind::Simulation).user(prompt).temperature(0.0)
    }

    /// Ranks `steps`; returns the candidates at or above the threshold, best first, restricted
    /// to the ids offered.
    pub async fn rank(
        &self,
        goal: &str,
        steps: &[&StepDefinition],
        view: &RunView<'_>,
        preamble: &[String],
    ) -> Result<Vec<SelectionCandidate>, LlmError> {
        let req = self.request(goal, steps, view, preamble);
        let (ranking, usage) = generate::<StepRanking>(self.model.as_ref(), req).await?;
        self.ledger.record(&TaskKind::Simulation, &usage);
        let mut kept: Vec<SelectionCandidate> = ranking
            .candidates
            .into_iter()
            .filter(|c| c.confidence.is_finite() && c.confidence >= RANKING_THRESHOLD)
            .filter(|c| steps.iter().any(|s| s.id == c.step_id))
            .map(|c| SelectionCandidate { step_id: c.step_id, score: c.confidence.min(1.0), reasons: vec![c.reason] })
            .collect();
        kept.sort_by(|a, b| b.score.partial_cmp(&a.score).unwrap_or(std::cmp::Ordering::Equal));
        kept.dedup_by(|a, b| a.step_id == b.step_id);
        Ok(kept)
    }
}

/// The open steps whose preconditions all hold, in graph order.
pub fn eligible_steps<'g>(graph: &'g StepGraph, view: &RunView<'_>) -> Vec<&'g StepDefinition> {
    graph
        .steps
        .iter()
        .filter(|s| view.status(&s.id).is_open())
        .filter(|s| s.preconditions.iter().all(|p| p.holds(view)))
        .collect()
}

/// Selects the step of the next turn (see the module documentation for the order).
pub async fn select_step(
    trajectory: &Trajectory,
    view: &RunView<'_>,
    ranker: &StepRanker,
    preamble: &[String],
) -> Result<SelectedStep, LlmError> {
    let none = SelectedStep { step_id: None, selection: Selection { method: SelectionMethod::None, candidates: None } };
    let Some(graph) = &trajectory.steps else {
        return Ok(none);
    };
    let started =
        view.traces.iter().any(|t| t.step_id.is_some()) || view.steps.get(&graph.start).is_some_and(|s| s.attempts > 0);
    if !started && view.status(&graph.start).is_open() {
        let candidate = SelectionCandidate {
            step_id: graph.start.clone(),
            score: 1.0,
            reasons: vec!["start step of the graph".to_string()],
        };
        return Ok(SelectedStep {
            step_id: Some(graph.start.clone()),
            selection: Selection { method: SelectionMethod::Start, candidates: Some(vec![candidate]) },
        });
    }
    let eligible = eligible_steps(graph, view);
    if let Some(step) = eligible.iter().find(|s| !s.preconditions.is_empty()) {
        let candidate = SelectionCandidate {
            step_id: step.id.clone(),
            score: 1.0,
            reasons: vec!["first step in graph order whose preconditions hold".to_string()],
        };
        return Ok(SelectedStep {
            step_id: Some(step.id.clone()),
            selection: Selection { method: SelectionMethod::PreconditionsOrdered, candidates: Some(vec![candidate]) },
        });
    }
    if eligible.is_empty() {
        return Ok(none);
    }
    let candidates = ranker.rank(&trajectory.goal, &eligible, view, preamble).await?;
    match candidates.first() {
        Some(best) => Ok(SelectedStep {
            step_id: Some(best.step_id.clone()),
            selection: Selection { method: SelectionMethod::LlmRanked, candidates: Some(candidates.clone()) },
        }),
        None => Ok(SelectedStep {
            step_id: None,
            selection: Selection { method: SelectionMethod::None, candidates: Some(Vec::new()) },
        }),
    }
}
