//! Tool-call inference: which tools to call, with which arguments, decided from the
//! conversation.
//!
//! Tools that overlap (an `overlap` relationship, or `overlap: always`) are decided
//! together in one structured call; every other tool in its own. A tool with no
//! parameters the customer must give, that is not consequential, runs without any model
//! call. Arguments are validated against the tool's parameters before anything runs:
//! what is missing or invalid becomes an insight, so the agent asks the customer for it.

use std::collections::{BTreeSet, HashMap};

use guidepost_core::relationship::{Endpoint, RelationshipKind};
use guidepost_core::tool::{Overlap, ParameterSource, ParameterType, Tool, ToolParameter};
use guidepost_core::{AgentDefinition, ToolId};
use guidepost_engine::GuidelineMatch;
use guidepost_llm::{ChatModel, ChatRequest, OutputFormat, TaskKind, Usage};
use guidepost_tools::registry::ToolCallRequest;
use guidepost_tools::result::ProblemKind;
use guidepost_tools::validate::validate_arguments;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::prompt::render;
use crate::state::{ParameterInsight, StagedCall, ToolDecision, ToolInsights};
use crate::trace::InferenceTrace;

const TEMPLATE: &str = include_str!("prompts/tool_calls.j2");

/// What inference needs to know.
pub struct InferenceInput<'a> {
    /// The agent.
    pub definition: &'a AgentDefinition,
    /// Tool-enabled matches not yet handled in this turn.
    pub matches: &'a [GuidelineMatch],
    /// The tools, as resolved by the registry (dynamic services included).
    pub tools: &'a HashMap<ToolId, Tool>,
    /// The whole conversation as (speaker, text): the customer's own words.
    pub history: &'a [(String, String)],
    /// The part of it the prompt shows (see [`crate::history`]).
    pub shown: &'a [(String, String)],
    /// What stands in the prompt for the messages before `shown`.
    pub earlier: Option<&'a str>,
    /// Calls already made in this turn.
    pub staged: &'a [StagedCall],
    /// Context variable values.
    pub variables: &'a indexmap::IndexMap<String, Value>,
}

/// What inference decided.
#[derive(Debug, Default)]
pub struct Inference {
    /// Calls to make now.
    pub calls: Vec<ToolCallRequest>,
    /// Decisions and missing or invalid arguments.
    pub insights: ToolInsights,
    /// One entry per batch.
    pub traces: Vec<InferenceTrace>,
    /// Model usage.
    pub usage: Vec<Usage>,
}

#[derive(Debug, Deserialize)]
struct Answer {
    tools: Vec<ToolAnswer>,
}

#[derive(Debug, Deserialize)]
struct ToolAnswer {
    tool: String,
    #[serde(default)]
    rationale: String,
    decision: String,
    #[serde(default)]
    calls: Vec<CallAnswer>,
}

#[derive(Debug, Deserialize)]
struct CallAnswer {
    #[serde(default)]
    arguments: Map<String, Value>,
}

/// Groups tools into batches decided together.
fn batches(definition: &AgentDefinition, tools: &[Tool]) -> Vec<Vec<Tool>> {
    let ids: BTreeSet<&ToolId> = tools.iter().map(|t| &t.id).collect();
    let related = |a: &ToolId, b: &ToolId| {
        definition.relationships.iter().any(|r| {
            r.kind == RelationshipKind::Overlap
                && matches!((&r.source, &r.target), (Endpoint::Tool(x), Endpoint::Tool(y)) if (x == a && y == b) || (x == b && y == a))
        })
    };
    let mut out: Vec<Vec<Tool>> = Vec::new();
    let always: Vec<Tool> = tools.iter().filter(|t| t.overlap == Overlap::Always).cloned().collect();
    let mut assigned: BTreeSet<ToolId> = always.iter().map(|t| t.id.clone()).collect();
    for tool in tools.iter().filter(|t| t.overlap == Overlap::Auto) {
        if assigned.contains(&tool.id) {
            continue;
        }
        // Breadth-first over overlap relationships among the candidates.
        let mut group = vec![tool.clone()];
        assigned.insert(tool.id.clone());
        let mut i = 0;
        while i < group.len() {
            let current = group[i].id.clone();
            for other in tools.iter().filter(|t| t.overlap == Overlap::Auto && ids.contains(&t.id)) {
                if !assigned.contains(&other.id) && related(&current, &other.id) {
                    assigned.insert(other.id.clone());
                    group.push(other.clone());
                }
            }
            i += 1;
        }
        out.push(group);
    }
    for tool in tools.iter().filter(|t| t.overlap == Overlap::None) {
        out.push(vec![tool.clone()]);
    }
    if !always.is_empty() {
        out.push(always);
    }
    out
}

