//! Resolution of relationships: the inline shorthands on guidelines and the top-level
//! list, endpoint kinds, and cycles that can never resolve.

use indexmap::IndexMap;

use super::{Loc, Resolver, find_cycles};
use crate::definition::check::did_you_mean;
use crate::guideline::Guideline;
use crate::ids::derive_id;
use crate::journey::Journey;
use crate::relationship::{Endpoint, Relationship, RelationshipKind, TagMode};

fn article(kind: RelationshipKind) -> &'static str {
    if kind.as_str().starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" }
}

/// Endpoint kinds each relationship kind accepts, as (sources, targets).
fn allowed(kind: RelationshipKind) -> (&'static [&'static str], &'static [&'static str]) {
    const ENTITIES: &[&str] = &["guideline", "tag", "journey"];
    match kind {
        RelationshipKind::Entailment => (ENTITIES, &["guideline", "tag"]),
        RelationshipKind::Priority | RelationshipKind::Dependency | RelationshipKind::DependencyAny => {
            (ENTITIES, ENTITIES)
        }
        RelationshipKind::Disambiguation => (&["guideline"], &["guideline", "journey"]),
        RelationshipKind::Reevaluation => (&["guideline", "tag"], &["tool"]),
        RelationshipKind::Overlap => (&["tool"], &["tool"]),
    }
}

struct Pending {
    kind: RelationshipKind,
    source: Endpoint,
    targets: Vec<(String, Loc)>,
    group: Option<String>,
    loc: Loc,
}

