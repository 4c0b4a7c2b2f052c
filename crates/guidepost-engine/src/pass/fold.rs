//! Folding the results of a wave of model calls into the pass's state: check verdicts into
//! candidates and raw matches, disambiguations into clarifications, selections into journey
//! decisions, each call into a batch record.

use std::collections::HashMap;

use guidepost_core::JourneyPath;
use indexmap::IndexMap;

use super::forks::keep_waiting_for_tool;
use super::{Decision, Pass, State, Task, TaskResult, guideline_match};
use crate::batches::GuidelineVerdict;
use crate::batches::disambiguation::Disambiguation;
use crate::catalog::GuidelineOrigin;
use crate::categorize::Category;
use crate::record::{BatchRecord, CandidateRecord, Verdict};

impl<'a> Pass<'a> {
    /// Folds the results of tasks run in `wave` into `state`.
    pub(super) fn fold(
        &self,
        done: Vec<(Task<'a>, TaskResult)>,
        wave: u32,
        state: &mut State<'a>,
        paths: &IndexMap<String, JourneyPath>,
    ) {
        for (task, result) in done {
            state.calls += 1;
            let batch = state.record.batches.len();
            match (task, result) {
                (Task::Checks { category, items }, TaskResult::Checks(outcome)) => {
                    let error = outcome.answer.as_ref().err().map(ToString::to_string);
                    if let Err(crate::error::BatchError::Model(e)) = &outcome.answer {
                        state.failures.push(e.clone());
                    }
                    state.record.batches.push(BatchRecord {
                        category,
                        items: items.iter().map(|g| g.id.clone()).collect(),
                        wave,
                        usage: outcome.usage.clone(),
                        estimated_prompt_tokens: outcome.estimated_tokens,
                        error,
                    });
                    let verdicts: HashMap<&str, &GuidelineVerdict> = match &outcome.answer {
                        Ok(v) => v.iter().map(|v| (v.guideline_id.as_str(), v)).collect(),
                        Err(_) => HashMap::new(),
                    };
                    for g in items {
                        if matches!(g.origin, GuidelineOrigin::Transition { .. } | GuidelineOrigin::Correction) {
                            if let Some(v) = verdicts.get(g.id.as_str()) {
                                state.steps.insert(&g.id, v.applies, v.probability);
                            }
                            continue;
                        }
                        let (verdict, rationale) = match (&outcome.answer, verdicts.get(g.id.as_str())) {
                            (Err(_), _) => (Verdict::Failed, None),
                            (Ok(_), Some(v)) if v.applies => (Verdict::Matched, v.rationale.clone()),
                            (Ok(_), Some(v)) => (Verdict::NotMatched, v.rationale.clone()),
                            (Ok(_), None) if category == Category::LowCriticality => (Verdict::NotMatched, None),
                            (Ok(_), None) => (Verdict::NoVerdict, None),
                        };
                        let score = if verdict == Verdict::Matched { 10 } else { 0 };
                        if verdict == Verdict::Matched {
                            state.raw.push(guideline_match(g, score, rationale.clone().unwrap_or_default()));
                        }
                        state.record.candidates.push(CandidateRecord {
                            guideline_id: g.id.clone(),
                            category: Some(category),
                            batch: Some(batch),
                            verdict,
                            rationale,
                            score,
                            probability: verdicts.get(g.id.as_str()).and_then(|v| v.probability),
                        });
                    }
                }
                (Task::Disambiguation { head, targets }, TaskResult::Disambiguation(outcome)) => {
                    if let Err(crate::error::BatchError::Model(e)) = &outcome.answer {
                        state.failures.push(e.clone());
                    }
                    state.record.batches.push(BatchRecord {
                        category: Category::Disambiguation,
                        items: std::iter::once(head.id.clone())
                            .chain(targets.iter().map(|t| t.entity.clone()))
                            .collect(),
                        wave,
                        usage: outcome.usage.clone(),
                        estimated_prompt_tokens: outcome.estimated_tokens,
                        error: outcome.answer.as_ref().err().map(ToString::to_string),
                    });
                    let (verdict, rationale, score) = match outcome.answer {
                        Ok(Disambiguation::Ask { options, question, rationale }) => {
                            state.clarifications.push((head, options, question, rationale.clone()));
                            (Verdict::Matched, Some(rationale), 10)
                        }
                        Ok(Disambiguation::Clear { rationale }) => (Verdict::NotMatched, Some(rationale), 0),
                        Err(_) => (Verdict::Failed, None, 0),
                    };
                    state.record.candidates.push(CandidateRecord {
                        guideline_id: head.id.clone(),
                        category: Some(Category::Disambiguation),
                        batch: Some(batch),
                        verdict,
                        rationale,
                        score,
                        probability: None,
                    });
                }
                (Task::Forks(task), TaskResult::Forks(selection)) => self.fold_forks(*task, *selection, wave, state),
                (Task::Journey { journey, path, starting, .. }, TaskResult::Journey(selection)) => {
                    let mut selection = *selection;
                    keep_waiting_for_tool(self.agent, &journey, &path, &state.tools_ran, &mut selection.change);
                    if let Some(crate::error::BatchError::Model(e)) = &selection.error {
                        state.failures.push(e.clone());
                    }
                    state.record.batches.push(BatchRecord {
                        category: Category::JourneyNodeSelection,
                        items: vec![journey.clone()],
                        wave,
                        usage: selection.usage.clone(),
                        estimated_prompt_tokens: selection.estimated_tokens,
                        error: selection.error.as_ref().map(ToString::to_string),
                    });
                    let decision = Decision {
                        change: selection.change,
                        path_before: (!starting).then(|| path.clone()).or_else(|| paths.get(&journey).cloned()),
                        rationale: selection.rationale,
                        fast_path: None,
                        batch: Some(batch),
                    };
                    if starting {
                        state.speculative.insert(journey, decision);
                    } else {
                        state.decisions.insert(journey, decision);
                    }
                }
                _ => {}
            }
        }
    }
}
