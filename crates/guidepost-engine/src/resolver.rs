//! Relational resolution: what the relationships between matched guidelines and active
//! journeys change about the matches.
//!
//! Per round, on the current active set: dependencies (`dependency` needs every target,
//! `dependency_any` needs one target per group; a journey-scoped guideline or node needs
//! its journey; failures cascade), then relational `priority` (an active source drops its
//! targets, even when it is itself outranked; a priority between tags drops every active
//! member of its target, whatever priorities hold between members, as in the reference; members
//! of a cycle of priorities between single guidelines or journeys keep each other), then
//! `entailment` (active sources add their targets). Rounds repeat until nothing changes; drops by priority and
//! additions by entailment are kept across rounds, dependency failures are recomputed.
//! Numeric priority applies as configured ([`NumericPriority`]).
//!
//! The result depends only on the set of inputs (entities are processed in sorted order),
//! and whatever survives survives resolving the result again.

use std::collections::{BTreeMap, BTreeSet};

use guidepost_core::{Endpoint, Relationship, RelationshipKind};

use crate::catalog::{CompiledAgent, Entity};
use crate::config::NumericPriority;
use crate::record::{Effect, GuidelineMatch, ResolutionReason, ResolutionRecord};

/// The outcome of resolution.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Resolved {
    /// Matches that stand, in definition order.
    pub matches: Vec<GuidelineMatch>,
    /// Active journeys, sorted.
    pub journeys: Vec<String>,
    /// Every drop and addition, with its reason.
    pub records: Vec<ResolutionRecord>,
}

impl Resolved {
    /// Journeys active after resolution that were not active before it (activated by
    /// entailment): they need node selection and a pass over their guidelines.
    pub fn activated(&self, before: &[String]) -> Vec<String> {
        self.journeys.iter().filter(|j| !before.contains(j)).cloned().collect()
    }
}

type Active = BTreeSet<Entity>;
type Reasons = BTreeMap<Entity, ResolutionReason>;
/// Priority between single entities: target -> its sources, each with the relationship.
type Edges = BTreeMap<Entity, BTreeSet<(Entity, String)>>;

/// Applies relationships to matches. See the module documentation.
#[derive(Debug, Clone, Copy)]
pub struct RelationalResolver<'a> {
    agent: &'a CompiledAgent,
    numeric: NumericPriority,
}

const MAX_ROUNDS: usize = 64;

impl<'a> RelationalResolver<'a> {
    /// A resolver over the relationships of `agent`.
    pub fn new(agent: &'a CompiledAgent, numeric: NumericPriority) -> Self {
        Self { agent, numeric }
    }

    /// Resolves `matches` (as decided by the model and journey selection) with the
    /// `journeys` active for this turn.
    pub fn resolve(&self, matches: &[GuidelineMatch], journeys: &[String]) -> Resolved {
        let mut given: BTreeMap<String, GuidelineMatch> = BTreeMap::new();
        for m in matches {
            match given.get(&m.guideline_id) {
                Some(old) if (old.score, &old.rationale) >= (m.score, &m.rationale) => {}
                _ => {
                    given.insert(m.guideline_id.clone(), m.clone());
                }
            }
        }
        let initial: Active = given
            .keys()
            .map(|g| Entity::Guideline(g.clone()))
            .chain(journeys.iter().map(|j| Entity::Journey(j.clone())))
            .collect();
        let mut deprioritized = Reasons::new();
        let mut entailed = Reasons::new();
        let mut failed = Reasons::new();
        let mut active = Active::new();
        for _ in 0..MAX_ROUNDS {
            let base: Active =
                initial.iter().chain(entailed.keys()).filter(|e| !deprioritized.contains_key(*e)).cloned().collect();
            let (after_deps, deps_failed) = self.dependencies(&base);
            failed = deps_failed;
            let dropped = self.priority(&after_deps);
            let after_priority: Active = after_deps.iter().filter(|e| !dropped.contains_key(*e)).cloned().collect();
            let added = self.entailment(&after_priority, &base, &deprioritized, &dropped);
            let changed = dropped.keys().any(|e| !deprioritized.contains_key(e))
                || added.keys().any(|e| !entailed.contains_key(e));
            for (e, r) in dropped {
                deprioritized.entry(e).or_insert(r);
            }
            for (e, r) in added {
                entailed.entry(e).or_insert(r);
            }
            active = after_priority;
            if !changed {
                break;
            }
        }
        let numeric_dropped = self.numeric(&active);
        active.retain(|e| !numeric_dropped.contains_key(e));
        self.finish(&given, &initial, active, [&failed, &deprioritized, &numeric_dropped], &entailed)
    }

