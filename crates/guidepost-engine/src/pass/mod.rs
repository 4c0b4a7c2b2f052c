//! One matching pass: prune, categorize, batch, evaluate in parallel, select journey
//! nodes, disambiguate, resolve. [`crate::GuidelineMatcher`] prepares its input.

mod finish;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use futures::future::join_all;
use guidepost_core::{JourneyPath, ToolId};
use indexmap::IndexMap;

use crate::batches::disambiguation::{self, Disambiguation, DisambiguationTarget};
use crate::batches::{self, CallOutcome, GuidelineVerdict};
use crate::batching::split;
use crate::catalog::{CompiledAgent, GuidelineOrigin, MatchableGuideline};
use crate::categorize::{Category, categorize};
use crate::config::{MatcherConfig, VerdictStyle};
use crate::context::MatchingContext;
use crate::error::EngineError;
use crate::journeys::paths::PathChange;
use crate::journeys::prediction::Prediction;
use crate::journeys::selection::{JourneySelector, ModelSelection, SelectionPlan};
use crate::matcher::MatchingOutcome;
use crate::prompt::ConversationView;
use crate::record::{
    BatchRecord, CandidateRecord, FastPath, GuidelineMatch, JourneyDecision, MatchKind, MatchingRecord, Verdict,
};

/// What a pass works on.
pub(crate) struct PassInput<'a> {
    pub ctx: &'a MatchingContext,
    pub iteration: u32,
    /// Journey paths at the start of the pass.
    pub paths_in: IndexMap<String, JourneyPath>,
    /// Only these guidelines are evaluated; the others keep their `carried` verdict.
    pub evaluate_only: Option<BTreeSet<String>>,
    /// Only these active journeys get node selection; the others keep their node.
    pub select_only: Option<BTreeSet<String>>,
    /// Unresolved matches of the previous pass of this turn.
    pub carried: Vec<GuidelineMatch>,
    /// Journey prediction for this pass.
    pub prediction: Prediction,
    /// Journeys considered by earlier passes of this turn (their conditions were checked).
    pub considered_before: Vec<String>,
}

enum Task<'a> {
    Checks { category: Category, items: Vec<&'a MatchableGuideline> },
    Disambiguation { head: &'a MatchableGuideline, targets: Vec<DisambiguationTarget> },
    Journey { journey: String, path: JourneyPath, starting: bool },
}

enum TaskResult {
    Checks(CallOutcome<Vec<GuidelineVerdict>>),
    Disambiguation(CallOutcome<Disambiguation>),
    Journey(Box<ModelSelection>),
}

struct Decision {
    change: PathChange,
    path_before: Option<JourneyPath>,
    rationale: String,
    fast_path: Option<FastPath>,
    batch: Option<usize>,
}

pub(crate) struct Pass<'a> {
    pub agent: &'a CompiledAgent,
    pub model: &'a dyn guidepost_llm::ChatModel,
    pub config: &'a MatcherConfig,
}

struct State<'a> {
    record: MatchingRecord,
    raw: Vec<GuidelineMatch>,
    decisions: BTreeMap<String, Decision>,
    speculative: BTreeMap<String, Decision>,
    clarifications: Vec<(&'a MatchableGuideline, Vec<String>, String, String)>,
    failures: Vec<guidepost_llm::LlmError>,
    calls: usize,
}

impl<'a> Pass<'a> {
    fn selector(&self) -> JourneySelector {
        JourneySelector { max_steps: self.config.max_advance_steps, temperature: self.config.temperature }
    }

    async fn run_task(&self, task: &Task<'a>, conversation: &ConversationView) -> TaskResult {
        let t = self.config.temperature;
        match task {
            Task::Checks { category, items } => {
                let style = self.config.verdicts.for_model(&self.model.capabilities());
                TaskResult::Checks(batches::evaluate_checks(self.model, *category, items, conversation, t, style).await)
            }
            Task::Disambiguation { head, targets } => {
                TaskResult::Disambiguation(disambiguation::evaluate(self.model, head, targets, conversation, t).await)
            }
            Task::Journey { journey, path, starting } => {
                let Some(graph) = self.agent.journey(journey) else {
                    return TaskResult::Journey(Box::new(ModelSelection {
                        change: PathChange {
                            decision: JourneyDecision::Exited,
                            path: None,
                            correction: Some("unknown journey".into()),
                        },
                        rationale: String::new(),
                        usage: None,
                        estimated_tokens: 0,
                        error: None,
                    }));
                };
                let selector = self.selector();
                let selection = if self.config.verdicts.for_model(&self.model.capabilities()) == VerdictStyle::Single {
                    selector.select_stepwise(self.model, graph, path, *starting, conversation).await
                } else {
                    selector.select_with_model(self.model, graph, path, *starting, conversation).await
                };
                TaskResult::Journey(Box::new(selection))
            }
        }
    }

