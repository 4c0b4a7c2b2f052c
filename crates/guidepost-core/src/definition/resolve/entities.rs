//! Resolution of tags, tools, guidelines, variables, glossary, capabilities and canned
//! responses.

use std::collections::HashMap;

use indexmap::IndexMap;

use super::{Loc, Namespace, Resolver};
use crate::definition::file::{FixtureOutcomeDecl, GuidelineDecl, ParameterDecl, ParameterDetails, TagDecl};
use crate::guideline::Guideline;
use crate::ids::{derive_id, slug};
use crate::knowledge::{CannedField, CannedResponse, Capability, ContextVariable, Tag, Term};
use crate::tool::{
    FIXTURE_SERVICE, Fixture, FixtureCase, FixtureOutcome, NATIVE_SERVICE, ParameterType, Tool, ToolId, ToolParameter,
};

/// A guideline declaration and where it was written.
pub(crate) struct GuidelineSite<'d> {
    pub decl: &'d GuidelineDecl,
    pub loc: Loc,
    pub journey: Option<String>,
}

impl<'a> Resolver<'a> {
    pub(super) fn tags(&mut self) -> Vec<Tag> {
        let mut out = Vec::new();
        for (i, f) in self.files.iter().enumerate() {
            for (k, decl) in f.file.tags.iter().enumerate() {
                let (name, id, description, path) = match decl {
                    TagDecl::Name(name) => (name.clone(), name.clone(), None, format!("tags[{k}]")),
                    TagDecl::Full(d) => (
                        d.name.clone(),
                        d.id.clone().unwrap_or_else(|| d.name.clone()),
                        d.description.clone(),
                        format!("tags[{k}].name"),
                    ),
                };
                let loc = Loc { file: i, path };
                self.non_empty(&name, &loc, "tag name");
                self.check_id(&id, &loc, "tag");
                if self.tags.contains_key(&id) {
                    self.register(Namespace::Tag, &id, loc, "tag");
                    continue;
                }
                self.register(Namespace::Tag, &id, loc, "tag");
                self.tag_names.insert(name.clone(), id.clone());
                out.push(Tag { id, name, description });
            }
        }
        out
    }

