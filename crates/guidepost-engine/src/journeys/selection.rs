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
//! Moves pass through forks that have a single transition. A move never rests on a fork:
//! one that ends there goes on through it, and through the forks after it
//! ([`JourneySelector::leave_forks`]). Every transition is taken only from the model's
//! verdict threshold; where the journey cannot stay and no exit reaches it, the model is asked
//! which exit holds.

use guidepost_core::projection::NodeKind;
use guidepost_core::{JourneyPath, ToolId};
use guidepost_llm::{ChatModel, TaskKind, Usage};

use crate::batches::{journey_selection, single};
use crate::error::BatchError;
use crate::journeys::graph::{JourneyEdge, JourneyGraph, JourneyNode};
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
    /// Transitions are asked in both polarities (see [`single::Ask::both_ways`]).
    pub both_ways: bool,
    /// Where two or more conditional ways lead on from a step, the model is asked which one
    /// of them holds, or that none does, in one comparison instead of a question per way.
    /// Exits such as "asks about another city" and "wants no more lookups", or "the customer
    /// named a city" and "has not named one yet", exclude each other; asked one at a time, a
    /// small model can affirm the wrong one or miss both, where set side by side it compares
    /// them. Off by default: its prompt shares less with the cached questions before it, so
    /// turns on a local model take longer (see the README's table of methods).
    pub compare_exits: bool,
    /// Where the yes-or-no questions about the exits of the question step the journey stands
    /// at leave the way on unsure (none holds, yet one was found likelier than not) or
    /// contested (more than one was found likelier than not), the exits are compared side by
    /// side, with "none of these", before the journey moves or stays. Asked one at a time, a
    /// small model put "那北京呢？" (after a weather report) at p 0.61 of asking about a city,
    /// short of its 0.70; the second look costs a call only where the first answers were
    /// unsure (see [`Self::wants_second_look`]).
    pub second_look: bool,
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
    /// engine walks the journey itself (through the transitions in `answered` without asking:
    /// the customer met them in an earlier message, before the journey reached them), asking
    /// about each conditional transition out of where the customer stands (one yes-or-no
    /// question each) and following one that holds,
    /// on through forks and through questions the customer already answered, until a tool
    /// step or a step where the agent must speak. A transition holds from the model's
    /// threshold (see [`single::evaluate`]); among those that hold the likeliest is taken.
    /// Where the journey cannot rest (a fork, the start of a journey whose conditions held, a
    /// tool step whose tool ran) and no exit holds, the unconditional exit is taken, else the
    /// model is asked which one of the exits holds ([`single::choose`]); a move never ends on a
    /// fork. A customer who corrects an earlier answer is left to the full selection
    /// ([`Self::select_with_model`]), which sees the whole journey; so is a start, a fork or a
    /// finished tool step that none of this decides.
    pub async fn select_stepwise(
        &self,
        model: &dyn ChatModel,
        graph: &JourneyGraph,
        path: &JourneyPath,
        starting: bool,
        answered: &[String],
        conversation: &ConversationView,
    ) -> ModelSelection {
        let mut asked = Asking::default();
        let answered_before = path
            .states()
            .iter()
            .rev()
            .skip(1)
            .any(|s| graph.node(s).is_some_and(crate::journeys::graph::JourneyNode::is_customer_dependent));
        let latest = conversation.latest_customer_message();
        let mut corrected = false;
        // The walk from where the journey stands, when it was asked beside the correction
        // question: its answers and what they cost.
        let mut walked: Option<(Result<Vec<String>, BatchError>, Asking)> = None;
        if !starting && answered_before {
            if latest.is_some_and(crate::catalog::has_correction_cue) {
                asked.notes.push("a correction cue in the latest message".into());
                corrected = true;
            } else {
                // The correction question only opens a fuller decision on whether and where
                // to go back: it takes the likelier answer, so that a correction the model is
                // unsure of is still looked at.
                let gate = Some(GATE_THRESHOLD);
                let ask_gate = async {
                    let mut gate_asked = Asking::default();
                    // Asked one way: it only opens a fuller decision.
                    let outcome =
                        self.ask_conditions(model, &[CORRECTION], conversation, &mut gate_asked, (gate, false));
                    (outcome.await, gate_asked)
                };
                // A model that keeps prompt prefixes reads questions asked together in one
                // pass (a few rows each), so the walk's first questions are asked beside the
                // correction question instead of after it; the walk is dropped, its calls
                // counted, if a correction opens the fuller decision. Any other model pays a
                // call per question and asks the walk's only when they count.
                let (outcome, gate_asked) = if model.reads_ahead() {
                    let walk = async {
                        let mut walk_asked = Asking::default();
                        let steps = self.walk(model, graph, path, answered, conversation, &mut walk_asked).await;
                        (steps, walk_asked)
                    };
                    let (gate, walk) = futures::join!(ask_gate, walk);
                    walked = Some(walk);
                    gate
                } else {
                    ask_gate.await
                };
                asked.absorb(gate_asked);
                match outcome {
                    Ok(verdicts) if verdicts.first().is_some_and(|v| v.holds) => corrected = true,
                    Ok(verdicts) => {
                        let p = verdicts.first().and_then(|v| v.probability);
                        asked.notes.push(match p {
                            Some(p) => format!("no correction (p {p:.2}, a fuller look from {GATE_THRESHOLD:.2})"),
                            None => "no correction".into(),
                        });
                    }
                    Err(error) => {
                        if let Some((_, walk_asked)) = walked {
                            asked.absorb_cost(walk_asked);
                        }
                        return self.failed(path, starting, asked, error);
                    }
                }
            }
        }
        if corrected {
            let mut full = self.full_selection(model, graph, path, starting, conversation, asked).await;
            if full.error.is_some() || !full.change.went_nowhere() {
                if let Some((_, walk_asked)) = walked {
                    Asking { notes: Vec::new(), ..walk_asked }.add_to(&mut full);
                }
                return full;
            }
            // The fuller look's answer named no move the graph allows (it neither went back
            // nor chose to stay): the message is read as the answer to where the journey
            // stands, as it would have been without the cue (a small model takes "what about
            // Shanghai?" for a correction, and its fuller answer then moves nowhere), at the
            // cost of both.
            asked = Asking {
                usage: full.usage,
                estimated_tokens: full.estimated_tokens,
                notes: vec![format!("{}; the fuller look went nowhere, walked on", full.rationale)],
            };
        }
        let steps = match walked {
            Some((steps, walk_asked)) => {
                asked.absorb(walk_asked);
                steps
            }
            None => self.walk(model, graph, path, answered, conversation, &mut asked).await,
        };
        let steps = match steps {
            Ok(steps) => steps,
            Err(error) => return self.failed(path, starting, asked, error),
        };
        let resting_place =
            graph.node(path.current()).is_some_and(|n| matches!(n.kind, NodeKind::Tool | NodeKind::Fork));
        if steps.is_empty() && (starting || resting_place) {
            // The journey's conditions held yet no way in did, or a tool step whose tool ran
            // (or a fork) found no way out: neither is a place to stay, so the full selection
            // decides.
            return self.full_selection(model, graph, path, starting, conversation, asked).await;
        }
        let change = if steps.is_empty() {
            PathChange { decision: JourneyDecision::Stayed, path: Some(path.clone()), correction: None }
        } else {
            advance(graph, path, &steps, starting, self.max_steps.max(steps.len()))
        };
        ModelSelection {
            change,
            rationale: asked.notes.join("; "),
            usage: asked.usage,
            estimated_tokens: asked.estimated_tokens,
            error: None,
        }
    }

    /// The move from where the journey stands that the latest message makes, step by step
    /// (see [`Self::select_stepwise`]): the steps it passes, in order. `answered`: the exits
    /// answered in earlier messages.
    async fn walk(
        &self,
        model: &dyn ChatModel,
        graph: &JourneyGraph,
        path: &JourneyPath,
        answered: &[String],
        conversation: &ConversationView,
        asked: &mut Asking,
    ) -> Result<Vec<String>, BatchError> {
        let mut steps: Vec<String> = Vec::new();
        let mut at = path.current().to_string();
        let unknown = |_: &JourneyEdge| None;
        // Forks are decided past the step limit (they only route), within the graph's size.
        let limit = self.max_steps.max(1) + graph.nodes.len();
        while steps.len() < limit {
            let Some(node) = graph.node(&at) else { break };
            let entered = !steps.is_empty();
            if steps.len() >= self.max_steps.max(1) && node.kind != NodeKind::Fork {
                break;
            }
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
            // A question the customer answered in an earlier message, before the journey
            // reached it, is gone on from without asking again.
            if node.is_customer_dependent()
                && let Some(edge) = node.edges.iter().find(|e| e.condition.is_some() && answered.contains(&e.id))
            {
                let condition = edge.condition.as_deref().unwrap_or_default();
                asked.notes.push(format!("{condition}: answered in an earlier message"));
                if edge.to == path.current() || steps.contains(&edge.to) {
                    break;
                }
                steps.push(edge.to.clone());
                at = edge.to.clone();
                continue;
            }
            let rests = !(node.kind == NodeKind::Fork || (!entered && node.kind == NodeKind::Tool));
            let how = Exit { rests, reached: entered, graph };
            let Some(edge) = self.next_exit(model, node, how, conversation, asked, &unknown).await? else { break };
            // A move does not come back to where it began or to a step it passed: one message
            // answers a question once.
            if edge.to == path.current() || steps.contains(&edge.to) {
                asked.notes.push(format!("`{}` was passed in this move: it ends at `{}`", edge.to, node.id));
                break;
            }
            steps.push(edge.to.clone());
            at = edge.to.clone();
        }
        // A fork none of whose exits could be taken is not a place to rest: the move ends
        // before it.
        while let Some(fork) = steps.last().and_then(|s| graph.node(s)).filter(|n| n.kind == NodeKind::Fork) {
            asked.notes.push(format!("no exit of fork `{}` could be taken: the move ends before it", fork.id));
            steps.pop();
        }
        Ok(steps)
    }

    /// The exit to take out of `node`: one whose condition holds (the likeliest), else (unless
    /// the journey may rest at `node`, and never out of a question) the unconditional exit,
    /// else, where the journey cannot rest, the one the model names when asked which exit
    /// holds. `known` gives verdicts already asked in this pass; the others are asked now.
    async fn next_exit<'g>(
        &self,
        model: &dyn ChatModel,
        node: &'g JourneyNode,
        Exit { rests, reached, graph }: Exit<'_>,
        conversation: &ConversationView,
        asked: &mut Asking,
        known: &(dyn Fn(&JourneyEdge) -> Option<ExitVerdict> + Sync),
    ) -> Result<Option<&'g JourneyEdge>, BatchError> {
        // Past a question this move only reached, a way on to a consequential step is not
        // asked about: the move cannot take it (see `advance`).
        let out_of_reach = |e: &JourneyEdge| {
            reached && node.is_customer_dependent() && graph.node(&e.to).is_some_and(|n| n.consequential)
        };
        let conditional: Vec<&JourneyEdge> =
            node.edges.iter().filter(|e| e.condition.is_some() && !out_of_reach(e)).collect();
        let otherwise = node.edges.iter().find(|e| e.condition.is_none()).filter(|_| node.kind != NodeKind::Chat);
        if conditional.is_empty() {
            // A question waits for its answer; a fork, the start or a finished tool step goes on.
            return Ok(otherwise);
        }
        if self.compare_exits
            && (2..single::MAX_CHOICES).contains(&conditional.len())
            && conditional.iter().all(|e| known(e).is_none())
        {
            // "None of these" is an answer everywhere: the journey stays at a question, takes
            // the unconditional way on where there is one, and a move ends before a fork
            // none of whose exits holds.
            // Past a question this move only reached, the choice must be as sure as a verdict
            // (a fork routes a move already made: the likeliest way is taken).
            let floor = (reached && node.kind == NodeKind::Chat)
                .then(|| self.verdict_threshold.unwrap_or_else(|| model.capabilities().verdict_threshold));
            let compared = self.compare(model, &conditional, floor, conversation, asked).await?;
            if compared.is_none()
                && let Some(edge) = otherwise
            {
                asked.notes.push(format!("the unconditional way on to `{}`", edge.to));
                return Ok(Some(edge));
            }
            return Ok(compared);
        }
        let verdicts: Vec<ExitVerdict> = match conditional.iter().map(|e| known(e)).collect::<Option<Vec<_>>>() {
            Some(verdicts) => verdicts,
            None => {
                let conditions: Vec<&str> = conditional.iter().filter_map(|e| e.condition.as_deref()).collect();
                let how = (self.verdict_threshold, self.both_ways);
                self.ask_conditions(model, &conditions, conversation, asked, how).await?
            }
        };
        asked.notes.extend(conditional.iter().zip(&verdicts).map(|(e, v)| v.note(e)));
        // Only where the message has not moved the journey yet: a question this move reached
        // by an answer waits unless an exit is sure (set beside "none of these", one exit is
        // favoured: the small model put "gave the destination" at 0.79 for a message that gave
        // only the pickup).
        if !reached && let Some(why) = self.wants_second_look(node, &verdicts) {
            asked.notes.push(format!("{why}: a second look"));
            return self.compare(model, &conditional, None, conversation, asked).await;
        }
        if let Some(edge) = choose_exit(&conditional, &verdicts) {
            return Ok(Some(edge));
        }
        if !reached && let Some(edge) = answer_to_the_question(node, graph, &conditional, &verdicts) {
            asked.notes.push(format!("the answer to the question asked, likelier than not: on to `{}`", edge.to));
            return Ok(Some(edge));
        }
        if let Some(edge) = otherwise {
            asked.notes.push(format!("none holds: the unconditional way on to `{}`", edge.to));
            return Ok(Some(edge));
        }
        if rests || !(2..=single::MAX_CHOICES).contains(&conditional.len()) {
            return Ok(None);
        }
        // A fork, a start or a finished tool step cannot be stayed on: asked which of its exits
        // holds (a few seconds), before the journey-wide selection (many more).
        Ok(self.which_exit(model, &conditional, conversation, asked).await)
    }

    async fn full_selection(
        &self,
        model: &dyn ChatModel,
        graph: &JourneyGraph,
        path: &JourneyPath,
        starting: bool,
        conversation: &ConversationView,
        before: Asking,
    ) -> ModelSelection {
        let mut selection = self.select_with_model(model, graph, path, starting, conversation).await;
        let mut usage = before.usage;
        if let Some(after) = selection.usage.take() {
            Usage::sum_into(&mut usage, &after);
        }
        selection.usage = usage;
        selection.estimated_tokens += before.estimated_tokens;
        if !before.notes.is_empty() {
            selection.rationale = format!("{}; full selection: {}", before.notes.join("; "), selection.rationale);
        }
        selection
    }

    fn failed(&self, path: &JourneyPath, starting: bool, asked: Asking, error: BatchError) -> ModelSelection {
        ModelSelection {
            change: PathChange::unchanged(path, starting, Some("selection failed; path unchanged".into())),
            rationale: asked.notes.join("; "),
            usage: asked.usage,
            estimated_tokens: asked.estimated_tokens,
            error: Some(error),
        }
    }

    /// Asks the model (one call) and applies its answer. A failed call leaves the path
    /// unchanged (a starting journey does not start). A move that ends on a fork goes on
    /// through it ([`Self::leave_forks`]).
    pub async fn select_with_model(
        &self,
        model: &dyn ChatModel,
        graph: &JourneyGraph,
        path: &JourneyPath,
        starting: bool,
        conversation: &ConversationView,
    ) -> ModelSelection {
        let threshold = self.verdict_threshold.unwrap_or_else(|| model.capabilities().verdict_threshold);
        let outcome = journey_selection::evaluate(model, graph, path, conversation, self.temperature, threshold).await;
        match outcome.answer {
            Ok((answer, held)) => {
                let change = apply_answer(graph, path, starting, &answer, self.max_steps);
                let rationale = std::iter::once(answer.rationale).chain(held).collect::<Vec<_>>().join("; ");
                let selection = ModelSelection {
                    change,
                    rationale,
                    usage: outcome.usage,
                    estimated_tokens: outcome.estimated_tokens,
                    error: None,
                };
                let unknown = |_: &JourneyEdge| None;
                self.leave_forks(model, (graph, path, starting), conversation, selection, &unknown).await
            }
            Err(error) => {
                let asked = Asking { estimated_tokens: outcome.estimated_tokens, ..Asking::default() };
                self.failed(path, starting, asked, error)
            }
        }
    }

    /// A fork is never a resting place: a move that ends on one goes on through it, and
    /// through the forks after it, each decided as in [`Self::select_stepwise`] (an exit
    /// that holds, else the unconditional exit, else the one the model names when asked
    /// which holds); a fork none of whose exits can be taken ends the move before it.
    /// `known` gives the verdicts on transitions already asked in this pass.
    pub(crate) async fn leave_forks(
        &self,
        model: &dyn ChatModel,
        (graph, path, starting): (&JourneyGraph, &JourneyPath, bool),
        conversation: &ConversationView,
        mut selection: ModelSelection,
        known: &(dyn Fn(&JourneyEdge) -> Option<ExitVerdict> + Sync),
    ) -> ModelSelection {
        let Some(mut steps) = selection.change.decision.steps().map(<[String]>::to_vec) else { return selection };
        let on_fork = |steps: &[String]| steps.last().and_then(|s| graph.node(s)).filter(|n| n.kind == NodeKind::Fork);
        if on_fork(&steps).is_none() {
            return selection;
        }
        let mut asked = Asking::default();
        let mut guard = graph.nodes.len();
        while let Some(fork) = on_fork(&steps)
            && guard > 0
        {
            guard -= 1;
            let how = Exit { rests: false, reached: true, graph };
            match self.next_exit(model, fork, how, conversation, &mut asked, known).await {
                Ok(Some(edge)) => steps.push(edge.to.clone()),
                Ok(None) => break,
                Err(error) => {
                    selection.error = Some(error);
                    break;
                }
            }
        }
        while let Some(fork) = on_fork(&steps) {
            asked.notes.push(format!("no exit of fork `{}` could be taken: the move ends before it", fork.id));
            steps.pop();
        }
        selection.change = if steps.is_empty() {
            PathChange::unchanged(
                path,
                starting,
                Some("the move ended on a fork none of whose exits holds; stayed".into()),
            )
        } else {
            advance(graph, path, &steps, starting, self.max_steps.max(steps.len()))
        };
        asked.add_to(&mut selection);
        selection
    }

    /// Asks whether each of `conditions` holds, one yes-or-no question each (in both
    /// polarities when `both_ways`), adding the calls' usage and estimated prompt tokens to
    /// `asked`. `threshold` overrides the model's.
    async fn ask_conditions(
        &self,
        model: &dyn ChatModel,
        conditions: &[&str],
        conversation: &ConversationView,
        asked: &mut Asking,
        (threshold, both_ways): (Option<f32>, bool),
    ) -> Result<Vec<ExitVerdict>, BatchError> {
        let items: Vec<PromptItem> =
            conditions.iter().enumerate().map(|(i, c)| PromptItem::statement((i + 1).to_string(), *c)).collect();
        let threshold = threshold.unwrap_or_else(|| model.capabilities().verdict_threshold);
        let ask = single::Ask {
            task: TaskKind::JourneySelection,
            asked: single::Asked::Now,
            temperature: self.temperature,
            threshold: Some(threshold),
            both_ways,
        };
        let outcome = single::evaluate(model, &ask, &items, conversation).await;
        asked.estimated_tokens += outcome.estimated_tokens;
        if let Some(u) = &outcome.usage {
            Usage::sum_into(&mut asked.usage, u);
        }
        outcome.answer.map(|verdicts| {
            verdicts
                .into_iter()
                .map(|v| ExitVerdict { holds: v.applies, probability: v.probability, threshold: Some(threshold) })
                .collect()
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
        asked: &mut Asking,
    ) -> Option<&'e JourneyEdge> {
        let conditions: Vec<&str> = exits.iter().filter_map(|e| e.condition.as_deref()).collect();
        let task = TaskKind::JourneySelection;
        let outcome = single::choose(model, task, self.temperature, &conditions, false, conversation).await;
        asked.estimated_tokens += outcome.estimated_tokens;
        if let Some(u) = &outcome.usage {
            Usage::sum_into(&mut asked.usage, u);
        }
        match outcome.answer {
            Ok(probabilities) => {
                let chosen = exits.iter().zip(&probabilities).max_by(|a, b| a.1.total_cmp(b.1));
                if let Some((edge, p)) = chosen {
                    let condition = edge.condition.as_deref().unwrap_or_default();
                    asked.notes.push(format!("none reached the threshold; which holds: {condition} (p {p:.2})"));
                }
                chosen.map(|(edge, _)| *edge)
            }
            Err(error) => {
                asked.notes.push(format!("which holds: the question failed ({error})"));
                None
            }
        }
    }
}