    fn finish(
        &self,
        given: &BTreeMap<String, GuidelineMatch>,
        initial: &Active,
        active: Active,
        drop_reasons: [&Reasons; 3],
        entailed: &Reasons,
    ) -> Resolved {
        let mut records = Vec::new();
        for e in initial.iter().filter(|e| !active.contains(*e)) {
            if let Some(reason) = drop_reasons.iter().find_map(|r| r.get(e)) {
                records.push(ResolutionRecord { entity: e.clone(), effect: Effect::Dropped, reason: reason.clone() });
            }
        }
        let mut matches = Vec::new();
        let mut journeys = Vec::new();
        for e in &active {
            match e {
                Entity::Journey(j) => journeys.push(j.clone()),
                Entity::Guideline(g) => {
                    if let Some(m) = given.get(g) {
                        matches.push(m.clone());
                    } else if let Some(reason) = entailed.get(e) {
                        records.push(ResolutionRecord {
                            entity: e.clone(),
                            effect: Effect::Added,
                            reason: reason.clone(),
                        });
                        if let Some(m) = self.entailed_match(g, reason, given) {
                            matches.push(m);
                        }
                    }
                }
            }
        }
        for e in active.iter().filter(|e| matches!(e, Entity::Journey(_)) && !initial.contains(*e)) {
            if let Some(reason) = entailed.get(e) {
                records.push(ResolutionRecord { entity: e.clone(), effect: Effect::Added, reason: reason.clone() });
            }
        }
        matches.sort_by_key(|m| (self.agent.order_of(&m.guideline_id), m.guideline_id.clone()));
        Resolved { matches, journeys, records }
    }

    fn entailed_match(
        &self,
        id: &str,
        reason: &ResolutionReason,
        given: &BTreeMap<String, GuidelineMatch>,
    ) -> Option<GuidelineMatch> {
        let g = self.agent.guideline(id)?;
        let by = match reason {
            ResolutionReason::Entailed { by, .. } => by.as_str(),
            _ => "",
        };
        let source_score = given.get(by).map_or(10, |m| m.score);
        Some(crate::pass::guideline_match(g, source_score, format!("entailed by {by}")))
    }

    /// The journey an entity belongs to (scoped guideline or journey node).
    fn journey_of(&self, e: &Entity) -> Option<&str> {
        let Entity::Guideline(id) = e else { return None };
        match self.agent.guideline(id) {
            Some(g) => g.journey.as_deref(),
            None => self.agent.journey_of_node(id),
        }
    }

    fn priority_of(&self, e: &Entity) -> i32 {
        match e {
            Entity::Journey(j) => self.agent.journey(j).map_or(0, |g| g.priority),
            Entity::Guideline(id) => match self.agent.guideline(id) {
                Some(g) => g.priority,
                None => self.agent.journey_of_node(id).and_then(|j| self.agent.journey(j)).map_or(0, |g| g.priority),
            },
        }
    }

    fn relationships(&self, kind: RelationshipKind) -> impl Iterator<Item = &'a Relationship> + 'a {
        self.agent.definition.relationships.iter().filter(move |r| r.kind == kind)
    }

    /// Whether the source end of a priority or entailment is active: a guideline or journey
    /// that is, or a tag with any active member (`tag:` and `any-tag:` alike; only
    /// dependencies tell them apart), as in the reference.
    fn source_active(&self, ep: &Endpoint, active: &Active) -> bool {
        match ep {
            Endpoint::Tag { tag, .. } => self.agent.tag_members(tag).iter().any(|m| active.contains(m)),
            other => self.endpoint_active(other, active),
        }
    }

