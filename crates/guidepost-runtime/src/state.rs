//! [`ResponseState`]: what a turn gathers across preparation iterations before the reply
//! is composed.

use guidepost_core::{AgentDefinition, Capability, JourneyPath, Term, ToolId};
use guidepost_engine::record::JourneyDecision;
use guidepost_engine::{GuidelineMatch, MatchKind, MatchingOutcome};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a tool-enabled match was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ToolDecision {
    /// The tool must run.
    NeedsToRun,
    /// What the tool would return is already known in this conversation.
    DataAlreadyInContext,
    /// The tool cannot run (missing or invalid arguments, or it does not fit).
    CannotRun,
}

/// An argument the customer must still give (or give again) before a tool can run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParameterInsight {
    /// The tool.
    pub tool: ToolId,
    /// Parameter name.
    pub parameter: String,
    /// Name to use with the customer.
    pub display_name: String,
    /// What it is.
    pub description: Option<String>,
    /// Why it matters.
    pub significance: Option<String>,
    /// Allowed values, when restricted.
    pub choices: Vec<Value>,
    /// Example values.
    pub examples: Vec<Value>,
    /// The rejected value, for invalid arguments.
    pub invalid_value: Option<Value>,
    /// Why it was rejected.
    pub problem: Option<String>,
    /// Lower asks first.
    pub precedence: i32,
}

/// What the tool stage learned besides results: decisions and what is missing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolInsights {
    /// Decision per tool considered.
    pub decisions: Vec<(ToolId, ToolDecision)>,
    /// Required arguments nobody gave.
    pub missing: Vec<ParameterInsight>,
    /// Arguments that were given but do not fit.
    pub invalid: Vec<ParameterInsight>,
}

impl ToolInsights {
    /// Keeps only the parameters with the lowest precedence, so the agent asks for the
    /// most important thing first.
    pub fn most_pressing(&self) -> (Vec<&ParameterInsight>, Vec<&ParameterInsight>) {
        let min = self.missing.iter().chain(&self.invalid).map(|p| p.precedence).min();
        let keep = |p: &&ParameterInsight| Some(p.precedence) == min;
        (self.missing.iter().filter(keep).collect(), self.invalid.iter().filter(keep).collect())
    }
}

/// A journey that rests at a question instead of the tool step it moved into (see
/// [`ResponseState::ask_before_tools`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskedInstead {
    /// The journey.
    pub journey: String,
    /// The tool step it had moved into.
    pub tool_step: String,
    /// The question it rests at.
    pub question: String,
    /// Why, for the trace.
    pub note: String,
}

/// One tool call of this turn and its result, as the model and the session see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagedCall {
    /// The tool.
    pub tool: ToolId,
    /// Arguments it ran with.
    pub arguments: serde_json::Map<String, Value>,
    /// `{data, metadata, control, canned_responses, canned_response_fields, guidelines}`.
    pub result: Value,
    /// Whether it succeeded.
    pub ok: bool,
    /// How long it took.
    pub duration_ms: u64,
    /// Its id, which is also the idempotency key it was sent with (the same in every
    /// attempt of the turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Whether it was sent in this attempt of the turn, reused from an earlier one, sent
    /// again, or left unconfirmed (see [`crate::journal::CallSource`]).
    #[serde(default, skip_serializing_if = "crate::journal::CallSource::is_sent")]
    pub source: crate::journal::CallSource,
}

