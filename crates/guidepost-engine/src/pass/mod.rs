//! One matching pass: prune, categorize, batch, evaluate in parallel, select journey
//! nodes, disambiguate, resolve. [`crate::GuidelineMatcher`] prepares its input.

mod answered;
mod finish;
mod fold;
mod forks;

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
use crate::record::{CandidateRecord, FastPath, GuidelineMatch, JourneyDecision, MatchKind, MatchingRecord, Verdict};

/// What a pass works on.
pub(crate) struct PassInput<'a> {
    pub ctx: &'a MatchingContext,
    pub iteration: u32,
    /// Journey paths at the start of the pass.
    pub paths_in: IndexMap<String, JourneyPath>,
    /// Transitions ahead of each journey the customer answered before (see
    /// [`guidepost_core::AgentState::journey_answers`]).
    pub answers_in: IndexMap<String, Vec<String>>,
    /// Only these guidelines are evaluated; the others keep their `carried` verdict.
    pub evaluate_only: Option<BTreeSet<String>>,
    /// Only these active journeys get node selection; the others keep their node.
    pub select_only: Option<BTreeSet<String>>,
    /// Unresolved matches of the previous pass of this turn.
    pub carried: Vec<GuidelineMatch>,
    /// Journey prediction for this pass.
    pub prediction: PredictionInput<'a>,
    /// Journeys considered by earlier passes of this turn (their conditions were checked).
    pub considered_before: Vec<String>,
}

/// Journey prediction as a pass receives it.
pub(crate) enum PredictionInput<'a> {
    /// Known before the pass starts (no embedding call was needed): the pass checks the
    /// conditions and scoped guidelines of the predicted journeys only, and selects their
    /// first step speculatively.
    Ready(Prediction),
    /// Still waiting for its embeddings. The pass does not wait: its first wave checks every
    /// inactive journey's condition, and once the prediction arrives the predicted journeys
    /// get their speculative work (first step, scoped guidelines) beside it. Work for a
    /// journey whose condition turned out false is dropped.
    Pending(futures::future::BoxFuture<'a, Prediction>),
}

/// A prediction still waiting for its embeddings, with what its speculative work needs: the
/// pass's context, the inactive journeys whose conditions the first wave checks, and the tools
/// that ran.
struct AwaitedPrediction<'p, 'c> {
    pending: futures::future::BoxFuture<'p, Prediction>,
    ctx: &'c MatchingContext,
    starting: &'c BTreeSet<String>,
    tools_ran: &'c [ToolId],
}

enum Task<'a> {
    Checks {
        category: Category,
        items: Vec<&'a MatchableGuideline>,
    },
    Disambiguation {
        head: &'a MatchableGuideline,
        targets: Vec<DisambiguationTarget>,
    },
    /// Node selection; `full`: the journey-wide selection, whatever the verdict style (a
    /// correction to look at).
    Journey {
        journey: String,
        path: JourneyPath,
        starting: bool,
        full: bool,
        /// Transitions ahead the customer answered before (by id).
        answered: Vec<String>,
    },
    /// The forks a decided move ended on (see [`forks`]).
    Forks(Box<forks::ForkTask>),
}

enum TaskResult {
    Checks(CallOutcome<Vec<GuidelineVerdict>>),
    Disambiguation(CallOutcome<Disambiguation>),
    Journey(Box<ModelSelection>),
    Forks(Box<ModelSelection>),
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
    /// Guideline checks and disambiguation.
    pub model: &'a dyn guidepost_llm::ChatModel,
    /// Journey node selection.
    pub journey_model: &'a dyn guidepost_llm::ChatModel,
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
    /// Journeys whose conditions this pass or an earlier one of the turn checked.
    conditions_checked: BTreeSet<String>,
    /// Inactive journeys whose scoped guidelines this pass checked.
    scoped_checked: BTreeSet<String>,
    /// Verdicts on journey transitions and corrections checked beside the guidelines.
    steps: answered::StepVerdicts,
    /// Active journeys whose deterministic move a correction in the latest message would undo.
    correctable: BTreeSet<String>,
    /// Tools that ran in this turn.
    tools_ran: Vec<ToolId>,
    /// Per journey, transitions beyond where its move rests that the latest message already
    /// satisfied (see [`answered`]).
    answered_ahead: BTreeMap<String, Vec<String>>,
    /// Journeys whose move was decided without reading the latest message and went no further
    /// on its answers: where the checks on the question it landed on were unsure or contested,
    /// a second look decides (see [`forks`]).
    unread: BTreeSet<String>,
}