    pub(super) fn tools(&mut self) -> Vec<Tool> {
        for (i, f) in self.files.iter().enumerate() {
            for (k, decl) in f.file.tools.iter().enumerate() {
                let base = format!("tools[{k}]");
                let name_loc = Loc { file: i, path: format!("{base}.name") };
                self.check_id(&decl.name, &name_loc, "tool");
                let service = match (&decl.service, &decl.fixture) {
                    (Some(s), _) => s.clone(),
                    (None, Some(_)) => FIXTURE_SERVICE.to_string(),
                    (None, None) => NATIVE_SERVICE.to_string(),
                };
                let service_loc = Loc { file: i, path: format!("{base}.service") };
                let builtin = service == FIXTURE_SERVICE || service == NATIVE_SERVICE;
                if !builtin && !self.services.contains_key(&service) {
                    let known: Vec<String> = self.services.keys().cloned().collect();
                    let hint = crate::definition::check::did_you_mean(&service, known.iter().map(String::as_str))
                        .map(|s| format!("did you mean `{s}`?"))
                        .unwrap_or_else(|| "declare it under `services:`".into());
                    self.error("unknown-reference", &service_loc, format!("unknown service `{service}`"), Some(hint));
                }
                if decl.fixture.is_some() && service != FIXTURE_SERVICE {
                    self.error("invalid-tool", &service_loc, format!("tool `{}` has a fixture but is served by `{service}`", decl.name), Some("remove `service` (fixture tools are served by the built-in `fixtures` service) or the fixture".into()));
                }
                if service == FIXTURE_SERVICE && decl.fixture.is_none() {
                    self.error(
                        "invalid-tool",
                        &service_loc,
                        format!("tool `{}` is served by `fixtures` but has no `fixture` table", decl.name),
                        None,
                    );
                }
                let id = ToolId::new(service.clone(), decl.name.clone());
                if let Some((_, first)) = self.tools.iter().find(|(t, _)| t.id == id) {
                    let hint = format!("first defined at {}", self.describe_loc(first));
                    self.error("duplicate-id", &name_loc, format!("duplicate tool `{id}`"), Some(hint));
                    continue;
                }
                let parameters = decl
                    .parameters
                    .iter()
                    .map(|(name, p)| self.parameter(name, p, i, &format!("{base}.parameters.{name}")))
                    .collect();
                let fixture = decl.fixture.as_ref().map(|fx| Fixture {
                    cases: fx
                        .cases
                        .iter()
                        .enumerate()
                        .filter_map(|(c, case)| {
                            let loc = Loc { file: i, path: format!("{base}.fixture.cases[{c}]") };
                            let outcome = self.fixture_outcome(case.result.as_ref(), case.error.as_ref(), &loc)?;
                            for arg in case.args.keys() {
                                if !decl.parameters.contains_key(arg) {
                                    let known = decl.parameters.keys().map(String::as_str);
                                    let hint = crate::definition::check::did_you_mean(arg, known)
                                        .map(|s| format!("did you mean `{s}`?"));
                                    self.error(
                                        "unknown-reference",
                                        &Loc { file: i, path: format!("{base}.fixture.cases[{c}].args.{arg}") },
                                        format!(
                                            "fixture row matches on `{arg}`, which is not a parameter of `{}`",
                                            decl.name
                                        ),
                                        hint,
                                    );
                                }
                            }
                            Some(FixtureCase { args: case.args.clone(), outcome })
                        })
                        .collect(),
                    otherwise: fx.otherwise.as_ref().and_then(|o: &FixtureOutcomeDecl| {
                        let loc = Loc { file: i, path: format!("{base}.fixture.otherwise") };
                        self.fixture_outcome(o.result.as_ref(), o.error.as_ref(), &loc)
                    }),
                });
                let tool = Tool {
                    id,
                    description: decl.description.clone(),
                    parameters,
                    consequential: decl.consequential.unwrap_or(false),
                    idempotency: if decl.idempotency_keys == Some(true) {
                        crate::tool::Idempotency::Keyed
                    } else {
                        crate::tool::Idempotency::Unknown
                    },
                    overlap: decl.overlap.unwrap_or_default(),
                    fixture,
                };
                self.tools.push((tool, Loc { file: i, path: base }));
            }
        }
        self.tools.iter().map(|(t, _)| t.clone()).collect()
    }

    fn fixture_outcome(
        &mut self,
        result: Option<&serde_json::Value>,
        error: Option<&String>,
        loc: &Loc,
    ) -> Option<FixtureOutcome> {
        match (result, error) {
            (Some(r), None) => Some(FixtureOutcome::Result(r.clone())),
            (None, Some(e)) => Some(FixtureOutcome::Error(e.clone())),
            _ => {
                self.error("invalid-fixture", loc, "a fixture outcome needs exactly one of `result` or `error`", None);
                None
            }
        }
    }

    fn parameter(&mut self, name: &str, decl: &ParameterDecl, file: usize, path: &str) -> ToolParameter {
        let details = match decl {
            ParameterDecl::Type(kind) => ParameterDetails { kind: Some(*kind), ..Default::default() },
            ParameterDecl::Full(d) => (**d).clone(),
        };
        let kind = details.kind.unwrap_or_default();
        if details.items.is_some() && kind != ParameterType::Array {
            self.error(
                "invalid-parameter",
                &Loc { file, path: format!("{path}.items") },
                format!("`items` is only meaningful for `array` parameters, and `{name}` is not one"),
                None,
            );
        }
        ToolParameter {
            name: name.to_string(),
            kind,
            items: details.items,
            description: details.description,
            allowed: details.allowed,
            required: details.required.unwrap_or(details.default.is_none()),
            default: details.default,
            source: details.source.unwrap_or_default(),
            hidden: details.hidden,
            examples: details.examples,
            precedence: details.precedence,
            display_name: details.display_name,
            significance: details.significance,
        }
    }

