//! Tool-call inference: which tools to call, with which arguments, decided from the
//! conversation.
//!
//! Tools that overlap (an `overlap` relationship, or `overlap: always`) are decided
//! together in one structured call; every other tool in its own. A tool that is not
//! consequential and whose arguments the conversation could not set (see
//! [`needs_inference`]) runs with its defaults, without any model call. Arguments are
//! validated against the tool's parameters before anything runs: what is missing or invalid
//! becomes an insight, so the agent asks the customer for it.

use std::collections::{BTreeSet, HashMap};

use guidepost_core::relationship::{Endpoint, RelationshipKind};
use guidepost_core::tool::{Overlap, ParameterSource, ParameterType, Tool, ToolParameter};
use guidepost_core::{AgentDefinition, ToolId};
use guidepost_engine::GuidelineMatch;
use guidepost_llm::{ChatModel, ChatRequest, LlmError, OutputFormat, TaskKind, Usage};
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

/// Whether the conversation could set one of the tool's arguments, so that only a model can
/// tell them: a required parameter without a default, a free one the customer could have
/// given (an optional note, a date that defaults to today), or a choice among fixed values
/// of which the customer named one other than the default ("my savings account" where the
/// account defaults to checking). Otherwise the tool runs with its defaults, without asking.
fn needs_inference(tool: &Tool, history: &[(String, String)]) -> bool {
    tool.parameters.iter().filter(|p| !p.hidden).any(|p| {
        if p.required && p.default.is_none() {
            return true;
        }
        if p.allowed.is_empty() {
            return true;
        }
        p.allowed.iter().filter(|v| Some(*v) != p.default.as_ref()).any(|v| named_by_customer(v, history))
    })
}

