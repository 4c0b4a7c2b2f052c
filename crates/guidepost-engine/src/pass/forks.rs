//! Moves never rest on a fork. A move decided without a model (a tool step whose tool ran,
//! an unconditional transition, a walk on answers given early) can land on a fork, or on a
//! fork after a fork; each is then decided in turn, in one more wave: a transition the pass's
//! checks already found to hold, else one asked now that holds, else the unconditional exit,
//! else the one the model names when asked which holds (see
//! [`JourneySelector::leave_forks`](crate::journeys::selection::JourneySelector)).
//!
//! The same wave takes a second look where such a move landed on a question and the checks
//! on its exits were unsure (none held, one was likelier than not) or contested (more than one
//! was): the exits are compared side by side, with "none of these", and the move goes on along
//! the one chosen. "那北京呢？" after a weather report is a message the unconditional move to
//! "ask whether to go on" did not read; its check put "asks about a city" at 0.61.

use std::collections::HashMap;

use guidepost_core::projection::NodeKind;
use guidepost_core::{JourneyPath, ToolId};

use super::{Pass, State, Task};
use crate::catalog::CompiledAgent;
use crate::categorize::Category;
use crate::journeys::graph::JourneyEdge;
use crate::journeys::paths::PathChange;
use crate::journeys::selection::{ExitVerdict, ModelSelection};
use crate::prompt::ConversationView;
use crate::record::{BatchRecord, JourneyDecision};

/// A decided move that ended on a fork.
pub(crate) struct ForkTask {
    journey: String,
    /// Where the move started (the root for a starting journey).
    from: JourneyPath,
    starting: bool,
    change: PathChange,
    /// Verdicts on transitions the pass already asked, by transition id.
    known: HashMap<String, ExitVerdict>,
    /// The move landed on a question whose checks were unsure or contested: a second look
    /// decides whether it goes on (see [`JourneySelector::look_again`]).
    ///
    /// [`JourneySelector::look_again`]: crate::journeys::selection::JourneySelector
    look_again: bool,
}

impl<'a> Pass<'a> {
    /// The fork tasks of the decisions in `state` whose move ends on a fork.
    pub(super) fn fork_tasks(&self, state: &State<'a>) -> Vec<Task<'a>> {
        let mut tasks = Vec::new();
        for (journey, decision) in &state.decisions {
            let Some(graph) = self.agent.journey(journey) else { continue };
            let moved =
                matches!(decision.change.decision, JourneyDecision::Started { .. } | JourneyDecision::Advanced { .. });
            let landing = decision.change.path.as_ref().and_then(|p| graph.node(p.current()));
            let on_fork = landing.is_some_and(|n| n.kind == NodeKind::Fork);
            let unread = landing.filter(|_| state.unread.contains(journey));
            if !moved || !(on_fork || unread.is_some()) {
                continue;
            }
            let mut known = HashMap::new();
            for node in graph.nodes.values() {
                for edge in &node.edges {
                    let item = self.agent.transition_item(journey, &edge.id);
                    if let Some((holds, probability)) = item.and_then(|i| state.steps.verdict(&i.id)) {
                        // Asked with the checks, held to the journeys' threshold.
                        let threshold = probability.map(|_| self.verdict_threshold());
                        let holds = match (probability, threshold) {
                            (Some(p), Some(t)) => p >= t,
                            _ => holds,
                        };
                        known.insert(edge.id.clone(), ExitVerdict { holds, probability, threshold });
                    }
                }
            }
            // A question the move landed on without reading the message: a second look where
            // the checks on its exits were unsure or contested.
            let look_again = unread.is_some_and(|node| {
                let exits = node.edges.iter().filter(|e| e.condition.is_some());
                let verdicts: Option<Vec<ExitVerdict>> = exits.map(|e| known.get(&e.id).copied()).collect();
                verdicts.is_some_and(|v| self.selector().wants_second_look(node, &v).is_some())
            });
            if !on_fork && !look_again {
                continue;
            }
            tasks.push(Task::Forks(Box::new(ForkTask {
                journey: journey.clone(),
                from: decision.path_before.clone().unwrap_or_else(JourneyPath::start),
                starting: decision.path_before.is_none(),
                change: decision.change.clone(),
                known,
                look_again,
            })));
        }
        tasks
    }

    /// The threshold the questions that move journeys are held to in this pass.
    fn verdict_threshold(&self) -> f32 {
        self.config
            .journey_verdict_threshold
            .or(self.config.verdict_threshold)
            .unwrap_or_else(|| self.journey_model.capabilities().verdict_threshold)
    }

    /// Runs a fork task.
    pub(super) async fn leave_forks(&self, task: &ForkTask, conversation: &ConversationView) -> ModelSelection {
        let selection = ModelSelection {
            change: task.change.clone(),
            rationale: String::new(),
            usage: None,
            estimated_tokens: 0,
            error: None,
        };
        let Some(graph) = self.agent.journey(&task.journey) else { return selection };
        let known = |edge: &JourneyEdge| task.known.get(&edge.id).copied();
        let at = (graph, &task.from, task.starting);
        if task.look_again {
            return self.selector().look_again(self.journey_model, at, conversation, selection, &known).await;
        }
        self.selector().leave_forks(self.journey_model, at, conversation, selection, &known).await
    }

    /// Folds the outcome of a fork task into its journey's decision.
    pub(super) fn fold_forks(&self, task: ForkTask, selection: ModelSelection, wave: u32, state: &mut State<'a>) {
        let asked_model = selection.usage.is_some() || selection.error.is_some();
        let batch = asked_model.then(|| {
            if let Some(crate::error::BatchError::Model(e)) = &selection.error {
                state.failures.push(e.clone());
            }
            state.record.batches.push(BatchRecord {
                category: Category::JourneyNodeSelection,
                items: vec![task.journey.clone()],
                wave,
                usage: selection.usage.clone(),
                estimated_prompt_tokens: selection.estimated_tokens,
                error: selection.error.as_ref().map(ToString::to_string),
            });
            state.record.batches.len() - 1
        });
        if !asked_model {
            // No call was made: the task does not count among the pass's calls.
            state.calls = state.calls.saturating_sub(1);
        }
        if let Some(decision) = state.decisions.get_mut(&task.journey) {
            decision.change = selection.change;
            if !selection.rationale.is_empty() {
                decision.rationale = format!("{}; {}", decision.rationale, selection.rationale);
            }
            if decision.batch.is_none() {
                decision.batch = batch;
            }
        }
    }
}

/// A journey waiting at a tool step whose tool has not run does not move past it, whatever a
/// selection answered (a backtrack or an exit stands): `change` becomes a stay.
pub(super) fn keep_waiting_for_tool(
    agent: &CompiledAgent,
    journey: &str,
    path: &JourneyPath,
    tools_ran: &[ToolId],
    change: &mut PathChange,
) {
    let waiting = agent
        .journey(journey)
        .and_then(|g| g.node(path.current()))
        .is_some_and(|n| n.kind == NodeKind::Tool && !n.tools.iter().any(|t| tools_ran.contains(t)));
    if waiting && matches!(change.decision, JourneyDecision::Advanced { .. } | JourneyDecision::Completed) {
        let note = format!("the tool of `{}` has not run yet: stayed", path.current());
        *change = PathChange::unchanged(path, false, Some(note));
    }
}