    pub(super) fn canned_responses(&mut self) -> Vec<CannedResponse> {
        let mut out = Vec::new();
        for (i, f) in self.files.iter().enumerate() {
            for (k, decl) in f.file.canned_responses.iter().enumerate() {
                let base = format!("canned_responses[{k}]");
                let template_loc = Loc { file: i, path: format!("{base}.template") };
                self.non_empty(&decl.template, &template_loc, "template");
                if let Err(err) = crate::templates::canned_environment().template_from_str(&decl.template) {
                    let detail = err.detail().map_or_else(|| err.kind().to_string(), str::to_string);
                    self.error(
                        "invalid-template",
                        &template_loc,
                        format!(
                            "the template does not parse: {detail} (line {} of the template)",
                            err.line().unwrap_or(1)
                        ),
                        Some("templates use Jinja syntax: `Your balance is {{ balance }}.`".into()),
                    );
                }
                let id = match &decl.id {
                    Some(id) => {
                        self.check_id(id, &Loc { file: i, path: format!("{base}.id") }, "canned response");
                        id.clone()
                    }
                    None => derive_id(&["canned", &self.agent_id, &decl.template]),
                };
                self.register(
                    Namespace::Canned,
                    &id,
                    Loc {
                        file: i,
                        path: decl.id.as_ref().map_or(format!("{base}.template"), |_| format!("{base}.id")),
                    },
                    "canned response",
                );
                let tags = self.tag_refs(&decl.tags, i, &format!("{base}.tags"));
                out.push(CannedResponse {
                    id,
                    template: decl.template.clone(),
                    fields: decl
                        .fields
                        .iter()
                        .map(|f| CannedField {
                            name: f.name.clone(),
                            description: f.description.clone(),
                            examples: f.examples.clone(),
                        })
                        .collect(),
                    signals: decl.signals.clone(),
                    field_dependencies: decl.field_dependencies.clone(),
                    tags,
                });
            }
        }
        out
    }

    /// Assigns journey ids first, so guidelines can be scoped to journeys and relationships
    /// can refer to them.
    pub(super) fn journey_ids(&mut self) -> Vec<(usize, usize, String)> {
        let mut out = Vec::new();
        for (i, f) in self.files.iter().enumerate() {
            for (k, decl) in f.file.journeys.iter().enumerate() {
                let base = format!("journeys[{k}]");
                let id = match &decl.id {
                    Some(id) => {
                        self.check_id(id, &Loc { file: i, path: format!("{base}.id") }, "journey");
                        id.clone()
                    }
                    None => slug(&decl.title).unwrap_or_else(|| derive_id(&["journey", &self.agent_id, &decl.title])),
                };
                let at =
                    Loc { file: i, path: decl.id.as_ref().map_or(format!("{base}.title"), |_| format!("{base}.id")) };
                self.register(Namespace::Journey, &id, at, "journey");
                out.push((i, k, id));
            }
        }
        out
    }

