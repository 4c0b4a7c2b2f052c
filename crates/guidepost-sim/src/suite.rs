//! Many runs: every scenario × N trials, in parallel up to a global cap and a cap per provider
//! (the agent's server or model, and the simulator's model), with budgets for each run and for
//! the whole suite, pass^k per scenario, usage per participant, and progress bars.
//!
//! Results do not depend on the concurrency: conversation ids are derived from the scenario id
//! and trial, and results are returned in scenario order, then trial order.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use guidepost_llm::{ChatModel, UsageLedger, UsageTotals};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, Semaphore};

use crate::agents::{AgentFactory, AgentTurn, AgentUnderTest};
use crate::coverage::CoverageReport;
use crate::customer::{CustomerOptions, SimulatedCustomer};
use crate::error::AgentError;
use crate::judge::Judge;
use crate::runner::{Budget, ParticipantLedgers, ParticipantUsage, RunEnv, RunResult, RunSummary, run_trajectory};
use crate::scenario::Scenario;
use crate::selection::StepRanker;

/// The simulator's models.
#[derive(Debug, Clone)]
pub struct SimModels {
    /// The simulated customer and the step ranker (task kind `simulation`).
    pub customer: Arc<dyn ChatModel>,
    /// The judge (task kind `judge`).
    pub judge: Arc<dyn ChatModel>,
}

/// How a suite runs.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    /// Trials per scenario.
    pub trials: u32,
    /// Runs in flight at once.
    pub concurrency: usize,
    /// Runs in flight at once per provider (agent endpoint, simulator model); `None`: no cap.
    pub per_provider_concurrency: Option<usize>,
    /// Limits of one run (a scenario's own budget takes precedence).
    pub run_budget: Budget,
    /// Limits of the whole suite.
    pub suite_budget: Budget,
    /// Time limit of one agent reply.
    pub turn_timeout: Duration,
    /// Where artifacts go (`None`: nothing written).
    pub artifacts_root: Option<PathBuf>,
    /// Show progress bars (only on a terminal).
    pub progress: bool,
    /// Simulated customer settings.
    pub customer: CustomerOptions,
    /// Turn limit of scenarios that set none (`None`: unlimited; runs then end only by goal,
    /// loop, policy, budget or the customer's done signal).
    pub default_max_turns: Option<u32>,
    /// The agent definition of each scenario (by scenario id), for the reply checks.
    pub definitions: std::collections::HashMap<String, Arc<guidepost_core::AgentDefinition>>,
}

impl Default for SuiteOptions {
    fn default() -> Self {
        Self {
            trials: 1,
            concurrency: 4,
            per_provider_concurrency: None,
            run_budget: Budget::default(),
            suite_budget: Budget::default(),
            turn_timeout: Duration::from_secs(180),
            artifacts_root: None,
            progress: false,
            customer: CustomerOptions::default(),
            default_max_turns: Some(30),
            definitions: Default::default(),
        }
    }
}

/// Results of one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioReport {
    /// The scenario id.
    pub id: String,
    /// Its file.
    pub path: PathBuf,
    /// Trials run.
    pub trials: u32,
    /// Trials passed.
    pub passed: u32,
    /// pass^k for k = 1 ..= trials: the chance that k trials drawn without replacement all pass.
    pub pass_hat_k: BTreeMap<u32, f64>,
    /// Each trial.
    pub runs: Vec<RunSummary>,
}

/// Totals of a suite.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SuiteTotals {
    /// Runs.
    pub runs: usize,
    /// Passed runs.
    pub passed: usize,
    /// Failed runs (including errors).
    pub failed: usize,
    /// Runs that ended with an error.
    pub errors: usize,
    /// Passed / runs.
    pub pass_rate: f64,
}

/// The suite's report (serialized as the JSON report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteReport {
    /// The agent under test.
    pub agent: String,
    /// Start.
    pub started_at: DateTime<Utc>,
    /// End.
    pub finished_at: DateTime<Utc>,
    /// Per scenario.
    pub scenarios: Vec<ScenarioReport>,
    /// Totals.
    pub totals: SuiteTotals,
    /// Usage per participant over all runs.
    pub usage: ParticipantUsage,
    /// Journey coverage of each agent definition the scenarios name (or `--definition`), in
    /// the order the scenarios first name them.
    pub coverage: Vec<CoverageReport>,
}

impl SuiteReport {
    /// The exit code a CI job gates on: 0 when every run passed (or, with `min_pass_rate`, when
    /// the pass rate reaches it and no run ended in an error), 1 otherwise. (Invalid options or
    /// scenario files are errors of [`run`](crate::run), for which the CLI should exit with 2.)
    pub fn exit_code(&self, min_pass_rate: Option<f64>) -> i32 {
        let ok = match min_pass_rate {
            Some(min) => self.totals.errors == 0 && self.totals.pass_rate + 1e-9 >= min,
            None => self.totals.failed == 0,
        };
        if ok { 0 } else { 1 }
    }

