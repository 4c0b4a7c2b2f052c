//! Answers given before they were asked. A deterministic move (a journey starting, an
//! unconditional transition) does not read the customer's latest message, yet that message
//! may already answer the step the move lands on ("I want to check order 48213" answers "ask
//! for the order number"), or several of the steps after it. The pass checks the conditional
//! transitions out of such steps in its first wave, beside the guidelines (a short line each,
//! no extra wave), and walks the journey on along those that hold: through questions already
//! answered and forks, stopping where the agent has something to do (a tool step, a step that
//! tells the customer something, the end) or where no checked transition holds.

use std::collections::{BTreeSet, HashMap};

use guidepost_core::JourneyPath;
use guidepost_core::projection::NodeKind;
use indexmap::IndexMap;

use super::{Decision, Pass, State, Task};
use crate::catalog::MatchableGuideline;
use crate::journeys::graph::{JourneyEdge, JourneyGraph, JourneyNode};
use crate::journeys::selection::verdict_note;
use crate::record::{FastPath, JourneyDecision};

/// Whether the walk may pass `node` on the customer's answers: a question (the customer may
/// have answered it already) or a fork (it only routes).
fn passable(node: &JourneyNode) -> bool {
    node.kind == NodeKind::Fork || node.is_customer_dependent()
}

/// The conditional transitions worth checking when a move lands on `landing`: those out of
/// `landing` and out of every question or fork they reach, within `max_steps` steps, but for
/// a question's ways on to a consequential step.
pub(crate) fn transitions_to_check<'g>(
    graph: &'g JourneyGraph,
    landing: &str,
    max_steps: usize,
) -> Vec<&'g JourneyEdge> {
    let mut edges = Vec::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut frontier = vec![landing];
    for _ in 0..max_steps.max(1) {
        let mut next = Vec::new();
        for id in frontier {
            let Some(node) = graph.node(id).filter(|n| passable(n)) else { continue };
            if !seen.insert(node.id.as_str()) {
                continue;
            }
            // Every question here is one the move only reached: a way from it to a
            // consequential step cannot be taken before the customer is asked it (see
            // `paths::advance`), nor kept as answered ahead of it.
            let reachable = |e: &&JourneyEdge| {
                !(node.is_customer_dependent() && graph.node(&e.to).is_some_and(|n| n.consequential))
            };
            for edge in node.edges.iter().filter(|e| e.condition.is_some()).filter(reachable) {
                edges.push(edge);
                next.push(edge.to.as_str());
            }
            // A fork goes on along its unconditional exit when no condition holds.
            if node.kind == NodeKind::Fork {
                next.extend(node.edges.iter().filter(|e| e.condition.is_none()).map(|e| e.to.as_str()));
            }
        }
        frontier = next;
    }
    edges
}

/// The steps after `from` that the checked transitions lead through (`held` gives a checked
/// transition's verdict, `None` when it was not checked).
/// Stops at a tool step, a step where the agent speaks without asking, the end, or a step
/// where no checked transition holds; at most `max_steps` steps.
pub(crate) fn walk_on(
    graph: &JourneyGraph,
    from: &str,
    held: impl Fn(&JourneyEdge) -> Option<bool>,
    max_steps: usize,
) -> Vec<String> {
    let mut steps = Vec::new();
    let mut at = from.to_string();
    while steps.len() < max_steps {
        let Some(node) = graph.node(&at).filter(|n| passable(n)) else { break };
        let chosen = node.edges.iter().find(|e| e.condition.is_some() && held(e) == Some(true));
        let next = match chosen {
            Some(edge) => Some(edge),
            None if node.kind == NodeKind::Fork
                && node.edges.iter().all(|e| e.condition.is_none() || held(e).is_some()) =>
            {
                node.edges.iter().find(|e| e.condition.is_none())
            }
            None => None,
        };
        let Some(edge) = next else { break };
        steps.push(edge.to.clone());
        at = edge.to.clone();
    }
    steps
}

/// Whether a question before the current step of `path` was answered already: a correction
/// of that answer would send the journey back.
pub(crate) fn answered_before(graph: &JourneyGraph, path: &JourneyPath) -> bool {
    path.states().iter().rev().skip(1).any(|s| graph.node(s).is_some_and(JourneyNode::is_customer_dependent))
}

