//! Journey node selection: deterministic fast paths first, one structured model call
//! otherwise.
//!
//! Fast paths (no model call):
//! - a tool node whose tool ran this turn and that has one exit advances along it
//!   ([`FastPath::ToolDone`]); a tool node whose tool has not run stays
//!   ([`FastPath::AwaitingTool`]);
//! - a chat node the agent already carried out, with a single unconditional transition,
//!   advances ([`FastPath::Unconditional`]);
//! - the root or a fork with a single transition takes it ([`FastPath::LoneCandidate`]);
//! - a node entered earlier in this same turn stays ([`FastPath::EnteredThisTurn`]): the
//!   agent has not acted on it yet.
//!
//! Moves pass through forks that have a single transition.

use guidepost_core::projection::NodeKind;
use guidepost_core::{JourneyPath, ToolId};
use guidepost_llm::{ChatModel, Usage};

use crate::batches::journey_selection;
use crate::error::BatchError;
use crate::journeys::graph::{JourneyEdge, JourneyGraph};
use crate::journeys::paths::{PathChange, advance, apply_answer};
use crate::prompt::ConversationView;
use crate::record::{FastPath, JourneyDecision};

/// What the fast paths concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectionPlan {
    /// Decided without the model.
    Decided {
        /// The change.
        change: PathChange,
        /// Which rule decided.
        fast_path: FastPath,
    },
    /// The model must decide.
    NeedsModel,
}

/// The outcome of a model-decided selection.
#[derive(Debug, Clone)]
pub struct ModelSelection {
    /// The change (the path is unchanged when the call failed).
    pub change: PathChange,
    /// The model's rationale.
    pub rationale: String,
    /// Usage, when the call returned.
    pub usage: Option<Usage>,
    /// Estimated prompt tokens.
    pub estimated_tokens: usize,
    /// The error, when the call failed.
    pub error: Option<BatchError>,
}

/// Decides where each journey stands.
#[derive(Debug, Clone, Copy)]
pub struct JourneySelector {
    /// Upper bound on steps per move.
    pub max_steps: usize,
    /// Sampling temperature of selection calls.
    pub temperature: f32,
}

impl JourneySelector {
    /// Applies the fast paths to `graph` at `path`.
    ///
    /// `starting`: the journey is not active yet (its path is just the root).
    /// `tools_ran`: tools with staged results this turn. `entered_this_turn`: the path's
    /// current node was entered earlier in this turn.
    pub fn fast_path(
        &self,
        graph: &JourneyGraph,
        path: &JourneyPath,
        starting: bool,
        tools_ran: &[ToolId],
        entered_this_turn: bool,
    ) -> SelectionPlan {
        let Some(current) = graph.node(path.current()) else {
            return SelectionPlan::Decided {
                change: PathChange {
                    decision: JourneyDecision::Exited,
                    path: None,
                    correction: Some(format!("node `{}` is not in the journey any more", path.current())),
                },
                fast_path: FastPath::LoneCandidate,
            };
        };
        let single = match current.edges.as_slice() {
            [edge] => Some(edge),
            _ => None,
        };
        match current.kind {
            NodeKind::Tool => {
                if !current.tools.iter().any(|t| tools_ran.contains(t)) {
                    return self.decided(
                        PathChange { decision: JourneyDecision::Stayed, path: Some(path.clone()), correction: None },
                        FastPath::AwaitingTool,
                    );
                }
                match single {
                    Some(edge) => self.follow(graph, path, starting, edge, FastPath::ToolDone),
                    None => SelectionPlan::NeedsModel,
                }
            }
            NodeKind::Chat if entered_this_turn => self.decided(
                PathChange { decision: JourneyDecision::Stayed, path: Some(path.clone()), correction: None },
                FastPath::EnteredThisTurn,
            ),
            NodeKind::Chat => match single {
                Some(edge) if edge.condition.is_none() => {
                    self.follow(graph, path, starting, edge, FastPath::Unconditional)
                }
                _ => SelectionPlan::NeedsModel,
            },
            NodeKind::Fork | NodeKind::End => match single {
                Some(edge) => self.follow(graph, path, starting, edge, FastPath::LoneCandidate),
                None => SelectionPlan::NeedsModel,
            },
        }
    }

    fn decided(&self, change: PathChange, fast_path: FastPath) -> SelectionPlan {
        SelectionPlan::Decided { change, fast_path }
    }

    fn follow(
        &self,
        graph: &JourneyGraph,
        path: &JourneyPath,
        starting: bool,
        edge: &JourneyEdge,
        fast_path: FastPath,
    ) -> SelectionPlan {
        let mut steps = vec![edge.to.clone()];
        while steps.len() < self.max_steps {
            let Some(node) = steps.last().and_then(|s| graph.node(s)) else { break };
            match (node.kind, node.edges.as_slice()) {
                (NodeKind::Fork, [next]) => steps.push(next.to.clone()),
                _ => break,
            }
        }
        self.decided(advance(graph, path, &steps, starting, self.max_steps), fast_path)
    }

    /// Asks the model (one call) and applies its answer. A failed call leaves the path
    /// unchanged (a starting journey does not start).
    pub async fn select_with_model(
        &self,
        model: &dyn ChatModel,
        graph: &JourneyGraph,
        path: &JourneyPath,
        starting: bool,
        conversation: &ConversationView,
    ) -> ModelSelection {
        let outcome = journey_selection::evaluate(model, graph, path, conversation, self.temperature).await;
        match outcome.answer {
            Ok(answer) => ModelSelection {
                change: apply_answer(graph, path, starting, &answer, self.max_steps),
                rationale: answer.rationale,
                usage: outcome.usage,
                estimated_tokens: outcome.estimated_tokens,
                error: None,
            },
            Err(error) => ModelSelection {
                change: PathChange {
                    decision: if starting { JourneyDecision::NotStarted } else { JourneyDecision::Stayed },
                    path: (!starting).then(|| path.clone()),
                    correction: Some("selection failed; path unchanged".into()),
                },
                rationale: String::new(),
                usage: None,
                estimated_tokens: outcome.estimated_tokens,
                error: Some(error),
            },
        }
    }
}
