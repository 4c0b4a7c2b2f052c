//! Step satisfaction. After each turn the selected step is checked, and so is every other open
//! step whose check is free (expression, closure, engine state), so milestones reached along
//! the way are noticed. Which check applies (see [`SatisfactionSpec`]):
//!
//! 1. an expression or a closure, when the step has one;
//! 2. the engine's own state (journey state reached, tool called, guideline matched), when the
//!    step lists engine expectations and the agent reports engine observations;
//! 3. otherwise the judge model, with the step's criterion (only for the selected step).

use guidepost_llm::LlmError;
use serde::{Deserialize, Serialize};

use crate::judge::Judge;
use crate::steps::{RunView, SatisfactionSpec, StepDefinition, StepGraph};

/// How a verdict was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SatisfactionMethod {
    /// An expression.
    Expression,
    /// A Rust closure.
    Closure,
    /// Engine observations.
    Engine,
    /// The judge model.
    Judge,
}

/// A satisfaction verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SatisfactionVerdict {
    /// The step.
    pub step_id: String,
    /// Whether it is satisfied.
    pub satisfied: bool,
    /// How it was decided.
    pub method: SatisfactionMethod,
    /// The judge's reasoning, when the judge decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
}

/// The check that applies to `spec` without calling a model, if any.
fn free_check(
    spec: &SatisfactionSpec,
    step: &StepDefinition,
    view: &RunView<'_>,
    engine: bool,
) -> Option<SatisfactionVerdict> {
    let verdict =
        |satisfied, method| SatisfactionVerdict { step_id: step.id.clone(), satisfied, method, reasoning: None };
    if let Some(expr) = &spec.expr {
        return Some(verdict(expr.holds(view), SatisfactionMethod::Expression));
    }
    if let Some(closure) = &spec.closure {
        return Some(verdict(closure(view, step), SatisfactionMethod::Closure));
    }
    if engine && !spec.engine.is_empty() {
        let all = spec.engine.iter().all(|e| e.holds(view.observations));
        return Some(verdict(all, SatisfactionMethod::Engine));
    }
    None
}

/// Decides whether the selected `step` is satisfied after the turn just played.
/// `engine` says whether the agent reports engine observations.
pub async fn evaluate_selected(
    step: &StepDefinition,
    view: &RunView<'_>,
    engine: bool,
    judge: &Judge,
    preamble: &[String],
) -> Result<SatisfactionVerdict, LlmError> {
    if let Some(verdict) = free_check(&step.satisfaction, step, view, engine) {
        return Ok(verdict);
    }
    let judgement = judge.step_satisfied(step, view.traces, preamble).await?;
    Ok(SatisfactionVerdict {
        step_id: step.id.clone(),
        satisfied: judgement.satisfied,
        method: SatisfactionMethod::Judge,
        reasoning: Some(judgement.reasoning),
    })
}

/// Open steps other than `selected` whose free checks now hold (milestones reached along the
/// way). Their preconditions must hold too.
pub fn satisfied_along_the_way(
    graph: &StepGraph,
    selected: Option<&str>,
    view: &RunView<'_>,
    engine: bool,
) -> Vec<SatisfactionVerdict> {
    graph
        .steps
        .iter()
        .filter(|s| Some(s.id.as_str()) != selected && view.status(&s.id).is_open())
        .filter(|s| s.preconditions.iter().all(|p| p.holds(view)))
        .filter_map(|s| free_check(&s.satisfaction, s, view, engine))
        .filter(|v| v.satisfied)
        .collect()
}
