//! Guidelines (with their tools) and relationships.

use std::collections::HashSet;

use indexmap::IndexMap;

use super::journeys::Journeys;
use super::wire::{GuidelineDto, RelationshipEnd, ToolIdDto};
use super::{Builder, ImportError, RelationshipsOf};
use crate::definition::file::{GuidelineDecl, OneOrMany, RelationshipDecl};
use crate::guideline::Criticality;
use crate::relationship::RelationshipKind;

/// Metadata keys Parlant's indexing writes into guidelines (and its journey projection into
/// node guidelines): its engine's own bookkeeping, which Guidepost works out for itself.
const DERIVED: &[&str] = &[
    "continuous",
    "customer_dependent_action_data",
    "agent_intention_condition",
    "internal_action",
    "tool_running_only",
    "journey_node",
    "disambiguation",
];

/// The agent's guidelines, journey-scoped ones placed in their journeys; the top-level ones
/// are returned.
pub(crate) fn import(b: &mut Builder<'_>, journeys: &mut Journeys) -> Result<Vec<GuidelineDecl>, ImportError> {
    let all =
        b.server.guidelines.as_ref().map_err(|e| ImportError::Unreadable { what: "guidelines", message: e.clone() })?;
    // A journey's own guidelines, made through the SDK, carry no tags and depend on the
    // journey: they go into their journey, or are left out with another agent's journey.
    let mut depends_on_journey = std::collections::HashMap::new();
    for r in b.server.relationships.iter().filter_map(|r| r.answer.as_ref().ok()).flatten() {
        if let (true, Some(RelationshipEnd::Guideline(g)), Some(RelationshipEnd::Tag(tag))) =
            (r.kind == "dependency", r.source(), r.target())
            && let Some(journey) = tag.strip_prefix("journey:")
        {
            depends_on_journey.insert(g, journey.to_string());
        }
    }
    let mut top = Vec::new();
    let mut derived = false;
    for g in all {
        if journeys.conditions.contains_key(&g.id) || !b.scope.includes(&g.tags) {
            continue;
        }
        let mut journey = g.tags.iter().find_map(|t| t.strip_prefix("journey:")).and_then(|j| journeys.index.get(j));
        if g.tags.is_empty()
            && let Some(j) = depends_on_journey.get(&g.id)
        {
            match journeys.index.get(j) {
                Some(index) => {
                    journey = Some(index);
                    b.nested.insert(g.id.clone(), j.clone());
                }
                None => {
                    b.foreign.insert(g.id.clone());
                    continue;
                }
            }
        }
        derived |= g.metadata.keys().any(|k| DERIVED.contains(&k.as_str()));
        let decl = guideline(b, g);
        match journey {
            Some(&index) => journeys.decls[index].guidelines.push(decl),
            None => top.push(decl),
        }
    }
    for (pid, &index) in &journeys.conditions {
        if let Some(id) = journeys.decls[index].id.clone() {
            b.condition_journeys.insert(pid.clone(), id);
        }
    }
    if derived {
        b.lose(
            format!("the properties Parlant's indexing wrote into guideline metadata ({})", DERIVED[..4].join(", ")),
            "they are Parlant's engine's bookkeeping; Guidepost works out what it needs itself",
        );
    }
    Ok(top)
}

