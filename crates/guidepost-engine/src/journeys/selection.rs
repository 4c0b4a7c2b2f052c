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
use guidepost_llm::{ChatModel, TaskKind, Usage};

use crate::batches::{journey_selection, single};
use crate::error::BatchError;
use crate::journeys::graph::{JourneyEdge, JourneyGraph};
use crate::journeys::paths::{PathChange, advance, apply_answer};
use crate::prompt::{ConversationView, PromptItem};
use crate::record::{FastPath, JourneyDecision};

/// The question that tells a correction of an earlier answer apart (stepwise selection).
use crate::catalog::CORRECTION;

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
    /// The probability of "yes" from which a transition holds, overriding the model's
    /// declared [`verdict_threshold`](guidepost_llm::ModelCapabilities::verdict_threshold).
    pub verdict_threshold: Option<f32>,
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

    /// For models that judge one condition at a time ([`crate::VerdictStyle::Single`]): the
    /// engine walks the journey itself, asking about each conditional transition out of
    /// where the customer stands (one yes-or-no question each) and following the first that
    /// holds, on through forks and through questions the customer already answered, until
    /// a tool step or a step where the agent must speak. Among transitions that hold, the one
    /// the model found likeliest is taken (when it reports how likely). A customer who
    /// corrects an earlier answer is left to the full selection ([`Self::select_with_model`]),
    /// which sees the whole journey; so is a start (or a fork, or a tool step whose tool ran)
    /// where no transition holds. Where the journey rests (and where it cannot stay) a
    /// transition the model found likelier than not is taken even short of its threshold:
    /// the customer most likely answers the question just asked. Going on past a step the
    /// move only reached takes the threshold.
    pub async fn select_stepwise(
        &self,
        model: &dyn ChatModel,
        graph: &JourneyGraph,
        path: &JourneyPath,
        starting: bool,
        conversation: &ConversationView,
    ) -> ModelSelection {
        let mut usage: Option<Usage> = None;
        let mut estimated_tokens = 0;
        let mut notes: Vec<String> = Vec::new();
        let ask = async |conditions: &[&str], usage: &mut Option<Usage>, estimated: &mut usize| {
            self.ask_conditions(model, conditions, conversation, usage, estimated, self.verdict_threshold).await
        };
        let answered_before = path
            .states()
            .iter()
            .rev()
            .skip(1)
            .any(|s| graph.node(s).is_some_and(crate::journeys::graph::JourneyNode::is_customer_dependent));
        let latest = conversation.latest_customer_message();
        let mut corrected = false;
        if !starting && answered_before {
            if latest.is_some_and(crate::catalog::has_correction_cue) {
                notes.push("a correction cue in the latest message".into());
                corrected = true;
            } else {
                // The correction question only opens a fuller decision on whether and where
                // to go back: it takes the likelier answer, so that a correction the model is
                // unsure of is still looked at.
                let gate = Some(GATE_THRESHOLD);
                let asked = self
                    .ask_conditions(model, &[CORRECTION], conversation, &mut usage, &mut estimated_tokens, gate)
                    .await;
                match asked {
                    Ok(verdicts) if verdicts.first().is_some_and(|v| v.holds) => corrected = true,
                    Ok(_) => notes.push("no correction".into()),
                    Err(error) => return self.failed(path, starting, usage, estimated_tokens, error),
                }
            }
        }
        if corrected {
            return self.full_selection(model, graph, path, starting, conversation, usage).await;
        }
        let mut steps: Vec<String> = Vec::new();
        let mut at = path.current().to_string();
        while steps.len() < self.max_steps.max(1) {
            let Some(node) = graph.node(&at) else { break };
            let entered = !steps.is_empty();
            // Where the agent has something to do, the move ends.
            if entered
                && (matches!(node.kind, NodeKind::Tool | NodeKind::End)
                    || (node.kind == NodeKind::Chat && !node.is_customer_dependent()))
            {
                break;
            }
            // A question this move only reached, whose every way on is consequential, is not
            // asked about: the move cannot go past it (see `advance`).
            if entered
                && node.is_customer_dependent()
                && !node.edges.is_empty()
                && node.edges.iter().all(|e| graph.node(&e.to).is_some_and(|n| n.consequential))
            {
                break;
            }
            let conditional: Vec<&JourneyEdge> = node.edges.iter().filter(|e| e.condition.is_some()).collect();
            let otherwise = node.edges.iter().find(|e| e.condition.is_none());
            let next = if conditional.is_empty() {
                // A question just reached waits for its answer; a fork goes on.
                match otherwise {
                    Some(edge) if node.kind != NodeKind::Chat => Some(edge),
                    _ => None,
                }
            } else {
                let conditions: Vec<&str> = conditional.iter().filter_map(|e| e.condition.as_deref()).collect();
                match ask(&conditions, &mut usage, &mut estimated_tokens).await {
                    Ok(verdicts) => {
                        notes.extend(conditional.iter().zip(&verdicts).map(|(e, v)| v.note(e)));
                        // Where the journey rests, the customer most likely answers what
                        // was just asked, and a journey that has just started, or stands on a
                        // fork or a tool step whose tool ran, cannot stay: there an exit the
                        // model found likelier than not is taken. Going on past a step the move
                        // only reached (an answer given before it was asked) takes an exit
                        // that reaches the threshold.
                        let first_step = !entered || matches!(node.kind, NodeKind::Fork | NodeKind::Tool);
                        let chosen = choose_exit(&conditional, &verdicts, false);
                        chosen
                            .or(otherwise.filter(|_| node.kind != NodeKind::Chat))
                            .or_else(|| choose_exit(&conditional, &verdicts, first_step))
                    }
                    Err(error) => return self.failed(path, starting, usage, estimated_tokens, error),
                }
            };
            // A tool step whose tool ran, or a fork, where an active journey rests cannot be
            // stayed on: when no exit was found likelier than not, the model is asked which
            // one of them holds (a few seconds), before the journey-wide selection (many
            // more). A journey just starting is not asked: not starting is one of its answers,
            // and only the journey-wide selection offers it.
            let next = match next {
                None if !entered
                    && !starting
                    && matches!(node.kind, NodeKind::Tool | NodeKind::Fork)
                    && (2..=single::MAX_CHOICES).contains(&conditional.len()) =>
                {
                    let (edge, note) =
                        self.which_exit(model, &conditional, conversation, &mut usage, &mut estimated_tokens).await;
                    notes.extend(note);
                    edge
                }
                next => next,
            };
            let Some(edge) = next else { break };
            steps.push(edge.to.clone());
            at = edge.to.clone();
        }
        let resting_place =
            graph.node(path.current()).is_some_and(|n| matches!(n.kind, NodeKind::Tool | NodeKind::Fork));
        if steps.is_empty() && (starting || resting_place) {
            // The journey's conditions held yet no way in did, or a tool step whose tool ran
            // (or a fork) found no way out: neither is a place to stay, so the full selection
            // decides.
            return self.full_selection(model, graph, path, starting, conversation, usage).await;
        }
        let change = if steps.is_empty() {
            PathChange { decision: JourneyDecision::Stayed, path: Some(path.clone()), correction: None }
        } else {
            advance(graph, path, &steps, starting, self.max_steps)
        };
        ModelSelection { change, rationale: notes.join("; "), usage, estimated_tokens, error: None }
    }

    async fn full_selection(
        &self,
        model: &dyn ChatModel,
        graph: &JourneyGraph,
        path: &JourneyPath,
        starting: bool,
        conversation: &ConversationView,
        mut usage: Option<Usage>,
    ) -> ModelSelection {
        let mut selection = self.select_with_model(model, graph, path, starting, conversation).await;
        if let Some(after) = selection.usage.take() {
            Usage::sum_into(&mut usage, &after);
        }
        selection.usage = usage;
        selection
    }

    fn failed(
        &self,
        path: &JourneyPath,
        starting: bool,
        usage: Option<Usage>,
        estimated_tokens: usize,
        error: BatchError,
    ) -> ModelSelection {
        ModelSelection {
            change: PathChange::unchanged(path, starting, Some("selection failed; path unchanged".into())),
            rationale: String::new(),
            usage,
            estimated_tokens,
            error: Some(error),
        }
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
            Ok(answer) => {
                let change = apply_answer(graph, path, starting, &answer, self.max_steps);
                let mut selection = ModelSelection {
                    change,
                    rationale: answer.rationale,
                    usage: outcome.usage,
                    estimated_tokens: outcome.estimated_tokens,
                    error: None,
                };
                self.leave_fork(model, graph, path, starting, conversation, &mut selection).await;
                selection
            }
            Err(error) => self.failed(path, starting, None, outcome.estimated_tokens, error),
        }
    }

    /// Asks whether each of `conditions` holds, one yes-or-no question each, adding the
    /// call's usage and estimated prompt tokens to the totals.
    async fn ask_conditions(
        &self,
        model: &dyn ChatModel,
        conditions: &[&str],
        conversation: &ConversationView,
        usage: &mut Option<Usage>,
        estimated: &mut usize,
        threshold: Option<f32>,
    ) -> Result<Vec<ExitVerdict>, BatchError> {
        let items: Vec<PromptItem> = conditions
            .iter()
            .enumerate()
            .map(|(i, c)| PromptItem {
                id: (i + 1).to_string(),
                condition: (*c).to_string(),
                action: None,
                description: None,
                waits: false,
            })
            .collect();
        let asked = single::Asked::Now;
        let ask = single::Ask { task: TaskKind::JourneySelection, asked, temperature: self.temperature, threshold };
        let outcome = single::evaluate(model, &ask, &items, conversation).await;
        *estimated += outcome.estimated_tokens;
        if let Some(u) = &outcome.usage {
            Usage::sum_into(usage, u);
        }
        outcome.answer.map(|verdicts| {
            verdicts.into_iter().map(|v| ExitVerdict { holds: v.applies, probability: v.probability }).collect()
        })
    }

    /// Which one of `exits` holds, asked as a choice among their conditions (see
    /// [`single::choose`]): the likeliest, with a note for the rationale. A failed call
    /// chooses none, and says so.
    async fn which_exit<'e>(
        &self,
        model: &dyn ChatModel,
        exits: &[&'e JourneyEdge],
        conversation: &ConversationView,
        usage: &mut Option<Usage>,
        estimated: &mut usize,
    ) -> (Option<&'e JourneyEdge>, Option<String>) {
        let conditions: Vec<&str> = exits.iter().filter_map(|e| e.condition.as_deref()).collect();
        let task = TaskKind::JourneySelection;
        let outcome = single::choose(model, task, self.temperature, &conditions, conversation).await;
        *estimated += outcome.estimated_tokens;
        if let Some(u) = &outcome.usage {
            Usage::sum_into(usage, u);
        }
        match outcome.answer {
            Ok(probabilities) => {
                exits.iter().zip(&probabilities).max_by(|a, b| a.1.total_cmp(b.1)).map_or((None, None), |(edge, p)| {
                    let condition = edge.condition.as_deref().unwrap_or_default();
                    (Some(*edge), Some(format!("which holds: {condition} (p {p:.2})")))
                })
            }
            Err(error) => (None, Some(format!("which holds: the question failed ({error})"))),
        }
    }

    /// A fork is never a resting place: a move that ends on a fork with more than one way out
    /// goes on along the first exit whose condition holds (one yes-or-no question per
    /// conditional exit), else along its unconditional exit; with neither, the journey stays
    /// where it was (a starting journey does not start).
    async fn leave_fork(
        &self,
        model: &dyn ChatModel,
        graph: &JourneyGraph,
        path: &JourneyPath,
        starting: bool,
        conversation: &ConversationView,
        selection: &mut ModelSelection,
    ) {
        let steps = match &selection.change.decision {
            JourneyDecision::Started { steps } | JourneyDecision::Advanced { steps } => steps.clone(),
            _ => return,
        };
        let Some(fork) = steps.last().and_then(|s| graph.node(s)).filter(|n| n.kind == NodeKind::Fork) else {
            return;
        };
        if fork.edges.len() < 2 {
            return;
        }
        let conditional: Vec<&JourneyEdge> = fork.edges.iter().filter(|e| e.condition.is_some()).collect();
        let mut chosen = None;
        if !conditional.is_empty() {
            let conditions: Vec<&str> = conditional.iter().filter_map(|e| e.condition.as_deref()).collect();
            let (mut usage, mut estimated) = (selection.usage.take(), selection.estimated_tokens);
            let threshold = self.verdict_threshold;
            let answer =
                self.ask_conditions(model, &conditions, conversation, &mut usage, &mut estimated, threshold).await;
            (selection.usage, selection.estimated_tokens) = (usage, estimated);
            match answer {
                Ok(verdicts) => {
                    chosen = choose_exit(&conditional, &verdicts, false)
                        .or_else(|| fork.edges.iter().find(|e| e.condition.is_none()))
                        .or_else(|| choose_exit(&conditional, &verdicts, true));
                }
                Err(error) => selection.error = Some(error),
            }
        }
        let chosen = chosen.or_else(|| fork.edges.iter().find(|e| e.condition.is_none()));
        selection.change = match chosen {
            Some(edge) => {
                let mut steps = steps;
                steps.push(edge.to.clone());
                let limit = self.max_steps.max(steps.len());
                advance(graph, path, &steps, starting, limit)
            }
            None => PathChange::unchanged(
                path,
                starting,
                Some(format!("the move ended on fork `{}` and none of its exits holds; stayed", fork.id)),
            ),
        };
    }
}