    pub(super) fn guidelines(&mut self, journey_ids: &[(usize, usize, String)]) -> Vec<Guideline> {
        let mut sites = Vec::new();
        for (i, f) in self.files.iter().enumerate() {
            for (k, decl) in f.file.guidelines.iter().enumerate() {
                sites.push(GuidelineSite {
                    decl,
                    loc: Loc { file: i, path: format!("guidelines[{k}]") },
                    journey: None,
                });
            }
        }
        for (i, k, journey) in journey_ids {
            let Some(decl) = self.files.get(*i).and_then(|f| f.file.journeys.get(*k)) else { continue };
            for (g, guideline) in decl.guidelines.iter().enumerate() {
                sites.push(GuidelineSite {
                    decl: guideline,
                    loc: Loc { file: *i, path: format!("journeys[{k}].guidelines[{g}]") },
                    journey: Some(journey.clone()),
                });
            }
        }
        let mut out = Vec::new();
        for site in &sites {
            let GuidelineSite { decl, loc, journey } = site;
            let base = &loc.path;
            let file = loc.file;
            self.non_empty(&decl.condition, &Loc { file, path: format!("{base}.condition") }, "condition");
            if let Some(action) = &decl.action {
                self.non_empty(action, &Loc { file, path: format!("{base}.action") }, "action");
            }
            let id = match &decl.id {
                Some(id) => {
                    self.check_id(id, &Loc { file, path: format!("{base}.id") }, "guideline");
                    id.clone()
                }
                None => derive_id(&[
                    "guideline",
                    &self.agent_id,
                    journey.as_deref().unwrap_or(""),
                    &decl.condition,
                    decl.action.as_deref().unwrap_or(""),
                ]),
            };
            let id_loc =
                Loc { file, path: decl.id.as_ref().map_or(format!("{base}.condition"), |_| format!("{base}.id")) };
            self.register(Namespace::Guideline, &id, id_loc, "guideline");
            let tags = self.tag_refs(&decl.tags, file, &format!("{base}.tags"));
            let tools = decl
                .tools
                .iter()
                .enumerate()
                .filter_map(|(t, text)| self.tool_ref(text, &Loc { file, path: format!("{base}.tools[{t}]") }))
                .collect();
            let canned_responses = self.canned_refs(&decl.canned_responses, file, &format!("{base}.canned_responses"));
            for (e, example) in decl.examples.iter().enumerate() {
                let loc = Loc { file, path: format!("{base}.examples[{e}].message") };
                self.non_empty(&example.message, &loc, "example message");
            }
            out.push(Guideline {
                id,
                condition: decl.condition.clone(),
                action: decl.action.clone(),
                description: decl.description.clone(),
                criticality: decl.criticality.unwrap_or_default(),
                enabled: decl.enabled.unwrap_or(true),
                tags,
                labels: decl.labels.clone(),
                metadata: decl.metadata.clone(),
                priority: decl.priority.unwrap_or(0),
                track: decl.track.unwrap_or(true),
                tools,
                composition_mode: decl.composition_mode,
                journey: journey.clone(),
                canned_responses,
                examples: decl.examples.clone(),
            });
        }
        out
    }

    pub(super) fn variables(&mut self) -> Vec<ContextVariable> {
        let mut out = Vec::new();
        let mut seen: HashMap<String, Loc> = HashMap::new();
        for (i, f) in self.files.iter().enumerate() {
            for (k, decl) in f.file.variables.iter().enumerate() {
                let base = format!("variables[{k}]");
                let name_loc = Loc { file: i, path: format!("{base}.name") };
                self.non_empty(&decl.name, &name_loc, "variable name");
                let id = decl.id.clone().unwrap_or_else(|| decl.name.clone());
                self.check_id(&id, &name_loc, "variable");
                if let Some(first) = seen.get(&id) {
                    let hint = format!("first defined at {}", self.describe_loc(first));
                    self.error("duplicate-id", &name_loc, format!("duplicate variable `{id}`"), Some(hint));
                    continue;
                }
                seen.insert(id.clone(), name_loc);
                let tool =
                    decl.tool.as_ref().and_then(|t| self.tool_ref(t, &Loc { file: i, path: format!("{base}.tool") }));
                let freshness = decl.freshness.as_ref().and_then(|text| {
                    let loc = Loc { file: i, path: format!("{base}.freshness") };
                    let parsed = match crate::knowledge::Freshness::parse(text) {
                        Ok(f) => Some(f),
                        Err(message) => {
                            self.error(
                                "invalid-value",
                                &loc,
                                message,
                                Some("write a number and a unit (`30s`, `15m`, `1h`, `1d`) or a cron schedule (`0 * * * *`)".into()),
                            );
                            None
                        }
                    };
                    if decl.tool.is_none() {
                        self.warning(
                            "unused-setting",
                            &loc,
                            "`freshness` only matters for a variable backed by a `tool`",
                            None,
                        );
                    }
                    parsed
                });
                let tags = self.tag_refs(&decl.tags, i, &format!("{base}.tags"));
                out.push(ContextVariable {
                    id,
                    name: decl.name.clone(),
                    description: decl.description.clone(),
                    tool,
                    freshness,
                    value: decl.value.clone(),
                    tags,
                });
            }
        }
        out
    }

