//! The end of a pass: apply disambiguation, update journey paths, resolve relationships
//! (with a second selection wave for journeys that resolution activates), and assemble
//! the record.

use std::collections::BTreeSet;

use guidepost_core::{JourneyPath, ToolId};
use indexmap::IndexMap;

use super::{Decision, Pass, PassInput, State};
use crate::catalog::Entity;
use crate::error::EngineError;
use crate::journeys::paths::{PathChange, node_match};
use crate::matcher::MatchingOutcome;
use crate::prompt::ConversationView;
use crate::record::{
    Effect, GuidelineMatch, JourneyDecision, JourneyRecord, MatchKind, PredictionReason, ResolutionReason,
    ResolutionRecord, Verdict,
};
use crate::resolver::RelationalResolver;

impl<'a> Pass<'a> {
    pub(super) async fn finish(
        &self,
        input: PassInput<'_>,
        mut state: State<'a>,
        conversation: &ConversationView,
        tools_ran: &[ToolId],
    ) -> Result<MatchingOutcome, EngineError> {
        let ctx = input.ctx;
        // Disambiguation: the clarification replaces the observation and the targets it offers.
        // Which targets are plausible is the disambiguation's own judgement: a target's own check
        // asks whether the customer clearly wants it, and on a request that is ambiguous between
        // targets each of those checks is rightly no.
        let mut removed: BTreeSet<String> = BTreeSet::new();
        for (head, options, question, rationale) in &state.clarifications {
            for option in options {
                removed.insert(option.clone());
                let entity = match option.strip_prefix("journey:") {
                    Some(j) => Entity::Journey(j.to_string()),
                    None => Entity::Guideline(option.clone()),
                };
                state.record.resolutions.push(ResolutionRecord {
                    entity,
                    effect: Effect::Dropped,
                    reason: ResolutionReason::Disambiguated { source: head.id.clone() },
                });
            }
            state.raw.push(GuidelineMatch {
                guideline_id: format!("clarify:{}", head.id),
                kind: MatchKind::Clarification { source: head.id.clone(), options: options.clone() },
                condition: head.condition.clone(),
                action: Some(question.clone()),
                tools: Vec::new(),
                score: 10,
                rationale: rationale.clone(),
            });
        }
        state.raw.retain(|m| !removed.contains(&m.guideline_id));
        for j in removed.iter().filter_map(|o| o.strip_prefix("journey:")) {
            if !input.paths_in.contains_key(j)
                && let Some(d) = state.decisions.get_mut(j)
            {
                d.change = PathChange {
                    decision: JourneyDecision::NotStarted,
                    path: None,
                    correction: Some("the customer is asked to choose first (disambiguation)".into()),
                };
            }
        }

        // Paths after selection.
        let mut paths: IndexMap<String, JourneyPath> = input.paths_in.clone();
        for (journey, decision) in &state.decisions {
            match &decision.change.path {
                Some(p) => {
                    paths.insert(journey.clone(), p.clone());
                }
                None => {
                    paths.shift_remove(journey);
                }
            }
        }
        // Answers ahead, kept for the journeys still active until the journey passes the step
        // they answer.
        let mut answers: IndexMap<String, Vec<String>> = IndexMap::new();
        for (journey, path) in &paths {
            let Some(graph) = self.agent.journey(journey) else { continue };
            let passed = &path.states()[..path.states().len().saturating_sub(1)];
            let before = input.answers_in.get(journey).into_iter().flatten();
            let mut kept: Vec<String> = Vec::new();
            for edge in before.chain(state.answered_ahead.get(journey).into_iter().flatten()) {
                if !kept.contains(edge) && graph.source_of(edge).is_some_and(|from| !passed.contains(&from.id)) {
                    kept.push(edge.clone());
                }
            }
            if !kept.is_empty() {
                answers.insert(journey.clone(), kept);
            }
        }
        // Node matches: fresh for decided journeys, carried for the others.
        for (journey, path) in &paths {
            match state.decisions.get(journey) {
                Some(d) => {
                    if let Some(m) = self.agent.journey(journey).and_then(|g| node_match(g, path, &d.rationale)) {
                        state.raw.push(m);
                    }
                }
                None => state.raw.extend(
                    input
                        .carried
                        .iter()
                        .filter(|m| matches!(&m.kind, MatchKind::JourneyNode { journey: j, .. } if j == journey))
                        .cloned(),
                ),
            }
        }
        // Carried guideline verdicts (later iterations).
        let fresh: BTreeSet<String> = state.raw.iter().map(|m| m.guideline_id.clone()).collect();
        let evaluated: BTreeSet<String> = state
            .record
            .candidates
            .iter()
            .filter(|c| c.verdict != Verdict::Carried && c.verdict != Verdict::Pruned)
            .map(|c| c.guideline_id.clone())
            .collect();
        for m in &input.carried {
            let stale = match &m.kind {
                MatchKind::JourneyNode { .. } => true,
                MatchKind::Clarification { source, .. } => evaluated.contains(source),
                _ => false,
            };
            if !stale && !fresh.contains(&m.guideline_id) && !evaluated.contains(&m.guideline_id) {
                state.raw.push(m.clone());
            }
        }

        let resolver = RelationalResolver::new(self.agent, self.config.numeric_priority);
        let journeys: Vec<String> = paths.keys().cloned().collect();
        let mut resolved = resolver.resolve(&state.raw, &journeys);

        // A journey activated by resolution (entailment) gets its selection now.
        let activated = resolved.activated(&journeys);
        if !activated.is_empty() {
            let mut tasks = Vec::new();
            // Guidelines scoped to a journey whose scoped guidelines were not checked (it was
            // not predicted): check them now.
            let mut second_pass: BTreeSet<String> = BTreeSet::new();
            for journey in
                activated.iter().filter(|j| !state.scoped_checked.contains(*j) && !input.paths_in.contains_key(*j))
            {
                second_pass.extend(
                    self.agent
                        .guidelines()
                        .iter()
                        .filter(|g| g.journey.as_deref() == Some(journey.as_str()))
                        .map(|g| g.id.clone()),
                );
                tasks.extend(self.scoped_checks(journey, ctx));
            }
            state
                .record
                .candidates
                .retain(|c| !(second_pass.contains(&c.guideline_id) && c.verdict == Verdict::Pruned));
            for p in state.record.predictions.iter_mut().filter(|p| activated.contains(&p.journey_id)) {
                if p.reason == PredictionReason::NotPredicted {
                    p.reason = PredictionReason::SecondPass;
                }
            }
            for journey in &activated {
                match self.plan_journey(journey, &JourneyPath::start(), true, tools_ran, true, &[]) {
                    Ok(d) => {
                        state.decisions.insert(journey.clone(), d);
                    }
                    Err(task) => tasks.push(task),
                }
            }
            self.wave(tasks, conversation, &mut state, &input.paths_in).await;
            for journey in &activated {
                state.speculative.remove(journey).map(|d| state.decisions.insert(journey.clone(), d));
                if let Some(path) = state.decisions.get(journey).and_then(|d| d.change.path.clone()) {
                    if let Some(m) = self.agent.journey(journey).and_then(|g| {
                        node_match(g, &path, state.decisions.get(journey).map_or("", |d| d.rationale.as_str()))
                    }) {
                        state.raw.push(m);
                    }
                    paths.insert(journey.clone(), path);
                }
            }
            let journeys: Vec<String> = paths.keys().cloned().collect();
            resolved = resolver.resolve(&state.raw, &journeys);
        }
        for journey in paths.keys().cloned().collect::<Vec<_>>() {
            if !resolved.journeys.contains(&journey) {
                let before = paths.shift_remove(&journey);
                state.decisions.insert(
                    journey,
                    Decision {
                        change: PathChange { decision: JourneyDecision::Deactivated, path: None, correction: None },
                        path_before: before,
                        rationale: "deactivated by relational resolution".into(),
                        fast_path: None,
                        batch: None,
                    },
                );
            }
        }
        state.record.resolutions.extend(resolved.records);

        // Journey records.
        for (journey, d) in state.decisions {
            let path_before = d.path_before.or_else(|| input.paths_in.get(&journey).cloned());
            let path_after = paths.get(&journey).cloned();
            let rationale = describe_move(&d.change.decision, path_before.as_ref(), path_after.as_ref(), &d.rationale);
            state.record.journeys.push(JourneyRecord {
                journey_id: journey.clone(),
                decision: d.change.decision,
                path_before,
                path_after,
                rationale,
                fast_path: d.fast_path,
                batch: d.batch,
                correction: d.change.correction,
            });
        }
        for j in self.agent.journeys().keys().filter(|j| state.conditions_checked.contains(*j)).cloned() {
            if !input.paths_in.contains_key(&j) && !state.record.journeys.iter().any(|r| r.journey_id == j) {
                state.record.journeys.push(JourneyRecord {
                    journey_id: j,
                    decision: JourneyDecision::NotStarted,
                    path_before: None,
                    path_after: None,
                    rationale: "did not start: no activation condition matched".into(),
                    fast_path: None,
                    batch: None,
                    correction: None,
                });
            }
        }
        if state.calls > 0
            && state.failures.len() == state.calls
            && let Some(first) = state.failures.into_iter().next()
        {
            return Err(EngineError::AllBatchesFailed { first, failed: state.calls });
        }
        let mut considered: Vec<String> = input.considered_before.clone();
        for j in self.agent.journeys().keys() {
            if state.conditions_checked.contains(j) && !considered.contains(j) {
                considered.push(j.clone());
            }
        }
        Ok(MatchingOutcome {
            matches: resolved.matches,
            journey_paths: paths,
            journey_answers: answers,
            record: state.record,
            unresolved: state.raw,
            considered_journeys: considered,
            tool_results_seen: ctx.staged_tool_results.len(),
        })
    }
}