/// The threshold of a question that only decides whether a fuller decision is made (the
/// likelier answer): missing a correction costs more than a needless full selection.
pub(crate) const GATE_THRESHOLD: f32 = 0.5;

/// The answer on one transition's condition.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ExitVerdict {
    /// Whether the condition holds.
    holds: bool,
    /// How likely the model found "yes", when it reports it.
    probability: Option<f32>,
}

impl ExitVerdict {
    /// `condition: yes (p 0.82)`, for the selection's rationale.
    fn note(&self, edge: &JourneyEdge) -> String {
        let condition = edge.condition.as_deref().unwrap_or_default();
        let answer = if self.holds { "yes" } else { "no" };
        match self.probability {
            Some(p) => format!("{condition}: {answer} (p {p:.2})"),
            None => format!("{condition}: {answer}"),
        }
    }
}

/// The exit to take among `exits` (each with its verdict). Among those that hold, the one
/// the model found likeliest (the first, without probabilities). When none holds and
/// `likelier_than_not` (the step where the journey rests, whose question the customer most
/// likely answers, or one it cannot stay on), the likeliest of all, if the model reported how
/// likely each was and found it likelier than not (short of its threshold); otherwise none,
/// and the caller falls back as without probabilities.
fn choose_exit<'e>(
    exits: &[&'e JourneyEdge],
    verdicts: &[ExitVerdict],
    likelier_than_not: bool,
) -> Option<&'e JourneyEdge> {
    let weighed = verdicts.iter().all(|v| v.probability.is_some());
    let p = |v: &ExitVerdict| v.probability.unwrap_or(0.0);
    let pairs = || exits.iter().copied().zip(verdicts);
    let holding = pairs().filter(|(_, v)| v.holds);
    let chosen = if weighed { holding.max_by(|a, b| p(a.1).total_cmp(&p(b.1))) } else { holding.into_iter().next() };
    if chosen.is_some() || !likelier_than_not || !weighed {
        return chosen.map(|(e, _)| e);
    }
    pairs().max_by(|a, b| p(a.1).total_cmp(&p(b.1))).filter(|(_, v)| p(v) >= GATE_THRESHOLD).map(|(e, _)| e)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use guidepost_core::definition::{SourceFile, load_agent};
    use guidepost_core::{JourneyPath, ToolId};

    use super::*;
    use crate::catalog::CompiledAgent;

    const FLOW: &str = r#"