/// Whether the customer's messages name a fixed value as a word ("savings", "express
/// shipping"), with or without a plural "s", underscores and hyphens read as spaces.
fn named_by_customer(value: &Value, history: &[(String, String)]) -> bool {
    let Some(text) = value.as_str() else { return said_by_customer(value, history) };
    if text.chars().any(guidepost_engine::writes_without_spaces) {
        return said_by_customer(value, history);
    }
    let words = |t: &str| -> Vec<String> {
        t.to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(|w| w.strip_suffix('s').filter(|s| s.len() > 2).unwrap_or(w).to_string())
            .collect()
    };
    let wanted = words(text);
    if wanted.is_empty() {
        return false;
    }
    history
        .iter()
        .filter(|(who, _)| who == "customer")
        .any(|(_, text)| words(text).windows(wanted.len()).any(|w| w == wanted.as_slice()))
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
/// arguments are the tools' parameters (all present, `null` when not given). A parameter
/// named in `copied` may only take one of the given values (or `null`): passages of the
/// customer's messages, for a value the model was asked to copy and did not.
fn schema(tools: &[Tool], copied: &HashMap<String, Vec<String>>, reasoned: bool) -> Value {
    let mut properties = Map::new();
    for tool in tools {
        for p in tool.parameters.iter().filter(|p| !p.hidden) {
            let kind = match copied.get(&p.name) {
                Some(values) => {
                    let mut values: Vec<Value> = values.iter().map(|v| json!(v)).collect();
                    values.push(Value::Null);
                    json!({"enum": values})
                }
                None => json_type(p),
            };
            properties.entry(p.name.clone()).or_insert(kind);
        }
    }
    let required: Vec<&String> = properties.keys().collect();
    let names: Vec<&str> = tools.iter().map(|t| t.id.name.as_str()).collect();
    let mut schema = json!({
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
    });
    if !reasoned {
        let item = &mut schema["properties"]["tools"]["items"];
        if let Some(properties) = item["properties"].as_object_mut() {
            properties.remove("rationale");
        }
        item["required"] = json!(["tool", "decision", "calls"]);
    }
    schema
}

/// Whether `batch` is decided with a rationale before each decision: always on a model that
/// follows compound instructions; on a small one only where a tool is consequential (a
/// booking, a payment), where the rationale is the model's look at whether the customer
/// asked for it. A small model's rationale for a lookup is most of what it writes (57 of 58
/// tokens deciding one weather lookup, 4.1 of its 6.9 s) and decides nothing the arguments
/// do not show.
fn reasoned(model: &dyn ChatModel, batch: &[Tool]) -> bool {
    model.capabilities().follows_compound_instructions || batch.iter().any(|t| t.consequential)
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
    scrubbed.values_mut().for_each(|v| guidepost_llm::secrets::scrub_json(v, &[]));
    staged.iter().any(|c| &c.tool == tool && c.arguments == scrubbed)
}

/// Whether `value` appears in what the customer wrote (case and spacing aside).
fn said_by_customer(value: &Value, history: &[(String, String)]) -> bool {
    let normalize = |t: &str| t.to_lowercase().split_whitespace().collect::<String>();
    let wanted = normalize(&value.as_str().map_or_else(|| value.to_string(), str::to_string));
    !wanted.is_empty() && history.iter().any(|(who, text)| who == "customer" && normalize(text).contains(&wanted))
}

/// The most passages [`customer_passages`] offers: enough for a few messages, well inside
/// what hosted providers accept in one enum.
const MAX_PASSAGES: usize = 200;

/// The longest passage [`customer_passages`] offers, in words (in scripts written without
/// spaces, characters).
const PASSAGE_WORDS: usize = 6;

/// Every passage of the customer's recent messages a value could be copied from: runs of up
/// to [`PASSAGE_WORDS`] words within a clause (a Han character counts as a word, so
/// "那成都呢" offers 成都), the latest message first, at most [`MAX_PASSAGES`].
fn customer_passages(history: &[(String, String)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let recent = history.iter().rev().filter(|(who, _)| who == "customer").take(3);
    for (_, text) in recent {
        for clause in text.split(|c: char| {
            matches!(c, ',' | '.' | '!' | '?' | ';' | ':' | '"' | '(' | ')' | '\n')
                || matches!(c, '，' | '。' | '！' | '？' | '；' | '：' | '、' | '“' | '”' | '（' | '）' | '「' | '」')
        }) {
            // Word boundaries as byte ranges, so a passage keeps the customer's own spacing.
            let mut words: Vec<(usize, usize)> = Vec::new();
            let mut start: Option<usize> = None;
            for (i, c) in clause.char_indices() {
                let unspaced = guidepost_engine::writes_without_spaces(c);
                if c.is_whitespace() || unspaced {
                    if let Some(s) = start.take() {
                        words.push((s, i));
                    }
                    if unspaced {
                        words.push((i, i + c.len_utf8()));
                    }
                } else if start.is_none() {
                    start = Some(i);
                }
            }
            if let Some(s) = start {
                words.push((s, clause.len()));
            }
            for first in 0..words.len() {
                for last in first..words.len().min(first + PASSAGE_WORDS) {
                    let passage = &clause[words[first].0..words[last].1];
                    if !out.iter().any(|p| p == passage) {
                        out.push(passage.to_string());
                    }
                    if out.len() == MAX_PASSAGES {
                        return out;
                    }
                }
            }
        }
    }
    out
}

/// The writing systems the letters of `texts` belong to: Latin (and any alphabet not named
/// below), Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai, Han, kana, hangul. Digits and
/// punctuation belong to none.
fn scripts<'a>(texts: impl Iterator<Item = &'a str>) -> BTreeSet<u8> {
    let mut out = BTreeSet::new();
    for c in texts.flat_map(str::chars).filter(|c| c.is_alphabetic()) {
        let script = match c as u32 {
            0x0370..=0x03FF => 1,
            0x0400..=0x052F => 2,
            0x0590..=0x05FF => 3,
            0x0600..=0x06FF => 4,
            0x0900..=0x097F => 5,
            0x0E00..=0x0E7F => 6,
            0x3040..=0x30FF => 7,
            0x1100..=0x11FF | 0xAC00..=0xD7AF => 8,
            _ if guidepost_engine::writes_without_spaces(c) => 9,
            _ => 0,
        };
        out.insert(script);
    }
    out
}

/// The passages that keep a word of `value`, where the word is likely to carry meaning: a
/// number (written in digits or as a word: "9 PM" keeps "At nine tonight"), a word of four
/// letters or more ("tonight", not "at" or "the"), or a character of a script written without
/// spaces.
fn passages_keeping_words_of(value: &Value, passages: &[String]) -> Vec<String> {
    let Some(text) = value.as_str() else { return Vec::new() };
    let kept = meaningful_words(text);
    passages.iter().filter(|p| !meaningful_words(p).is_disjoint(&kept)).cloned().collect()
}

/// The words of `text` [`passages_keeping_words_of`] compares, lowercased, numbers as digits.
fn meaningful_words(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut BTreeSet<String>| {
        if let Some(n) = number_word(word) {
            out.insert(n.to_string());
        } else if word.chars().count() >= 4 || (!word.is_empty() && word.chars().all(|c| c.is_ascii_digit())) {
            out.insert(word.clone());
        }
        word.clear();
    };
    for c in text.to_lowercase().chars() {
        let unspaced = guidepost_engine::writes_without_spaces(c);
        // Digits, letters and unspaced characters each make words of their own ("9点" is
        // "9" and "点", "7pm" is "7" and "pm").
        let joins = word
            .chars()
            .last()
            .is_some_and(|last| !unspaced && c.is_alphanumeric() && (last.is_ascii_digit() == c.is_ascii_digit()));
        if !joins {
            flush(&mut word, &mut out);
        }
        if unspaced {
            match number_word(&c.to_string()) {
                Some(n) => out.insert(n.to_string()),
                None => out.insert(c.to_string()),
            };
        } else if c.is_alphanumeric() {
            word.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// The number a number word stands for, in English or Chinese ("nine", "twelve", "九", "两").
fn number_word(word: &str) -> Option<u32> {
    const ENGLISH: [&str; 21] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ];
    const CHINESE: [&str; 11] = ["零", "一", "二", "三", "四", "五", "六", "七", "八", "九", "十"];
    let at = |list: &[&str]| list.iter().position(|w| *w == word).and_then(|i| u32::try_from(i).ok());
    match word {
        "thirty" => Some(30),
        "forty" => Some(40),
        "fifty" => Some(50),
        "两" => Some(2),
        _ => at(&ENGLISH).or_else(|| at(&CHINESE)),
    }
}

/// Whether `value` is a translation: written in scripts none of which the customer wrote in
/// (`written`, the [`scripts`] of their messages). A value without letters is none.
fn translated(value: &Value, written: &BTreeSet<u8>) -> bool {
    let used = scripts(value.as_str().into_iter());
    !used.is_empty() && used.is_disjoint(written)
}

/// The customer-only arguments of an answer that the customer did not write, as
/// (parameter, value) (`location`, `"北京"`).
fn foreign_values(
    batch: &[Tool],
    response: &guidepost_llm::ChatResponse,
    history: &[(String, String)],
) -> Vec<(String, Value)> {
    let Some(answer) = response.output.as_json().and_then(|v| serde_json::from_value::<Answer>(v.clone()).ok()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in answer.tools.iter().filter(|e| e.decision == "needs_to_run") {
        let Some(tool) = batch.iter().find(|t| t.id.name == entry.tool) else { continue };
        for call in &entry.calls {
            for p in tool.parameters.iter().filter(|p| p.source == ParameterSource::Customer) {
                if let Some(value) = call.arguments.get(&p.name).filter(|v| !is_no_value(v))
                    && !said_by_customer(value, history)
                {
                    out.push((p.name.clone(), value.clone()));
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
        if !single.consequential && !needs_inference(single, input.history) {
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

/// The request a tool decision for `definition`'s agent begins with (its instructions, tools
/// and answer format, then the conversation `shown` so far, after what `earlier` stands
/// for), for reading ahead while the customer writes, when `tools` are decided together in
/// one batch that needs the model: which batch a turn asks about is not known before the
/// turn, and a batch's answer format comes first in its prompt.
pub(crate) fn read_ahead_request(
    model: &dyn ChatModel,
    definition: &AgentDefinition,
    tools: &[Tool],
    shown: &[(String, String)],
    earlier: Option<&str>,
) -> Result<Option<ChatRequest>, LlmError> {
    let mut all = batches(definition, tools);
    let batch = match (all.pop(), all.is_empty()) {
        (Some(batch), true) => batch,
        _ => return Ok(None),
    };
    // A lone tool with nothing to decide runs without the model.
    if let [tool] = batch.as_slice()
        && !tool.consequential
        && !needs_inference(tool, &[])
    {
        return Ok(None);
    }
    let reasoned = reasoned(model, &batch);
    let context = json!({
        "agent_name": definition.agent.name,
        "agent_description": definition.agent.description,
        "tools": tools_view(&batch),
        "guidelines": [],
        "variables": [],
        "staged": [],
        "history": history_view(shown),
        "earlier": earlier,
        "last_customer": "",
        "reasoned": reasoned,
    });
    Ok(Some(request(render("tool_calls.j2", TEMPLATE, context)?, &batch, &HashMap::new(), reasoned)))
}

/// The conversation as the prompt lists it, message by message.
fn history_view(shown: &[(String, String)]) -> Vec<Value> {
    shown.iter().map(|(speaker, text)| json!({"speaker": speaker, "text": text})).collect()
}

/// The request deciding `batch` on `prompt`.
fn request(prompt: String, batch: &[Tool], copied: &HashMap<String, Vec<String>>, reasoned: bool) -> ChatRequest {
    let schema = schema(batch, copied, reasoned);
    ChatRequest::new(TaskKind::ToolInference)
        .user(prompt)
        .output(OutputFormat::Json { name: "tool_calls".into(), schema, strict: true })
        .temperature(0.0)
}

/// The tools of `batch` as the prompt lists them.
fn tools_view(batch: &[Tool]) -> Vec<Value> {
    batch
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
        .collect()
}

async fn decide_with_model(model: &dyn ChatModel, batch: &[Tool], input: &InferenceInput<'_>, out: &mut Inference) {
    let tools_view = tools_view(batch);
    let guidelines: Vec<Value> = input
        .matches
        .iter()
        .filter(|m| m.tools.iter().any(|id| batch.iter().any(|t| &t.id == id)))
        .map(|m| json!({"condition": m.condition, "action": m.action}))
        .collect();
    let staged: Vec<Value> = input.staged.iter().map(|c| json!({"tool": c.tool.name, "arguments": Value::Object(c.arguments.clone()).to_string(), "result": c.result.get("data").cloned().unwrap_or(Value::Null).to_string()})).collect();
    let history = history_view(input.shown);
    let reasoned = reasoned(model, batch);
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
            "reasoned": reasoned,
    });
    let names: Vec<String> = batch.iter().map(|t| t.id.to_string()).collect();
    let mut asked_again = false;
    let mut copied: HashMap<String, Vec<String>> = HashMap::new();
    let response = loop {
        let prompt = match render("tool_calls.j2", TEMPLATE, context.clone()) {
            Ok(prompt) => prompt,
            Err(err) => break Err(err),
        };
        let response = match model.complete(request(prompt, batch, &copied, reasoned)).await {
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
        let named: Vec<String> = foreign.iter().map(|(name, value)| format!("{name} = {value}")).collect();
        context["retry_note"] = json!(format!(
            "Your previous answer gave {}, which the customer did not write. A parameter marked \"from the customer only\" takes the customer's own words exactly as written, never a translation or a guess; leave it null if the customer did not give it.",
            named.join(", ")
        ));
        // Asked again, a value can be held to the customer's own words where it plainly
        // stands for some of them: a translation (a script the customer never wrote in) may
        // only be a passage of their messages, and a rewording ("9 PM tonight" for "At nine
        // tonight") only a passage that keeps a word of it, so a small model that rewrites
        // whatever it is told still picks the customer's version (or null). A value that
        // shares nothing with what the customer wrote was made up; restricted to passages
        // it would become whichever words fit worst ("能帮" as a city), so it is asked for
        // again freely and refused if it comes back.
        let written = scripts(input.history.iter().filter(|(who, _)| who == "customer").map(|(_, text)| text.as_str()));
        let strings = |name: &str| {
            batch
                .iter()
                .flat_map(|t| &t.parameters)
                .any(|p| p.name == name && p.allowed.is_empty() && matches!(p.kind, ParameterType::String))
        };
        let passages = customer_passages(input.history);
        for (name, value) in foreign.iter().filter(|(name, _)| strings(name)) {
            let offered = if translated(value, &written) {
                passages.clone()
            } else {
                passages_keeping_words_of(value, &passages)
            };
            if !offered.is_empty() {
                copied.insert(name.clone(), offered);
            }
        }
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
        rationales.extend(
            entries.iter().filter(|e| !e.rationale.is_empty()).map(|e| format!("{}: {}", tool.id.name, e.rationale)),
        );
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
        rationale: (!rationales.is_empty()).then(|| rationales.join(" | ")),
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
            idempotency: Default::default(),
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
        let s = schema(&[tool("weather", vec![p], Overlap::Auto)], &HashMap::new(), true);
        assert_eq!(
            s["properties"]["tools"]["items"]["properties"]["calls"]["items"]["properties"]["arguments"]["properties"]
                ["city"]["type"],
            json!(["string", "null"])
        );
        assert_eq!(s["properties"]["tools"]["items"]["properties"]["tool"]["enum"], json!(["weather"]));
        assert_eq!(s["properties"]["tools"]["items"]["required"], json!(["tool", "rationale", "decision", "calls"]));
    }

    #[test]
    fn a_batch_decided_without_a_rationale_is_not_asked_for_one() {
        let p = guidepost_tools::native::parameter("city", ParameterType::String);
        let s = schema(&[tool("weather", vec![p], Overlap::Auto)], &HashMap::new(), false);
        let item = &s["properties"]["tools"]["items"];
        assert_eq!(item["required"], json!(["tool", "decision", "calls"]));
        assert!(item["properties"].get("rationale").is_none(), "{item}");
        assert!(item["properties"].get("decision").is_some() && item["properties"].get("calls").is_some());
    }

    #[test]
    fn passages_are_runs_of_the_customers_words_within_a_clause() {
        let history = vec![
            ("customer".to_string(), "What's the weather in  New York today?".to_string()),
            ("agent".to_string(), "Which city?".to_string()),
            ("customer".to_string(), "那成都呢？Or Paris, maybe".to_string()),
        ];
        let passages = customer_passages(&history);
        for wanted in ["成都", "那成都呢", "Or Paris", "Paris", "maybe", "New York", "in  New York today", "What's"]
        {
            assert!(passages.iter().any(|p| p == wanted), "{wanted} in {passages:?}");
        }
        assert!(
            passages.iter().position(|p| p == "成都") < passages.iter().position(|p| p == "New York"),
            "latest first"
        );
        for unwanted in ["Which city", "Paris, maybe", "呢？Or", "What's the weather in  New York today"] {
            assert!(!passages.iter().any(|p| p == unwanted), "{unwanted} in {passages:?}");
        }
        let long = vec![("customer".to_string(), "word ".repeat(500))];
        assert_eq!(customer_passages(&long).len(), PASSAGE_WORDS, "repeats are offered once");
        let varied = vec![("customer".to_string(), (0..500).map(|i| format!("w{i} ")).collect::<String>())];
        assert_eq!(customer_passages(&varied).len(), MAX_PASSAGES);
    }

    #[test]
    fn a_reworded_value_is_offered_the_passages_that_keep_its_words() {
        let history = vec![
            ("customer".to_string(), "To the city museum, please.".to_string()),
            ("agent".to_string(), "When would you like to be picked up?".to_string()),
            ("customer".to_string(), "At nine tonight.".to_string()),
        ];
        let passages = customer_passages(&history);
        let kept = |value: &str| passages_keeping_words_of(&json!(value), &passages);
        assert_eq!(kept("9 PM tonight"), ["At nine", "At nine tonight", "nine", "nine tonight", "tonight"]);
        assert_eq!(kept("21:00"), Vec::<String>::new(), "a clock time in other numbers keeps nothing");
        assert_eq!(kept("9 PM"), ["At nine", "At nine tonight", "nine", "nine tonight"]);
        assert!(kept("the City Museum of Art").contains(&"To the city museum".to_string()));
        assert!(kept("at the station").is_empty(), "short words keep nothing: {:?}", kept("at the station"));
        assert!(kept("Oak Avenue").is_empty(), "a made-up value keeps nothing");
        let zh = vec![("customer".to_string(), "那成都呢？".to_string())];
        let zh_passages = customer_passages(&zh);
        assert!(passages_keeping_words_of(&json!("成都市"), &zh_passages).contains(&"成都".to_string()));
        assert!(passages_keeping_words_of(&json!("北京"), &zh_passages).is_empty());
        let at_nine = vec![("customer".to_string(), "晚上九点".to_string())];
        let at_nine = customer_passages(&at_nine);
        assert!(passages_keeping_words_of(&json!("21点"), &at_nine).contains(&"点".to_string()));
        assert!(passages_keeping_words_of(&json!("9点"), &at_nine).contains(&"九点".to_string()));
        assert!(passages_keeping_words_of(&json!(7), &passages).is_empty(), "only strings are reworded");
    }

    #[test]
    fn a_value_is_translated_when_written_in_a_script_the_customer_did_not_use() {
        let translated = |value: &str, said: &[&str]| translated(&json!(value), &scripts(said.iter().copied()));
        assert!(translated("上海", &["What's the weather in Shanghai today?"]));
        assert!(translated("Chengdu", &["那成都呢？"]));
        assert!(translated("Москва", &["Weather in Moscow?"]));
        assert!(!translated("上海", &["能帮我查一下天气吗？"]), "made up in the customer's own script");
        assert!(!translated("Hangzhou", &["你好，what's the weather like in 杭州?"]));
        assert!(!translated("12345", &["Where is my order?"]), "digits are no script");
        assert!(!translated("東京", &["東京の天気は？"]), "Han among kana is still Han");
    }

    #[test]
    fn a_no_value_string_is_no_foreign_value() {
        let mut city = guidepost_tools::native::parameter("city", ParameterType::String);
        city.source = ParameterSource::Customer;
        let batch = [tool("weather", vec![city], Overlap::Auto)];
        let history = vec![("customer".to_string(), "What's the weather in Shanghai?".to_string())];
        let answer = |city: &str| {
            let value = json!({"tools": [{"tool": "weather", "decision": "needs_to_run", "calls": [{"arguments": {"city": city}}]}]});
            guidepost_llm::ChatResponse::new(guidepost_llm::Output::Json(value), Usage::default())
        };
        assert_eq!(foreign_values(&batch, &answer("上海"), &history), [("city".to_string(), json!("上海"))]);
        assert!(foreign_values(&batch, &answer("Shanghai"), &history).is_empty());
        assert!(foreign_values(&batch, &answer("null"), &history).is_empty(), "no value, nothing to ask again");
    }

    #[test]
    fn defaults_stand_unless_the_conversation_could_set_an_argument() {
        let account = ToolParameter {
            allowed: vec![json!("checking"), json!("savings"), json!("money_market")],
            default: Some(json!("checking")),
            ..guidepost_tools::native::parameter("account", ParameterType::String)
        };
        let balance = tool("balance", vec![account.clone()], Overlap::Auto);
        let said = |text: &str| vec![("customer".to_string(), text.to_string())];
        assert!(!needs_inference(&balance, &said("How much money do I have?")));
        assert!(!needs_inference(&balance, &said("What's in my checking account?")), "the default itself");
        assert!(!needs_inference(&balance, &said("Any savingsplan?")), "not as a word");
        assert!(needs_inference(&balance, &said("And my saving account?")));
        assert!(needs_inference(&balance, &said("My money market balance, please")));
        let agent_said = vec![("agent".to_string(), "Checking or savings?".to_string())];
        assert!(!needs_inference(&balance, &agent_said), "the agent's words do not count");
        let hidden = ToolParameter { hidden: true, allowed: vec![], ..account.clone() };
        assert!(!needs_inference(&tool("t", vec![hidden], Overlap::Auto), &said("savings")));
        let free = ToolParameter { allowed: vec![], default: Some(json!("today")), ..account };
        assert!(needs_inference(&tool("t", vec![free], Overlap::Auto), &said("hi")), "a free value could be given");
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
