//! Applying node-selection decisions to journey paths, with the core path algebra:
//! forward progress appends, revisiting truncates (backtracking), reaching `end` or the
//! root again completes. Model answers are validated against the graph: an advance only
//! follows existing transitions, stops after a tool step and after a step that only tells the
//! customer something (it is said, and rested on; a closing question right after it is asked
//! with it), and a backtrack only targets a visited step; anything else is corrected and the
//! correction recorded.

use guidepost_core::journey::START_STATE;
use guidepost_core::projection::NodeKind;
use guidepost_core::{JourneyPath, PathStep};

use crate::batches::journey_selection::{JourneySelectionAnswer, StepDecision, local_id, node_of};
use crate::batches::key_number;
use crate::journeys::graph::{JourneyGraph, JourneyNode};
use crate::record::{GuidelineMatch, JourneyDecision, MatchKind};

/// The effect of a decision on one journey's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathChange {
    /// What happened.
    pub decision: JourneyDecision,
    /// The path afterwards; `None` when the journey is (no longer) active.
    pub path: Option<JourneyPath>,
    /// A model answer the engine could not follow, and what it did instead.
    pub correction: Option<String>,
}

impl PathChange {
    /// The journey stays where it was (a starting journey does not start), with `correction`
    /// saying why.
    pub fn unchanged(path: &JourneyPath, starting: bool, correction: Option<String>) -> Self {
        PathChange {
            decision: if starting { JourneyDecision::NotStarted } else { JourneyDecision::Stayed },
            path: (!starting).then(|| path.clone()),
            correction,
        }
    }
}

impl PathChange {
    /// Whether the decision went nowhere because the engine could not follow it: the journey
    /// stayed and a correction says why (a move the graph does not allow, a failed call),
    /// unlike a decision to stay.
    pub fn went_nowhere(&self) -> bool {
        self.decision == JourneyDecision::Stayed && self.correction.is_some()
    }
}

/// Moves `path` forward through `steps` (node ids). Invalid steps end the move: the valid
/// prefix is kept. `starting` marks a journey that is not active yet.
pub fn advance(
    graph: &JourneyGraph,
    path: &JourneyPath,
    steps: &[String],
    starting: bool,
    max_steps: usize,
) -> PathChange {
    let mut valid: Vec<String> = Vec::new();
    let mut correction = None;
    let mut at = path.current().to_string();
    // Models often restate the path so far (from the start, or just the current step)
    // before the steps they enter; a restatement is not a move.
    let steps = fresh_steps(path, steps);
    for step in steps.iter().take(max_steps.max(1)) {
        if graph.edge(&at, step).is_none() {
            correction = Some(format!("step `{step}` is not reachable from `{at}`; kept the valid part of the move"));
            break;
        }
        // A consequential step (a booking, a payment) is entered from a question only when the
        // customer was asked it: where the journey rested, not a step this move only reached.
        // So the customer sees what is about to happen and answers it, even when a model reads
        // a confirmation into an answer to the question before.
        if !valid.is_empty()
            && graph.node(step).is_some_and(|n| n.consequential)
            && graph.node(&at).is_some_and(JourneyNode::is_customer_dependent)
        {
            correction = Some(format!(
                "stopped at `{at}`: `{step}` is consequential, and the customer has not been asked `{at}` yet"
            ));
            break;
        }
        valid.push(step.clone());
        at = step.clone();
        if graph.node(step).is_some_and(|n| n.kind == NodeKind::Tool) {
            if valid.len() < steps.len() {
                correction = Some(format!("stopped at tool step `{step}`: its tool must run first"));
            }
            break;
        }
        // A step that only tells the customer something is said and rested on: the steps
        // after it wait for the next turn. Unless what follows is the journey's closing
        // question ("Is there anything else?", whose one way on ends the journey): it is
        // asked in the same reply, as an agent would, so that the customer's answer to what
        // was told ("No, that's all, thanks") is the answer to it and ends the journey,
        // instead of being asked after the customer already said so.
        if graph.node(step).is_some_and(|n| n.kind == NodeKind::Chat && !n.is_customer_dependent()) {
            let closing = graph.closing_question_after(step).filter(|q| !valid.iter().any(|v| v == q));
            let next_is_closing = steps.get(valid.len()).is_none_or(|s| Some(s.as_str()) == closing);
            match closing {
                Some(question) if next_is_closing => valid.push(question.to_string()),
                _ if valid.len() < steps.len() => {
                    correction =
                        Some(format!("stopped at `{step}`: the agent tells the customer something there first"));
                }
                _ => {}
            }
            break;
        }
    }
    if correction.is_none() && steps.len() > max_steps.max(1) {
        correction = Some(format!("advanced at most {max_steps} steps"));
    }
    let stayed = |correction| PathChange::unchanged(path, starting, correction);
    if valid.is_empty() {
        return stayed(correction.or_else(|| Some("advance without steps; stayed".into())));
    }
    match path.step(&valid) {
        PathStep::Completed => PathChange { decision: JourneyDecision::Completed, path: None, correction },
        PathStep::Advanced(p) | PathStep::Backtracked(p) => {
            let decision = if starting {
                JourneyDecision::Started { steps: valid }
            } else {
                JourneyDecision::Advanced { steps: valid }
            };
            PathChange { decision, path: Some(p), correction }
        }
        PathStep::Stayed => stayed(correction),
    }
}