impl JourneySelector {
    /// Whether the answers on the conditional exits of question step `node` (`verdicts`, in
    /// their order) call for a second look, and why: "unsure" when none holds yet one was
    /// found likelier than not, "contested" when more than one was. The exits are then
    /// compared side by side (see [`Self::second_look`]). A question with one conditional exit
    /// has nothing to compare it with: set beside "none of these" alone, the small model
    /// favoured the exit (0.83 for "provided the order number" when no number was given), so
    /// its verdict stands.
    pub(crate) fn wants_second_look(&self, node: &JourneyNode, verdicts: &[ExitVerdict]) -> Option<&'static str> {
        let conditional = node.edges.iter().filter(|e| e.condition.is_some()).count();
        if !self.second_look || node.kind != NodeKind::Chat || !(2..single::MAX_CHOICES).contains(&conditional) {
            return None;
        }
        let likely = verdicts.iter().filter(|v| v.holds || v.unsure()).count();
        if likely > 1 {
            Some("contested")
        } else if likely == 1 && !verdicts.iter().any(|v| v.holds) {
            Some("unsure")
        } else {
            None
        }
    }

    /// A move decided without reading the customer's message (an unconditional transition,
    /// a journey's start) that landed on a question whose exits the pass's checks left unsure
    /// or contested ([`Self::wants_second_look`]; `known` gives those checks' verdicts): the
    /// exits are compared, and the move goes on along the one chosen, and on through forks
    /// after it. Otherwise `selection` is returned as it was.
    pub(crate) async fn look_again(
        &self,
        model: &dyn ChatModel,
        (graph, path, starting): (&JourneyGraph, &JourneyPath, bool),
        conversation: &ConversationView,
        mut selection: ModelSelection,
        known: &(dyn Fn(&JourneyEdge) -> Option<ExitVerdict> + Sync),
    ) -> ModelSelection {
        let Some(mut steps) = selection.change.decision.steps().map(<[String]>::to_vec) else { return selection };
        let Some(node) = steps.last().and_then(|s| graph.node(s)) else { return selection };
        let exits: Vec<&JourneyEdge> = node.edges.iter().filter(|e| e.condition.is_some()).collect();
        let Some(verdicts) = exits.iter().map(|e| known(e)).collect::<Option<Vec<_>>>() else { return selection };
        let Some(why) = self.wants_second_look(node, &verdicts) else { return selection };
        let mut asked = Asking::default();
        asked.notes.push(format!("at `{}`, {why}: a second look", node.id));
        match self.compare(model, &exits, None, conversation, &mut asked).await {
            Ok(Some(edge)) if edge.to != path.current() && !steps.contains(&edge.to) => {
                steps.push(edge.to.clone());
                selection.change = advance(graph, path, &steps, starting, self.max_steps.max(steps.len()));
            }
            Ok(_) => {}
            Err(error) => selection.error = Some(error),
        }
        asked.add_to(&mut selection);
        if selection.error.is_some() {
            return selection;
        }
        self.leave_forks(model, (graph, path, starting), conversation, selection, known).await
    }

    /// Which one of `exits` holds, in one comparison asked in both orders with "none of
    /// these" listed last. The likeliest choice is taken, when it reaches `floor`; `None` when
    /// it is "none of these" or falls short.
    async fn compare<'e>(
        &self,
        model: &dyn ChatModel,
        exits: &[&'e JourneyEdge],
        floor: Option<f32>,
        conversation: &ConversationView,
        asked: &mut Asking,
    ) -> Result<Option<&'e JourneyEdge>, BatchError> {
        let mut statements: Vec<&str> = exits.iter().filter_map(|e| e.condition.as_deref()).collect();
        let chinese = single::writes_chinese(&statements.concat());
        statements.push(if chinese { NONE_OF_THESE_ZH } else { NONE_OF_THESE });
        let task = TaskKind::JourneySelection;
        let outcome = single::choose(model, task, self.temperature, &statements, true, conversation).await;
        asked.estimated_tokens += outcome.estimated_tokens;
        if let Some(u) = &outcome.usage {
            Usage::sum_into(&mut asked.usage, u);
        }
        let probabilities = outcome.answer?;
        let odds = statements
            .iter()
            .zip(&probabilities)
            .map(|(s, p)| format!("{s} (p {p:.2})"))
            .collect::<Vec<_>>()
            .join(", ");
        let likeliest = probabilities.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1));
        if let (Some((i, p)), Some(floor)) = (likeliest, floor)
            && i < exits.len()
            && *p < floor
        {
            asked.notes.push(format!("compared: {odds}; short of {floor:.2}, none taken"));
            return Ok(None);
        }
        match likeliest.and_then(|(i, _)| exits.get(i)) {
            Some(edge) => {
                asked.notes.push(format!("compared: {odds}; on to `{}`", edge.to));
                Ok(Some(*edge))
            }
            None => {
                asked.notes.push(format!("compared: {odds}; none holds"));
                Ok(None)
            }
        }
    }
}