impl<'a> Resolver<'a> {
    pub(super) fn relationships(&mut self, guidelines: &[Guideline], journeys: &[Journey]) -> Vec<Relationship> {
        let mut pending: Vec<Pending> = Vec::new();
        // Inline shorthands on guidelines, in the order guidelines were declared.
        let sites: Vec<(String, Loc)> = self.guideline_ids.iter().map(|(id, loc)| (id.clone(), loc.clone())).collect();
        for (id, loc) in sites {
            let base = crate::definition::check::parent_path(&loc.path).to_string();
            let Some(decl) = self.guideline_decl(loc.file, &base) else { continue };
            let source = Endpoint::Guideline(id.clone());
            let lists: [(&Vec<String>, RelationshipKind, &str); 6] = [
                (&decl.entails, RelationshipKind::Entailment, "entails"),
                (&decl.priority_over, RelationshipKind::Priority, "priority_over"),
                (&decl.depends_on, RelationshipKind::Dependency, "depends_on"),
                (&decl.depends_on_any, RelationshipKind::DependencyAny, "depends_on_any"),
                (&decl.disambiguates, RelationshipKind::Disambiguation, "disambiguates"),
                (&decl.reevaluate_after, RelationshipKind::Reevaluation, "reevaluate_after"),
            ];
            for (list, kind, field) in lists {
                if list.is_empty() {
                    continue;
                }
                let targets = list
                    .iter()
                    .enumerate()
                    .map(|(k, t)| (t.clone(), Loc { file: loc.file, path: format!("{base}.{field}[{k}]") }))
                    .collect();
                let group = (kind == RelationshipKind::DependencyAny).then(|| format!("{id}.any"));
                pending.push(Pending {
                    kind,
                    source: source.clone(),
                    targets,
                    group,
                    loc: Loc { file: loc.file, path: format!("{base}.{field}") },
                });
            }
        }
        // The top-level list.
        for (i, f) in self.files.iter().enumerate() {
            for (k, decl) in f.file.relationships.iter().enumerate() {
                let base = format!("relationships[{k}]");
                let source_loc = Loc { file: i, path: format!("{base}.source") };
                let Some(source) = self.endpoint(&decl.source, &source_loc, decl.kind == RelationshipKind::Overlap)
                else {
                    continue;
                };
                let targets: Vec<(String, Loc)> = match &decl.target {
                    crate::definition::file::OneOrMany::One(t) => {
                        vec![(t.clone(), Loc { file: i, path: format!("{base}.target") })]
                    }
                    crate::definition::file::OneOrMany::Many(ts) => ts
                        .iter()
                        .enumerate()
                        .map(|(n, t)| (t.clone(), Loc { file: i, path: format!("{base}.target[{n}]") }))
                        .collect(),
                };
                let group = match decl.kind {
                    RelationshipKind::DependencyAny => Some(decl.group.clone().unwrap_or_else(|| {
                        derive_id(&[
                            "group",
                            &source.to_string(),
                            &targets.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>().join(","),
                        ])
                    })),
                    _ => {
                        if decl.group.is_some() {
                            self.warning(
                                "unused-setting",
                                &Loc { file: i, path: format!("{base}.group") },
                                "`group` only applies to `dependency_any` relationships",
                                None,
                            );
                        }
                        None
                    }
                };
                pending.push(Pending { kind: decl.kind, source, targets, group, loc: Loc { file: i, path: base } });
            }
        }

        let mut out: Vec<Relationship> = Vec::new();
        for p in pending {
            let (sources, targets_ok) = allowed(p.kind);
            if !sources.contains(&p.source.kind_name()) {
                let hint = format!(
                    "{} {} relationship starts at a {}",
                    article(p.kind),
                    p.kind.as_str(),
                    sources.join(" or ")
                );
                self.error(
                    "wrong-endpoint-kind",
                    &p.loc,
                    format!(
                        "{} cannot be the source of {} {} relationship",
                        p.source,
                        article(p.kind),
                        p.kind.as_str()
                    ),
                    Some(hint),
                );
                continue;
            }
            if p.kind == RelationshipKind::Disambiguation {
                if let Endpoint::Guideline(id) = &p.source
                    && guidelines.iter().any(|g| &g.id == id && g.action.is_some())
                {
                    self.error(
                        "wrong-endpoint-kind",
                        &p.loc,
                        format!("`{id}` disambiguates, so it must be an observation (no `action`)"),
                        Some(
                            "the agent's clarifying question is written for it; move the action to the targets".into(),
                        ),
                    );
                    continue;
                }
                if p.targets.len() < 2 {
                    self.warning(
                        "single-target",
                        &p.loc,
                        "a disambiguation needs at least two targets to choose between",
                        None,
                    );
                }
            }
            let tool_targets = p.kind == RelationshipKind::Reevaluation || p.kind == RelationshipKind::Overlap;
            for (text, loc) in &p.targets {
                let Some(target) = self.endpoint(text, loc, tool_targets) else { continue };
                if !targets_ok.contains(&target.kind_name()) {
                    let hint = format!(
                        "{} {} relationship points at a {}",
                        article(p.kind),
                        p.kind.as_str(),
                        targets_ok.join(" or ")
                    );
                    self.error(
                        "wrong-endpoint-kind",
                        loc,
                        format!(
                            "{target} cannot be the target of {} {} relationship",
                            article(p.kind),
                            p.kind.as_str()
                        ),
                        Some(hint),
                    );
                    continue;
                }
                if target == p.source {
                    self.error("cycle", loc, format!("{} relationship from {target} to itself", p.kind.as_str()), None);
                    continue;
                }
                let id = derive_id(&[
                    "relationship",
                    p.kind.as_str(),
                    &p.source.to_string(),
                    &target.to_string(),
                    p.group.as_deref().unwrap_or(""),
                ]);
                if out.iter().any(|r| r.id == id) {
                    self.warning(
                        "duplicate-relationship",
                        loc,
                        format!("the {} relationship from {} to {target} is declared twice", p.kind.as_str(), p.source),
                        None,
                    );
                    continue;
                }
                out.push(Relationship { id, kind: p.kind, source: p.source.clone(), target, group: p.group.clone() });
            }
        }
        self.relationship_cycles(&out, journeys);
        out
    }

