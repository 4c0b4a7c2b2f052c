//! Canned-response candidates: which approved templates apply now, rendered with their
//! fields.

use guidepost_core::AgentDefinition;
use serde_json::{Map, Value, json};

use crate::state::ResponseState;

/// A template that can be sent now, rendered.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Template id.
    pub id: String,
    /// The rendered text.
    pub text: String,
}

/// Fields available to templates: `std.*` (customer, agent, variables, missing and
/// invalid parameters) and every field tool results provided (`canned_response_fields`,
/// later calls winning).
pub fn fields(definition: &AgentDefinition, state: &ResponseState, customer_name: Option<&str>) -> Value {
    let mut out = Map::new();
    // A tool's data fields are available to templates; fields the tool declared
    // explicitly (`canned_response_fields`) take precedence.
    for call in state.tool_calls.iter().filter(|c| c.ok) {
        if let Some(Value::Object(data)) = call.result.get("data") {
            out.extend(data.clone());
        }
    }
    for call in &state.tool_calls {
        if let Some(Value::Object(f)) = call.result.get("canned_response_fields") {
            out.extend(f.clone());
        }
    }
    let (missing, invalid) = state.tool_insights.most_pressing();
    out.insert(
        "std".into(),
        json!({
            "customer": {"name": customer_name},
            "agent": {"name": definition.agent.name},
            "variables": state.context_variables,
            "missing_params": missing.iter().map(|m| m.display_name.clone()).collect::<Vec<_>>(),
            "invalid_params": invalid.iter().map(|m| m.display_name.clone()).collect::<Vec<_>>(),
        }),
    );
    Value::Object(out)
}

/// Templates that apply now: those tied to matched guidelines or to the journey states of the
/// reply, global ones (tied to no guideline or state, and untagged or sharing a tag with the
/// agent), and templates returned by tools. A template whose fields are not all available is
/// left out.
pub fn candidates(definition: &AgentDefinition, state: &ResponseState, fields: &Value) -> Vec<Candidate> {
    let tied: std::collections::HashSet<&str> = definition
        .guidelines
        .iter()
        .flat_map(|g| g.canned_responses.iter())
        .chain(definition.journeys.iter().flat_map(|j| j.states.iter().flat_map(|s| s.canned_responses.iter())))
        .map(String::as_str)
        .collect();
    let mut ids: Vec<String> = definition
        .canned_responses
        .iter()
        .filter(|c| !tied.contains(c.id.as_str()))
        .filter(|c| c.tags.is_empty() || c.tags.iter().any(|t| definition.agent.tags.contains(t)))
        .map(|c| c.id.clone())
        .collect();
    for m in state.all_matches() {
        if let Some(g) = definition.guideline(&m.guideline_id) {
            ids.extend(g.canned_responses.iter().cloned());
        }
    }
    for (journey, node) in super::turn_states(definition, state) {
        if let Some(s) = definition.journey(&journey).and_then(|j| j.state(&node)) {
            ids.extend(s.canned_responses.iter().cloned());
        }
    }
    let env = guidepost_core::templates::canned_environment();
    let ctx = minijinja::Value::from(minijinja::value::Serde(fields));
    let mut out: Vec<Candidate> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for id in ids {
        if !seen.insert(id.clone()) {
            continue;
        }
        let Some(c) = definition.canned_responses.iter().find(|c| c.id == id) else { continue };
        if c.field_dependencies.iter().any(|f| fields.get(f).is_none()) {
            continue;
        }
        match env.render_str(&c.template, ctx.clone()) {
            Ok(text) => out.push(Candidate { id, text }),
            // A field the turn does not have is the normal reason to leave a template out;
            // anything else (a filter failing on a value) is worth a warning.
            Err(err) if err.kind() == minijinja::ErrorKind::UndefinedError => {
                tracing::debug!(template = %id, error = %err, "canned response left out: a field is not available")
            }
            Err(err) => tracing::warn!(template = %id, error = %err, "canned response left out: it failed to render"),
        }
    }
    for (n, call) in state.tool_calls.iter().enumerate() {
        if let Some(Value::Array(templates)) = call.result.get("canned_responses") {
            for (k, t) in templates.iter().filter_map(Value::as_str).enumerate() {
                if let Ok(text) = env.render_str(t, ctx.clone()) {
                    out.push(Candidate { id: format!("tool{n}_{k}"), text });
                }
            }
        }
    }
    out
}
