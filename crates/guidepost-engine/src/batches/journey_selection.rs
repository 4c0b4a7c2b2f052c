//! Journey node selection: one call decides stay, advance (possibly several steps),
//! backtrack (to which visited step) or exit, with a rationale.

use std::collections::BTreeMap;

use guidepost_core::JourneyPath;
use guidepost_core::projection::NodeKind;
use guidepost_llm::{ChatModel, TaskKind, TokenDecision, label_odds, schema_name_for, strict_schema_for};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CallOutcome, boolean_keys_schema, call_weighed};
use crate::error::BatchError;
use crate::journeys::graph::JourneyGraph;
use crate::prompt::{ConversationView, RenderedPrompt, render};

/// What the model decided for a journey.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepDecision {
    /// The current step is not done.
    Stay,
    /// Move forward through `steps`.
    Advance,
    /// Go back to the visited step `backtrack_to`.
    Backtrack,
    /// The customer left the journey (or, when starting, it does not apply).
    Exit,
}

/// The answer of a journey selection call.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JourneySelectionAnswer {
    /// A verdict per conditional transition out of the current step, keyed `[<step
    /// number>] <condition>`, judged before the decision: small models judge one condition far
    /// more reliably than they pick a branch, and the move is held to these verdicts. The
    /// call's schema lists the keys, so a constrained model judges every one.
    #[serde(default)]
    pub exits: BTreeMap<String, bool>,
    /// Why, in one or two sentences.
    pub rationale: String,
    /// The decision.
    pub decision: StepDecision,
    /// Step numbers entered, in order (advance only).
    pub steps: Vec<String>,
    /// The visited step to go back to (backtrack only).
    pub backtrack_to: Option<String>,
}

/// A transition as the prompt shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TransitionView {
    /// Target step number.
    pub to: String,
    /// Condition, if any.
    pub condition: Option<String>,
}

/// A step as the prompt shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepView {
    /// Step number (0 is the start).
    pub id: String,
    /// `start`, `chat`, `tool`, `fork` or `end`.
    pub kind: String,
    /// Whether the step waits for the customer's answer.
    pub waits: bool,
    /// Whether the step was visited.
    pub visited: bool,
    /// Whether this is the current step.
    pub current: bool,
    /// What happens at the step.
    pub action: String,
    /// Outgoing transitions.
    pub transitions: Vec<TransitionView>,
}

/// The journey part of the prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JourneyView {
    /// Title.
    pub title: String,
    /// Description.
    pub description: Option<String>,
    /// Activation conditions.
    pub conditions: Vec<String>,
    /// Steps, numbered in breadth-first order.
    pub steps: Vec<StepView>,
    /// Current step number.
    pub current: String,
    /// Visited step numbers, in order.
    pub visited: Vec<String>,
    /// The conditional transitions out of the current step, to be judged one by one.
    pub exits: Vec<TransitionView>,
}

/// The step number of node `id` (its breadth-first position).
pub fn local_id(graph: &JourneyGraph, id: &str) -> String {
    graph.nodes.get_index_of(id).map_or_else(|| id.to_string(), |i| i.to_string())
}

/// The node of step number `local`.
pub fn node_of(graph: &JourneyGraph, local: &str) -> Option<String> {
    let local = local.trim().trim_start_matches('[').trim_end_matches(']');
    let index: usize = local.parse().ok()?;
    graph.nodes.get_index(index).map(|(k, _)| k.clone())
}