/// How the way out of a step is chosen.
#[derive(Debug, Clone, Copy)]
struct Exit<'g> {
    /// The journey may rest at the step.
    rests: bool,
    /// The move only reached the step (it is not where the journey stood).
    reached: bool,
    /// The journey the step is in.
    graph: &'g JourneyGraph,
}

/// The one way on from the question the customer was just asked (where the journey rested,
/// its agent message asking it), found likelier than not yet short of the threshold, when it
/// leads to a step that is not consequential: it is taken. Staying there asks the same
/// question again, and a journey that stays on an answer it did not recognise trails one step
/// behind the customer for the rest of the conversation ("To the harbour." after "Where are
/// you going?" was put at p 0.61 of giving the destination); going on asks the next question,
/// and what is missing is still asked for before any consequential step (a booking, a
/// payment) runs, which holds to the threshold as before.
fn answer_to_the_question<'e>(
    node: &JourneyNode,
    graph: &JourneyGraph,
    conditional: &[&'e JourneyEdge],
    verdicts: &[ExitVerdict],
) -> Option<&'e JourneyEdge> {
    let ([edge], [verdict]) = (conditional, verdicts) else { return None };
    let quiet = graph.node(&edge.to).is_some_and(|n| !n.consequential);
    (node.is_customer_dependent() && verdict.unsure() && quiet).then_some(*edge)
}

