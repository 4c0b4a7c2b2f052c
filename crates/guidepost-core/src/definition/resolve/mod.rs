//! Resolution: authoring files to the [`AgentDefinition`] model, with semantic checks.
//!
//! Structural problems (unknown fields, wrong types) are caught before this step by the
//! schema check. Here every reference is resolved by name, ids are assigned, journeys are
//! checked as graphs and relationships as a whole; every problem found is reported, each
//! at the position of the text that caused it.

mod entities;
mod journeys;
mod relationships;

use std::collections::{HashMap, HashSet};

use indexmap::IndexMap;

use super::check::{SpanTable, did_you_mean};
use super::diagnostic::Diagnostic;
use super::file::AgentFile;
use super::source::Span;
use crate::agent::{Agent, DEFAULT_MAX_ENGINE_ITERATIONS, Preamble};
use crate::ids::{derive_id, is_valid_id, slug};
use crate::model::AgentDefinition;
use crate::tool::{ServiceKind, Tool, ToolId, ToolService};

/// A definition file after parsing and the schema check.
#[derive(Debug, Clone)]
pub struct ParsedFile {
    /// File name as given to the loader.
    pub name: String,
    /// The content.
    pub file: AgentFile,
    /// Positions of its keys and values.
    pub spans: SpanTable,
}

/// Where something was written.
#[derive(Debug, Clone)]
pub(crate) struct Loc {
    file: usize,
    path: String,
}

pub(crate) struct Resolver<'a> {
    files: &'a [ParsedFile],
    diagnostics: Vec<Diagnostic>,
    agent_id: String,
    /// Tag id -> where declared; tag name -> id.
    tags: IndexMap<String, Loc>,
    tag_names: HashMap<String, String>,
    services: IndexMap<String, (ToolService, Loc)>,
    tools: Vec<(Tool, Loc)>,
    guideline_ids: IndexMap<String, Loc>,
    journey_ids: IndexMap<String, Loc>,
    canned_ids: IndexMap<String, Loc>,
}

/// Resolves parsed files into a definition. Returns the definition when there are no
/// errors (warnings may be present) and all diagnostics either way.
pub fn resolve(files: &[ParsedFile]) -> (Option<AgentDefinition>, Vec<Diagnostic>) {
    let mut r = Resolver {
        files,
        diagnostics: Vec::new(),
        agent_id: String::new(),
        tags: IndexMap::new(),
        tag_names: HashMap::new(),
        services: IndexMap::new(),
        tools: Vec::new(),
        guideline_ids: IndexMap::new(),
        journey_ids: IndexMap::new(),
        canned_ids: IndexMap::new(),
    };
    let mut agent = r.agent();
    let tags = r.tags();
    if let Some(agent) = agent.as_mut() {
        agent.tags = r.agent_tags();
    }
    let services = r.services();
    let tools = r.tools();
    let canned_responses = r.canned_responses();
    let journey_ids = r.journey_ids();
    let guidelines = r.guidelines(&journey_ids);
    let journeys = r.journeys(&journey_ids);
    let relationships = r.relationships(&guidelines, &journeys);
    let variables = r.variables();
    let terms = r.terms();
    let capabilities = r.capabilities();
    r.duplicate_conditions(&guidelines);
    let has_errors = r.diagnostics.iter().any(|d| d.severity == super::diagnostic::Severity::Error);
    let definition = match agent {
        Some(agent) if !has_errors => Some(AgentDefinition {
            agent,
            tags,
            guidelines,
            relationships,
            journeys,
            tools,
            services,
            variables,
            terms,
            capabilities,
            canned_responses,
        }),
        _ => None,
    };
    (definition, r.diagnostics)
}

impl<'a> Resolver<'a> {
    fn span(&self, loc: &Loc) -> Span {
        self.files.get(loc.file).map(|f| f.spans.value(&loc.path)).unwrap_or_default()
    }

    fn key_span(&self, loc: &Loc) -> Span {
        self.files.get(loc.file).map(|f| f.spans.key(&loc.path)).unwrap_or_default()
    }

    fn file_name(&self, file: usize) -> &str {
        self.files.get(file).map_or("<unknown>", |f| f.name.as_str())
    }

    fn error(&mut self, code: &'static str, loc: &Loc, message: impl Into<String>, hint: Option<String>) {
        let d = Diagnostic::error(code, self.file_name(loc.file), self.span(loc), message).with_hint_opt(hint);
        self.diagnostics.push(d);
    }

