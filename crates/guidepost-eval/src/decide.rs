//! The decisions of a case, read from the matching passes of its turn, each with why the
//! engine decided so.

use guidepost_engine::catalog::Entity;
use guidepost_engine::record::{MatchingRecord, Verdict};
use guidepost_engine::{Category, MatchKind, MatchingContext, MatchingOutcome};
use serde_json::{Value, json};

use crate::case::Case;
use crate::run::{Decided, Kind, clarification_options, journey_position, sorted, verdict_of};

/// One decision of `case`.
pub(crate) fn decided(
    case: &Case,
    run: usize,
    kind: Kind,
    subject: &str,
    expected: Value,
    actual: Value,
    rationale: Option<String>,
) -> Decided {
    let correct = expected == actual;
    Decided {
        case: case.spec.id.clone(),
        run,
        kind,
        subject: subject.to_string(),
        expected,
        actual,
        correct,
        rationale,
        probability: None,
    }
}

/// Every decision of `case`, lost with a pass that failed (`why`).
pub(crate) fn lost(case: &Case, run: usize, why: &str) -> Vec<Decided> {
    let expect = &case.spec.expect;
    let why = Some(why.to_string());
    let mut out = Vec::new();
    for (g, applies) in &expect.guidelines {
        out.push(decided(case, run, Kind::Guideline, g, json!(applies), Value::Null, why.clone()));
    }
    for (g, applies) in &expect.relationships {
        out.push(decided(case, run, Kind::Relationship, g, json!(applies), Value::Null, why.clone()));
    }
    for (j, state) in &expect.journeys {
        out.push(decided(case, run, Kind::Journey, j, json!(state), Value::Null, why.clone()));
    }
    if let Some(options) = &expect.clarification {
        out.push(decided(case, run, Kind::Disambiguation, "clarification", sorted(options), Value::Null, why.clone()));
    }
    for tool in expect.tools.keys() {
        out.push(decided(case, run, Kind::Tool, tool, json!("?"), Value::Null, why.clone()));
    }
    out
}

/// The guideline, relationship, journey and clarification decisions of `case` after its
/// matching `passes` (the first pass of the turn, then the one after its tool calls, if any).
pub(crate) fn matching(case: &Case, run: usize, passes: &[&MatchingOutcome], ctx: &MatchingContext) -> Vec<Decided> {
    let Some(last) = passes.last() else { return Vec::new() };
    let records: Vec<&MatchingRecord> = passes.iter().map(|p| &p.record).collect();
    let expect = &case.spec.expect;
    let mut out = Vec::new();
    for (g, applies) in &expect.guidelines {
        let candidate = verdict_of(&records, g);
        let actual = candidate.is_some_and(|c| c.verdict == Verdict::Matched);
        let why = candidate.map(|c| {
            let verdict = serde_json::to_value(c.verdict).ok().and_then(|v| v.as_str().map(str::to_string));
            let verdict = verdict.unwrap_or_default();
            match (&c.rationale, c.category) {
                (Some(r), Some(category)) => format!("{verdict} ({}): {r}", category.as_str()),
                (Some(r), None) => format!("{verdict}: {r}"),
                (None, Some(category)) => format!("{verdict} ({})", category.as_str()),
                (None, None) => verdict,
            }
        });
        let mut decision = decided(case, run, Kind::Guideline, g, json!(applies), json!(actual), why);
        decision.probability = candidate.and_then(|c| c.probability);
        out.push(decision);
    }
    for (subject, followed) in &expect.relationships {
        let entity = match subject.strip_prefix("journey:") {
            Some(j) => Entity::Journey(j.to_string()),
            None => Entity::Guideline(subject.clone()),
        };
        let actual = match &entity {
            Entity::Journey(j) => last.journey_paths.contains_key(j),
            Entity::Guideline(g) => {
                last.matches.iter().any(|m| &m.guideline_id == g && matches!(m.kind, MatchKind::Guideline))
            }
        };
        let was_matched = match &entity {
            Entity::Journey(j) => last.journey_paths.contains_key(j),
            Entity::Guideline(g) => last.unresolved.iter().any(|m| &m.guideline_id == g),
        };
        let why = crate::resolution::why(&entity, was_matched, actual, &last.record.resolutions);
        out.push(decided(case, run, Kind::Relationship, subject, json!(followed), json!(actual), Some(why)));
    }
    for (j, state) in &expect.journeys {
        let actual = journey_position(passes, ctx, j);
        let why: Vec<String> = records
            .iter()
            .filter_map(|r| r.journey(j))
            .enumerate()
            .map(
                |(i, r)| {
                    if passes.len() > 1 { format!("pass {}: {}", i + 1, r.rationale) } else { r.rationale.clone() }
                },
            )
            .collect();
        out.push(decided(
            case,
            run,
            Kind::Journey,
            j,
            json!(state),
            json!(actual),
            (!why.is_empty()).then(|| why.join(" | ")),
        ));
    }
    if let Some(options) = &expect.clarification {
        let asked = clarification_options(last);
        // Why a question was asked or not: the disambiguation checks' own rationales.
        let why: Vec<String> = records
            .iter()
            .flat_map(|r| r.candidates.iter())
            .filter(|c| c.category == Some(Category::Disambiguation) && c.verdict != Verdict::Carried)
            .map(|c| format!("{}: {}", c.guideline_id, c.rationale.as_deref().unwrap_or("no rationale")))
            .collect();
        let why = if why.is_empty() { "no disambiguation was checked".to_string() } else { why.join("; ") };
        out.push(decided(case, run, Kind::Disambiguation, "clarification", sorted(options), sorted(&asked), Some(why)));
    }
    out
}