/// Everything a turn gathers across iterations. Hooks read and change it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ResponseState {
    /// Context variable values by name.
    pub context_variables: IndexMap<String, Value>,
    /// Glossary terms relevant to the conversation.
    pub glossary_terms: Vec<Term>,
    /// Capabilities relevant to the conversation, offered when they help.
    pub capabilities: Vec<Capability>,
    /// Iterations completed.
    pub iterations: u32,
    /// Matches without tools: what the reply must follow.
    pub ordinary_matches: Vec<GuidelineMatch>,
    /// Matches with tools.
    pub tool_enabled_matches: Vec<GuidelineMatch>,
    /// Active journeys and where each stands.
    pub journey_paths: IndexMap<String, JourneyPath>,
    /// Transitions ahead of each journey the customer already answered (see
    /// [`guidepost_core::AgentState::journey_answers`]).
    #[serde(default)]
    pub journey_answers: IndexMap<String, Vec<String>>,
    /// Where the journeys stood when the turn began (to tell which steps this turn entered).
    pub previous_journey_paths: IndexMap<String, JourneyPath>,
    /// Tool calls made so far in this turn.
    pub tool_calls: Vec<StagedCall>,
    /// What the tool stage learned.
    pub tool_insights: ToolInsights,
    /// Whether preparation is done.
    pub prepared_to_respond: bool,
    /// The last matching outcome.
    #[serde(skip)]
    pub matching: Option<MatchingOutcome>,
    /// The states each journey entered in this turn, in order, across iterations (a state
    /// the journey loops back to counts again).
    #[serde(default)]
    pub entered: IndexMap<String, Vec<String>>,
}

impl ResponseState {
    /// Takes in a matching outcome.
    pub fn absorb(&mut self, outcome: &MatchingOutcome) {
        self.ordinary_matches = outcome.ordinary().cloned().collect();
        self.tool_enabled_matches = outcome.tool_enabled().cloned().collect();
        self.journey_paths = outcome.journey_paths.clone();
        self.journey_answers = outcome.journey_answers.clone();
        for record in &outcome.record.journeys {
            let steps: Vec<String> = match &record.decision {
                JourneyDecision::Started { steps } | JourneyDecision::Advanced { steps } => steps.clone(),
                JourneyDecision::Backtracked { to } => vec![to.clone()],
                _ => continue,
            };
            self.entered.entry(record.journey_id.clone()).or_default().extend(steps);
        }
        self.matching = Some(outcome.clone());
    }

    /// Every match, ordinary and tool-enabled.
    pub fn all_matches(&self) -> impl Iterator<Item = &GuidelineMatch> {
        self.ordinary_matches.iter().chain(&self.tool_enabled_matches)
    }