fn needs_customer_input(tool: &Tool) -> bool {
    tool.parameters.iter().any(|p| p.required && !p.hidden && p.default.is_none())
}

fn json_type(p: &ToolParameter) -> Value {
    if !p.allowed.is_empty() {
        let mut values = p.allowed.clone();
        values.push(Value::Null);
        return json!({"enum": values});
    }
    let base = |t: ParameterType| match t {
        ParameterType::Integer => "integer",
        ParameterType::Number => "number",
        ParameterType::Boolean => "boolean",
        ParameterType::Array => "array",
        _ => "string",
    };
    match p.kind {
        ParameterType::Array => {
            json!({"type": ["array", "null"], "items": {"type": base(p.items.unwrap_or_default())}})
        }
        other => json!({"type": [base(other), "null"]}),
    }
}

/// The answer schema for a batch: per tool a rationale, a decision and calls whose
/// arguments are the tools' parameters (all present, `null` when not given).
fn schema(tools: &[Tool]) -> Value {
    let mut properties = Map::new();
    for tool in tools {
        for p in tool.parameters.iter().filter(|p| !p.hidden) {
            properties.entry(p.name.clone()).or_insert_with(|| json_type(p));
        }
    }
    let required: Vec<&String> = properties.keys().collect();
    let names: Vec<&str> = tools.iter().map(|t| t.id.name.as_str()).collect();
    json!({
        "type": "object",
        "properties": {
            "tools": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "tool": {"type": "string", "enum": names},
                        "rationale": {"type": "string"},
                        "decision": {"type": "string", "enum": ["needs_to_run", "data_already_in_context", "cannot_run"]},
                        "calls": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {"arguments": {"type": "object", "properties": properties, "required": required, "additionalProperties": false}},
                                "required": ["arguments"],
                                "additionalProperties": false
                            }
                        }
                    },
                    "required": ["tool", "rationale", "decision", "calls"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["tools"],
        "additionalProperties": false
    })
}

fn insight(tool: &Tool, p: &ToolParameter, invalid_value: Option<Value>, problem: Option<String>) -> ParameterInsight {
    ParameterInsight {
        tool: tool.id.clone(),
        parameter: p.name.clone(),
        display_name: p.display_name.clone().unwrap_or_else(|| p.name.replace('_', " ")),
        description: p.description.clone(),
        significance: p.significance.clone(),
        choices: p.allowed.clone(),
        examples: p.examples.clone(),
        invalid_value,
        problem,
        precedence: p.precedence.unwrap_or(i32::MAX),
    }
}

fn already_staged(staged: &[StagedCall], tool: &ToolId, args: &Map<String, Value>) -> bool {
    // Staged calls keep their arguments scrubbed of secrets: compare like with like.
    let mut scrubbed = args.clone();
    scrubbed.values_mut().for_each(crate::runtime::scrub_json);
    staged.iter().any(|c| &c.tool == tool && c.arguments == scrubbed)
}

/// Whether `value` appears in what the customer wrote (case and spacing aside).
fn said_by_customer(value: &Value, history: &[(String, String)]) -> bool {
    let normalize = |t: &str| t.to_lowercase().split_whitespace().collect::<String>();
    let wanted = normalize(&value.as_str().map_or_else(|| value.to_string(), str::to_string));
    !wanted.is_empty() && history.iter().any(|(who, text)| who == "customer" && normalize(text).contains(&wanted))
}