fn guideline(b: &mut Builder<'_>, g: &GuidelineDto) -> GuidelineDecl {
    let id = b.fresh_id(&g.condition, &g.id);
    b.guideline_ids.insert(g.id.clone(), id.clone());
    let criticality = match g.criticality.as_deref() {
        Some("low") => Some(Criticality::Low),
        Some("high") => Some(Criticality::High),
        Some("medium") | None => None,
        Some(other) => {
            b.lose(format!("the criticality of guideline `{id}`"), format!("`{other}` is not low, medium or high"));
            None
        }
    };
    let metadata: IndexMap<String, serde_json::Value> = g
        .metadata
        .iter()
        .filter(|(k, _)| !DERIVED.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let tools = match b.server.guideline_details.get(&g.id) {
        Some(Ok(detail)) => detail
            .tool_associations
            .iter()
            .map(|a| format!("{}:{}", a.tool_id.service_name, a.tool_id.tool_name))
            .collect(),
        Some(Err(e)) => {
            let why = format!("{e}{}", super::known_cause(e, false));
            b.lose(format!("whether guideline `{id}` (\"{}\") has tools, and which", g.condition), why);
            Vec::new()
        }
        None => Vec::new(),
    };
    let composition_mode = g.composition_mode.as_deref().and_then(|m| b.composition(m, &format!("guideline `{id}`")));
    GuidelineDecl {
        id: Some(id),
        condition: g.condition.clone(),
        action: g.action.clone().filter(|a| !a.trim().is_empty()),
        description: g.description.clone().filter(|d| !d.trim().is_empty()),
        criticality,
        priority: (g.priority != 0).then_some(g.priority),
        enabled: (!g.enabled).then_some(false),
        track: (!g.track).then_some(false),
        tags: b.tag_refs(&g.tags),
        labels: g.labels.clone(),
        tools,
        metadata,
        composition_mode,
        ..GuidelineDecl::default()
    }
}

/// Every relationship the reads found, once each.
pub(crate) fn relationships(b: &mut Builder<'_>) -> Vec<RelationshipDecl> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for read in &b.server.relationships {
        let list = match &read.answer {
            Ok(list) => list,
            Err(e) => {
                let of = match &read.of {
                    RelationshipsOf::Guideline(pid) => match b.guideline_ids.get(pid) {
                        Some(id) => format!("guideline `{id}`"),
                        None => format!("guideline {pid}"),
                    },
                    RelationshipsOf::Tag(tag) => format!("tag `{tag}`"),
                    RelationshipsOf::Tool(t) => format!("tool `{}:{}`", t.service_name, t.tool_name),
                };
                b.lose(format!("the relationships of {of}"), format!("{e}{}", super::known_cause(e, true)));
                continue;
            }
        };
        for r in list {
            if !seen.insert(r.id.clone()) {
                continue;
            }
            let what = format!("a {} relationship ({})", r.kind, r.id);
            let kind = match r.kind.as_str() {
                "entailment" => RelationshipKind::Entailment,
                "priority" => RelationshipKind::Priority,
                "dependency" => RelationshipKind::Dependency,
                "disambiguation" => RelationshipKind::Disambiguation,
                "overlap" => RelationshipKind::Overlap,
                "reevaluation" => RelationshipKind::Reevaluation,
                other => {
                    b.lose(what, format!("`{other}` is not a relationship kind Guidepost knows"));
                    continue;
                }
            };
            let (Some(source), Some(target)) = (r.source(), r.target()) else {
                b.lose(what, "the API gave it no source or no target");
                continue;
            };
            let foreign = |end: &RelationshipEnd| matches!(end, RelationshipEnd::Guideline(g) if b.foreign.contains(g));
            if foreign(&source) || foreign(&target) {
                continue;
            }
            // A journey's own guideline, placed in the journey: the dependency is its placement.
            if let (RelationshipEnd::Guideline(g), RelationshipEnd::Tag(tag)) = (&source, &target)
                && b.nested.get(g).is_some_and(|j| tag.strip_prefix("journey:") == Some(j.as_str()))
                && kind == RelationshipKind::Dependency
            {
                continue;
            }
            let Some(source) = end(b, &source, read.tool(), &what) else { continue };
            let Some(target) = end(b, &target, read.tool(), &what) else { continue };
            // A disambiguation is one question among all its targets; Parlant stores one
            // relationship per target.
            let merged = (kind == RelationshipKind::Disambiguation)
                .then(|| out.iter_mut().find(|r: &&mut RelationshipDecl| r.kind == kind && r.source == source))
                .flatten();
            match merged {
                Some(existing) => {
                    let mut targets = existing.target.to_vec();
                    targets.push(target);
                    existing.target = OneOrMany::Many(targets);
                }
                None => out.push(RelationshipDecl { kind, source, target: OneOrMany::One(target), group: None }),
            }
        }
    }
    out
}

/// A relationship's end as the definition refers to it; None (and a loss) when it is not
/// part of the import.
fn end(b: &mut Builder<'_>, end: &RelationshipEnd, tool: Option<&ToolIdDto>, what: &str) -> Option<String> {
    match end {
        RelationshipEnd::Guideline(pid) => {
            if let Some(id) = b.guideline_ids.get(pid) {
                return Some(format!("guideline:{id}"));
            }
            // Relationships to a journey made through the SDK point at its condition guidelines.
            if let Some(journey) = b.condition_journeys.get(pid) {
                return Some(format!("journey:{journey}"));
            }
            b.lose(what.to_string(), format!("it relates to guideline {pid}, which belongs to another agent"));
            None
        }
        RelationshipEnd::Tag(tag) => {
            if let Some(journey) = tag.strip_prefix("journey:") {
                if let Some(id) = b.journey_ids.get(journey) {
                    return Some(format!("journey:{id}"));
                }
                b.lose(what.to_string(), format!("it relates to journey {journey}, which belongs to another agent"));
                return None;
            }
            if tag.contains(':') {
                b.lose(what.to_string(), format!("it relates to the built-in tag `{tag}`, which has no counterpart"));
                return None;
            }
            let names = b.tag_refs(std::slice::from_ref(tag));
            names.first().map(|name| format!("tag:{name}"))
        }
        RelationshipEnd::Tool(name) => b.tool_ref(name, tool, what).map(|t| format!("tool:{t}")),
    }
}