    fn error_at_key(&mut self, code: &'static str, loc: &Loc, message: impl Into<String>, hint: Option<String>) {
        let d = Diagnostic::error(code, self.file_name(loc.file), self.key_span(loc), message).with_hint_opt(hint);
        self.diagnostics.push(d);
    }

    fn warning(&mut self, code: &'static str, loc: &Loc, message: impl Into<String>, hint: Option<String>) {
        let d = Diagnostic::warning(code, self.file_name(loc.file), self.span(loc), message).with_hint_opt(hint);
        self.diagnostics.push(d);
    }

    /// Whether the mapping at `path` of `file` has a key that is not a field of `def` (a
    /// definition of the format's JSON Schema) but a misspelling of `field`: the unknown-field
    /// error already names the cause of `field` being absent, so its absence is not reported
    /// again.
    fn misspelt(&self, file: usize, path: &str, def: &str, field: &str) -> bool {
        let Some(parsed) = self.files.get(file) else { return false };
        let fields: Vec<&str> = crate::definition::json_schema()["$defs"][def]["properties"]
            .as_object()
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        parsed.spans.keys_of(path).any(|key| {
            !fields.contains(&key)
                && crate::definition::check::did_you_mean(key, fields.iter().copied()).as_deref() == Some(field)
        })
    }

    fn describe_loc(&self, loc: &Loc) -> String {
        let span = self.span(loc);
        format!("{}:{}:{}", self.file_name(loc.file), span.line, span.col)
    }

    /// Checks that a text is not blank.
    fn non_empty(&mut self, text: &str, loc: &Loc, what: &str) {
        if text.trim().is_empty() {
            self.error(
                "empty-text",
                loc,
                format!("{what} is empty"),
                Some(format!("write the {what} in a sentence, or remove the entry")),
            );
        }
    }

    /// Validates an author-given id.
    fn check_id(&mut self, id: &str, loc: &Loc, what: &str) {
        if !is_valid_id(id) {
            self.error(
                "invalid-id",
                loc,
                format!("`{}` is not a valid {what} id", id.escape_debug()),
                Some("ids may not be empty or contain whitespace, control characters, `:` or `/`".into()),
            );
        }
    }

    /// Registers an id in a namespace, reporting duplicates.
    fn register(&mut self, namespace: Namespace, id: &str, loc: Loc, what: &str) {
        let first = match namespace {
            Namespace::Guideline => self.guideline_ids.get(id).cloned(),
            Namespace::Journey => self.journey_ids.get(id).cloned(),
            Namespace::Canned => self.canned_ids.get(id).cloned(),
            Namespace::Tag => self.tags.get(id).cloned(),
        };
        if let Some(first) = first {
            let hint = format!("first defined at {}; give one of them a different `id`", self.describe_loc(&first));
            self.error("duplicate-id", &loc, format!("duplicate {what} id `{id}`"), Some(hint));
            return;
        }
        match namespace {
            Namespace::Guideline => self.guideline_ids.insert(id.to_string(), loc),
            Namespace::Journey => self.journey_ids.insert(id.to_string(), loc),
            Namespace::Canned => self.canned_ids.insert(id.to_string(), loc),
            Namespace::Tag => self.tags.insert(id.to_string(), loc),
        };
    }

    fn agent(&mut self) -> Option<Agent> {
        let mut found: Option<(usize, Agent)> = None;
        for (i, f) in self.files.iter().enumerate() {
            let Some(section) = &f.file.agent else { continue };
            let loc = Loc { file: i, path: "agent".into() };
            if let Some((first, _)) = &found {
                let hint = format!(
                    "the agent is already defined in {}; an agent has exactly one `agent` section",
                    self.file_name(*first)
                );
                self.error_at_key("duplicate-agent", &loc, "a second `agent` section", Some(hint));
                continue;
            }
            self.non_empty(&section.name, &Loc { file: i, path: "agent.name".into() }, "agent name");
            let id = match &section.id {
                Some(id) => {
                    self.check_id(id, &Loc { file: i, path: "agent.id".into() }, "agent");
                    id.clone()
                }
                None => slug(&section.name).unwrap_or_else(|| derive_id(&["agent", &section.name])),
            };
            if let Some(language) = &section.language
                && language != "customer"
                && !crate::reply_check::is_language_code(language)
            {
                self.error(
                    "invalid-language",
                    &Loc { file: i, path: "agent.language".into() },
                    format!("`{language}` is not a language code"),
                    Some(
                        "write a code such as `en`, `zh` or `pt-BR`, or `customer` to reply in the customer's language"
                            .into(),
                    ),
                );
            }
            let agent = Agent {
                id,
                name: section.name.clone(),
                description: section.description.clone(),
                max_engine_iterations: section.max_engine_iterations.unwrap_or(DEFAULT_MAX_ENGINE_ITERATIONS),
                composition_mode: section.composition_mode.unwrap_or_default(),
                output_mode: section.output_mode.unwrap_or_default(),
                tags: Vec::new(),
                preamble: section
                    .preamble
                    .as_ref()
                    .map(|p| Preamble { enabled: p.enabled, examples: p.examples.clone() })
                    .unwrap_or_default(),
                no_match_reply: section.no_match_reply.clone(),
                language: section.language.clone().filter(|l| l != "customer"),
                fallback_reply: section.fallback_reply.clone(),
            };
            found = Some((i, agent));
        }
        match found {
            Some((_, agent)) => {
                self.agent_id = agent.id.clone();
                Some(agent)
            }
            None => {
                let d = Diagnostic::error(
                    "missing-agent",
                    self.file_name(0),
                    Span { line: 1, col: 1, len: 1 },
                    "no `agent` section: the definition does not say which agent it is",
                )
                .with_hint("add `agent: {name: ..., description: ...}` to one of the files");
                self.diagnostics.push(d);
                None
            }
        }
    }