    fn endpoint_active(&self, ep: &Endpoint, active: &Active) -> bool {
        match ep {
            Endpoint::Guideline(g) => active.contains(&Entity::Guideline(g.clone())),
            Endpoint::Journey(j) => active.contains(&Entity::Journey(j.clone())),
            Endpoint::Tag { tag, mode } => self.agent.tag_active(tag, *mode, |m| active.contains(m)),
            Endpoint::Tool(_) => false,
        }
    }

    /// Whether a relationship's source end covers entity `e` (for dependencies).
    fn covers(&self, ep: &Endpoint, e: &Entity) -> bool {
        match ep {
            Endpoint::Guideline(g) => matches!(e, Entity::Guideline(x) if x == g),
            Endpoint::Journey(j) => matches!(e, Entity::Journey(x) if x == j) || self.journey_of(e) == Some(j.as_str()),
            Endpoint::Tag { tag, .. } => self.agent.tag_members(tag).contains(e),
            Endpoint::Tool(_) => false,
        }
    }

    /// Active entities an end stands for (targets of priority: a journey brings its nodes
    /// and scoped guidelines along).
    fn members_in(&self, ep: &Endpoint, active: &Active) -> Vec<Entity> {
        let mut out: Vec<Entity> = match ep {
            Endpoint::Guideline(g) => vec![Entity::Guideline(g.clone())],
            Endpoint::Journey(j) => {
                let mut v = vec![Entity::Journey(j.clone())];
                v.extend(active.iter().filter(|e| self.journey_of(e) == Some(j.as_str())).cloned());
                v
            }
            Endpoint::Tag { tag, .. } => self.agent.tag_members(tag).to_vec(),
            Endpoint::Tool(_) => Vec::new(),
        };
        out.retain(|e| active.contains(e));
        out
    }

    fn unmet(&self, e: &Entity, active: &Active) -> Option<ResolutionReason> {
        if let Some(j) = self.journey_of(e)
            && !active.contains(&Entity::Journey(j.to_string()))
        {
            return Some(ResolutionReason::JourneyInactive { journey: j.to_string() });
        }
        for r in self.relationships(RelationshipKind::Dependency) {
            if self.covers(&r.source, e) && !self.endpoint_active(&r.target, active) {
                return Some(ResolutionReason::UnmetDependency {
                    relationship: r.id.clone(),
                    target: r.target.to_string(),
                });
            }
        }
        let mut groups: BTreeMap<String, bool> = BTreeMap::new();
        for r in self.relationships(RelationshipKind::DependencyAny) {
            if self.covers(&r.source, e) {
                let group = r.group.clone().unwrap_or_else(|| r.id.clone());
                let met = self.endpoint_active(&r.target, active);
                *groups.entry(group).or_insert(false) |= met;
            }
        }
        groups.into_iter().find(|(_, met)| !met).map(|(group, _)| ResolutionReason::UnmetDependencyAny { group })
    }

    fn dependencies(&self, base: &Active) -> (Active, Reasons) {
        let mut failed = Reasons::new();
        loop {
            let active: Active = base.iter().filter(|e| !failed.contains_key(*e)).cloned().collect();
            let newly: Vec<(Entity, ResolutionReason)> =
                active.iter().filter_map(|e| self.unmet(e, &active).map(|r| (e.clone(), r))).collect();
            if newly.is_empty() {
                return (active, failed);
            }
            failed.extend(newly);
        }
    }