impl<'a> Pass<'a> {
    fn selector(&self) -> JourneySelector {
        JourneySelector {
            max_steps: self.config.max_advance_steps,
            temperature: self.config.temperature,
            verdict_threshold: self.config.journey_verdict_threshold.or(self.config.verdict_threshold),
            both_ways: self.config.ask_both_ways,
            compare_exits: self.config.compare_exits,
            second_look: self.config.second_look,
        }
    }

    async fn run_task(&self, task: &Task<'a>, conversation: &ConversationView) -> TaskResult {
        let t = self.config.temperature;
        match task {
            Task::Checks { category, items } => {
                let settings = batches::CheckSettings {
                    style: self.config.verdicts.for_model(&self.model.capabilities()),
                    temperature: t,
                    threshold: self.config.verdict_threshold,
                    both_ways: self.config.ask_both_ways,
                };
                TaskResult::Checks(
                    batches::evaluate_checks(self.model, *category, items, conversation, &settings).await,
                )
            }
            Task::Disambiguation { head, targets } => {
                TaskResult::Disambiguation(disambiguation::evaluate(self.model, head, targets, conversation, t).await)
            }
            Task::Forks(task) => TaskResult::Forks(Box::new(self.leave_forks(task, conversation).await)),
            Task::Journey { journey, path, starting, full, answered } => {
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
                let model = self.journey_model;
                let style = self.config.journey_verdicts.unwrap_or(self.config.verdicts);
                let selection = if style.for_model(&model.capabilities()) == VerdictStyle::Single && !full {
                    selector.select_stepwise(model, graph, path, *starting, answered, conversation).await
                } else {
                    selector.select_with_model(model, graph, path, *starting, conversation).await
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
        self.fold(tasks.into_iter().zip(results).collect(), wave, state, paths);
    }

    /// Plans node selection for `journey` at `path`: a fast-path decision, or a model task
    /// (which goes on without asking through the transitions in `answered`, answered in an
    /// earlier message).
    fn plan_journey(
        &self,
        journey: &str,
        path: &JourneyPath,
        starting: bool,
        tools_ran: &[ToolId],
        entered_this_turn: bool,
        answered: &[String],
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
            SelectionPlan::NeedsModel => Err(Task::Journey {
                journey: journey.to_string(),
                path: path.clone(),
                starting,
                full: false,
                answered: answered.to_vec(),
            }),
        }
    }

    /// Runs the pass.
    pub(crate) async fn run(&self, mut input: PassInput<'_>) -> Result<MatchingOutcome, EngineError> {
        let ctx = input.ctx;
        let conversation = ConversationView::build(&self.agent.definition, ctx, self.config.history_window);
        let tools_ran = ctx.tools_ran();
        let active: Vec<String> = input.paths_in.keys().cloned().collect();
        let prediction = std::mem::replace(&mut input.prediction, PredictionInput::Ready(Prediction::default()));
        let (ready, pending) = match prediction {
            PredictionInput::Ready(p) => (Some(p), None),
            PredictionInput::Pending(future) => (None, Some(future)),
        };
        // Journeys whose conditions this pass may check, and those whose scoped guidelines its
        // first wave checks. Without a prediction at hand: every journey's condition, and the
        // active journeys' scoped guidelines (the predicted ones' follow when it arrives).
        let considered: BTreeSet<String> = match &ready {
            Some(p) => p.considered().into_iter().chain(active.iter().cloned()).collect(),
            None => self.agent.journeys().keys().cloned().collect(),
        };
        let scoped: BTreeSet<String> = match &ready {
            Some(_) => considered.clone(),
            None => active.iter().cloned().collect(),
        };
        let mut state = State {
            record: MatchingRecord {
                iteration: input.iteration,
                predictions: ready.as_ref().map(|p| p.records.clone()).unwrap_or_default(),
                embedding_calls: ready.as_ref().map_or(0, |p| p.embedding_calls),
                ..MatchingRecord::default()
            },
            raw: Vec::new(),
            decisions: BTreeMap::new(),
            speculative: BTreeMap::new(),
            clarifications: Vec::new(),
            failures: Vec::new(),
            calls: 0,
            conditions_checked: input.considered_before.iter().cloned().chain(considered.iter().cloned()).collect(),
            // A later pass carries the verdicts of scoped guidelines instead of checking them.
            scoped_checked: match input.evaluate_only {
                None => scoped.iter().filter(|j| !active.contains(j)).cloned().collect(),
                Some(_) => BTreeSet::new(),
            },
            steps: answered::StepVerdicts::default(),
            correctable: BTreeSet::new(),
            tools_ran: tools_ran.clone(),
            answered_ahead: BTreeMap::new(),
            unread: BTreeSet::new(),
        };

        // Candidates, by category.
        let mut by_category: BTreeMap<Category, Vec<&'a MatchableGuideline>> = BTreeMap::new();
        let mut categories: HashMap<&str, Category> = HashMap::new();
        let carried_ids: BTreeSet<&str> = input.carried.iter().map(|m| m.guideline_id.as_str()).collect();
        // Inactive journeys whose condition this pass checks: they may start in it.
        let mut starting: BTreeSet<String> = BTreeSet::new();
        for g in self.agent.guidelines() {
            let needed = match &g.origin {
                GuidelineOrigin::JourneyCondition(j) => considered.contains(j) && !active.contains(j),
                GuidelineOrigin::Definition => g.journey.as_ref().is_none_or(|j| scoped.contains(j)),
                // Step checks are not in the guideline list; `step_checks` adds them.
                GuidelineOrigin::Transition { .. } | GuidelineOrigin::Correction => false,
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
            if let GuidelineOrigin::JourneyCondition(j) = &g.origin {
                starting.insert(j.clone());
            }
            categories.insert(g.id.as_str(), category);
            by_category.entry(category.batch_kind()).or_default().push(g);
        }
        // Active journeys: deterministic moves are decided now, the others need a selection.
        let mut selections: Vec<Task<'a>> = Vec::new();
        for (journey, path) in &input.paths_in {
            if input.select_only.as_ref().is_some_and(|only| !only.contains(journey)) {
                continue;
            }
            let entered = ctx.previous_state.journey_paths.get(journey) != Some(path);
            let answered = input.answers_in.get(journey).map_or(&[][..], Vec::as_slice);
            match self.plan_journey(journey, path, false, &tools_ran, entered, answered) {
                Ok(decision) => {
                    state.decisions.insert(journey.clone(), decision);
                }
                Err(task) => selections.push(task),
            }
        }
        // The starting journeys' first moves, planned once: the step checks read them, and
        // speculative selection takes the ones a model must decide.
        let start_plans: Vec<(&String, Result<Decision, Task<'a>>)> =
            if input.evaluate_only.is_none() || ready.is_some() {
                let start = JourneyPath::start();
                starting.iter().map(|j| (j, self.plan_journey(j, &start, true, &tools_ran, true, &[]))).collect()
            } else {
                Vec::new()
            };
        if input.evaluate_only.is_none() {
            let items = self.step_checks(&input.paths_in, &start_plans, &mut state);
            by_category.entry(Category::Actionable).or_default().extend(items);
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

        // Node selection for active journeys (planned above), and speculative selection for
        // starting ones.
        tasks.extend(selections);
        if ready.is_some() {
            for (journey, plan) in start_plans {
                match plan {
                    Ok(decision) => {
                        state.speculative.insert(journey.clone(), decision);
                    }
                    Err(task) if self.config.speculative_journey_selection => tasks.push(task),
                    Err(_) => {}
                }
            }
        }
        match pending {
            None => self.wave(tasks, &conversation, &mut state, &input.paths_in).await,
            Some(pending) => {
                let prediction = self
                    .first_wave_beside_prediction(
                        tasks,
                        AwaitedPrediction { pending, ctx, starting: &starting, tools_ran: &tools_ran },
                        &conversation,
                        &mut state,
                        &input.paths_in,
                    )
                    .await;
                state.record.predictions = prediction.records;
                state.record.embedding_calls = prediction.embedding_calls;
            }
        }
        for c in &mut state.record.candidates {
            if let Some(category) = categories.get(c.guideline_id.as_str()) {
                c.category = Some(*category);
            }
        }

        // Journeys whose condition matched start; those without a speculative decision get
        // their selection now (a second wave), with their scoped guidelines when these were
        // not checked yet.
        let condition_matched = |raw: &[GuidelineMatch], j: &str| {
            raw.iter().any(|m| matches!(&m.kind, MatchKind::JourneyCondition { journey } if journey == j))
        };
        let mut second: Vec<Task<'a>> = Vec::new();
        let corrected = state.steps.gate(self.agent.correction_item().id.as_str()) == Some(true)
            || (!state.correctable.is_empty() && crate::catalog::has_correction_cue(&ctx.last_customer_message()));
        // The moves a correction's fuller look replaces, kept in case it finds nothing to
        // correct.
        let mut replaced: Vec<(String, Decision)> = Vec::new();
        if corrected {
            // The customer corrected an earlier answer: the journeys that would have moved on
            // without reading it get a selection that sees the whole journey.
            for journey in std::mem::take(&mut state.correctable) {
                if let Some(path) = input.paths_in.get(&journey) {
                    if let Some(decision) = state.decisions.remove(&journey) {
                        replaced.push((journey.clone(), decision));
                    }
                    second.push(Task::Journey {
                        journey,
                        path: path.clone(),
                        starting: false,
                        full: true,
                        answered: Vec::new(),
                    });
                }
            }
        }
        for journey in &starting {
            if !condition_matched(&state.raw, journey) {
                continue;
            }
            if !state.scoped_checked.contains(journey) {
                second.extend(self.scoped_checks(journey, ctx));
                state.scoped_checked.insert(journey.clone());
            }
            if let Some(decision) = state.speculative.remove(journey) {
                state.decisions.insert(journey.clone(), decision);
            } else if let Err(task) = self.plan_journey(journey, &JourneyPath::start(), true, &tools_ran, true, &[]) {
                second.push(task);
            }
        }
        self.wave(second, &conversation, &mut state, &input.paths_in).await;
        restore_uncorrected(&mut state, replaced);
        drop_pruned_records_of_checked(&mut state);
        for journey in &starting {
            if let Some(decision) = state.speculative.remove(journey)
                && condition_matched(&state.raw, journey)
            {
                state.decisions.insert(journey.clone(), decision);
            }
        }

        self.walk_on_answers(&mut state, &input.answers_in);
        let forks = self.fork_tasks(&state);
        self.wave(forks, &conversation, &mut state, &input.paths_in).await;
        self.finish(input, state, &conversation, &tools_ran).await
    }

    /// The checks of the guidelines scoped to `journey`, batched by category.
    fn scoped_checks(&self, journey: &str, ctx: &MatchingContext) -> Vec<Task<'a>> {
        let mut by_kind: BTreeMap<Category, Vec<&'a MatchableGuideline>> = BTreeMap::new();
        for g in self.agent.guidelines().iter().filter(|g| g.journey.as_deref() == Some(journey)) {
            let category = categorize(g, ctx.previously_applied(&g.id), false);
            by_kind.entry(category.batch_kind()).or_default().push(g);
        }
        let mut tasks = Vec::new();
        for (kind, items) in by_kind {
            for chunk in split(&items, self.config) {
                tasks.push(Task::Checks { category: kind, items: chunk });
            }
        }
        tasks
    }

    /// The first wave of a pass whose journey prediction still waits for its embeddings.
    /// `tasks` run at once; when the prediction arrives, the predicted journeys among
    /// `starting` get their speculative work (first-step selection, scoped guideline checks)
    /// beside them. Once the first wave is in, the work of journeys whose condition did not
    /// match is dropped (and not started, when the prediction comes later). Returns the
    /// prediction.
    async fn first_wave_beside_prediction(
        &self,
        tasks: Vec<Task<'a>>,
        awaited: AwaitedPrediction<'_, '_>,
        conversation: &ConversationView,
        state: &mut State<'a>,
        paths: &IndexMap<String, JourneyPath>,
    ) -> Prediction {
        let AwaitedPrediction { pending, ctx, starting, tools_ran } = awaited;
        use futures::future::{AbortHandle, Abortable};
        use std::sync::Mutex;
        state.record.waves += 1;
        let wave = state.record.waves;
        // Journeys whose condition matched, once the first wave is in.
        let matched: Mutex<Option<BTreeSet<String>>> = Mutex::new(None);
        let handles: Mutex<Vec<(String, AbortHandle)>> = Mutex::new(Vec::new());
        let first = async {
            let results = join_all(tasks.iter().map(|t| self.run_task(t, conversation))).await;
            let held = matched_conditions(&tasks, &results);
            for (journey, handle) in handles.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter() {
                if !held.contains(journey) {
                    handle.abort();
                }
            }
            *matched.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(held);
            results
        };
        let speculation = async {
            let prediction = pending.await;
            let known = matched.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            let mut planned: Vec<(String, Task<'a>)> = Vec::new();
            let mut fast: Vec<(String, Decision)> = Vec::new();
            for journey in prediction.considered().into_iter().filter(|j| starting.contains(j)) {
                if known.as_ref().is_some_and(|held| !held.contains(&journey)) {
                    continue;
                }
                match self.plan_journey(&journey, &JourneyPath::start(), true, tools_ran, true, &[]) {
                    Ok(decision) => fast.push((journey.clone(), decision)),
                    Err(task) if self.config.speculative_journey_selection || known.is_some() => {
                        planned.push((journey.clone(), task));
                    }
                    Err(_) => {}
                }
                planned.extend(self.scoped_checks(&journey, ctx).into_iter().map(|t| (journey.clone(), t)));
            }
            let runs: Vec<_> = {
                let mut handles = handles.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                planned
                    .iter()
                    .map(|(journey, task)| {
                        let (handle, registration) = AbortHandle::new_pair();
                        handles.push((journey.clone(), handle));
                        Abortable::new(self.run_task(task, conversation), registration)
                    })
                    .collect()
            };
            let results = join_all(runs).await;
            (prediction, fast, planned, results)
        };
        let (results, (prediction, fast, planned, speculated)) = futures::join!(first, speculation);
        self.fold(tasks.into_iter().zip(results).collect(), wave, state, paths);
        let mut done = Vec::new();
        for ((journey, task), result) in planned.into_iter().zip(speculated) {
            if let Ok(result) = result {
                if matches!(task, Task::Checks { .. }) {
                    state.scoped_checked.insert(journey);
                }
                done.push((task, result));
            }
        }
        self.fold(done, wave, state, paths);
        for (journey, decision) in fast {
            state.speculative.insert(journey, decision);
        }
        prediction
    }
}

/// Journeys whose condition one of `tasks` found to hold.
fn matched_conditions(tasks: &[Task<'_>], results: &[TaskResult]) -> BTreeSet<String> {
    let mut held = BTreeSet::new();
    for (task, result) in tasks.iter().zip(results) {
        if let (Task::Checks { items, .. }, TaskResult::Checks(outcome)) = (task, result)
            && let Ok(verdicts) = &outcome.answer
        {
            for g in items {
                if let GuidelineOrigin::JourneyCondition(j) = &g.origin
                    && verdicts.iter().any(|v| v.guideline_id == g.id && v.applies)
                {
                    held.insert(j.clone());
                }
            }
        }
    }
    held
}

/// A guideline first recorded as pruned and then checked keeps only the record of its check.
fn drop_pruned_records_of_checked(state: &mut State<'_>) {
    let checked: BTreeSet<String> = state
        .record
        .candidates
        .iter()
        .filter(|c| c.verdict != Verdict::Pruned)
        .map(|c| c.guideline_id.clone())
        .collect();
    state.record.candidates.retain(|c| c.verdict != Verdict::Pruned || !checked.contains(&c.guideline_id));
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
    CandidateRecord {
        guideline_id: g.id.clone(),
        category,
        batch: None,
        verdict,
        rationale: None,
        score: 0,
        probability: None,
    }
}

pub(crate) fn guideline_match(g: &MatchableGuideline, score: u8, rationale: String) -> GuidelineMatch {
    GuidelineMatch {
        guideline_id: g.id.clone(),
        kind: match &g.origin {
            // Step checks never become matches: the pass keeps their verdicts apart.
            GuidelineOrigin::Definition | GuidelineOrigin::Transition { .. } | GuidelineOrigin::Correction => {
                MatchKind::Guideline
            }
            GuidelineOrigin::JourneyCondition(j) => MatchKind::JourneyCondition { journey: j.clone() },
        },
        condition: g.condition.clone(),
        action: g.action.clone(),
        tools: g.tools.clone(),
        score,
        rationale,
    }
}

/// Where the fuller look a correction cue opened went nowhere because its answer named no move
/// the graph allows (it neither went back nor chose to stay), the move the journey would have
/// made without the cue stands (the walk on the answers the checks found goes on from it): a
/// small model takes a new request ("what about Shanghai?") for a correction, and its
/// journey-wide answer then often names steps out of order. A fuller look that chose to stay
/// is followed. The fuller look's rationale is kept beside the move's.
fn restore_uncorrected(state: &mut State<'_>, replaced: Vec<(String, Decision)>) {
    for (journey, mut before) in replaced {
        let full = state.decisions.get(&journey);
        if full.is_some_and(|d| !d.change.went_nowhere()) {
            continue;
        }
        if let Some(full) = full {
            before.rationale = format!(
                "{}; the fuller look after a correction cue went nowhere ({})",
                before.rationale, full.rationale
            );
        }
        state.decisions.insert(journey, before);
    }
}