/// Moves `path` back to the visited node `to`.
pub fn backtrack(path: &JourneyPath, to: &str) -> PathChange {
    if to == START_STATE || !path.visited(to) || path.current() == to {
        return PathChange {
            decision: JourneyDecision::Stayed,
            path: Some(path.clone()),
            correction: Some(format!("cannot backtrack to `{to}`: not an earlier visited step; stayed")),
        };
    }
    match path.step([to]) {
        PathStep::Backtracked(p) | PathStep::Advanced(p) => PathChange {
            decision: JourneyDecision::Backtracked { to: to.to_string() },
            path: Some(p),
            correction: None,
        },
        PathStep::Completed => PathChange { decision: JourneyDecision::Completed, path: None, correction: None },
        PathStep::Stayed => {
            PathChange { decision: JourneyDecision::Stayed, path: Some(path.clone()), correction: None }
        }
    }
}

/// The listed steps without a restatement of the current step or of the path so far.
fn fresh_steps<'a>(path: &JourneyPath, steps: &'a [String]) -> &'a [String] {
    let visited = path.states();
    let from_start = steps.iter().zip(visited).take_while(|(a, b)| a == b).count();
    let restated =
        if from_start > 0 { from_start } else { steps.iter().take_while(|s| s.as_str() == path.current()).count() };
    &steps[restated..]
}

/// Holds a move to the model's own verdicts on the current step's conditional transitions
/// (`exits`): a move along a transition it judged not to hold is redirected to the single
/// transition that does hold, or becomes a stay when none holds. Returns the corrected
/// answer and a note of the correction.
fn hold_to_exit_verdicts(
    graph: &JourneyGraph,
    path: &JourneyPath,
    starting: bool,
    answer: &JourneySelectionAnswer,
) -> (JourneySelectionAnswer, Option<String>) {
    let mut checked = answer.clone();
    let Some(current) = graph.node(path.current()) else { return (checked, None) };
    let verdict = |to: &str| {
        answer
            .exits
            .iter()
            .find(|(key, _)| key_number(key).and_then(|n| node_of(graph, n)).as_deref() == Some(to))
            .map(|(_, holds)| *holds)
    };
    if checked.decision == StepDecision::Exit {
        // "Exit" is the designed ending, not an abandoned journey, where the way on to the
        // journey's end is taken anyway: a transition to it judged to hold ("no more
        // lookups, thanks"), or the last step's own unconditional one (the booking told,
        // nothing left to do; a tool step a journey rests at has not run, so it is left).
        // Complete it.
        let to_end = current.edges.iter().find(|e| {
            ((e.condition.is_none() && current.kind != NodeKind::Tool) || verdict(&e.to) == Some(true))
                && graph.node(&e.to).is_some_and(|n| n.kind == NodeKind::End)
        });
        return match to_end {
            Some(edge) => {
                let note = match edge.condition {
                    None => format!("\"exit\" at the last step, whose way on is `{}`: completed", edge.to),
                    Some(_) => format!("\"exit\" along the transition to `{}` judged to hold: completed", edge.to),
                };
                checked.decision = StepDecision::Advance;
                checked.steps = vec![local_id(graph, &edge.to)];
                (checked, Some(note))
            }
            None => (checked, None),
        };
    }
    if checked.exits.is_empty() {
        return (checked, None);
    }
    // A real backtrack (to an earlier visited step) is a correction: the verdicts on the
    // current step's exits do not speak to it.
    let real_backtrack = checked.decision == StepDecision::Backtrack
        && !starting
        && checked
            .backtrack_to
            .as_deref()
            .and_then(|b| node_of(graph, b))
            .is_some_and(|b| b != path.current() && path.visited(&b));
    if real_backtrack {
        return (checked, None);
    }
    let holding: Vec<String> = current
        .edges
        .iter()
        .filter(|e| e.condition.is_none() || verdict(&e.to) == Some(true))
        .map(|e| e.to.clone())
        .collect();
    let conditional_holding: Vec<&String> =
        current.edges.iter().filter(|e| e.condition.is_some() && verdict(&e.to) == Some(true)).map(|e| &e.to).collect();
    let move_to = |mut checked: JourneySelectionAnswer, to: &str| {
        let note = format!("the decision did not follow the transition judged to hold; moved to `{to}`");
        checked.decision = StepDecision::Advance;
        checked.steps = vec![local_id(graph, to)];
        checked.backtrack_to = None;
        (checked, Some(note))
    };
    // "Stay" (or a backtrack to nowhere) while exactly one condition of the current step
    // holds: the step is done by the model's own verdict. At the start of an activated
    // journey there is no staying at all.
    if checked.decision != StepDecision::Advance {
        return match (conditional_holding.as_slice(), holding.as_slice()) {
            ([only], _) => move_to(checked, only),
            (_, [only]) if starting => move_to(checked, only),
            _ => (checked, None),
        };
    }
    let nodes: Vec<String> = checked.steps.iter().filter_map(|s| node_of(graph, s)).collect();
    let first = fresh_steps(path, &nodes).first().cloned();
    let first_holds = first.as_deref().is_some_and(|f| {
        current.edges.iter().any(|e| e.to == f && (e.condition.is_none() || verdict(&e.to) != Some(false)))
    });
    if first_holds {
        return (checked, None);
    }
    match holding.as_slice() {
        [only] => move_to(checked, only),
        [] => {
            checked.decision = StepDecision::Stay;
            checked.steps.clear();
            (checked, Some("no transition of the current step was judged to hold; stayed".into()))
        }
        _ => (checked, None),
    }
}