impl JourneyView {
    /// The view of `graph` with the session at `path`.
    pub fn build(graph: &JourneyGraph, path: &JourneyPath) -> Self {
        let steps = graph
            .nodes
            .values()
            .map(|n| {
                let tools: Vec<String> = n.tools.iter().map(ToString::to_string).collect();
                let action = match n.kind {
                    NodeKind::End => "the journey ends".to_string(),
                    NodeKind::Fork if n.id == guidepost_core::journey::START_STATE => "start".to_string(),
                    NodeKind::Fork => "route only".to_string(),
                    NodeKind::Tool => {
                        let base = format!("call {}", tools.join(", "));
                        n.action.as_ref().map_or(base.clone(), |a| format!("{base} ({a})"))
                    }
                    NodeKind::Chat => n.action.clone().unwrap_or_default(),
                };
                StepView {
                    id: local_id(graph, &n.id),
                    kind: if n.id == guidepost_core::journey::START_STATE {
                        "start".into()
                    } else {
                        n.kind.as_str().into()
                    },
                    waits: n.is_customer_dependent(),
                    visited: path.visited(&n.id),
                    current: path.current() == n.id,
                    action,
                    transitions: n
                        .edges
                        .iter()
                        .map(|e| TransitionView { to: local_id(graph, &e.to), condition: e.condition.clone() })
                        .collect(),
                }
            })
            .collect();
        let exits = graph
            .node(path.current())
            .map(|n| {
                n.edges
                    .iter()
                    .filter(|e| e.condition.is_some())
                    .map(|e| TransitionView { to: local_id(graph, &e.to), condition: e.condition.clone() })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            title: graph.title.clone(),
            description: graph.description.clone(),
            conditions: graph.conditions.clone(),
            exits,
            steps,
            current: local_id(graph, path.current()),
            visited: path.states().iter().map(|s| local_id(graph, s)).collect(),
        }
    }
}

#[derive(Serialize)]
struct SelectionContext<'a> {
    conversation: &'a ConversationView,
    journey: JourneyView,
}

/// Renders the selection prompt for `graph` at `path`.
pub fn render_prompt(
    graph: &JourneyGraph,
    path: &JourneyPath,
    conversation: &ConversationView,
) -> Result<RenderedPrompt, BatchError> {
    render_view(JourneyView::build(graph, path), conversation)
}

fn render_view(journey: JourneyView, conversation: &ConversationView) -> Result<RenderedPrompt, BatchError> {
    render("journey_selection.j2", &SelectionContext { conversation, journey })
}

/// The key of a conditional transition in the answer's `exits`.
pub fn exit_key(transition: &TransitionView) -> String {
    format!("[{}] {}", transition.to, transition.condition.as_deref().unwrap_or_default())
}

/// The answer schema of one selection call: `exits` comes first and lists exactly the
/// current step's conditional transitions as required boolean fields.
pub fn answer_schema(journey: &JourneyView) -> serde_json::Value {
    let mut schema = strict_schema_for::<JourneySelectionAnswer>();
    let exits = boolean_keys_schema(&journey.exits.iter().map(exit_key).collect::<Vec<_>>());
    if let Some(props) = schema.get_mut("properties").and_then(serde_json::Value::as_object_mut) {
        let mut ordered = serde_json::Map::new();
        ordered.insert("exits".into(), exits);
        for (k, v) in props.iter().filter(|(k, _)| k.as_str() != "exits") {
            ordered.insert(k.clone(), v.clone());
        }
        *props = ordered;
    }
    schema
}

/// Asks the model where the journey stands. Where the model reports how likely its answers
/// were, an exit into a consequential step (a booking, a payment) that it judged to hold with
/// a probability short of `threshold` is taken as not holding, as the one-at-a-time question
/// about that exit would be; the answer comes with a note for each exit so held. Other exits
/// stand as the model answered: the whole-journey look is asked where the one-at-a-time
/// questions could not settle the move.
pub async fn evaluate(
    model: &dyn ChatModel,
    graph: &JourneyGraph,
    path: &JourneyPath,
    conversation: &ConversationView,
    temperature: f32,
    threshold: f32,
) -> CallOutcome<(JourneySelectionAnswer, Vec<String>)> {
    let journey = JourneyView::build(graph, path);
    let keys: Vec<(String, bool)> = journey
        .exits
        .iter()
        .map(|t| (exit_key(t), node_of(graph, &t.to).and_then(|n| graph.node(&n)).is_some_and(|n| n.consequential)))
        .collect();
    let schema = (schema_name_for::<JourneySelectionAnswer>(), answer_schema(&journey));
    let prompt = render_view(journey, conversation);
    let outcome = call_weighed(model, TaskKind::JourneySelection, prompt, temperature, schema).await;
    CallOutcome {
        answer: outcome.answer.map(|(mut answer, decisions)| {
            let notes = hold_exits_to_threshold(&mut answer, &keys, &decisions, threshold);
            (answer, notes)
        }),
        usage: outcome.usage,
        estimated_tokens: outcome.estimated_tokens,
    }
}

