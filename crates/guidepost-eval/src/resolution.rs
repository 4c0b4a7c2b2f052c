//! Cases that give what matched before relational resolution: resolution alone decides their
//! `relationships`, without a model.

use guidepost_engine::catalog::Entity;
use guidepost_engine::record::{Effect, ResolutionRecord};
use guidepost_engine::{CompiledAgent, GuidelineMatch, MatchKind, MatcherConfig, RelationalResolver};
use serde_json::json;

use crate::case::Case;
use crate::run::{Decided, Kind};

/// The relationship decisions of `case`, whose `matched` lists what matched before resolution.
pub(crate) fn decide(case: &Case, run: usize, agent: &CompiledAgent, config: &MatcherConfig) -> Vec<Decided> {
    let matched = case.spec.matched.as_deref().unwrap_or_default();
    let mut journeys: Vec<String> = case.spec.state.journeys.keys().cloned().collect();
    let mut matches = Vec::new();
    for id in matched {
        match id.strip_prefix("journey:") {
            Some(j) => {
                if !journeys.iter().any(|x| x == j) {
                    journeys.push(j.to_string());
                }
            }
            None => {
                if let Some(g) = agent.guideline(id) {
                    let kind = match &g.origin {
                        guidepost_engine::catalog::GuidelineOrigin::JourneyCondition(j) => {
                            MatchKind::JourneyCondition { journey: j.clone() }
                        }
                        _ => MatchKind::Guideline,
                    };
                    matches.push(GuidelineMatch {
                        guideline_id: g.id.clone(),
                        kind,
                        condition: g.condition.clone(),
                        action: g.action.clone(),
                        tools: g.tools.clone(),
                        score: 10,
                        rationale: "given as matched".into(),
                    });
                }
            }
        }
    }
    let resolved = RelationalResolver::new(agent, config.numeric_priority).resolve(&matches, &journeys);
    case.spec
        .expect
        .relationships
        .iter()
        .map(|(subject, expected)| {
            let entity = match subject.strip_prefix("journey:") {
                Some(j) => Entity::Journey(j.to_string()),
                None => Entity::Guideline(subject.clone()),
            };
            let followed = match &entity {
                Entity::Journey(j) => resolved.journeys.contains(j),
                Entity::Guideline(g) => resolved.matches.iter().any(|m| &m.guideline_id == g),
            };
            let was_matched = matched.iter().any(|m| m == subject);
            let rationale = why(&entity, was_matched, followed, &resolved.records);
            Decided {
                case: case.spec.id.clone(),
                run,
                kind: Kind::Relationship,
                subject: subject.clone(),
                expected: json!(expected),
                actual: json!(followed),
                correct: *expected == followed,
                rationale: Some(rationale),
                probability: None,
            }
        })
        .collect()
}

/// Why resolution left `entity` followed or not: its resolution records, or that nothing
/// changed it.
pub(crate) fn why(entity: &Entity, was_matched: bool, followed: bool, records: &[ResolutionRecord]) -> String {
    let own: Vec<String> = records
        .iter()
        .filter(|r| &r.entity == entity)
        .map(|r| {
            let effect = match r.effect {
                Effect::Added => "added",
                Effect::Dropped => "dropped",
            };
            format!("{effect}: {}", serde_json::to_string(&r.reason).unwrap_or_default())
        })
        .collect();
    if !own.is_empty() {
        return own.join("; ");
    }
    match (was_matched, followed) {
        (true, true) => "matched, and nothing in resolution dropped it".into(),
        (false, false) => "not matched, and nothing in resolution added it".into(),
        (true, false) => "matched, then dropped".into(),
        (false, true) => "not matched, then added".into(),
    }
}