    fn priority(&self, active: &Active) -> Reasons {
        // edges: target -> [(source, relationship id)]. A relationship with a tag at either
        // end is tag-level: it removes every active member of its target whatever priorities
        // hold between members (the reference's rule), so only relationships between single
        // guidelines and journeys can form the cycles whose members keep each other.
        let mut edges: Edges = BTreeMap::new();
        let mut by_tag: BTreeMap<Entity, (Entity, String)> = BTreeMap::new();
        for r in self.relationships(RelationshipKind::Priority) {
            if !self.source_active(&r.source, active) {
                continue;
            }
            let tag_level = matches!(r.source, Endpoint::Tag { .. }) || matches!(r.target, Endpoint::Tag { .. });
            let sources = self.members_in(&r.source, active);
            let targets = self.members_in(&r.target, active);
            for s in &sources {
                for t in targets.iter().filter(|t| *t != s && !sources.contains(t)) {
                    if tag_level {
                        by_tag.entry(t.clone()).or_insert_with(|| (s.clone(), r.id.clone()));
                    } else {
                        edges.entry(t.clone()).or_default().insert((s.clone(), r.id.clone()));
                    }
                }
            }
        }
        // Mutual priority: numbers break the tie (or both stay).
        let pairs: Vec<(Entity, Entity)> = edges
            .iter()
            .flat_map(|(t, ss)| ss.iter().map(move |(s, _)| (s.clone(), t.clone())))
            .filter(|(s, t)| edges.get(s).is_some_and(|back| back.iter().any(|(x, _)| x == t)))
            .collect();
        let mut numeric = Reasons::new();
        for (s, t) in pairs {
            let (ps, pt) = (self.priority_of(&s), self.priority_of(&t));
            let s_wins = self.numeric == NumericPriority::BreakTies && ps > pt;
            if !s_wins {
                if let Some(set) = edges.get_mut(&t) {
                    set.retain(|(x, _)| *x != s);
                }
            } else {
                numeric.insert(
                    t.clone(),
                    ResolutionReason::NumericPriority { by: entity_name(&s), winner: ps, priority: pt },
                );
            }
        }
        let mut memo: BTreeMap<Entity, Option<(Entity, String)>> = BTreeMap::new();
        let mut dropped = Reasons::new();
        for e in active {
            let by = by_tag.get(e).cloned().or_else(|| dropped_by(e, &edges, &mut memo));
            if let Some((by, rel)) = by {
                let reason = numeric
                    .get(e)
                    .filter(|r| matches!(r, ResolutionReason::NumericPriority { by: b, .. } if *b == entity_name(&by)))
                    .cloned()
                    .unwrap_or(ResolutionReason::Deprioritized { relationship: rel, by: entity_name(&by) });
                dropped.insert(e.clone(), reason);
            }
        }
        dropped
    }

    fn entailment(&self, active: &Active, base: &Active, deprioritized: &Reasons, dropped: &Reasons) -> Reasons {
        let mut added = Reasons::new();
        for r in self.relationships(RelationshipKind::Entailment) {
            if !self.source_active(&r.source, active) {
                continue;
            }
            let Some(by) = self.source_entity(&r.source, active) else { continue };
            let targets: Vec<Entity> = match &r.target {
                Endpoint::Guideline(g) if self.agent.guideline(g).is_some() => vec![Entity::Guideline(g.clone())],
                Endpoint::Journey(j) if self.agent.journey(j).is_some() => vec![Entity::Journey(j.clone())],
                Endpoint::Tag { tag, .. } => self.agent.tag_members(tag).to_vec(),
                _ => Vec::new(),
            };
            for t in targets {
                if base.contains(&t) || deprioritized.contains_key(&t) || dropped.contains_key(&t) {
                    continue;
                }
                added
                    .entry(t)
                    .or_insert(ResolutionReason::Entailed { relationship: r.id.clone(), by: entity_name(&by) });
            }
        }
        added
    }

    fn source_entity(&self, ep: &Endpoint, active: &Active) -> Option<Entity> {
        self.members_in(ep, active).into_iter().next()
    }

