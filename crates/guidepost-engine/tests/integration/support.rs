//! Shared helpers: loading definitions, reading prompts the way a model would, and
//! building scripted answers from rules.

use std::sync::Arc;

use guidepost_core::EventSource;
use guidepost_core::definition::{SourceFile, load_agent};
use guidepost_core::{AgentDefinition, AgentState, JourneyPath};
use guidepost_engine::context::events::message;
use guidepost_engine::{CompiledAgent, GuidelineMatcher, MatcherConfig, MatchingContext, MatchingOutcome};
use guidepost_llm::providers::scripted::ScriptedModel;
use guidepost_llm::{ChatRequest, Embedder};
use serde_json::{Value, json};

/// Loads an example agent from `examples/agents`.
pub fn example(name: &str) -> AgentDefinition {
    let path = format!("{}/../../examples/agents/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    inline(&text)
}

/// Loads an inline YAML definition.
pub fn inline(yaml: &str) -> AgentDefinition {
    let loaded = load_agent(&[SourceFile::new("agent.yaml", yaml)]);
    loaded.definition.unwrap_or_else(|| panic!("definition does not load: {:?}", loaded.diagnostics))
}

/// A matcher over `definition` with `model` and no embedder.
pub fn matcher(definition: AgentDefinition, model: Arc<ScriptedModel>) -> GuidelineMatcher {
    matcher_with(definition, model, None, MatcherConfig::default())
}

/// A matcher with every part given.
pub fn matcher_with(
    definition: AgentDefinition,
    model: Arc<dyn guidepost_llm::ChatModel>,
    embedder: Option<Arc<dyn Embedder>>,
    config: MatcherConfig,
) -> GuidelineMatcher {
    GuidelineMatcher::new(Arc::new(CompiledAgent::new(Arc::new(definition))), model, embedder, config)
}

/// A session driven turn by turn, keeping events and agent state as the runtime would.
pub struct Session {
    pub events: Vec<guidepost_core::Event>,
    pub state: AgentState,
}

impl Session {
    pub fn new() -> Self {
        Self { events: Vec::new(), state: AgentState::default() }
    }

    /// Adds a customer message and returns the context for matching it.
    pub fn customer(&mut self, text: &str) -> MatchingContext {
        let offset = self.events.len() as u64;
        self.events.push(message(EventSource::Customer, offset, text));
        MatchingContext::new(self.events.clone(), self.state.clone())
    }

    /// Ends the turn: records the agent's reply and the new state (matched guidelines
    /// with actions count as applied).
    pub fn reply(&mut self, outcome: &MatchingOutcome, text: &str) {
        let offset = self.events.len() as u64;
        self.events.push(message(EventSource::AiAgent, offset, text));
        for m in outcome.matches.iter().filter(|m| m.action.is_some()) {
            if !self.state.applied_guideline_ids.contains(&m.guideline_id) {
                self.state.applied_guideline_ids.push(m.guideline_id.clone());
            }
        }
        self.state.journey_paths = outcome.journey_paths.clone();
        self.state.journey_answers = outcome.journey_answers.clone();
    }
}

/// The path of `journey` as a list of states.
pub fn path_of(outcome: &MatchingOutcome, journey: &str) -> Option<Vec<String>> {
    outcome.journey_paths.get(journey).map(|p: &JourneyPath| p.states().to_vec())
}

pub fn states(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The user part of a request (the per-turn part of the prompt).
pub fn user(req: &ChatRequest) -> &str {
    req.last_user_message()
}

/// The last customer message shown in the prompt's conversation.
pub fn last_customer(req: &ChatRequest) -> String {
    let text = user(req);
    let conversation = text.split("## Conversation").nth(1).unwrap_or("");
    let conversation = conversation.split("\n## ").next().unwrap_or("");
    conversation.lines().rev().find_map(|l| l.strip_prefix("customer: ")).unwrap_or("").to_string()
}

/// The tool results section of the prompt.
pub fn tool_results(req: &ChatRequest) -> String {
    user(req).split("## Tool results of this turn").nth(1).unwrap_or("").to_string()
}

/// Numbered items `[n] text` after `section` (text is the rest of the line, with a
/// leading `when: ` removed).
pub fn items(req: &ChatRequest, section: &str) -> Vec<(String, String)> {
    let text = user(req);
    let Some(part) = text.split(section).nth(1) else { return Vec::new() };
    part.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l.strip_prefix('[')?;
            let (id, text) = rest.split_once("] ")?;
            id.parse::<usize>().ok()?;
            Some((id.to_string(), text.trim_start_matches("when: ").to_string()))
        })
        .collect()
}

/// A check answer: `decide(condition, last customer message)` for every listed item.
pub fn checks(req: &ChatRequest, section: &str, decide: impl Fn(&str, &str) -> bool) -> Value {
    let last = last_customer(req);
    let checks: Vec<Value> = items(req, section)
        .into_iter()
        .map(|(id, cond)| {
            let applies = decide(&cond, &last);
            json!({"id": id, "rationale": format!("scripted: {applies}"), "applies": applies})
        })
        .collect();
    json!({ "checks": checks })
}

/// The step number of the step whose line contains `needle`.
pub fn step(req: &ChatRequest, needle: &str) -> String {
    let text = user(req);
    let steps = text.split("## Steps").nth(1).unwrap_or("");
    for line in steps.lines() {
        if let Some(rest) = line.strip_prefix('[')
            && let Some((id, body)) = rest.split_once(']')
            && body.contains(needle)
        {
            return id.to_string();
        }
    }
    panic!("no step containing `{needle}` in prompt:\n{text}")
}

/// The current step line of a journey selection prompt.
pub fn current_step(req: &ChatRequest) -> String {
    let text = user(req);
    text.lines().find(|l| l.contains("[CURRENT]")).unwrap_or("").to_string()
}

pub fn advance(steps: Vec<String>, why: &str) -> Value {
    json!({"rationale": why, "decision": "advance", "steps": steps, "backtrack_to": null})
}

pub fn stay(why: &str) -> Value {
    json!({"rationale": why, "decision": "stay", "steps": [], "backtrack_to": null})
}

pub fn backtrack(to: String, why: &str) -> Value {
    json!({"rationale": why, "decision": "backtrack", "steps": [], "backtrack_to": to})
}

/// A previously-applied answer that re-applies nothing.
pub fn reapply_none(req: &ChatRequest) -> Value {
    let checks: Vec<Value> = items(req, "## Guidelines already followed")
        .into_iter()
        .map(|(id, _)| json!({"id": id, "rationale": "already done", "condition_holds_again": false, "customer_completed": false, "should_apply": false}))
        .collect();
    json!({ "checks": checks })
}