    pub(super) fn terms(&mut self) -> Vec<Term> {
        let mut out = Vec::new();
        let mut seen: IndexMap<String, Loc> = IndexMap::new();
        for (i, f) in self.files.iter().enumerate() {
            for (k, decl) in f.file.glossary.iter().enumerate() {
                let base = format!("glossary[{k}]");
                let loc = Loc { file: i, path: format!("{base}.name") };
                self.non_empty(&decl.name, &loc, "term");
                self.non_empty(
                    &decl.description,
                    &Loc { file: i, path: format!("{base}.description") },
                    "term description",
                );
                let id = decl.id.clone().unwrap_or_else(|| derive_id(&["term", &self.agent_id, &decl.name]));
                if let Some(first) = seen.get(&id) {
                    let hint = format!("first defined at {}", self.describe_loc(first));
                    self.error("duplicate-id", &loc, format!("duplicate glossary term `{}`", decl.name), Some(hint));
                    continue;
                }
                seen.insert(id.clone(), loc);
                let tags = self.tag_refs(&decl.tags, i, &format!("{base}.tags"));
                out.push(Term {
                    id,
                    name: decl.name.clone(),
                    description: decl.description.clone(),
                    synonyms: decl.synonyms.clone(),
                    tags,
                });
            }
        }
        out
    }

    pub(super) fn capabilities(&mut self) -> Vec<Capability> {
        let mut out = Vec::new();
        let mut seen: IndexMap<String, Loc> = IndexMap::new();
        for (i, f) in self.files.iter().enumerate() {
            for (k, decl) in f.file.capabilities.iter().enumerate() {
                let base = format!("capabilities[{k}]");
                let loc = Loc { file: i, path: format!("{base}.title") };
                self.non_empty(&decl.title, &loc, "capability title");
                self.non_empty(
                    &decl.description,
                    &Loc { file: i, path: format!("{base}.description") },
                    "capability description",
                );
                let id = decl.id.clone().unwrap_or_else(|| {
                    slug(&decl.title).unwrap_or_else(|| derive_id(&["capability", &self.agent_id, &decl.title]))
                });
                if let Some(first) = seen.get(&id) {
                    let hint = format!("first defined at {}", self.describe_loc(first));
                    self.error("duplicate-id", &loc, format!("duplicate capability `{id}`"), Some(hint));
                    continue;
                }
                seen.insert(id.clone(), loc);
                let tags = self.tag_refs(&decl.tags, i, &format!("{base}.tags"));
                out.push(Capability {
                    id,
                    title: decl.title.clone(),
                    description: decl.description.clone(),
                    signals: decl.signals.clone(),
                    tags,
                });
            }
        }
        out
    }

    /// Warns about guidelines whose conditions say the same thing (in the same scope).
    pub(super) fn duplicate_conditions(&mut self, guidelines: &[Guideline]) {
        fn normalize(text: &str) -> String {
            text.split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_lowercase()
                .trim_end_matches(['.', '!', '?', '。', '！', '？'])
                .to_string()
        }
        let mut seen: HashMap<(Option<String>, String), String> = HashMap::new();
        let locs: Vec<(String, Loc)> = self.guideline_ids.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for g in guidelines {
            let key = (g.journey.clone(), normalize(&g.condition));
            match seen.get(&key) {
                Some(first) if first != &g.id => {
                    let Some((_, loc)) = locs.iter().find(|(id, _)| id == &g.id) else { continue };
                    let loc = Loc {
                        file: loc.file,
                        path: format!("{}.condition", crate::definition::check::parent_path(&loc.path)),
                    };
                    self.warning(
                        "duplicate-condition",
                        &loc,
                        format!("guideline `{}` has the same condition as `{first}`", g.id),
                        Some("merge their actions into one guideline, or make the conditions say what differs".into()),
                    );
                }
                Some(_) => {}
                None => {
                    seen.insert(key, g.id.clone());
                }
            }
        }
    }
}