    /// Entities that an active entity entails (whether or not they also matched).
    fn entailed_targets(&self, active: &Active) -> Active {
        let mut out = Active::new();
        for r in self.relationships(RelationshipKind::Entailment) {
            if !self.source_active(&r.source, active) {
                continue;
            }
            match &r.target {
                Endpoint::Guideline(g) => {
                    out.insert(Entity::Guideline(g.clone()));
                }
                Endpoint::Journey(j) => {
                    out.insert(Entity::Journey(j.clone()));
                }
                Endpoint::Tag { tag, .. } => out.extend(self.agent.tag_members(tag).iter().cloned()),
                Endpoint::Tool(_) => {}
            }
        }
        out
    }

    /// Highest-wins numeric priority; entailed entities take no part.
    fn numeric(&self, active: &Active) -> Reasons {
        let mut out = Reasons::new();
        if self.numeric != NumericPriority::HighestWins {
            return out;
        }
        let entailed = self.entailed_targets(active);
        let competing: Vec<&Entity> = active.iter().filter(|e| !entailed.contains(*e)).collect();
        let Some(best) = competing
            .iter()
            .max_by(|a, b| self.priority_of(a).cmp(&self.priority_of(b)).then_with(|| b.cmp(a)))
            .map(|e| (*e).clone())
        else {
            return out;
        };
        let top = self.priority_of(&best);
        for e in competing {
            let p = self.priority_of(e);
            if p < top {
                out.insert(
                    e.clone(),
                    ResolutionReason::NumericPriority { by: entity_name(&best), winner: top, priority: p },
                );
            }
        }
        out
    }
}

/// The name of an entity in records: the guideline id, or `journey:{id}`.
pub fn entity_name(e: &Entity) -> String {
    match e {
        Entity::Guideline(g) => g.clone(),
        Entity::Journey(j) => format!("journey:{j}"),
    }
}

/// Whether `e` is dropped: some active source has priority over it, even a source that is
/// itself outranked (with a over b over c all active, only a remains). A source that `e`
/// itself outranks, directly or through others (a priority cycle), does not drop it, so a
/// cycle does not empty itself. Entities are visited in sorted order, so the outcome does not
/// depend on input order.
fn dropped_by(
    e: &Entity,
    edges: &Edges,
    memo: &mut BTreeMap<Entity, Option<(Entity, String)>>,
) -> Option<(Entity, String)> {
    if let Some(known) = memo.get(e) {
        return known.clone();
    }
    let result = edges.get(e).and_then(|sources| sources.iter().find(|(s, _)| !outranks(e, s, edges))).cloned();
    memo.insert(e.clone(), result.clone());
    result
}