    /// The journey states no run reached, as `agent: journey.state`, over every agent whose
    /// coverage was measured.
    pub fn missed_states(&self) -> Vec<String> {
        self.coverage
            .iter()
            .flat_map(|c| {
                c.journeys
                    .iter()
                    .flat_map(move |j| j.missed_states.iter().map(move |s| format!("{}: {}.{}", c.agent, j.journey, s)))
            })
            .collect()
    }
}

/// The suite's report and every run's full result.
#[derive(Debug, Clone)]
pub struct SuiteOutcome {
    /// The report.
    pub report: SuiteReport,
    /// Every run, in scenario then trial order.
    pub runs: Vec<RunResult>,
}

/// pass^k = C(c, k) / C(n, k) for c passes out of n trials.
///
/// ```
/// assert_eq!(guidepost_sim::suite::pass_hat_k(4, 2, 1), 0.5);
/// assert!((guidepost_sim::suite::pass_hat_k(4, 2, 2) - 1.0 / 6.0).abs() < 1e-12);
/// ```
pub fn pass_hat_k(n: u32, c: u32, k: u32) -> f64 {
    if k > n || k == 0 {
        return 0.0;
    }
    let choose = |n: u32, k: u32| -> f64 {
        if k > n {
            return 0.0;
        }
        (0..k).fold(1.0, |acc, i| acc * f64::from(n - i) / f64::from(i + 1))
    };
    choose(c, k) / choose(n, k)
}

/// An agent that could not be created: it fails at start, so the run ends with `error`.
struct Unavailable(AgentError);

#[async_trait]
impl AgentUnderTest for Unavailable {
    async fn start(&mut self, _conversation_id: &str) -> Result<(), AgentError> {
        Err(self.0.clone())
    }
    async fn reply(&mut self, _customer_message: &str) -> Result<AgentTurn, AgentError> {
        Err(self.0.clone())
    }
}

type Semaphores = Arc<Mutex<BTreeMap<String, Arc<Semaphore>>>>;

async fn provider_semaphore(map: &Semaphores, key: &str, permits: usize) -> Arc<Semaphore> {
    let mut map = map.lock().await;
    Arc::clone(map.entry(key.to_string()).or_insert_with(|| Arc::new(Semaphore::new(permits.max(1)))))
}

/// What the suite shows while it runs: on a terminal, a bar over all runs and a line per run
/// in flight (its turn and whom it waits for); elsewhere (a log, CI) a line per finished run.
/// Failed runs are always reported with their reason.
struct SuiteProgress {
    bars: Option<MultiProgress>,
    overall: ProgressBar,
    lines: bool,
}

impl SuiteProgress {
    fn new(total: usize, enabled: bool) -> Self {
        let terminal = enabled && std::io::stderr().is_terminal();
        let bars = terminal.then(MultiProgress::new);
        let overall = match &bars {
            Some(bars) => bars.add(ProgressBar::new(u64::try_from(total).unwrap_or(u64::MAX))),
            None => ProgressBar::hidden(),
        };
        if let Ok(style) = ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {pos}/{len} runs {msg}") {
            overall.set_style(style);
        }
        Self { bars, overall, lines: enabled && !terminal }
    }

    /// The line of one run, shown while it is in flight.
    fn run_bar(&self, name: &str) -> ProgressBar {
        let Some(bars) = &self.bars else { return ProgressBar::hidden() };
        let bar = bars.add(ProgressBar::new_spinner());
        if let Ok(style) = ProgressStyle::with_template("  {spinner} {prefix} [{elapsed}] {msg}") {
            bar.set_style(style);
        }
        bar.set_prefix(name.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    }

    fn finished(&self, run_bar: &ProgressBar, result: &RunResult, took: Duration) {
        run_bar.finish_and_clear();
        if let Some(bars) = &self.bars {
            bars.remove(run_bar);
        }
        self.overall.inc(1);
        self.overall.set_message(format!("{} {}", result.scenario_id, result.reason));
        let name = format!("{} (trial {})", result.scenario_id, result.trial);
        let line = if result.passed() {
            self.lines.then(|| format!("passed {name}: {} in {:.1} s", result.reason, took.as_secs_f64()))
        } else {
            Some(format!("FAILED {name}: {}: {}", result.reason, result.summary))
        };
        if let Some(line) = line {
            match &self.bars {
                Some(bars) => {
                    let _ = bars.println(line);
                }
                None => eprintln!("{line}"),
            }
        }
    }

    fn finish(&self) {
        self.overall.finish_and_clear();
        if let Some(bars) = &self.bars {
            let _ = bars.clear();
        }
    }
}