    /// Resolves a tag reference (by id or name) to its id.
    fn tag_ref(&mut self, text: &str, loc: &Loc) -> Option<String> {
        if self.tags.contains_key(text) {
            return Some(text.to_string());
        }
        if let Some(id) = self.tag_names.get(text) {
            return Some(id.clone());
        }
        let known: Vec<String> = self.tags.keys().cloned().collect();
        let hint = match did_you_mean(text, known.iter().map(String::as_str)) {
            Some(s) => format!("did you mean `{s}`?"),
            None => "declare it under `tags:` first".to_string(),
        };
        self.error("unknown-reference", loc, format!("unknown tag `{text}`"), Some(hint));
        None
    }

    /// The agent's own tags (resolved once the declared tags are known).
    fn agent_tags(&mut self) -> Vec<String> {
        let Some((file, tags)) =
            self.files.iter().enumerate().find_map(|(i, f)| f.file.agent.as_ref().map(|a| (i, a.tags.clone())))
        else {
            return Vec::new();
        };
        self.tag_refs(&tags, file, "agent.tags")
    }

    fn tag_refs(&mut self, tags: &[String], file: usize, path: &str) -> Vec<String> {
        tags.iter()
            .enumerate()
            .filter_map(|(k, t)| self.tag_ref(t, &Loc { file, path: format!("{path}[{k}]") }))
            .collect()
    }

    /// Resolves a tool reference: `name`, or `service:name`.
    fn tool_ref(&mut self, text: &str, loc: &Loc) -> Option<ToolId> {
        if let Some(id) = ToolId::parse(text) {
            if self.tools.iter().any(|(t, _)| t.id == id) {
                return Some(id);
            }
            if self.services.get(&id.service).is_some_and(|(s, _)| s.kind.is_dynamic()) {
                return Some(id);
            }
        } else {
            let matches: Vec<ToolId> =
                self.tools.iter().filter(|(t, _)| t.id.name == text).map(|(t, _)| t.id.clone()).collect();
            match matches.as_slice() {
                [one] => return Some(one.clone()),
                [] => {}
                many => {
                    let options = many.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ");
                    self.error(
                        "ambiguous-reference",
                        loc,
                        format!("tool `{text}` is provided by several services"),
                        Some(format!("write one of {options}")),
                    );
                    return None;
                }
            }
        }
        let names: Vec<String> = self.tools.iter().map(|(t, _)| t.id.name.clone()).collect();
        let hint = match did_you_mean(text.rsplit(':').next().unwrap_or(text), names.iter().map(String::as_str)) {
            Some(s) => format!("did you mean `{s}`?"),
            None => "declare it under `tools:` (or as `service:name` for a tool of an MCP, OpenAPI or Parlant service)"
                .to_string(),
        };
        self.error("unknown-reference", loc, format!("unknown tool `{text}`"), Some(hint));
        None
    }

    fn canned_refs(&mut self, refs: &[String], file: usize, path: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (k, text) in refs.iter().enumerate() {
            if self.canned_ids.contains_key(text) {
                out.push(text.clone());
            } else {
                let known: Vec<String> = self.canned_ids.keys().cloned().collect();
                let hint = did_you_mean(text, known.iter().map(String::as_str)).map(|s| format!("did you mean `{s}`?"));
                self.error(
                    "unknown-reference",
                    &Loc { file, path: format!("{path}[{k}]") },
                    format!("unknown canned response `{text}`"),
                    hint,
                );
            }
        }
        out
    }

