//! Policies decide, after every turn (and before the first), whether a run stops. The
//! [`DefaultPolicy`] handles goals and turn limits; others are pluggable through [`Policy`].

use crate::steps::{RunView, StepStatus};
use crate::trajectory::{StopReason, Trajectory};

/// What a policy sees.
#[derive(Debug, Clone, Copy)]
pub struct PolicyContext<'a> {
    /// The trajectory.
    pub trajectory: &'a Trajectory,
    /// The run so far.
    pub view: RunView<'a>,
}

/// A policy's verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyDecision {
    /// Go on.
    Continue,
    /// Stop the run.
    Stop {
        /// Why.
        reason: StopReason,
        /// Whether the goal counts as reached.
        completed: bool,
        /// A sentence for the end marker.
        summary: String,
    },
}

/// A stop rule.
pub trait Policy: Send + Sync {
    /// The policy's name, for logs.
    fn name(&self) -> &str;
    /// Decides whether the run stops.
    fn evaluate(&self, ctx: &PolicyContext<'_>) -> PolicyDecision;
}

/// Goal reached when a terminal step is satisfied (or, in a graph without terminals, every
/// step is satisfied); `max-turns` when the turn limit is reached. Nothing else: there is no
/// hidden turn cap.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultPolicy;

impl Policy for DefaultPolicy {
    fn name(&self) -> &str {
        "default"
    }

    fn evaluate(&self, ctx: &PolicyContext<'_>) -> PolicyDecision {
        if let Some(graph) = &ctx.trajectory.steps {
            let satisfied = |id: &str| ctx.view.status(id) == StepStatus::Satisfied;
            if let Some(terminal) = graph.terminals.iter().find(|t| satisfied(t)) {
                return PolicyDecision::Stop {
                    reason: StopReason::GoalReached,
                    completed: true,
                    summary: format!("Terminal step \"{terminal}\" satisfied"),
                };
            }
            if graph.terminals.is_empty() && !graph.steps.is_empty() && graph.steps.iter().all(|s| satisfied(&s.id)) {
                return PolicyDecision::Stop {
                    reason: StopReason::GoalReached,
                    completed: true,
                    summary: "All steps satisfied".to_string(),
                };
            }
        }
        if let Some(max) = ctx.trajectory.max_turns
            && ctx.view.traces.len() >= usize::try_from(max).unwrap_or(usize::MAX)
        {
            return PolicyDecision::Stop {
                reason: StopReason::MaxTurns,
                completed: false,
                summary: format!("Maximum turns ({max}) reached"),
            };
        }
        PolicyDecision::Continue
    }
}

/// Stops with `policy-violation` when the agent says one of the forbidden phrases
/// (case-insensitive).
#[derive(Debug, Clone)]
pub struct ForbiddenAgentPhrases {
    /// The phrases.
    pub phrases: Vec<String>,
}

impl Policy for ForbiddenAgentPhrases {
    fn name(&self) -> &str {
        "forbidden_agent_phrases"
    }

    fn evaluate(&self, ctx: &PolicyContext<'_>) -> PolicyDecision {
        let Some(last) = ctx.view.traces.last() else {
            return PolicyDecision::Continue;
        };
        let said = last.agent_texts().join("\n").to_lowercase();
        match self.phrases.iter().find(|p| said.contains(&p.to_lowercase())) {
            Some(phrase) => PolicyDecision::Stop {
                reason: StopReason::PolicyViolation,
                completed: false,
                summary: format!("The agent said the forbidden phrase \"{phrase}\""),
            },
            None => PolicyDecision::Continue,
        }
    }
}

/// Stops with `no-step-match` after this many simulated turns in a row without a step
/// (graphs only), for scenarios that must stay on their steps.
#[derive(Debug, Clone, Copy)]
pub struct RequireStepMatch {
    /// Turns in a row without a step that are tolerated.
    pub max_turns_without_step: u32,
}

impl Policy for RequireStepMatch {
    fn name(&self) -> &str {
        "require_step_match"
    }

    fn evaluate(&self, ctx: &PolicyContext<'_>) -> PolicyDecision {
        if ctx.trajectory.steps.is_none() {
            return PolicyDecision::Continue;
        }
        let run = ctx
            .view
            .traces
            .iter()
            .rev()
            .take_while(|t| t.step_id.is_none() && t.source == crate::trajectory::TurnSource::Simulated)
            .count();
        if run > usize::try_from(self.max_turns_without_step).unwrap_or(usize::MAX) {
            return PolicyDecision::Stop {
                reason: StopReason::NoStepMatch,
                completed: false,
                summary: format!("No step matched for {run} turns in a row"),
            };
        }
        PolicyDecision::Continue
    }
}