impl<'a> Pass<'a> {
    /// The transition and correction checks of the first pass (see [`answered`]): for each
    /// journey whose move this pass is deterministic and lands on a question or a fork, the
    /// conditional transitions the customer's latest message may already satisfy; and, when
    /// an active journey would move on past questions answered before, whether that message
    /// corrects an answer.
    pub(super) fn step_checks(
        &self,
        paths_in: &IndexMap<String, JourneyPath>,
        start_plans: &[(&String, Result<Decision, Task<'a>>)],
        state: &mut State<'a>,
    ) -> Vec<&'a MatchableGuideline> {
        // The deterministic moves: the active journeys' (already decided) and the starting
        // journeys' first steps.
        let starts = start_plans.iter().filter_map(|(j, plan)| Some((j.as_str(), plan.as_ref().ok()?)));
        let moves = state.decisions.iter().map(|(j, d)| (j.as_str(), d)).chain(starts);
        let mut items: Vec<&'a MatchableGuideline> = Vec::new();
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut correctable = BTreeSet::new();
        for (journey, decision) in moves {
            let Some(graph) = self.agent.journey(journey) else { continue };
            let moved = !matches!(decision.change.decision, JourneyDecision::Stayed);
            // A journey waiting at a tool step since an earlier turn (its tool could not run)
            // still reads the message: the customer may have changed the request.
            let waiting = matches!(decision.fast_path, Some(FastPath::AwaitingTool));
            if let Some(path) = paths_in.get(journey)
                && ((moved
                    && matches!(decision.fast_path, Some(FastPath::Unconditional | FastPath::LoneCandidate))
                    && answered_before(graph, path))
                    || waiting)
            {
                correctable.insert(journey.to_string());
            }
            let Some(landing) = decision.change.path.as_ref().filter(|_| moved) else { continue };
            for edge in transitions_to_check(graph, landing.current(), self.config.max_advance_steps) {
                if let Some(item) = self.agent.transition_item(journey, &edge.id)
                    && seen.insert(item.id.as_str())
                {
                    items.push(item);
                }
            }
        }
        state.correctable = correctable;
        if !state.correctable.is_empty() {
            items.push(self.agent.correction_item());
        }
        items
    }

    /// Walks the journeys whose move was deterministic on along the transitions the
    /// customer's latest message already satisfied, or an earlier one did (`answers_in`, by
    /// journey). Transitions that held beyond where a walk rests are kept for later turns
    /// ([`State::answered_ahead`]): "I need a taxi to the airport" gives the destination
    /// while the journey still asks for the pickup address.
    pub(super) fn walk_on_answers(&self, state: &mut State<'a>, answers_in: &IndexMap<String, Vec<String>>) {
        let none = Vec::new();
        for (journey, decision) in &mut state.decisions {
            if decision.fast_path.is_none() {
                continue;
            }
            let steps_so_far = match &decision.change.decision {
                JourneyDecision::Started { steps } | JourneyDecision::Advanced { steps } => steps.clone(),
                _ => continue,
            };
            let (Some(graph), Some(landing)) = (self.agent.journey(journey), decision.change.path.as_ref()) else {
                continue;
            };
            let before = answers_in.get(journey).unwrap_or(&none);
            // Transitions asked with the checks, held to the journeys' threshold.
            let threshold = self
                .config
                .journey_verdict_threshold
                .or(self.config.verdict_threshold)
                .unwrap_or_else(|| self.model.capabilities().verdict_threshold);
            let checked = |edge: &crate::journeys::graph::JourneyEdge| {
                self.agent.transition_item(journey, &edge.id).and_then(|item| state.steps.held_at(&item.id, threshold))
            };
            let held = |edge: &crate::journeys::graph::JourneyEdge| {
                if before.contains(&edge.id) { Some(true) } else { checked(edge) }
            };
            let room = self.config.max_advance_steps.saturating_sub(steps_so_far.len());
            let more = walk_on(graph, landing.current(), held, room);
            let ahead = transitions_to_check(graph, landing.current(), self.config.max_advance_steps);
            // Every transition looked at ahead of the move, held or not.
            let looked: Vec<String> = ahead
                .iter()
                .filter_map(|edge| {
                    let item = self.agent.transition_item(journey, &edge.id)?;
                    let (_, p) = state.steps.verdict(&item.id)?;
                    let holds = state.steps.held_at(&item.id, threshold)?;
                    let condition = edge.condition.as_deref().unwrap_or_default();
                    Some(verdict_note(condition, holds, p, p.map(|_| threshold)))
                })
                .collect();
            if !looked.is_empty() {
                decision.rationale = format!("{}; looked ahead: {}", decision.rationale, looked.join("; "));
            }
            // Answers to questions beyond the one the journey now rests at: not out of the
            // landing step or a step walked through (this message moved the journey there).
            let passed: Vec<&str> = std::iter::once(landing.current()).chain(more.iter().map(String::as_str)).collect();
            let kept: Vec<String> = ahead
                .iter()
                .filter(|edge| graph.source_of(&edge.id).is_some_and(|from| !passed.contains(&from.id.as_str())))
                .filter(|edge| checked(edge) == Some(true))
                .map(|edge| edge.id.clone())
                .collect();
            if !kept.is_empty() {
                state.answered_ahead.insert(journey.clone(), kept);
            }
            if more.is_empty() {
                // The message moved nothing: where the checks on the question the move landed
                // on were unsure or contested, a second look decides (see `forks`).
                state.unread.insert(journey.clone());
                continue;
            }
            let starting = decision.path_before.is_none();
            let from = decision.path_before.clone().unwrap_or_else(JourneyPath::start);
            let all: Vec<String> = steps_so_far.into_iter().chain(more).collect();
            decision.change =
                crate::journeys::paths::advance(graph, &from, &all, starting, self.config.max_advance_steps);
        }
    }
}

/// Verdicts of the step checks of a pass, by item id: whether each holds, and how likely
/// the model found "yes" when it reports it.
#[derive(Debug, Default)]
pub(crate) struct StepVerdicts {
    verdicts: HashMap<String, (bool, Option<f32>)>,
}

impl StepVerdicts {
    /// Notes a verdict.
    pub fn insert(&mut self, item: &str, holds: bool, probability: Option<f32>) {
        self.verdicts.insert(item.to_string(), (holds, probability));
    }