/// The customer-only arguments of an answer that the customer did not write
/// (`location = "北京"`).
fn foreign_values(batch: &[Tool], response: &guidepost_llm::ChatResponse, history: &[(String, String)]) -> Vec<String> {
    let Some(answer) = response.output.as_json().and_then(|v| serde_json::from_value::<Answer>(v.clone()).ok()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in answer.tools.iter().filter(|e| e.decision == "needs_to_run") {
        let Some(tool) = batch.iter().find(|t| t.id.name == entry.tool) else { continue };
        for call in &entry.calls {
            for p in tool.parameters.iter().filter(|p| p.source == ParameterSource::Customer) {
                if let Some(value) = call.arguments.get(&p.name).filter(|v| !v.is_null())
                    && !said_by_customer(value, history)
                {
                    out.push(format!("{} = {value}", p.name));
                }
            }
        }
    }
    out
}

/// Whether a proposed argument stands for "no value": JSON null, or a string a model writes
/// for it (`"null"`, `"None"`, `"N/A"`, empty). Taken as given, such a string would run a
/// tool with a made-up argument instead of asking the customer.
fn is_no_value(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => {
            let s = s.trim().to_ascii_lowercase();
            matches!(s.as_str(), "" | "null" | "none" | "nil" | "n/a" | "unknown" | "undefined")
        }
        _ => false,
    }
}

/// Turns one call the model proposed into a call to make, or into insights.
fn admit(tool: &Tool, proposed: Map<String, Value>, input: &InferenceInput<'_>, out: &mut Inference) -> ToolDecision {
    let args: Map<String, Value> =
        proposed.into_iter().filter(|(k, v)| !is_no_value(v) && tool.parameters.iter().any(|p| &p.name == k)).collect();
    let validated = match validate_arguments(tool, &args) {
        Ok(v) => v,
        Err(problems) => {
            for problem in problems.iter().filter(|p| !p.hidden) {
                let Some(param) = tool.parameters.iter().find(|p| p.name == problem.parameter) else { continue };
                match problem.problem {
                    ProblemKind::Missing => out.insights.missing.push(insight(tool, param, None, None)),
                    ProblemKind::Invalid | ProblemKind::Unknown => out.insights.invalid.push(insight(
                        tool,
                        param,
                        problem.value.clone(),
                        Some(problem.message.clone()),
                    )),
                }
            }
            return ToolDecision::CannotRun;
        }
    };
    if already_staged(input.staged, &tool.id, &validated) {
        return ToolDecision::DataAlreadyInContext;
    }
    // A value that must come from the customer has to be in the customer's own words;
    // otherwise the model supplied it, and the agent asks instead.
    for p in tool.parameters.iter().filter(|p| p.source == ParameterSource::Customer) {
        if let Some(value) = validated.get(&p.name)
            && !said_by_customer(value, input.history)
        {
            out.insights.missing.push(insight(tool, p, None, Some("must come from the customer".into())));
            return ToolDecision::CannotRun;
        }
    }
    out.calls.push(ToolCallRequest::new(tool.id.clone(), validated));
    ToolDecision::NeedsToRun
}

/// Decides the calls for the tool-enabled matches of one iteration.
pub async fn infer(model: &dyn ChatModel, input: InferenceInput<'_>) -> Inference {
    let mut out = Inference::default();
    let mut wanted: Vec<Tool> = Vec::new();
    for m in input.matches {
        for id in &m.tools {
            if wanted.iter().any(|t| &t.id == id) {
                continue;
            }
            match input.tools.get(id).or_else(|| input.definition.tool(id)) {
                Some(tool) => wanted.push(tool.clone()),
                None => out.insights.decisions.push((id.clone(), ToolDecision::CannotRun)),
            }
        }
    }
    for batch in batches(input.definition, &wanted) {
        let [single] = batch.as_slice() else {
            decide_with_model(model, &batch, &input, &mut out).await;
            continue;
        };
        if !single.consequential && !needs_customer_input(single) {
            // Nothing to infer: run it with its defaults, unless it already ran.
            let decision = admit(single, Map::new(), &input, &mut out);
            out.insights.decisions.push((single.id.clone(), decision));
            out.traces.push(InferenceTrace {
                tools: vec![single.id.to_string()],
                model_call: false,
                rationale: None,
                prompt_tokens: 0,
                failed: false,
            });
            continue;
        }
        decide_with_model(model, &batch, &input, &mut out).await;
    }
    out
}