/// Applies a model answer to `path`, held to its own verdicts on the current step's exits.
pub fn apply_answer(
    graph: &JourneyGraph,
    path: &JourneyPath,
    starting: bool,
    answer: &JourneySelectionAnswer,
    max_steps: usize,
) -> PathChange {
    let (answer, note) = hold_to_exit_verdicts(graph, path, starting, answer);
    let mut change = apply_checked_answer(graph, path, starting, &answer, max_steps);
    if change.correction.is_none() {
        change.correction = note;
    }
    change
}

fn apply_checked_answer(
    graph: &JourneyGraph,
    path: &JourneyPath,
    starting: bool,
    answer: &JourneySelectionAnswer,
    max_steps: usize,
) -> PathChange {
    match answer.decision {
        StepDecision::Stay if starting => {
            PathChange { decision: JourneyDecision::NotStarted, path: None, correction: None }
        }
        StepDecision::Stay => {
            PathChange { decision: JourneyDecision::Stayed, path: Some(path.clone()), correction: None }
        }
        StepDecision::Exit if starting => {
            PathChange { decision: JourneyDecision::NotStarted, path: None, correction: None }
        }
        StepDecision::Exit => PathChange { decision: JourneyDecision::Exited, path: None, correction: None },
        StepDecision::Advance => {
            let mut unknown = None;
            let steps: Vec<String> = answer
                .steps
                .iter()
                .map_while(|s| {
                    let node = node_of(graph, s);
                    if node.is_none() {
                        unknown = Some(format!("unknown step number `{s}`"));
                    }
                    node
                })
                .collect();
            let mut change = advance(graph, path, &steps, starting, max_steps);
            if change.correction.is_none() {
                change.correction = unknown;
            }
            change
        }
        StepDecision::Backtrack if starting => PathChange {
            decision: JourneyDecision::NotStarted,
            path: None,
            correction: Some("a journey that has not started cannot backtrack".into()),
        },
        StepDecision::Backtrack => match answer.backtrack_to.as_deref().and_then(|s| node_of(graph, s)) {
            Some(to) => {
                let back = backtrack(path, &to);
                // The correction may settle the revisited step again: move on from it.
                let steps: Vec<String> = answer.steps.iter().map_while(|s| node_of(graph, s)).collect();
                match (&back.decision, &back.path) {
                    (JourneyDecision::Backtracked { .. }, Some(p)) if !steps.is_empty() => {
                        let forward = advance(graph, p, &steps, false, max_steps);
                        match forward.decision {
                            JourneyDecision::Completed => forward,
                            _ => PathChange {
                                decision: back.decision,
                                path: forward.path.or(back.path),
                                correction: forward.correction,
                            },
                        }
                    }
                    _ => back,
                }
            }
            None => PathChange {
                decision: JourneyDecision::Stayed,
                path: Some(path.clone()),
                correction: Some("backtrack without a known step; stayed".into()),
            },
        },
    }
}

