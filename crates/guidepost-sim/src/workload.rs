//! The performance workload (`bench/agents/{small,medium,large}.json`: agents and the
//! customer messages of one conversation) as agent definitions, for `guidepost bench`,
//! `guidepost load` and the engine's benchmarks.

use guidepost_core::AgentDefinition;
use guidepost_core::definition::{Severity, SourceFile, load_agent};
use serde_json::{Value, json};

/// Converts the workload's JSON into a definition file: journeys with chat and tool
/// states, tools served by fixtures that always answer, guidelines as given.
pub fn convert(bench: &Value) -> Value {
    let target = |to: &str| if to.eq_ignore_ascii_case("end") { "end".to_string() } else { to.to_string() };
    let next_of = |transitions: &[&Value]| -> Value {
        match transitions {
            [t] if t.get("condition").is_none() => json!(target(t["to"].as_str().unwrap_or("end"))),
            many => Value::Array(
                many.iter()
                    .map(|t| match t.get("condition") {
                        Some(c) => json!({"to": target(t["to"].as_str().unwrap_or("end")), "when": c}),
                        None => json!({"to": target(t["to"].as_str().unwrap_or("end"))}),
                    })
                    .collect(),
            ),
        }
    };
    let journeys: Vec<Value> = bench["journeys"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|j| {
            let transitions: Vec<&Value> = j["transitions"].as_array().into_iter().flatten().collect();
            let from = |state: &str| -> Vec<&Value> { transitions.iter().copied().filter(|t| t["from"] == state).collect() };
            let states: Vec<Value> = j["states"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| {
                    let id = s["id"].as_str().unwrap_or("state");
                    let mut state = json!({"id": id, "next": next_of(&from(id))});
                    if s["kind"] == "tool" {
                        state["tool"] = s["tool"].clone();
                    } else {
                        state["chat"] = s["text"].clone();
                    }
                    state
                })
                .collect();
            json!({"id": j["id"], "title": j["title"], "description": j["description"], "conditions": j["conditions"], "start": next_of(&from("initial")), "states": states})
        })
        .collect();
    let tools: Vec<Value> = bench["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let params: serde_json::Map<String, Value> =
                t["params"].as_object().into_iter().flatten().map(|(name, _)| (name.clone(), json!("string"))).collect();
            json!({"name": t["name"], "description": t["description"], "parameters": params, "fixture": {"otherwise": {"result": {"status": "shipped", "eta_days": 2}}}})
        })
        .collect();
    let guidelines: Vec<Value> = bench["guidelines"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| json!({"condition": g["condition"], "action": g["action"]}))
        .collect();
    json!({"agent": bench["agent"], "tools": tools, "guidelines": guidelines, "journeys": journeys})
}

/// Loads a workload file's text: the definition and the session's customer messages.
pub fn load(text: &str) -> Result<(AgentDefinition, Vec<String>), String> {
    let bench: Value = serde_json::from_str(text).map_err(|e| format!("the workload is not JSON: {e}"))?;
    let file = serde_json::to_string(&convert(&bench)).map_err(|e| e.to_string())?;
    let loaded = load_agent(&[SourceFile::new("bench.json", file)]);
    let errors: Vec<String> =
        loaded.diagnostics.iter().filter(|d| d.severity == Severity::Error).map(|d| d.message.clone()).collect();
    let Some(definition) = loaded.definition else { return Err(format!("the workload does not load: {errors:?}")) };
    let messages =
        bench["messages"].as_array().into_iter().flatten().filter_map(|m| m.as_str().map(str::to_string)).collect();
    Ok((definition, messages))
}