    /// The verdict on `item` held to `threshold` where the model said how likely "yes" was
    /// (else the verdict as given), if it was checked and answered.
    pub fn held_at(&self, item: &str, threshold: f32) -> Option<bool> {
        self.verdicts.get(item).map(|(holds, p)| p.map_or(*holds, |p| p >= threshold))
    }

    /// The verdict on `item` and how likely "yes" was, if it was checked and answered.
    pub fn verdict(&self, item: &str) -> Option<(bool, Option<f32>)> {
        self.verdicts.get(item).copied()
    }

    /// The verdict on a question that only opens a fuller decision (a correction sends the
    /// journey to a selection that sees it whole): the likelier answer where the model said
    /// how likely, else the verdict.
    pub fn gate(&self, item: &str) -> Option<bool> {
        self.verdicts.get(item).map(|(holds, p)| p.map_or(*holds, |p| p >= crate::journeys::selection::GATE_THRESHOLD))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taxi() -> JourneyGraph {
        let yaml = r#"
agent: { name: T }
journeys:
  - id: taxi
    title: Book a taxi
    conditions: [The customer wants a taxi]
    start: pickup
    states:
      - { id: pickup, chat: Ask where to pick them up, next: [{ to: dropoff, when: The customer gave the pickup address }] }
      - { id: dropoff, chat: Ask where they are going, next: [{ to: route, when: The customer gave the destination }] }
      - id: route
        fork: true
        next:
          - { to: book, when: The ride is within the city }
          - { to: refuse }
      - { id: book, tool: book_ride, next: done }
      - { id: refuse, chat: Tell them rides leave the city only by phone, next: end }
      - { id: done, chat: Confirm the booking, next: end }
tools:
  - name: book_ride
    description: Books a ride
    fixture: { cases: [{ args: {}, result: { ok: true } }] }
"#;
        let def =
            guidepost_core::definition::load_agent(&[guidepost_core::definition::SourceFile::new("taxi.yaml", yaml)])
                .definition
                .unwrap();
        JourneyGraph::build(&def, &def.journeys[0])
    }

    fn condition_of(e: &JourneyEdge) -> &str {
        e.condition.as_deref().unwrap_or_default()
    }

    #[test]
    fn the_transitions_checked_reach_through_questions_and_forks_only() {
        let g = taxi();
        let edges: Vec<&str> = transitions_to_check(&g, "pickup", 4).into_iter().map(condition_of).collect();
        assert_eq!(
            edges,
            [
                "The customer gave the pickup address",
                "The customer gave the destination",
                "The ride is within the city"
            ]
        );
        assert_eq!(transitions_to_check(&g, "pickup", 1).len(), 1, "bounded by the steps a move may take");
        assert!(transitions_to_check(&g, "done", 4).is_empty(), "the agent speaks there: nothing to check");
    }

    #[test]
    fn the_walk_follows_what_holds_and_stops_where_the_agent_acts() {
        let g = taxi();
        let all = |_: &JourneyEdge| Some(true);
        assert_eq!(walk_on(&g, "pickup", all, 4), ["dropoff", "route", "book"], "stops at the tool step");
        let pickup_only = |e: &JourneyEdge| Some(condition_of(e).contains("pickup"));
        assert_eq!(walk_on(&g, "pickup", pickup_only, 4), ["dropoff"], "waits at the next question");
        let outside = |e: &JourneyEdge| Some(!condition_of(e).contains("within"));
        assert_eq!(walk_on(&g, "pickup", outside, 4), ["dropoff", "route", "refuse"], "a fork takes its default exit");
        let unchecked = |_: &JourneyEdge| None;
        assert!(walk_on(&g, "pickup", unchecked, 4).is_empty(), "nothing checked, nothing walked");
        assert_eq!(walk_on(&g, "pickup", all, 2).len(), 2);
    }
}

#[cfg(test)]
mod threshold_tests {
    use super::StepVerdicts;

    #[test]
    fn a_verdict_with_odds_is_held_to_the_threshold_asked_one_without_stands() {
        let mut steps = StepVerdicts::default();
        // Asked with the checks at 0.70: a "no" at p 0.65.
        steps.insert("to_dropoff", false, Some(0.65));
        steps.insert("to_end", true, None);
        assert_eq!(steps.held_at("to_dropoff", 0.7), Some(false));
        assert_eq!(steps.held_at("to_dropoff", 0.6), Some(true), "a journey threshold of 0.6 takes it");
        assert_eq!(steps.held_at("to_end", 0.99), Some(true), "no odds: the verdict as given");
        assert_eq!(steps.held_at("never_asked", 0.5), None);
    }
}