    /// The journey states this reply carries out, as (journey, state): every state each
    /// active journey entered this turn (it may pass several, e.g. a question the customer had
    /// already answered and the step that tells a tool's result), or its current state when it
    /// stayed. A question the journey passed
    /// on the way (the customer had already answered it, so the journey went on) is not
    /// carried out again: only the state where the journey rests asks.
    pub fn reply_states(&self, definition: &AgentDefinition) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (id, path) in &self.journey_paths {
            let mut steps = self.entered_states(id);
            if steps.is_empty() {
                steps.push(path.current().to_string());
            }
            let rest = steps.len() - 1;
            let journey = definition.journey(id);
            for (i, step) in steps.into_iter().enumerate() {
                let asks = || match journey.and_then(|j| j.state(&step)).map(|s| &s.kind) {
                    Some(guidepost_core::StateKind::Chat { action }) => {
                        guidepost_engine::categorize::asks_customer(action)
                    }
                    _ => false,
                };
                if i < rest && asks() {
                    continue;
                }
                out.push((id.clone(), step));
            }
        }
        out
    }

    /// The questions the journeys wait on after this turn: the action of each active
    /// journey's current state when it asks the customer something ("Ask for the
    /// destination"). The reply has to ask them, or the customer has nothing to answer.
    pub fn open_questions(&self, definition: &AgentDefinition) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (id, path) in &self.journey_paths {
            if let Some(guidepost_core::StateKind::Chat { action }) =
                definition.journey(id).and_then(|j| j.state(path.current())).map(|s| &s.kind)
                && guidepost_engine::categorize::asks_customer(action)
                && !out.contains(action)
            {
                out.push(action.clone());
            }
        }
        out
    }

    /// Journeys that moved into a tool step this turn whose tool could not run for want of an
    /// argument nobody gave rest instead at the question that leads into that step, where
    /// the step before offered one ([`guidepost_engine::journeys::paths::question_before_tool`]):
    /// the reply asks for what is missing either way, and the next turn reads the answer
    /// as the answer to that question. The tool step's match gives way to the question's.
    /// The journeys moved.
    pub fn ask_before_tools(&mut self, agent: &guidepost_engine::CompiledAgent) -> Vec<AskedInstead> {
        let mut moved = Vec::new();
        let journeys: Vec<String> = self.journey_paths.keys().cloned().collect();
        for journey in journeys {
            let (Some(graph), Some(path)) = (agent.journey(&journey), self.journey_paths.get(&journey)) else {
                continue;
            };
            let at = path.current().to_string();
            let Some(node) = graph.node(&at) else { continue };
            let entered_now = self.entered_states(&journey).contains(&at);
            let ran = self.tool_calls.iter().any(|c| node.tools.contains(&c.tool));
            let wanting: Vec<&str> = self
                .tool_insights
                .missing
                .iter()
                .filter(|m| node.tools.contains(&m.tool))
                .map(|m| m.parameter.as_str())
                .collect();
            if !entered_now || ran || wanting.is_empty() {
                continue;
            }
            let Some(asked) = guidepost_engine::journeys::paths::question_before_tool(graph, path) else { continue };
            let question = asked.current().to_string();
            let note =
                format!("rested at `{question}` instead of `{at}`: its tool cannot run without {}", wanting.join(", "));
            self.tool_enabled_matches.retain(
                |m| !matches!(&m.kind, MatchKind::JourneyNode { journey: j, node } if *j == journey && *node == at),
            );
            if let Some(m) = guidepost_engine::journeys::paths::node_match(graph, &asked, &note) {
                self.ordinary_matches.push(m);
            }
            if let Some(entered) = self.entered.get_mut(&journey) {
                entered.retain(|s| *s != at);
                entered.push(question.clone());
            }
            self.journey_paths.insert(journey.clone(), asked);
            moved.push(AskedInstead { journey, tool_step: at, question, note });
        }
        moved
    }

    /// The states of `journey` this turn entered, in order: the path beyond the part it
    /// shares with where the journey stood when the turn began (all of it for a journey
    /// that started now). Empty when the journey stayed where it was.
    pub fn entered_states(&self, journey: &str) -> Vec<String> {
        let Some(path) = self.journey_paths.get(journey) else { return Vec::new() };
        // The engine's own record of the moves: it sees a loop back to a state visited in
        // an earlier turn, which a comparison of paths cannot.
        if let Some(entered) = self.entered.get(journey).filter(|e| !e.is_empty()) {
            let mut seen = std::collections::HashSet::new();
            return entered.iter().filter(|s| seen.insert(s.as_str())).cloned().collect();
        }
        let before = self.previous_journey_paths.get(journey);
        let shared = before.map_or(1, |b| b.states().iter().zip(path.states()).take_while(|(a, b)| a == b).count());
        if before.is_some_and(|b| b == path) {
            return Vec::new();
        }
        path.states().iter().skip(shared).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(name: &str) -> AgentDefinition {
        let path = format!("{}/../../examples/agents/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        guidepost_core::definition::load_agent(&[guidepost_core::definition::SourceFile::new(path, text)])
            .definition
            .unwrap()
    }

    fn moved(journey: &str, path: &[&str], entered: &[&str]) -> ResponseState {
        let mut state = ResponseState::default();
        let states: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        state.journey_paths.insert(journey.into(), JourneyPath::from_states(states).unwrap());
        state.entered.insert(journey.into(), entered.iter().map(|s| s.to_string()).collect());
        state
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(j, s)| (j.to_string(), s.to_string())).collect()
    }

    #[test]
    fn questions_answered_on_the_way_are_not_asked_again() {
        let taxi = example("taxi");
        let state = moved(
            "book_taxi",
            &["initial", "pickup", "dropoff", "time", "confirm"],
            &["pickup", "dropoff", "time", "confirm"],
        );
        assert_eq!(state.reply_states(&taxi), pairs(&[("book_taxi", "confirm")]));
    }

    #[test]
    fn what_the_agent_tells_on_the_way_is_still_said() {
        let weather = example("weather");
        let state = moved(
            "weather_lookup",
            &["initial", "get_weather", "show_result", "ask_continue"],
            &["show_result", "ask_continue"],
        );
        assert_eq!(
            state.reply_states(&weather),
            pairs(&[("weather_lookup", "show_result"), ("weather_lookup", "ask_continue")])
        );
    }
}