    fn guideline_decl(&self, file: usize, base: &str) -> Option<&'a crate::definition::file::GuidelineDecl> {
        let f = &self.files.get(file)?.file;
        let parse_index = |s: &str| s.trim_end_matches(']').parse::<usize>().ok();
        if let Some(rest) = base.strip_prefix("guidelines[") {
            return f.guidelines.get(parse_index(rest)?);
        }
        let rest = base.strip_prefix("journeys[")?;
        let (j, rest) = rest.split_once("].guidelines[")?;
        f.journeys.get(j.parse::<usize>().ok()?)?.guidelines.get(parse_index(rest)?)
    }

    /// Resolves an endpoint reference. A bare name is a guideline or a journey, or a tool
    /// where tools are expected.
    fn endpoint(&mut self, text: &str, loc: &Loc, tools_expected: bool) -> Option<Endpoint> {
        let (prefix, name) = match text.split_once(':') {
            Some((p @ ("guideline" | "journey" | "tag" | "all-tag" | "any-tag" | "tool"), rest)) => (Some(p), rest),
            _ => (None, text),
        };
        match prefix {
            Some("guideline") => self.guideline_endpoint(name, loc),
            Some("journey") => self.journey_endpoint(name, loc),
            Some("tag" | "all-tag") => self.tag_ref(name, loc).map(|tag| Endpoint::Tag { tag, mode: TagMode::All }),
            Some("any-tag") => self.tag_ref(name, loc).map(|tag| Endpoint::Tag { tag, mode: TagMode::Any }),
            Some(_) => self.tool_ref(name, loc).map(Endpoint::Tool),
            None if tools_expected => self.tool_ref(name, loc).map(Endpoint::Tool),
            None => {
                let is_guideline = self.guideline_ids.contains_key(name);
                let is_journey = self.journey_ids.contains_key(name);
                match (is_guideline, is_journey) {
                    (true, false) => Some(Endpoint::Guideline(name.to_string())),
                    (false, true) => Some(Endpoint::Journey(name.to_string())),
                    (true, true) => {
                        self.error(
                            "ambiguous-reference",
                            loc,
                            format!("`{name}` is both a guideline and a journey"),
                            Some(format!("write `guideline:{name}` or `journey:{name}`")),
                        );
                        None
                    }
                    (false, false) => {
                        let known: Vec<String> =
                            self.guideline_ids.keys().chain(self.journey_ids.keys()).cloned().collect();
                        let hint = match did_you_mean(name, known.iter().map(String::as_str)) {
                            Some(s) => format!("did you mean `{s}`?"),
                            None => "refer to a guideline or journey by its `id`, or use `tag:<tag>`, `any-tag:<tag>`, `tool:<tool>`".into(),
                        };
                        self.error(
                            "unknown-reference",
                            loc,
                            format!("unknown guideline or journey `{name}`"),
                            Some(hint),
                        );
                        None
                    }
                }
            }
        }
    }

    fn guideline_endpoint(&mut self, name: &str, loc: &Loc) -> Option<Endpoint> {
        if self.guideline_ids.contains_key(name) {
            return Some(Endpoint::Guideline(name.to_string()));
        }
        let known: Vec<String> = self.guideline_ids.keys().cloned().collect();
        let hint = did_you_mean(name, known.iter().map(String::as_str)).map(|s| format!("did you mean `{s}`?"));
        self.error("unknown-reference", loc, format!("unknown guideline `{name}`"), hint);
        None
    }

    fn journey_endpoint(&mut self, name: &str, loc: &Loc) -> Option<Endpoint> {
        if self.journey_ids.contains_key(name) {
            return Some(Endpoint::Journey(name.to_string()));
        }
        let known: Vec<String> = self.journey_ids.keys().cloned().collect();
        let hint = did_you_mean(name, known.iter().map(String::as_str)).map(|s| format!("did you mean `{s}`?"));
        self.error("unknown-reference", loc, format!("unknown journey `{name}`"), hint);
        None
    }

    /// Dependency and priority cycles can never resolve; entailment cycles are only
    /// redundant.
    fn relationship_cycles(&mut self, relationships: &[Relationship], _journeys: &[Journey]) {
        for (kinds, code_is_error, what) in [
            (&[RelationshipKind::Dependency, RelationshipKind::DependencyAny][..], true, "dependencies"),
            (&[RelationshipKind::Priority][..], true, "priorities"),
            (&[RelationshipKind::Entailment][..], false, "entailments"),
        ] {
            let mut edges: IndexMap<String, Vec<String>> = IndexMap::new();
            for r in relationships.iter().filter(|r| kinds.contains(&r.kind)) {
                edges.entry(r.source.to_string()).or_default().push(r.target.to_string());
                edges.entry(r.target.to_string()).or_default();
            }
            for cycle in find_cycles(&edges) {
                let first = cycle.first().cloned().unwrap_or_default();
                let loc = self.endpoint_loc(&first);
                let shown =
                    cycle.iter().map(|c| c.strip_prefix("guideline:").unwrap_or(c)).collect::<Vec<_>>().join(" -> ");
                if code_is_error {
                    let hint = if what == "dependencies" {
                        "each waits for the other, so none can ever apply; remove one dependency"
                    } else {
                        "each drops the other when both match; decide which one wins"
                    };
                    self.error("cycle", &loc, format!("{what} form a cycle: {shown}"), Some(hint.into()));
                } else {
                    self.warning(
                        "cycle",
                        &loc,
                        format!("{what} form a cycle: {shown}"),
                        Some("these always apply together; consider merging them".into()),
                    );
                }
            }
        }
    }

    fn endpoint_loc(&self, endpoint: &str) -> Loc {
        let id = endpoint.split_once(':').map_or(endpoint, |(_, id)| id);
        self.guideline_ids
            .get(id)
            .or_else(|| self.journey_ids.get(id))
            .cloned()
            .unwrap_or(Loc { file: 0, path: String::new() })
    }
}