    fn services(&mut self) -> Vec<ToolService> {
        let mut out = Vec::new();
        for (i, f) in self.files.iter().enumerate() {
            for (k, decl) in f.file.services.iter().enumerate() {
                let loc = Loc { file: i, path: format!("services[{k}]") };
                let name_loc = Loc { file: i, path: format!("services[{k}].name") };
                self.check_id(&decl.name, &name_loc, "service");
                if matches!(decl.name.as_str(), crate::tool::FIXTURE_SERVICE | crate::tool::NATIVE_SERVICE) {
                    self.error(
                        "reserved-name",
                        &name_loc,
                        format!("`{}` is the name of a built-in service", decl.name),
                        Some("choose another name".into()),
                    );
                    continue;
                }
                if let Some((_, first)) = self.services.get(&decl.name) {
                    let hint = format!("first defined at {}", self.describe_loc(first));
                    self.error("duplicate-id", &name_loc, format!("duplicate service `{}`", decl.name), Some(hint));
                    continue;
                }
                let needs = match decl.kind {
                    ServiceKind::Openapi => (decl.url.is_none() && decl.spec.is_none())
                        .then_some("an OpenAPI service needs `spec` (a path or URL of its document) or `url`"),
                    ServiceKind::Mcp => (decl.url.is_none() == decl.command.is_empty())
                        .then_some("an MCP service needs exactly one of `url` (streamable HTTP) or `command` (stdio)"),
                    ServiceKind::Parlant => decl.url.is_none().then_some("a Parlant plugin service needs `url`"),
                    ServiceKind::Fixture | ServiceKind::Native => Some(
                        "fixture and native services are built in; declare tools with a `fixture`, or register native tools in Rust",
                    ),
                };
                if let Some(message) = needs {
                    self.error(
                        "invalid-service",
                        &loc,
                        format!("service `{}` is incomplete", decl.name),
                        Some(message.to_string()),
                    );
                }
                let service = ToolService {
                    name: decl.name.clone(),
                    kind: decl.kind,
                    url: decl.url.clone(),
                    spec: decl.spec.clone(),
                    command: decl.command.clone(),
                    env: decl.env.clone(),
                    timeout_ms: decl.timeout_ms,
                    idempotency_keys: decl.idempotency_keys.unwrap_or(false),
                };
                self.services.insert(decl.name.clone(), (service.clone(), loc));
                out.push(service);
            }
        }
        out
    }
}

#[derive(Clone, Copy)]
enum Namespace {
    Guideline,
    Journey,
    Canned,
    Tag,
}

/// Finds cycles in a directed graph given as adjacency lists; returns each cycle once as
/// the list of its nodes (first node repeated at the end).
pub(crate) fn find_cycles(edges: &IndexMap<String, Vec<String>>) -> Vec<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Active,
        Done,
    }
    fn visit(
        node: &str,
        edges: &IndexMap<String, Vec<String>>,
        marks: &mut HashMap<String, Mark>,
        stack: &mut Vec<String>,
        out: &mut Vec<Vec<String>>,
        seen: &mut HashSet<Vec<String>>,
    ) {
        marks.insert(node.to_string(), Mark::Active);
        stack.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            match marks.get(next.as_str()) {
                Some(Mark::Active) => {
                    if let Some(at) = stack.iter().position(|s| s == next) {
                        let mut cycle: Vec<String> = stack[at..].to_vec();
                        let mut key = cycle.clone();
                        key.sort();
                        if seen.insert(key) {
                            cycle.push(next.clone());
                            out.push(cycle);
                        }
                    }
                }
                Some(Mark::Done) => {}
                None => visit(next, edges, marks, stack, out, seen),
            }
        }
        stack.pop();
        marks.insert(node.to_string(), Mark::Done);
    }
    let mut marks = HashMap::new();
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for node in edges.keys() {
        if !marks.contains_key(node.as_str()) {
            visit(node, edges, &mut marks, &mut Vec::new(), &mut out, &mut seen);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_are_found_once() {
        let mut edges: IndexMap<String, Vec<String>> = IndexMap::new();
        edges.insert("a".into(), vec!["b".into()]);
        edges.insert("b".into(), vec!["c".into(), "a".into()]);
        edges.insert("c".into(), vec![]);
        edges.insert("d".into(), vec!["d".into()]);
        let cycles = find_cycles(&edges);
        assert_eq!(cycles, vec![vec!["a".to_string(), "b".into(), "a".into()], vec!["d".to_string(), "d".into()]]);
    }
}