/// The last choice of a comparison among a question's exits.
const NONE_OF_THESE: &str = "None of the statements above is true";
const NONE_OF_THESE_ZH: &str = "以上陈述都不成立";

/// What the questions of one selection asked and cost, and the notes of their answers.
#[derive(Debug, Default)]
struct Asking {
    usage: Option<Usage>,
    estimated_tokens: usize,
    notes: Vec<String>,
}

impl Asking {
    /// Takes in `other`'s cost and, after its own, its notes.
    fn absorb(&mut self, mut other: Asking) {
        self.notes.append(&mut other.notes);
        self.absorb_cost(other);
    }

    /// Takes in `other`'s cost only (questions whose answers were not used).
    fn absorb_cost(&mut self, other: Asking) {
        if let Some(u) = &other.usage {
            Usage::sum_into(&mut self.usage, u);
        }
        self.estimated_tokens += other.estimated_tokens;
    }

    /// Adds the questions' cost to `selection`, and their notes after its rationale.
    fn add_to(self, selection: &mut ModelSelection) {
        if let Some(u) = self.usage {
            Usage::sum_into(&mut selection.usage, &u);
        }
        selection.estimated_tokens += self.estimated_tokens;
        if !self.notes.is_empty() {
            let before = std::mem::take(&mut selection.rationale);
            let notes = self.notes.join("; ");
            selection.rationale = if before.is_empty() { notes } else { format!("{before}; {notes}") };
        }
    }
}