/// Whether `by` has priority over `e`, directly or through others: `by` is among the sources
/// reached by walking from `e` to whatever outranks it (iteratively, over active entities).
fn outranks(by: &Entity, e: &Entity, edges: &Edges) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![e.clone()];
    while let Some(x) = stack.pop() {
        for (s, _) in edges.get(&x).into_iter().flatten() {
            if s == by {
                return true;
            }
            if seen.insert(s.clone()) {
                stack.push(s.clone());
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use guidepost_core::definition::{SourceFile, load_agent};

    use super::*;
    use crate::record::MatchKind;

    const DEF: &str = r#"
agent: { name: Otto }
guidelines:
  - { id: human, condition: The customer asks for a human, action: Hand over, priority_over: ["journey:order"] }
  - { id: scoped_a, condition: A, action: do a }
journeys:
  - id: order
    title: Order
    conditions: [The customer wants an order]
    start: ask
    states:
      - { id: ask, chat: Ask for the number, next: end }
    guidelines:
      - { id: scoped, condition: The customer is upset, action: Apologize }
"#;

    fn agent() -> CompiledAgent {
        CompiledAgent::new(Arc::new(load_agent(&[SourceFile::new("a.yaml", DEF)]).definition.unwrap()))
    }

    fn m(id: &str) -> GuidelineMatch {
        GuidelineMatch {
            guideline_id: id.into(),
            kind: MatchKind::Guideline,
            condition: String::new(),
            action: None,
            tools: vec![],
            score: 10,
            rationale: String::new(),
        }
    }

    #[test]
    fn priority_over_a_journey_drops_it_with_its_guidelines() {
        let agent = agent();
        let resolver = RelationalResolver::new(&agent, NumericPriority::BreakTies);
        let resolved = resolver.resolve(&[m("human"), m("scoped")], &["order".to_string()]);
        assert_eq!(resolved.journeys, Vec::<String>::new());
        assert_eq!(resolved.matches.iter().map(|m| m.guideline_id.as_str()).collect::<Vec<_>>(), vec!["human"]);
        let journey = resolved.records.iter().find(|r| r.entity == Entity::Journey("order".into())).unwrap();
        assert!(matches!(&journey.reason, ResolutionReason::Deprioritized { by, .. } if by == "human"));
    }

    fn resolve_ids(def: &str, ids: &[&str]) -> Vec<String> {
        let agent = CompiledAgent::new(Arc::new(load_agent(&[SourceFile::new("a.yaml", def)]).definition.unwrap()));
        let resolver = RelationalResolver::new(&agent, NumericPriority::BreakTies);
        let matches: Vec<GuidelineMatch> = ids.iter().map(|id| m(id)).collect();
        let mut out: Vec<String> =
            resolver.resolve(&matches, &[]).matches.into_iter().map(|m| m.guideline_id).collect();
        out.sort();
        out
    }

    #[test]
    fn an_outranked_guideline_still_outranks_the_ones_below_it() {
        let chain = r#"
agent: { name: Otto }
guidelines:
  - { id: a, condition: A, action: do a, priority_over: [b] }
  - { id: b, condition: B, action: do b, priority_over: [c] }
  - { id: c, condition: C, action: do c }
"#;
        assert_eq!(resolve_ids(chain, &["a", "b", "c"]), ["a"]);
        assert_eq!(resolve_ids(chain, &["b", "c"]), ["b"]);
        assert_eq!(resolve_ids(chain, &["a", "c"]), ["a", "c"]);
    }

    #[test]
    fn a_tag_priority_is_absolute_and_member_priorities_still_apply() {
        // t1 over t2 as tags, and g2_1 (in t2) over g1_1 (in t1) as guidelines, all four
        // matched: the tag removes both members of t2, and g2_1, though removed, still removes
        // g1_1. Only g1_2 is followed.
        let tags = r#"
agent: { name: Otto }
tags: [t1, t2]
guidelines:
  - { id: g1_1, condition: A, action: do a, tags: [t1] }
  - { id: g1_2, condition: B, action: do b, tags: [t1] }
  - { id: g2_1, condition: C, action: do c, tags: [t2], priority_over: [g1_1] }
  - { id: g2_2, condition: D, action: do d, tags: [t2] }
relationships:
  - { kind: priority, source: "tag:t1", target: "tag:t2" }
"#;
        assert_eq!(resolve_ids(tags, &["g1_1", "g1_2", "g2_1", "g2_2"]), ["g1_2"]);
        // Without the member's priority, the tag's alone decides.
        assert_eq!(resolve_ids(tags, &["g1_1", "g1_2", "g2_2"]), ["g1_1", "g1_2"]);
        // One matched member makes the tag a source of priority (`tag:` as `any-tag:`: only
        // dependencies tell them apart).
        assert_eq!(resolve_ids(tags, &["g1_2", "g2_2"]), ["g1_2"]);
    }

    #[test]
    fn scoped_guidelines_need_their_journey() {
        let agent = agent();
        let resolver = RelationalResolver::new(&agent, NumericPriority::BreakTies);
        let resolved = resolver.resolve(&[m("scoped"), m("scoped_a")], &[]);
        assert_eq!(resolved.matches.iter().map(|m| m.guideline_id.as_str()).collect::<Vec<_>>(), vec!["scoped_a"]);
        assert!(
            matches!(&resolved.records[0].reason, ResolutionReason::JourneyInactive { journey } if journey == "order")
        );
        let with_journey = resolver.resolve(&[m("scoped")], &["order".to_string()]);
        assert_eq!(with_journey.matches.len(), 1);
        assert!(with_journey.records.is_empty());
    }
}