    /// Runs `tasks` in parallel as one wave and folds the results into `state`.
    async fn wave(
        &self,
        tasks: Vec<Task<'a>>,
        conversation: &ConversationView,
        state: &mut State<'a>,
        paths: &IndexMap<String, JourneyPath>,
    ) {
        if tasks.is_empty() {
            return;
        }
        state.record.waves += 1;
        let wave = state.record.waves;
        tracing::debug!(wave, calls = tasks.len(), "matching wave");
        let results = join_all(tasks.iter().map(|t| self.run_task(t, conversation))).await;
        for (task, result) in tasks.into_iter().zip(results) {
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
                    });
                }
                (Task::Journey { journey, path, starting }, TaskResult::Journey(selection)) => {
                    let selection = *selection;
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

    /// Plans node selection for `journey` at `path`: a fast-path decision, or a model task.
    fn plan_journey(
        &self,
        journey: &str,
        path: &JourneyPath,
        starting: bool,
        tools_ran: &[ToolId],
        entered_this_turn: bool,
    ) -> Result<Decision, Task<'a>> {
        let Some(graph) = self.agent.journey(journey) else {
            return Ok(Decision {
                change: PathChange {
                    decision: JourneyDecision::Exited,
                    path: None,
                    correction: Some("unknown journey".into()),
                },
                path_before: Some(path.clone()),
                rationale: "the journey is not in the definition".into(),
                fast_path: None,
                batch: None,
            });
        };
        match self.selector().fast_path(graph, path, starting, tools_ran, entered_this_turn) {
            SelectionPlan::Decided { change, fast_path } => Ok(Decision {
                change,
                path_before: (!starting).then(|| path.clone()),
                rationale: fast_path_rationale(fast_path).into(),
                fast_path: Some(fast_path),
                batch: None,
            }),
            SelectionPlan::NeedsModel => {
                Err(Task::Journey { journey: journey.to_string(), path: path.clone(), starting })
            }
        }
    }

    /// Runs the pass.
    pub(crate) async fn run(&self, input: PassInput<'_>) -> Result<MatchingOutcome, EngineError> {
        let ctx = input.ctx;
        let conversation = ConversationView::build(&self.agent.definition, ctx, self.config.history_window);
        let tools_ran = ctx.tools_ran();
        let active: Vec<String> = input.paths_in.keys().cloned().collect();
        let considered: BTreeSet<String> =
            input.prediction.considered().into_iter().chain(active.iter().cloned()).collect();
        let mut state = State {
            record: MatchingRecord {
                iteration: input.iteration,
                predictions: input.prediction.records.clone(),
                embedding_calls: input.prediction.embedding_calls,
                ..MatchingRecord::default()
            },
            raw: Vec::new(),
            decisions: BTreeMap::new(),
            speculative: BTreeMap::new(),
            clarifications: Vec::new(),
            failures: Vec::new(),
            calls: 0,
        };

        // Candidates, by category.
        let mut by_category: BTreeMap<Category, Vec<&'a MatchableGuideline>> = BTreeMap::new();
        let mut categories: HashMap<&str, Category> = HashMap::new();
        let carried_ids: BTreeSet<&str> = input.carried.iter().map(|m| m.guideline_id.as_str()).collect();
        for g in self.agent.guidelines() {
            let needed = match &g.origin {
                GuidelineOrigin::JourneyCondition(j) => considered.contains(j) && !active.contains(j),
                GuidelineOrigin::Definition => g.journey.as_ref().is_none_or(|j| considered.contains(j)),
            };
            if !needed {
                if !matches!(&g.origin, GuidelineOrigin::JourneyCondition(j) if active.contains(j)) {
                    state.record.candidates.push(candidate(g, None, Verdict::Pruned));
                }
                continue;
            }
            let head = g.is_observation() && self.agent.disambiguation_targets(&g.id) >= 2;
            let category = categorize(g, ctx.previously_applied(&g.id), head);
            if let Some(only) = &input.evaluate_only {
                let journey_new = g.journey_affinity().is_some_and(|j| !input.considered_before.iter().any(|c| c == j));
                if !only.contains(&g.id) && !journey_new {
                    let mut c = candidate(g, Some(category), Verdict::Carried);
                    c.score = if carried_ids.contains(g.id.as_str()) { 10 } else { 0 };
                    state.record.candidates.push(c);
                    continue;
                }
            }
            categories.insert(g.id.as_str(), category);
            by_category.entry(category.batch_kind()).or_default().push(g);
        }
        let mut tasks: Vec<Task<'a>> = Vec::new();
        for (category, items) in &by_category {
            if *category == Category::Disambiguation {
                for head in items {
                    tasks
                        .push(Task::Disambiguation { head, targets: disambiguation::targets_of(self.agent, &head.id) });
                }
            } else {
                for chunk in split(items, self.config) {
                    tasks.push(Task::Checks { category: *category, items: chunk });
                }
            }
        }

        // Node selection for active journeys, and speculative selection for starting ones.
        for (journey, path) in &input.paths_in {
            if input.select_only.as_ref().is_some_and(|only| !only.contains(journey)) {
                continue;
            }
            let entered = ctx.previous_state.journey_paths.get(journey) != Some(path);
            match self.plan_journey(journey, path, false, &tools_ran, entered) {
                Ok(decision) => {
                    state.decisions.insert(journey.clone(), decision);
                }
                Err(task) => tasks.push(task),
            }
        }
        // Journeys that may start in this pass: considered, inactive, and (in later
        // iterations) not already decided by an earlier pass of the turn.
        let starting: Vec<String> = considered
            .iter()
            .filter(|j| !active.contains(j))
            .filter(|j| input.evaluate_only.is_none() || !input.considered_before.contains(j))
            .cloned()
            .collect();
        for journey in &starting {
            match self.plan_journey(journey, &JourneyPath::start(), true, &tools_ran, true) {
                Ok(decision) => {
                    state.speculative.insert(journey.clone(), decision);
                }
                Err(task) if self.config.speculative_journey_selection => tasks.push(task),
                Err(_) => {}
            }
        }
        self.wave(tasks, &conversation, &mut state, &input.paths_in).await;
        for c in &mut state.record.candidates {
            if let Some(category) = categories.get(c.guideline_id.as_str()) {
                c.category = Some(*category);
            }
        }

        // Journeys whose condition matched start; those without a speculative decision
        // get their selection now (a second wave).
        let condition_matched = |raw: &[GuidelineMatch], j: &str| {
            raw.iter().any(|m| matches!(&m.kind, MatchKind::JourneyCondition { journey } if journey == j))
        };
        let mut second: Vec<Task<'a>> = Vec::new();
        for journey in &starting {
            if !condition_matched(&state.raw, journey) {
                continue;
            }
            if let Some(decision) = state.speculative.remove(journey) {
                state.decisions.insert(journey.clone(), decision);
            } else if let Err(task) = self.plan_journey(journey, &JourneyPath::start(), true, &tools_ran, true) {
                second.push(task);
            }
        }
        self.wave(second, &conversation, &mut state, &input.paths_in).await;
        for journey in &starting {
            if let Some(decision) = state.speculative.remove(journey)
                && condition_matched(&state.raw, journey)
            {
                state.decisions.insert(journey.clone(), decision);
            }
        }

        self.finish(input, state, &conversation, &tools_ran).await
    }
}

fn fast_path_rationale(fast_path: FastPath) -> &'static str {
    match fast_path {
        FastPath::ToolDone => "the step's tool ran and the step has a single exit",
        FastPath::Unconditional => "the step was carried out and its only transition is unconditional",
        FastPath::LoneCandidate => "only one step can come next",
        FastPath::AwaitingTool => "the step's tool has not run yet",
        FastPath::EnteredThisTurn => "the step was entered earlier in this turn",
    }
}

pub(crate) fn candidate(g: &MatchableGuideline, category: Option<Category>, verdict: Verdict) -> CandidateRecord {
    CandidateRecord { guideline_id: g.id.clone(), category, batch: None, verdict, rationale: None, score: 0 }
}

pub(crate) fn guideline_match(g: &MatchableGuideline, score: u8, rationale: String) -> GuidelineMatch {
    GuidelineMatch {
        guideline_id: g.id.clone(),
        kind: match &g.origin {
            GuidelineOrigin::Definition => MatchKind::Guideline,
            GuidelineOrigin::JourneyCondition(j) => MatchKind::JourneyCondition { journey: j.clone() },
        },
        condition: g.condition.clone(),
        action: g.action.clone(),
        tools: g.tools.clone(),
        score,
        rationale,
    }
}