/// The threshold of a question that only decides whether a fuller decision is made (the
/// likelier answer): missing a correction costs more than a needless full selection.
pub(crate) const GATE_THRESHOLD: f32 = 0.5;

/// The probability of "yes" from which a verdict short of its threshold is unsure: the model
/// found the condition likelier than not.
const UNSURE_FROM: f32 = 0.5;

/// The answer on one transition's condition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ExitVerdict {
    /// Whether the condition holds.
    pub holds: bool,
    /// How likely the model found "yes", when it reports it.
    pub probability: Option<f32>,
    /// The probability from which "yes" held, when the model reports how likely.
    pub threshold: Option<f32>,
}

impl ExitVerdict {
    /// Found likelier than not, yet short of the threshold.
    fn unsure(&self) -> bool {
        matches!((self.probability, self.threshold), (Some(p), Some(t)) if (UNSURE_FROM..t).contains(&p))
    }

    /// `condition: yes (p 0.82, yes from 0.70)`, for the selection's rationale.
    fn note(&self, edge: &JourneyEdge) -> String {
        verdict_note(edge.condition.as_deref().unwrap_or_default(), self.holds, self.probability, self.threshold)
    }
}

/// `condition: yes (p 0.82, yes from 0.70)`: a verdict as rationales give it.
pub(crate) fn verdict_note(condition: &str, holds: bool, probability: Option<f32>, threshold: Option<f32>) -> String {
    let answer = if holds { "yes" } else { "no" };
    match (probability, threshold) {
        (Some(p), Some(t)) => format!("{condition}: {answer} (p {p:.2}, yes from {t:.2})"),
        (Some(p), None) => format!("{condition}: {answer} (p {p:.2})"),
        _ => format!("{condition}: {answer}"),
    }
}