async fn decide_with_model(model: &dyn ChatModel, batch: &[Tool], input: &InferenceInput<'_>, out: &mut Inference) {
    let tools_view: Vec<Value> = batch
        .iter()
        .map(|t| {
            json!({
                "name": t.id.name,
                "description": t.description,
                "consequential": t.consequential,
                "parameters": t.parameters.iter().filter(|p| !p.hidden).map(|p| json!({
                    "name": p.name,
                    "kind": serde_json::to_value(p.kind).unwrap_or(Value::Null),
                    "required": p.required && p.default.is_none(),
                    "description": p.description,
                    "source": serde_json::to_value(p.source).unwrap_or(Value::Null),
                    "allowed": p.allowed.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let guidelines: Vec<Value> = input
        .matches
        .iter()
        .filter(|m| m.tools.iter().any(|id| batch.iter().any(|t| &t.id == id)))
        .map(|m| json!({"condition": m.condition, "action": m.action}))
        .collect();
    let staged: Vec<Value> = input.staged.iter().map(|c| json!({"tool": c.tool.name, "arguments": Value::Object(c.arguments.clone()).to_string(), "result": c.result.get("data").cloned().unwrap_or(Value::Null).to_string()})).collect();
    let history: Vec<Value> = input.shown.iter().map(|(s, t)| json!({"speaker": s, "text": t})).collect();
    let mut context = json!({
            "agent_name": input.definition.agent.name,
            "agent_description": input.definition.agent.description,
            "tools": tools_view,
            "guidelines": guidelines,
            "variables": crate::prompt::display_values(input.variables),
            "staged": staged,
            "history": history,
            "earlier": input.earlier,
            "last_customer": crate::prompt::last_customer(input.history),
    });
    let names: Vec<String> = batch.iter().map(|t| t.id.to_string()).collect();
    let mut asked_again = false;
    let response = loop {
        let prompt = match render("tool_calls.j2", TEMPLATE, context.clone()) {
            Ok(prompt) => prompt,
            Err(err) => break Err(err),
        };
        let request = ChatRequest::new(TaskKind::ToolInference)
            .user(prompt)
            .output(OutputFormat::Json { name: "tool_calls".into(), schema: schema(batch), strict: true })
            .temperature(0.0);
        let response = match model.complete(request).await {
            Ok(r) => r,
            Err(err) => break Err(err),
        };
        // A value for a parameter that only the customer can give, which the customer did
        // not write (a translation, a guess), is asked for once more with the reason.
        let foreign = if asked_again { Vec::new() } else { foreign_values(batch, &response, input.history) };
        if foreign.is_empty() {
            break Ok(response);
        }
        out.usage.push(response.usage.clone());
        context["retry_note"] = json!(format!(
            "Your previous answer gave {}, which the customer did not write. A parameter marked \"from the customer only\" takes the customer's own words exactly as written, never a translation or a guess; leave it null if the customer did not give it.",
            foreign.join(", ")
        ));
        asked_again = true;
    };
    let response = match response {
        Ok(r) => r,
        Err(err) => {
            let err = guidepost_llm::secrets::scrub(&err.to_string());
            tracing::warn!(tools = ?names, error = %err, "tool-call inference failed; the tools do not run this turn");
            for t in batch {
                out.insights.decisions.push((t.id.clone(), ToolDecision::CannotRun));
            }
            out.traces.push(InferenceTrace {
                tools: names,
                model_call: true,
                rationale: Some(format!("inference failed: {err}")),
                prompt_tokens: 0,
                failed: true,
            });
            return;
        }
    };
    let prompt_tokens = response.usage.prompt_tokens;
    out.usage.push(response.usage.clone());
    let answer: Option<Answer> = response.output.as_json().and_then(|v| serde_json::from_value(v.clone()).ok());
    let Some(answer) = answer else {
        for t in batch {
            out.insights.decisions.push((t.id.clone(), ToolDecision::CannotRun));
        }
        out.traces.push(InferenceTrace {
            tools: names,
            model_call: true,
            rationale: Some("the answer did not fit the schema".into()),
            prompt_tokens,
            failed: true,
        });
        return;
    };
    let mut rationales = Vec::new();
    for tool in batch {
        let entries: Vec<&ToolAnswer> = answer.tools.iter().filter(|a| a.tool == tool.id.name).collect();
        let decision = entries
            .iter()
            .map(|e| e.decision.as_str())
            .find(|d| *d == "needs_to_run")
            .or_else(|| entries.first().map(|e| e.decision.as_str()));
        rationales.extend(entries.iter().map(|e| format!("{}: {}", tool.id.name, e.rationale)));
        let decided = match decision {
            Some("needs_to_run") => {
                let mut calls: Vec<Map<String, Value>> =
                    entries.iter().flat_map(|e| e.calls.iter().map(|c| c.arguments.clone())).collect();
                if calls.is_empty() {
                    calls.push(Map::new());
                }
                let mut result = ToolDecision::CannotRun;
                for args in calls {
                    let d = admit(tool, args, input, out);
                    if d == ToolDecision::NeedsToRun || result == ToolDecision::CannotRun {
                        result = d;
                    }
                }
                result
            }
            Some("data_already_in_context") => ToolDecision::DataAlreadyInContext,
            _ => ToolDecision::CannotRun,
        };
        out.insights.decisions.push((tool.id.clone(), decided));
    }
    out.traces.push(InferenceTrace {
        tools: names,
        model_call: true,
        rationale: Some(rationales.join(" | ")),
        prompt_tokens,
        failed: false,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use guidepost_core::tool::{Fixture, FixtureOutcome};

    fn tool(name: &str, params: Vec<ToolParameter>, overlap: Overlap) -> Tool {
        Tool {
            id: ToolId::new("fixtures", name),
            description: None,
            parameters: params,
            consequential: false,
            overlap,
            fixture: Some(Fixture { cases: vec![], otherwise: Some(FixtureOutcome::Result(json!(1))) }),
        }
    }

    #[test]
    fn strings_that_stand_for_no_value_are_no_value() {
        for v in [json!(null), json!("null"), json!(" None "), json!("N/A"), json!("")] {
            assert!(is_no_value(&v), "{v}");
        }
        for v in [json!("48213"), json!(0), json!(false), json!("Nonesuch Street")] {
            assert!(!is_no_value(&v), "{v}");
        }
    }

    #[test]
    fn schema_lists_every_parameter_as_nullable() {
        let p = guidepost_tools::native::parameter("city", ParameterType::String);
        let s = schema(&[tool("weather", vec![p], Overlap::Auto)]);
        assert_eq!(
            s["properties"]["tools"]["items"]["properties"]["calls"]["items"]["properties"]["arguments"]["properties"]
                ["city"]["type"],
            json!(["string", "null"])
        );
        assert_eq!(s["properties"]["tools"]["items"]["properties"]["tool"]["enum"], json!(["weather"]));
    }

    #[test]
    fn customer_values_must_be_in_the_customers_words() {
        let history = vec![
            ("customer".to_string(), "Pick me up at 12 Oak  Avenue".to_string()),
            ("agent".to_string(), "Main Street?".to_string()),
        ];
        assert!(said_by_customer(&json!("12 oak avenue"), &history));
        assert!(!said_by_customer(&json!("Main Street"), &history), "the agent's words do not count");
        assert!(!said_by_customer(&json!("Elm Road"), &history));
        assert!(said_by_customer(&json!(12), &history));
        assert!(!said_by_customer(&json!(""), &history));
    }

    #[test]
    fn tools_without_overlap_are_decided_alone() {
        let def = guidepost_core::builder::AgentBuilder::new("A").build().unwrap_or_else(|e| panic!("{e}"));
        let tools =
            vec![tool("a", vec![], Overlap::Auto), tool("b", vec![], Overlap::None), tool("c", vec![], Overlap::Auto)];
        let groups: Vec<Vec<String>> =
            batches(&def, &tools).iter().map(|g| g.iter().map(|t| t.id.name.clone()).collect()).collect();
        assert_eq!(groups, vec![vec!["a".to_string()], vec!["c".to_string()], vec!["b".to_string()]]);
    }
}