agent: { name: Otto }
journeys:
  - id: order
    title: Order
    conditions: [The customer wants an order]
    start: ask
    states:
      - id: ask
        chat: Ask for the order number
        next:
          - { to: lookup, when: The customer gave the number }
      - { id: lookup, tool: check, next: route }
      - { id: route, fork: true, next: report }
      - { id: report, chat: Tell the status, next: end }
tools:
  - { name: check, description: Check an order }
"#;

    fn agent() -> CompiledAgent {
        let def = load_agent(&[SourceFile::new("a.yaml", FLOW)]).definition.unwrap();
        CompiledAgent::new(Arc::new(def))
    }

    fn path(states: &[&str]) -> JourneyPath {
        JourneyPath::from_states(states.iter().map(|s| s.to_string()).collect()).unwrap()
    }

    const SELECTOR: JourneySelector = JourneySelector { max_steps: 4, temperature: 0.0, verdict_threshold: None };

    #[test]
    fn root_with_one_transition_needs_no_model() {
        let agent = agent();
        let graph = agent.journey("order").unwrap();
        let SelectionPlan::Decided { change, fast_path } =
            SELECTOR.fast_path(graph, &JourneyPath::start(), true, &[], true)
        else {
            panic!("expected a fast path")
        };
        assert_eq!(fast_path, FastPath::LoneCandidate);
        assert_eq!(change.decision, JourneyDecision::Started { steps: vec!["ask".into()] });
    }

    #[test]
    fn conditional_chat_step_needs_the_model() {
        let agent = agent();
        let graph = agent.journey("order").unwrap();
        let plan = SELECTOR.fast_path(graph, &path(&["initial", "ask"]), false, &[], false);
        assert_eq!(plan, SelectionPlan::NeedsModel);
        let plan = SELECTOR.fast_path(graph, &path(&["initial", "ask"]), false, &[], true);
        assert!(matches!(plan, SelectionPlan::Decided { fast_path: FastPath::EnteredThisTurn, .. }));
    }

    #[test]
    fn tool_step_waits_for_its_tool_then_passes_single_edge_forks() {
        let agent = agent();
        let graph = agent.journey("order").unwrap();
        let tool = graph.node("lookup").unwrap().tools[0].clone();
        let at_tool = path(&["initial", "ask", "lookup"]);
        let plan = SELECTOR.fast_path(graph, &at_tool, false, &[], false);
        assert!(
            matches!(plan, SelectionPlan::Decided { fast_path: FastPath::AwaitingTool, ref change } if change.decision == JourneyDecision::Stayed)
        );
        let other = ToolId::new("native", "other");
        assert!(matches!(
            SELECTOR.fast_path(graph, &at_tool, false, &[other], false),
            SelectionPlan::Decided { fast_path: FastPath::AwaitingTool, .. }
        ));
        let SelectionPlan::Decided { change, fast_path } = SELECTOR.fast_path(graph, &at_tool, false, &[tool], false)
        else {
            panic!("expected a fast path")
        };
        assert_eq!(fast_path, FastPath::ToolDone);
        assert_eq!(change.decision, JourneyDecision::Advanced { steps: vec!["route".into(), "report".into()] });
        assert_eq!(change.path.unwrap().current(), "report");
    }

    #[test]
    fn unconditional_last_step_completes() {
        let agent = agent();
        let graph = agent.journey("order").unwrap();
        let SelectionPlan::Decided { change, fast_path } =
            SELECTOR.fast_path(graph, &path(&["initial", "ask", "lookup", "route", "report"]), false, &[], false)
        else {
            panic!("expected a fast path")
        };
        assert_eq!(fast_path, FastPath::Unconditional);
        assert_eq!(change.decision, JourneyDecision::Completed);
        assert!(change.path.is_none());
    }

    #[test]
    fn the_likeliest_exit_is_chosen_and_one_is_forced_only_where_the_journey_cannot_stay() {
        let edge = |to: &str| JourneyEdge {
            id: to.into(),
            to: to.into(),
            condition: Some(format!("to {to}")),
            guideline_id: format!("journey_node:{to}"),
        };
        let (a, b) = (edge("a"), edge("b"));
        let exits = [&a, &b];
        let v = |holds, p: Option<f32>| ExitVerdict { holds, probability: p };
        let to = |e: Option<&JourneyEdge>| e.map(|e| e.to.clone());
        // Among those that hold, the likeliest; without probabilities, the first.
        assert_eq!(to(choose_exit(&exits, &[v(true, Some(0.8)), v(true, Some(0.9))], false)), Some("b".into()));
        assert_eq!(to(choose_exit(&exits, &[v(true, None), v(true, None)], false)), Some("a".into()));
        // None holds: nothing, unless likelier than not is enough and the odds are known.
        let short = [v(false, Some(0.4)), v(false, Some(0.6))];
        assert_eq!(to(choose_exit(&exits, &short, false)), None);
        assert_eq!(to(choose_exit(&exits, &short, true)), Some("b".into()));
        assert_eq!(to(choose_exit(&exits, &[v(false, None), v(false, None)], true)), None);
        assert_eq!(to(choose_exit(&exits, &[v(false, Some(0.3)), v(false, Some(0.4))], true)), None, "both unlikely");
    }
}