/// Runs every scenario `options.trials` times against agents made by `agent`.
pub async fn run_suite(
    scenarios: &[Scenario],
    agent: Arc<dyn AgentFactory>,
    models: &SimModels,
    options: &SuiteOptions,
) -> SuiteOutcome {
    let started_at = Utc::now();
    let suite_ledger = UsageLedger::new("suite");
    let semaphores: Semaphores = Arc::default();
    let jobs: Vec<(usize, &Scenario, u32)> =
        scenarios.iter().enumerate().flat_map(|(i, s)| (0..options.trials.max(1)).map(move |t| (i, s, t))).collect();
    let progress = SuiteProgress::new(jobs.len(), options.progress);
    let mut results: Vec<(usize, u32, RunResult)> = futures::stream::iter(jobs)
        .map(|(index, scenario, trial)| {
            let agent = Arc::clone(&agent);
            let semaphores = Arc::clone(&semaphores);
            let suite_ledger = suite_ledger.clone();
            let progress = &progress;
            async move {
                let mut keys = vec![agent.provider_key(), models.customer.model_id().to_string()];
                keys.sort();
                keys.dedup();
                let mut permits = Vec::new();
                if let Some(cap) = options.per_provider_concurrency {
                    for key in &keys {
                        let semaphore = provider_semaphore(&semaphores, key, cap).await;
                        if let Ok(permit) = semaphore.acquire_owned().await {
                            permits.push(permit);
                        }
                    }
                }
                let mut setup = scenario.setup_for(trial, options.definitions.get(&scenario.id).cloned());
                if setup.trajectory.max_turns.is_none() {
                    setup.trajectory.max_turns = options.default_max_turns;
                }
                let ledgers = ParticipantLedgers::under(&suite_ledger, &setup.trajectory.conversation_id);
                let run_bar = progress.run_bar(&format!("{} (trial {trial})", scenario.id));
                let clock = std::time::Instant::now();
                let run_budget = scenario.file.budget.unwrap_or(options.run_budget);
                let env = RunEnv {
                    customer: SimulatedCustomer::new(
                        Arc::clone(&models.customer),
                        ledgers.customer.clone(),
                        options.customer.clone(),
                    ),
                    ranker: StepRanker::new(Arc::clone(&models.customer), ledgers.customer.clone()),
                    judge: Judge::new(Arc::clone(&models.judge), ledgers.judge.clone()),
                    budgets: vec![(ledgers.run.clone(), run_budget), (suite_ledger.clone(), options.suite_budget)],
                    ledgers,
                    turn_timeout: options.turn_timeout,
                    artifacts_root: options.artifacts_root.clone(),
                    progress: run_bar.clone(),
                };
                let mut instance: Box<dyn AgentUnderTest> = match agent.create_for(scenario).await {
                    Ok(a) => a,
                    Err(e) => Box::new(Unavailable(e)),
                };
                let result = run_trajectory(&setup, instance.as_mut(), &env).await;
                drop(permits);
                progress.finished(&run_bar, &result, clock.elapsed());
                (index, trial, result)
            }
        })
        .buffer_unordered(options.concurrency.max(1))
        .collect()
        .await;
    progress.finish();
    results.sort_by_key(|(i, t, _)| (*i, *t));
    let runs: Vec<RunResult> = results.into_iter().map(|(_, _, r)| r).collect();
    let report = build_report(agent.describe(), scenarios, &runs, started_at);
    SuiteOutcome { report, runs }
}

fn add(total: &mut UsageTotals, more: &UsageTotals) {
    total.answers += more.answers;
    total.calls += more.calls;
    total.prompt_tokens += more.prompt_tokens;
    total.completion_tokens += more.completion_tokens;
    total.cached_tokens += more.cached_tokens;
    total.latency += more.latency;
    total.cost_usd += more.cost_usd;
    total.unpriced_models.extend(more.unpriced_models.iter().cloned());
}

fn build_report(agent: String, scenarios: &[Scenario], runs: &[RunResult], started_at: DateTime<Utc>) -> SuiteReport {
    let mut usage = ParticipantUsage::default();
    for run in runs {
        add(&mut usage.customer, &run.usage.customer);
        add(&mut usage.judge, &run.usage.judge);
        add(&mut usage.agent, &run.usage.agent);
    }
    let scenario_reports: Vec<ScenarioReport> = scenarios
        .iter()
        .map(|s| {
            let mine: Vec<&RunResult> = runs.iter().filter(|r| r.scenario_id == s.id).collect();
            let n = u32::try_from(mine.len()).unwrap_or(u32::MAX);
            let c = u32::try_from(mine.iter().filter(|r| r.passed()).count()).unwrap_or(u32::MAX);
            ScenarioReport {
                id: s.id.clone(),
                path: s.path.clone(),
                trials: n,
                passed: c,
                pass_hat_k: (1..=n).map(|k| (k, pass_hat_k(n, c, k))).collect(),
                runs: mine.iter().map(|r| r.summary_record()).collect(),
            }
        })
        .collect();
    let passed = runs.iter().filter(|r| r.passed()).count();
    #[allow(clippy::cast_precision_loss)]
    let pass_rate = if runs.is_empty() { 0.0 } else { passed as f64 / runs.len() as f64 };
    SuiteReport {
        agent,
        started_at,
        finished_at: Utc::now(),
        scenarios: scenario_reports,
        totals: SuiteTotals {
            runs: runs.len(),
            passed,
            failed: runs.len() - passed,
            errors: runs.iter().filter(|r| r.error.is_some()).count(),
            pass_rate,
        },
        usage,
        coverage: Vec::new(),
    }
}