/// The exit to take among `exits` (each with its verdict): among those that hold, the one the
/// model found likeliest (the first, without probabilities); none when none holds.
fn choose_exit<'e>(exits: &[&'e JourneyEdge], verdicts: &[ExitVerdict]) -> Option<&'e JourneyEdge> {
    let weighed = verdicts.iter().all(|v| v.probability.is_some());
    let p = |v: &ExitVerdict| v.probability.unwrap_or(0.0);
    let mut holding = exits.iter().copied().zip(verdicts).filter(|(_, v)| v.holds);
    let chosen = if weighed { holding.max_by(|a, b| p(a.1).total_cmp(&p(b.1))) } else { holding.next() };
    chosen.map(|(e, _)| e)
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

    const SELECTOR: JourneySelector = JourneySelector {
        max_steps: 4,
        temperature: 0.0,
        verdict_threshold: None,
        both_ways: false,
        compare_exits: false,
        second_look: false,
    };

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
    fn the_likeliest_exit_that_holds_is_chosen_and_none_short_of_the_threshold() {
        let edge = |to: &str| JourneyEdge {
            id: to.into(),
            to: to.into(),
            condition: Some(format!("to {to}")),
            guideline_id: format!("journey_node:{to}"),
        };
        let (a, b) = (edge("a"), edge("b"));
        let exits = [&a, &b];
        let v = |holds, p: Option<f32>| ExitVerdict { holds, probability: p, threshold: Some(0.7) };
        let to = |e: Option<&JourneyEdge>| e.map(|e| e.to.clone());
        // Among those that hold, the likeliest; without probabilities, the first.
        assert_eq!(to(choose_exit(&exits, &[v(true, Some(0.8)), v(true, Some(0.9))])), Some("b".into()));
        assert_eq!(to(choose_exit(&exits, &[v(true, None), v(true, None)])), Some("a".into()));
        // None holds: none, however likely.
        assert_eq!(to(choose_exit(&exits, &[v(false, Some(0.4)), v(false, Some(0.62))])), None);
        assert_eq!(v(false, Some(0.62)).note(&b), "to b: no (p 0.62, yes from 0.70)");
    }
}