/// The move a journey made, then why: "moved to `dropoff`: <why>", "stayed at `pickup`:
/// <why>".
fn describe_move(
    decision: &JourneyDecision,
    before: Option<&JourneyPath>,
    after: Option<&JourneyPath>,
    why: &str,
) -> String {
    let through = |steps: &[String]| match steps.split_last() {
        Some((last, [])) => format!("`{last}`"),
        Some((last, passed)) => {
            let passed: Vec<String> = passed.iter().map(|s| format!("`{s}`")).collect();
            format!("`{last}` through {}", passed.join(", "))
        }
        None => "?".to_string(),
    };
    let at = |p: Option<&JourneyPath>| p.map_or_else(|| "?".to_string(), |p| format!("`{}`", p.current()));
    let summary = match decision {
        JourneyDecision::Started { steps } => format!("started at {}", through(steps)),
        JourneyDecision::Advanced { steps } => format!("moved to {}", through(steps)),
        JourneyDecision::Stayed => format!("stayed at {}", at(after.or(before))),
        JourneyDecision::Backtracked { to } => format!("went back to `{to}`"),
        JourneyDecision::Completed => "completed".to_string(),
        JourneyDecision::Exited => "exited".to_string(),
        JourneyDecision::NotStarted => "did not start".to_string(),
        JourneyDecision::Deactivated => "deactivated".to_string(),
    };
    if why.is_empty() { summary } else { format!("{summary}: {why}") }
}