/// Holds the `exits` of `answer` into consequential steps to `threshold`: the answer's schema
/// puts `exits` first, its keys in the order of `keys` (each with whether it leads into a
/// consequential step), so the model's first choices between `true` and `false` are its
/// verdicts on them, in that order. Such an exit judged to hold with a probability short of
/// the threshold is set to not holding. Returns a note per exit so held; nothing changes
/// without token probabilities (hosted models).
fn hold_exits_to_threshold(
    answer: &mut JourneySelectionAnswer,
    keys: &[(String, bool)],
    decisions: &[TokenDecision],
    threshold: f32,
) -> Vec<String> {
    // A boolean's place offers both words; a key's text never does, even where it holds one.
    let offers = |d: &TokenDecision, word: &str| d.options.iter().any(|o| o.token.trim() == word);
    let odds = decisions
        .iter()
        .filter(|d| offers(d, "true") && offers(d, "false"))
        .filter_map(|d| label_odds(std::slice::from_ref(d), &["true", "false"]).map(|p| p[0]));
    let mut notes = Vec::new();
    for ((key, consequential), p) in keys.iter().zip(odds) {
        if let Some(holds) = answer.exits.get_mut(key)
            && *consequential
            && *holds
            && p < threshold
        {
            *holds = false;
            notes
                .push(format!("exit {key}: judged to hold at p {p:.2}, short of {threshold:.2}: taken as not holding"));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use guidepost_llm::TokenOption;

    use super::*;

    fn choice(offset: usize, options: &[(&str, f32)]) -> TokenDecision {
        let options = options.iter().map(|(t, p)| TokenOption { token: t.to_string(), probability: *p }).collect();
        TokenDecision { offset, options }
    }

    #[test]
    fn an_exit_into_a_consequential_step_judged_to_hold_short_of_the_threshold_does_not_hold() {
        let keys = [
            ("[5] The customer confirms the details".to_string(), true),
            ("[6] The customer cancels".to_string(), false),
        ];
        let answer = |confirms: bool, cancels: bool| JourneySelectionAnswer {
            exits: BTreeMap::from([(keys[0].0.clone(), confirms), (keys[1].0.clone(), cancels)]),
            rationale: "r".into(),
            decision: StepDecision::Advance,
            steps: vec!["5".into()],
            backtrack_to: None,
        };
        // Keys are written without a choice; the verdicts are the first true/false choices,
        // in the schema's order; the free text after them does not count.
        let decisions = [
            choice(2, &[("\"[", 0.9), ("\"", 0.1)]),
            choice(40, &[("true", 0.57), ("false", 0.43)]),
            choice(80, &[("false", 0.78), ("true", 0.22)]),
            choice(90, &[(" true", 0.2), (" the", 0.8)]),
        ];
        // A key whose text holds one of the words offers only that word there.
        let mut with_key_word = decisions.to_vec();
        with_key_word.insert(1, choice(20, &[(" false", 0.9), (" f", 0.1)]));
        let mut held = answer(true, false);
        let notes = hold_exits_to_threshold(&mut held, &keys, &decisions, 0.7);
        assert_eq!(held.exits, answer(false, false).exits);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("p 0.57, short of 0.70"), "{notes:?}");
        let mut held_again = answer(true, false);
        assert_eq!(hold_exits_to_threshold(&mut held_again, &keys, &with_key_word, 0.7), notes);
        // A sure verdict stands, and so does every verdict without probabilities.
        let sure = [choice(40, &[("true", 0.93), ("false", 0.07)]), choice(80, &[("false", 0.9), ("true", 0.1)])];
        let mut kept = answer(true, false);
        assert!(hold_exits_to_threshold(&mut kept, &keys, &sure, 0.7).is_empty());
        assert_eq!(kept.exits, answer(true, false).exits);
        let mut unweighed = answer(true, true);
        assert!(hold_exits_to_threshold(&mut unweighed, &keys, &[], 0.7).is_empty());
        assert_eq!(unweighed.exits, answer(true, true).exits);
        // An exit that books nothing stands as the model answered it.
        let unsure = [choice(40, &[("false", 0.9), ("true", 0.1)]), choice(80, &[("true", 0.55), ("false", 0.45)])];
        let mut ordinary = answer(false, true);
        assert!(hold_exits_to_threshold(&mut ordinary, &keys, &unsure, 0.7).is_empty());
        assert_eq!(ordinary.exits, answer(false, true).exits);
    }
}