/// Where a journey that moved into a tool step rests instead when the tool cannot run for want
/// of something only the customer can give: the question the step before offered as the other
/// way into that tool step (a start that goes to the lookup when the customer named a city and
/// to "ask which city" when not). `path` with its tool step replaced by that question; `None`
/// when the journey does not stand at a tool step or no such question exists.
pub fn question_before_tool(graph: &JourneyGraph, path: &JourneyPath) -> Option<JourneyPath> {
    let states = path.states();
    let tool = graph.node(path.current()).filter(|n| n.kind == NodeKind::Tool)?;
    let before = graph.node(states.get(states.len().checked_sub(2)?)?)?;
    let question = before
        .edges
        .iter()
        .filter_map(|e| graph.node(&e.to))
        .find(|q| q.id != tool.id && q.is_customer_dependent() && q.edges.iter().any(|e| e.to == tool.id))?;
    let mut steps = states[..states.len() - 1].to_vec();
    steps.push(question.id.clone());
    JourneyPath::from_states(steps)
}

/// The match of the current node of `path`: chat and tool nodes only (the root, forks and
/// the end have nothing to do).
pub fn node_match(graph: &JourneyGraph, path: &JourneyPath, rationale: &str) -> Option<GuidelineMatch> {
    let current = path.current();
    let node = graph.node(current)?;
    if !matches!(node.kind, NodeKind::Chat | NodeKind::Tool) {
        return None;
    }
    let states = path.states();
    let edge = states.len().checked_sub(2).and_then(|i| states.get(i)).and_then(|prev| graph.edge(prev, current));
    Some(GuidelineMatch {
        guideline_id: edge.map_or_else(|| node.guideline_id.clone(), |e| e.guideline_id.clone()),
        kind: MatchKind::JourneyNode { journey: graph.id.clone(), node: current.to_string() },
        condition: edge.and_then(|e| e.condition.clone()).unwrap_or_default(),
        action: node.action.clone().or_else(|| {
            (node.kind == NodeKind::Tool).then(|| {
                let tools: Vec<String> = node.tools.iter().map(ToString::to_string).collect();
                format!("Call {}", tools.join(", "))
            })
        }),
        tools: node.tools.clone(),
        score: 10,
        rationale: rationale.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use guidepost_core::definition::{SourceFile, load_agent};

    use super::*;
    use crate::catalog::CompiledAgent;

    const FLOW: &str = r#"
agent: { name: Otto }
journeys:
  - id: taxi
    title: Taxi
    conditions: [The customer wants a taxi]
    start: pickup
    states:
      - { id: pickup, chat: Ask for the pickup, next: [{ to: dropoff, when: Pickup given }] }
      - { id: dropoff, chat: Ask for the destination, next: [{ to: time, when: Destination given }] }
      - { id: time, chat: Ask for the time, next: [{ to: end, when: Time given }] }
"#;

    fn graph() -> JourneyGraph {
        let def = load_agent(&[SourceFile::new("a.yaml", FLOW)]).definition.unwrap();
        let agent = CompiledAgent::new(Arc::new(def));
        agent.journey("taxi").unwrap().clone()
    }

    fn answer(decision: StepDecision, steps: &[&str], to: Option<&str>) -> JourneySelectionAnswer {
        JourneySelectionAnswer {
            rationale: "r".into(),
            exits: Default::default(),
            decision,
            steps: steps.iter().map(|s| s.to_string()).collect(),
            backtrack_to: to.map(String::from),
        }
    }

    fn path(states: &[&str]) -> JourneyPath {
        JourneyPath::from_states(states.iter().map(|s| s.to_string()).collect()).unwrap()
    }

    #[test]
    fn answers_map_onto_the_path_algebra() {
        let g = graph();
        let at_time = path(&["initial", "pickup", "dropoff", "time"]);
        // step numbers are breadth-first positions: 0 initial, 1 pickup, 2 dropoff, 3 time, 4 end
        let exit = apply_answer(&g, &at_time, false, &answer(StepDecision::Exit, &[], None), 4);
        assert_eq!((exit.decision, exit.path), (JourneyDecision::Exited, None));
        let back = apply_answer(&g, &at_time, false, &answer(StepDecision::Backtrack, &[], Some("1")), 4);
        assert_eq!(back.decision, JourneyDecision::Backtracked { to: "pickup".into() });
        assert_eq!(back.path, Some(path(&["initial", "pickup"])));
        let back_and_on = apply_answer(&g, &at_time, false, &answer(StepDecision::Backtrack, &["2"], Some("1")), 4);
        assert_eq!(back_and_on.decision, JourneyDecision::Backtracked { to: "pickup".into() });
        assert_eq!(back_and_on.path, Some(path(&["initial", "pickup", "dropoff"])));
        let done = apply_answer(&g, &at_time, false, &answer(StepDecision::Advance, &["4"], None), 4);
        assert_eq!(done.decision, JourneyDecision::Completed);
    }

    #[test]
    fn a_consequential_step_is_entered_only_from_the_question_that_was_asked() {
        const BOOKING: &str = r#"
agent: { name: Rita }
journeys:
  - id: taxi
    title: Taxi
    conditions: [The customer wants a taxi]
    start: time
    states:
      - { id: time, chat: Ask for the pickup time, next: [{ to: confirm, when: Time given }] }
      - { id: confirm, chat: Repeat the details and ask the customer to confirm, next: [{ to: book, when: Confirmed }] }
      - { id: book, tool: book_taxi, next: done }
      - { id: done, chat: Tell the booking number, next: end }
tools:
  - { name: book_taxi, consequential: true, fixture: { cases: [{ args: {}, result: { id: 1 } }] } }
"#;
        let def = load_agent(&[SourceFile::new("a.yaml", BOOKING)]).definition.unwrap();
        let g = CompiledAgent::new(Arc::new(def)).journey("taxi").unwrap().clone();
        assert!(g.node("book").unwrap().consequential);
        assert!(!g.node("confirm").unwrap().consequential);
        // The time given and a confirmation read into it: the move stops at the question.
        let at_time = path(&["initial", "time"]);
        let skipped = advance(&g, &at_time, &["confirm".into(), "book".into()], false, 4);
        assert_eq!(skipped.decision, JourneyDecision::Advanced { steps: vec!["confirm".into()] });
        assert!(skipped.correction.unwrap().contains("`book` is consequential"));
        // Asked to confirm, the customer confirms: the booking goes ahead.
        let at_confirm = path(&["initial", "time", "confirm"]);
        let booked = advance(&g, &at_confirm, &["book".into()], false, 4);
        assert_eq!(booked.decision, JourneyDecision::Advanced { steps: vec!["book".into()] });
        assert_eq!(booked.correction, None);
    }

    #[test]
    fn invalid_answers_are_corrected() {
        let g = graph();
        let at_dropoff = path(&["initial", "pickup", "dropoff"]);
        let unvisited = apply_answer(&g, &at_dropoff, false, &answer(StepDecision::Backtrack, &[], Some("3")), 4);
        assert_eq!(unvisited.decision, JourneyDecision::Stayed);
        assert!(unvisited.correction.is_some());
        let unknown = apply_answer(&g, &at_dropoff, false, &answer(StepDecision::Advance, &["99"], None), 4);
        assert_eq!(unknown.decision, JourneyDecision::Stayed);
        assert!(unknown.correction.is_some());
        let too_far = advance(&g, &JourneyPath::start(), &["pickup".into(), "dropoff".into(), "time".into()], true, 2);
        assert_eq!(too_far.decision, JourneyDecision::Started { steps: vec!["pickup".into(), "dropoff".into()] });
        assert!(too_far.correction.unwrap().contains("at most 2"));
        let not_started = apply_answer(&g, &JourneyPath::start(), true, &answer(StepDecision::Exit, &[], None), 4);
        assert_eq!((not_started.decision, not_started.path), (JourneyDecision::NotStarted, None));
        // A small model restating the current step, then listing every step: the current
        // step is skipped, and the move keeps its valid prefix.
        let restated = apply_answer(
            &g,
            &JourneyPath::start(),
            true,
            &answer(StepDecision::Advance, &["0", "1", "3", "2"], None),
            4,
        );
        assert_eq!(restated.decision, JourneyDecision::Started { steps: vec!["pickup".into()] });
        assert_eq!(restated.path, Some(path(&["initial", "pickup"])));
        // ... or the whole path so far before the step it enters.
        let at_dropoff = path(&["initial", "pickup", "dropoff"]);
        let replayed =
            apply_answer(&g, &at_dropoff, false, &answer(StepDecision::Advance, &["0", "1", "2", "3"], None), 4);
        assert_eq!(replayed.decision, JourneyDecision::Advanced { steps: vec!["time".into()] });
        // A restatement with nothing new is no move.
        let nothing = apply_answer(&g, &at_dropoff, false, &answer(StepDecision::Advance, &["0", "1", "2"], None), 4);
        assert_eq!(nothing.decision, JourneyDecision::Stayed);
    }

    #[test]
    fn a_closing_question_after_a_step_that_tells_is_asked_with_it() {
        const STATUS: &str = r#"
agent: { name: Otto }
journeys:
  - id: status
    title: Order status
    conditions: [The customer asks where their order is]
    start: lookup
    states:
      - { id: lookup, tool: check_order, next: report }
      - { id: report, chat: Tell the customer the order's status, next: wrap }
      - { id: wrap, chat: Ask the customer if there is anything else you can help with, next: end }
tools:
  - { name: check_order, description: Status of an order }
"#;
        let def = load_agent(&[SourceFile::new("s.yaml", STATUS)]).definition.unwrap();
        let g = CompiledAgent::new(Arc::new(def)).journey("status").unwrap().clone();
        assert_eq!(g.closing_question_after("report"), Some("wrap"));
        assert_eq!(g.closing_question_after("wrap"), None, "a question is no step that tells");
        let at_tool = path(&["initial", "lookup"]);
        // The status is told and the closing question asked in the same reply: the journey
        // rests at the question, so "No, that's all" answers it and ends the journey.
        let change = advance(&g, &at_tool, &["report".into()], false, 4);
        assert_eq!(change.decision, JourneyDecision::Advanced { steps: vec!["report".into(), "wrap".into()] });
        assert_eq!(change.correction, None);
        let listed = advance(&g, &at_tool, &["report".into(), "wrap".into()], false, 4);
        assert_eq!(listed.decision, change.decision, "listed on by the model, the same move");
        let at_wrap = change.path.unwrap();
        assert_eq!(advance(&g, &at_wrap, &["end".into()], false, 4).decision, JourneyDecision::Completed);
        // Not a closing question: one the customer's answer routes, or one that leads on to
        // more steps. The step that tells is rested on as before.
        let weather = weather();
        assert_eq!(weather.closing_question_after("show"), None, "`show` leads to the end itself");
        let mut routed = g.clone();
        routed.nodes.get_mut("wrap").unwrap().edges[0].condition = Some("The customer needs nothing else".into());
        assert_eq!(routed.closing_question_after("report"), None);
        let change = advance(&routed, &at_tool, &["report".into()], false, 4);
        assert_eq!(change.decision, JourneyDecision::Advanced { steps: vec!["report".into()] });
    }

    #[test]
    fn node_match_uses_the_entering_edge() {
        let g = graph();
        let m = node_match(&g, &path(&["initial", "pickup", "dropoff"]), "why").unwrap();
        assert!(m.guideline_id.starts_with("journey_node:taxi.dropoff:"));
        assert_eq!(m.condition, "Pickup given");
        assert!(node_match(&g, &JourneyPath::start(), "why").is_none());
    }

    const WEATHER: &str = r#"
agent: { name: Sky }
journeys:
  - id: weather
    title: Weather
    conditions: [The customer wants the weather]
    start:
      - { to: lookup, when: The customer named a city }
      - { to: ask_city, when: The customer named no city }
    states:
      - { id: ask_city, chat: Ask which city, next: lookup }
      - { id: lookup, tool: get_weather, next: [{ to: show, when: Found }, { to: sorry, when: Not found }] }
      - { id: show, chat: Tell the weather, next: end }
      - { id: sorry, chat: Say the city is not supported, next: end }
tools:
  - { name: get_weather, description: Weather of a city }
"#;

    fn weather() -> JourneyGraph {
        let def = load_agent(&[SourceFile::new("w.yaml", WEATHER)]).definition.unwrap();
        CompiledAgent::new(Arc::new(def)).journey("weather").unwrap().clone()
    }

    fn judged(mut a: JourneySelectionAnswer, exits: &[(&str, bool)]) -> JourneySelectionAnswer {
        a.exits = exits.iter().map(|(to, holds)| (format!("[{to}] some condition"), *holds)).collect();
        a
    }

    #[test]
    fn a_move_is_held_to_the_models_own_verdicts_on_the_current_steps_transitions() {
        let g = weather();
        let start = JourneyPath::start();
        let (lookup, ask) = (local_id(&g, "lookup"), local_id(&g, "ask_city"));
        // "I'd like the weather": the model judges "named no city" to hold yet moves to the tool.
        let a = judged(answer(StepDecision::Advance, &[&lookup], None), &[(&lookup, false), (&ask, true)]);
        let change = apply_answer(&g, &start, true, &a, 4);
        assert_eq!(change.decision, JourneyDecision::Started { steps: vec!["ask_city".into()] });
        assert!(change.correction.unwrap().contains("judged to hold"));
        // A consistent move is kept as it is, restated start included.
        let a = judged(answer(StepDecision::Advance, &["0", &ask], None), &[(&lookup, false), (&ask, true)]);
        let change = apply_answer(&g, &start, true, &a, 4);
        assert_eq!(
            (change.decision, change.correction),
            (JourneyDecision::Started { steps: vec!["ask_city".into()] }, None)
        );
        // A starting journey cannot backtrack: the backtrack is read as the move the verdicts allow.
        let a = judged(answer(StepDecision::Backtrack, &["0", &ask], Some(&lookup)), &[(&lookup, true), (&ask, false)]);
        let change = apply_answer(&g, &start, true, &a, 4);
        assert_eq!(change.decision, JourneyDecision::Started { steps: vec!["lookup".into()] });
        // "Stay" at the start of an activated journey takes the one transition judged to hold.
        let a = judged(answer(StepDecision::Stay, &["0"], None), &[(&lookup, false), (&ask, true)]);
        let change = apply_answer(&g, &start, true, &a, 4);
        assert_eq!(change.decision, JourneyDecision::Started { steps: vec!["ask_city".into()] });
        // After the tool ran, a "backtrack" to the current step (no correction at all) or a
        // "stay" follows the one exit judged to hold.
        let at_tool = path(&["initial", "lookup"]);
        let (show, sorry) = (local_id(&g, "show"), local_id(&g, "sorry"));
        for wrong in [answer(StepDecision::Backtrack, &[&lookup], Some(&lookup)), answer(StepDecision::Stay, &[], None)]
        {
            let change = apply_answer(&g, &at_tool, false, &judged(wrong, &[(&show, false), (&sorry, true)]), 4);
            assert_eq!(change.decision, JourneyDecision::Advanced { steps: vec!["sorry".into()] });
        }
        // A stay with no exit judged to hold stays.
        let a = judged(answer(StepDecision::Stay, &[], None), &[(&show, false), (&sorry, false)]);
        assert_eq!(apply_answer(&g, &at_tool, false, &a, 4).decision, JourneyDecision::Stayed);
        // A real backtrack (a correction) is kept whatever the verdicts say.
        let at_show = path(&["initial", "ask_city", "lookup", "show"]);
        let back = judged(answer(StepDecision::Backtrack, &[], Some(&ask)), &[]);
        let change = apply_answer(&g, &at_show, false, &back, 4);
        assert_eq!(change.decision, JourneyDecision::Backtracked { to: "ask_city".into() });
        // "Exit" while the transition to the end is judged to hold completes the journey.
        let at_sorry = path(&["initial", "lookup", "sorry"]);
        let end = local_id(&g, "end");
        let a = judged(answer(StepDecision::Exit, &[], None), &[(&end, true)]);
        let mut conditional = weather();
        conditional.nodes.get_mut("sorry").unwrap().edges[0].condition = Some("The customer is done".into());
        assert_eq!(apply_answer(&conditional, &at_sorry, false, &a, 4).decision, JourneyDecision::Completed);
        assert_eq!(
            apply_answer(&conditional, &at_sorry, false, &judged(a.clone(), &[(&end, false)]), 4).decision,
            JourneyDecision::Exited
        );
        // So does "exit" at a last step whose one way on is the unconditional one to the end
        // (the booking told, nothing left), judged or not; not where that way is a condition
        // nobody judged to hold.
        let unjudged = answer(StepDecision::Exit, &[], None);
        assert_eq!(apply_answer(&weather(), &at_sorry, false, &unjudged, 4).decision, JourneyDecision::Completed);
        assert_eq!(apply_answer(&conditional, &at_sorry, false, &unjudged, 4).decision, JourneyDecision::Exited);
        let mut tool_last = weather();
        let to_end = tool_last.nodes["show"].edges.clone();
        tool_last.nodes.get_mut("lookup").unwrap().edges = to_end;
        assert_eq!(
            apply_answer(&tool_last, &path(&["initial", "lookup"]), false, &unjudged, 4).decision,
            JourneyDecision::Exited,
            "a tool step waiting to run is left, not completed"
        );
        assert_eq!(
            apply_answer(&weather(), &path(&["initial", "lookup"]), false, &unjudged, 4).decision,
            JourneyDecision::Exited,
            "a step with a way on other than the end is left, not completed"
        );
        // A step that only says something is rested on: the chat step after it waits for the
        // next turn.
        let mut chained = weather();
        chained.nodes.get_mut("show").unwrap().edges[0].to = "sorry".into();
        let change = apply_answer(&chained, &at_tool, false, &answer(StepDecision::Advance, &[&show], None), 4);
        assert_eq!(change.decision, JourneyDecision::Advanced { steps: vec!["show".into()] });
        let sorry_id = local_id(&chained, "sorry");
        let listed = answer(StepDecision::Advance, &[&show, &sorry_id], None);
        let change = apply_answer(&chained, &at_tool, false, &listed, 4);
        assert_eq!(change.decision, JourneyDecision::Advanced { steps: vec!["show".into()] }, "even when listed on");
        assert!(change.correction.unwrap().contains("tells the customer something"));
        // No transition holds: the tool step stays put.
        let at_tool = path(&["initial", "lookup"]);
        let a = judged(
            answer(StepDecision::Advance, &["3"], None),
            &[(&local_id(&g, "show"), false), (&local_id(&g, "sorry"), false)],
        );
        let change = apply_answer(&g, &at_tool, false, &a, 4);
        assert_eq!(change.decision, JourneyDecision::Stayed);
        assert!(change.correction.unwrap().contains("no transition"));
        // Without verdicts (older answers, scripted models) the move is taken as given.
        let change = apply_answer(&g, &start, true, &answer(StepDecision::Advance, &[&lookup], None), 4);
        assert_eq!(change.decision, JourneyDecision::Started { steps: vec!["lookup".into()] });
    }

    #[test]
    fn the_answer_schema_asks_for_a_verdict_on_every_conditional_exit_first() {
        use crate::batches::journey_selection::{JourneyView, answer_schema};
        let g = weather();
        let schema = answer_schema(&JourneyView::build(&g, &JourneyPath::start()));
        let properties = schema["properties"].as_object().unwrap();
        assert_eq!(properties.keys().next().map(String::as_str), Some("exits"));
        let exits = &properties["exits"];
        let keys: Vec<&str> = exits["required"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
        let (lookup, ask) = (local_id(&g, "lookup"), local_id(&g, "ask_city"));
        assert_eq!(
            keys,
            [format!("[{lookup}] The customer named a city"), format!("[{ask}] The customer named no city")]
        );
        assert_eq!(exits["additionalProperties"], false);
        assert!(schema["required"].as_array().unwrap().iter().any(|k| k == "exits"));
        assert_eq!(key_number(keys[1]), Some(ask.as_str()));
        assert_eq!(key_number("no bracket"), None);
        // A step without conditional exits asks for an empty object.
        let at_show = path(&["initial", "lookup", "show"]);
        let schema = answer_schema(&JourneyView::build(&g, &at_show));
        assert_eq!(schema["properties"]["exits"]["required"], serde_json::json!([]));
    }

    #[test]
    fn a_tool_step_that_cannot_run_gives_way_to_the_question_that_leads_into_it() {
        let g = weather();
        let at_lookup = path(&["initial", "lookup"]);
        let asked = question_before_tool(&g, &at_lookup).unwrap();
        assert_eq!(asked.states(), ["initial", "ask_city"]);
        let m = node_match(&g, &asked, "why").unwrap();
        assert_eq!(m.guideline_id, g.edge("initial", "ask_city").unwrap().guideline_id);
        assert!(m.tools.is_empty());
        // Entered from the question itself: nothing else asks for what the tool needs.
        assert!(question_before_tool(&g, &path(&["initial", "ask_city", "lookup"])).is_none());
        // Not at a tool step.
        assert!(question_before_tool(&g, &path(&["initial", "ask_city"])).is_none());
        assert!(question_before_tool(&g, &JourneyPath::start()).is_none());
    }
}
