//! One run: the turn loop that selects a step, checks loops and policies, asks the simulated
//! customer for a message (or plays a scripted line), calls the agent, records the trace
//! (appending it to the artifacts at once), updates step states and checks satisfaction.
//! Failures of the agent, the models or the disk end the run with reason `error`; what
//! happened until then is kept and written.

mod result;
mod setup;

pub use result::{CheckpointResult, FailureSource, ParticipantUsage, RunResult, RunSummary};
pub use setup::{Budget, ParticipantLedgers, RunEnv, RunSetup, ScriptItem};

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use guidepost_llm::TaskKind;

use crate::agents::AgentUnderTest;
use crate::customer::{CustomerError, CustomerOutcome, TurnContext};
use crate::error::AgentError;
use crate::loops::detect_loop;
use crate::message::ModelMessage;
use crate::observations::{EngineExpectation, EngineObservations};
use crate::output::artifacts::ArtifactWriter;
use crate::policy::{DefaultPolicy, Policy, PolicyContext, PolicyDecision};
use crate::satisfaction::{SatisfactionVerdict, evaluate_selected, satisfied_along_the_way};
use crate::selection::select_step;
use crate::steps::{OnFailure, RunView, StepRuntime, StepStatus};
use crate::trajectory::{EndMarker, Selection, SelectionMethod, StepTrace, StopReason, TurnSource};

/// Why the loop stops.
struct Stop {
    reason: StopReason,
    completed: bool,
    summary: String,
    error: Option<String>,
    failure: Option<FailureSource>,
}

impl Stop {
    fn new(reason: StopReason, completed: bool, summary: impl Into<String>) -> Self {
        Self { reason, completed, summary: summary.into(), error: None, failure: None }
    }
    fn error(source: FailureSource, summary: impl Into<String>) -> Self {
        let summary = summary.into();
        Self {
            reason: StopReason::Error,
            completed: false,
            error: Some(summary.clone()),
            summary,
            failure: Some(source),
        }
    }
}

struct Run<'a> {
    setup: &'a RunSetup,
    env: &'a RunEnv,
    agent: &'a mut dyn AgentUnderTest,
    writer: Option<ArtifactWriter>,
    traces: Vec<StepTrace>,
    preamble: Vec<String>,
    steps: StepRuntime,
    observations: EngineObservations,
    reports_engine: bool,
    verdicts: Vec<SatisfactionVerdict>,
    checkpoints: Vec<CheckpointResult>,
}

/// Runs one conversation to its end. Never fails: errors become the `error` stop reason.
pub async fn run_trajectory(setup: &RunSetup, agent: &mut dyn AgentUnderTest, env: &RunEnv) -> RunResult {
    let started_at = Utc::now();
    let trajectory = &setup.trajectory;
    let mut run = Run {
        setup,
        env,
        agent,
        writer: None,
        traces: Vec::new(),
        preamble: Vec::new(),
        steps: StepRuntime::new(trajectory.steps.as_ref()),
        observations: EngineObservations::default(),
        reports_engine: false,
        verdicts: Vec::new(),
        checkpoints: Vec::new(),
    };
    let mut stop = match &env.artifacts_root {
        Some(root) => match ArtifactWriter::begin(root, trajectory) {
            Ok(writer) => {
                run.writer = Some(writer);
                None
            }
            Err(e) => Some(Stop::error(FailureSource::Harness, format!("cannot write artifacts: {e}"))),
        },
        None => None,
    };
    if stop.is_none() {
        let started = tokio::time::timeout(env.turn_timeout, run.agent.start(&trajectory.conversation_id))
            .await
            .unwrap_or(Err(AgentError::Timeout(env.turn_timeout)));
        stop = match started {
            Ok(()) => run.play_script().await,
            Err(e) => Some(Stop::error(FailureSource::Agent, format!("agent failed to start: {e}"))),
        };
    }
    // However the run ended (also when `start` failed half-way), the agent removes what it
    // created; what it could not remove is reported with the run.
    let cleanup_error = match tokio::time::timeout(env.turn_timeout, run.agent.finish()).await {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(_) => Some(format!("the agent did not finish the conversation within {:?}", env.turn_timeout)),
    };
    if let Some(e) = &cleanup_error {
        tracing::warn!(error = %e, "the agent did not clean up after the run");
    }
    let stop = stop.unwrap_or_else(|| run.final_policy_stop());
    run.finalize(stop, started_at, cleanup_error)
}

impl Run<'_> {
    fn view(&self) -> RunView<'_> {
        RunView { traces: &self.traces, steps: &self.steps, observations: &self.observations }
    }

    fn script(&self) -> Vec<ScriptItem> {
        if self.setup.script.is_empty() {
            vec![ScriptItem::Simulate { turns: None }]
        } else {
            self.setup.script.clone()
        }
    }

    async fn play_script(&mut self) -> Option<Stop> {
        for item in self.script() {
            let stop = match item {
                ScriptItem::Customer { text, step } => match self.pre_turn_checks() {
                    Some(stop) => Some(stop),
                    None => {
                        let selection = Selection { method: SelectionMethod::None, candidates: None };
                        self.play_turn(text, step, selection, TurnSource::Scripted).await
                    }
                },
                ScriptItem::Agent { text } => self.inject(text).await,
                ScriptItem::Checkpoint { name, expect } => self.checkpoint(name, &expect),
                ScriptItem::Simulate { turns } => self.simulate(turns).await,
            };
            if stop.is_some() {
                return stop;
            }
        }
        None
    }

    async fn inject(&mut self, text: String) -> Option<Stop> {
        if let Err(e) = self.agent.inject_agent_message(&text).await {
            return Some(Stop::error(FailureSource::Agent, format!("agent refused an injected line: {e}")));
        }
        match self.traces.last_mut() {
            Some(last) => last.agent_messages.push(ModelMessage::assistant(text)),
            None => self.preamble.push(text),
        }
        None
    }

    fn checkpoint(&mut self, name: String, expect: &[EngineExpectation]) -> Option<Stop> {
        let failures: Vec<String> =
            expect.iter().filter(|e| !e.holds(&self.observations)).map(EngineExpectation::describe).collect();
        let passed = failures.is_empty();
        let summary = format!("Checkpoint \"{name}\" failed: {}", failures.join("; "));
        self.checkpoints.push(CheckpointResult { name, after_turn: self.traces.len(), passed, failures });
        (!passed).then(|| Stop::new(StopReason::CheckpointFailed, false, summary))
    }

    fn policy_stop(&self) -> Option<Stop> {
        let ctx = PolicyContext { trajectory: &self.setup.trajectory, view: self.view() };
        let default: &dyn Policy = &DefaultPolicy;
        let stops: Vec<Stop> = std::iter::once(default)
            .chain(self.setup.policies.iter().map(AsRef::as_ref))
            .filter_map(|p| match p.evaluate(&ctx) {
                PolicyDecision::Continue => None,
                PolicyDecision::Stop { reason, completed, summary } => Some(Stop::new(reason, completed, summary)),
            })
            .collect();
        // A violation in the turn that also reached the goal still fails the run.
        let violation = stops.iter().position(|s| s.reason == StopReason::PolicyViolation);
        let mut stops = stops;
        match violation {
            Some(i) => Some(stops.swap_remove(i)),
            None => stops.into_iter().next(),
        }
    }

    /// The stop of a script that ran out of items: complete when there is no step graph (a
    /// fully scripted test), incomplete when terminal steps were not reached.
    fn final_policy_stop(&self) -> Stop {
        self.policy_stop().unwrap_or_else(|| {
            let completed = self.setup.trajectory.steps.is_none();
            Stop::new(StopReason::ScriptEnded, completed, "The scenario script ended")
        })
    }

    fn pre_turn_checks(&self) -> Option<Stop> {
        for (ledger, budget) in &self.env.budgets {
            if let Some(why) = budget.exceeded(&ledger.totals()) {
                return Some(Stop::new(StopReason::BudgetExceeded, false, format!("Budget exceeded: {why}")));
            }
        }
        self.policy_stop()
    }

    async fn simulate(&mut self, turns: Option<u32>) -> Option<Stop> {
        let mut played = 0u32;
        while turns.is_none_or(|n| played < n) {
            if let Some(stop) = self.pre_turn_checks() {
                return Some(stop);
            }
            if let Some(stop) = self.simulated_turn().await {
                return Some(stop);
            }
            played += 1;
        }
        None
    }

    async fn simulated_turn(&mut self) -> Option<Stop> {
        let selected = match select_step(&self.setup.trajectory, &self.view(), &self.env.ranker, &self.preamble).await {
            Ok(s) => s,
            Err(e) => return Some(Stop::error(FailureSource::Simulator, format!("step ranking failed: {e}"))),
        };
        let mut ids: Vec<Option<String>> = self.traces.iter().map(|t| t.step_id.clone()).collect();
        ids.push(selected.step_id.clone());
        if let Some(found) = detect_loop(&ids, &self.setup.trajectory.loop_detection) {
            return Some(Stop::new(StopReason::AgentLoop, false, found.summary()));
        }
        let graph = self.setup.trajectory.steps.as_ref();
        let step = selected.step_id.as_deref().and_then(|id| graph.and_then(|g| g.step(id)));
        let ctx =
            TurnContext { trajectory: &self.setup.trajectory, traces: &self.traces, preamble: &self.preamble, step };
        self.env.progress.set_message(format!("turn {}: the customer is writing", self.traces.len() + 1));
        let reply = match self.env.customer.next_message(ctx).await {
            Ok(reply) => reply,
            Err(CustomerError::RoleSlip(why)) => {
                return Some(Stop::new(
                    StopReason::PolicyViolation,
                    false,
                    format!("Simulated customer left its role: {why}"),
                ));
            }
            Err(CustomerError::Model(e)) => {
                return Some(Stop::error(FailureSource::Simulator, format!("simulated customer failed: {e}")));
            }
        };
        if reply.done {
            // A goodbye can be what the last step needs the agent to hear ("no thanks, that's
            // all" closes a journey): when the customer considers its goal met but the terminal
            // steps are not yet satisfied, the goodbye is sent as a last turn before judging.
            if reply.outcome == Some(CustomerOutcome::GoalMet) && !self.terminals_met() && !reply.message.is_empty() {
                let goodbye = reply.message.clone();
                if let Some(stop) =
                    self.play_turn(goodbye, selected.step_id, selected.selection, TurnSource::Simulated).await
                {
                    return Some(stop);
                }
            }
            return Some(self.customer_done(reply.outcome, &reply.message));
        }
        self.play_turn(reply.message, selected.step_id, selected.selection, TurnSource::Simulated).await
    }

    /// Whether a terminal step (or, with no terminals, every step) is satisfied; true without
    /// a step graph.
    fn terminals_met(&self) -> bool {
        self.setup.trajectory.steps.as_ref().is_none_or(|g| {
            g.terminals.iter().any(|t| self.steps.get(t).is_some_and(|s| s.status == StepStatus::Satisfied))
                || (g.terminals.is_empty()
                    && g.steps
                        .iter()
                        .all(|s| self.steps.get(&s.id).is_some_and(|st| st.status == StepStatus::Satisfied)))
        })
    }

    fn customer_done(&self, outcome: Option<CustomerOutcome>, goodbye: &str) -> Stop {
        match outcome {
            Some(CustomerOutcome::GoalMet) if self.terminals_met() => Stop::new(
                StopReason::GoalReached,
                true,
                format!("The customer ended the conversation, goal met: {goodbye}"),
            ),
            Some(CustomerOutcome::GoalMet) => Stop::new(
                StopReason::CustomerEnded,
                false,
                format!("The customer considered its goal met before the terminal steps were satisfied: {goodbye}"),
            ),
            _ => Stop::new(StopReason::CustomerEnded, false, format!("The customer gave up: {goodbye}")),
        }
    }

    async fn play_turn(
        &mut self,
        message: String,
        step_id: Option<String>,
        selection: Selection,
        source: TurnSource,
    ) -> Option<Stop> {
        let graph = self.setup.trajectory.steps.clone();
        let step = step_id.as_deref().and_then(|id| graph.as_ref().and_then(|g| g.step(id)));
        if let Some(step) = step {
            self.steps.record_attempt(&step.id);
        }
        let mut limit = self.env.turn_timeout;
        if let (Some(step), Some(state)) = (step, step_id.as_deref().and_then(|id| self.steps.get(id)))
            && let (Some(timeout), Some(started)) = (step.timeout, state.started_at)
        {
            let spent = (Utc::now() - started).to_std().unwrap_or_default();
            limit = limit.min(timeout.saturating_sub(spent).max(Duration::from_millis(1)));
        }
        let clock = Instant::now();
        self.env.progress.set_message(format!("turn {}: waiting for the agent", self.traces.len() + 1));
        let outcome = match tokio::time::timeout(limit, self.agent.reply(&message)).await {
            Ok(result) => result,
            Err(_) => Err(AgentError::Timeout(limit)),
        };
        let latency_ms = u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
        let turn_index = u32::try_from(self.traces.len()).unwrap_or(u32::MAX);
        let (agent_messages, observations, failure) = match outcome {
            Ok(turn) => {
                if let Some(usage) = &turn.usage {
                    self.env.ledgers.agent.record(&TaskKind::Generation, usage);
                }
                (turn.to_model_messages(turn_index), turn.observations, None)
            }
            Err(e) => (Vec::new(), None, Some(e)),
        };
        if let Some(seen) = &observations {
            self.reports_engine = true;
            self.observations.absorb(seen);
        }
        let trace = StepTrace {
            turn_index,
            user_message: ModelMessage::user(message),
            agent_messages,
            timestamp: Utc::now(),
            step_id: step_id.clone(),
            selection,
            end: None,
            source,
            observations,
            latency_ms: Some(latency_ms),
        };
        self.traces.push(trace);
        if let Some(writer) = &self.writer
            && let Err(e) = writer.append(self.traces.len() - 1, &self.traces[self.traces.len() - 1])
        {
            return Some(Stop::error(FailureSource::Harness, format!("cannot append the turn to the artifacts: {e}")));
        }
        if let Some(e) = failure {
            let timed_out = matches!(e, AgentError::Timeout(_));
            if timed_out && let Some(step) = step {
                // The step's own time ran out while the agent was answering.
                if step.timeout.is_some_and(|t| limit < self.env.turn_timeout && limit <= t) {
                    return self.fail_step(&step.id, step.on_failure, "ran out of time");
                }
            }
            return Some(Stop::error(FailureSource::Agent, format!("agent failed: {e}")));
        }
        self.update_steps(step_id.as_deref()).await
    }

    async fn update_steps(&mut self, step_id: Option<&str>) -> Option<Stop> {
        let graph = self.setup.trajectory.steps.clone()?;
        if let Some(step) = step_id.and_then(|id| graph.step(id)) {
            let verdict =
                match evaluate_selected(step, &self.view(), self.reports_engine, &self.env.judge, &self.preamble).await
                {
                    Ok(v) => v,
                    Err(e) => {
                        return Some(Stop::error(
                            FailureSource::Judge,
                            format!("judging step \"{}\" failed: {e}", step.id),
                        ));
                    }
                };
            let satisfied = verdict.satisfied;
            self.verdicts.push(verdict);
            if satisfied {
                self.steps.set_status(&step.id, StepStatus::Satisfied);
            } else if let Some(state) = self.steps.get(&step.id) {
                if step.max_attempts.is_some_and(|max| state.attempts >= max) {
                    if let Some(stop) = self.fail_step(&step.id, step.on_failure, "ran out of attempts") {
                        return Some(stop);
                    }
                } else if let (Some(timeout), Some(started)) = (step.timeout, state.started_at)
                    && (Utc::now() - started).to_std().unwrap_or_default() >= timeout
                    && let Some(stop) = self.fail_step(&step.id, step.on_failure, "ran out of time")
                {
                    return Some(stop);
                }
            }
        }
        loop {
            let along = satisfied_along_the_way(&graph, step_id, &self.view(), self.reports_engine);
            if along.is_empty() {
                break;
            }
            for verdict in along {
                self.steps.set_status(&verdict.step_id, StepStatus::Satisfied);
                self.verdicts.push(verdict);
            }
        }
        None
    }

    fn fail_step(&mut self, id: &str, on_failure: OnFailure, why: &str) -> Option<Stop> {
        self.steps.set_status(id, StepStatus::Failed);
        match on_failure {
            OnFailure::Stop => Some(Stop::new(StopReason::StepFailed, false, format!("Step \"{id}\" {why}"))),
            OnFailure::Skip => {
                self.steps.set_status(id, StepStatus::Skipped);
                if let Some(graph) = &self.setup.trajectory.steps {
                    self.steps.propagate_blocked(graph);
                }
                None
            }
        }
    }

    fn finalize(mut self, mut stop: Stop, started_at: DateTime<Utc>, cleanup_error: Option<String>) -> RunResult {
        for expectation in &self.setup.expect {
            let passed = expectation.holds(&self.observations);
            self.checkpoints.push(CheckpointResult {
                name: format!("final: {}", expectation.describe()),
                after_turn: self.traces.len(),
                passed,
                failures: if passed { Vec::new() } else { vec![expectation.describe()] },
            });
        }
        if let Some(last) = self.traces.last_mut() {
            last.end = Some(EndMarker {
                is_final: true,
                reason: stop.reason,
                completed: stop.completed,
                summary: Some(stop.summary.clone()),
            });
        }
        let ledgers = &self.env.ledgers;
        let mut result = RunResult {
            scenario_id: self.setup.scenario_id.clone(),
            trial: self.setup.trial,
            conversation_id: self.setup.trajectory.conversation_id.clone(),
            traces: self.traces,
            preamble: self.preamble,
            reason: stop.reason,
            completed: stop.completed,
            summary: std::mem::take(&mut stop.summary),
            error: stop.error.take(),
            failure: stop.failure,
            steps: self.steps.states().to_vec(),
            verdicts: self.verdicts,
            checkpoints: self.checkpoints,
            observations: self.observations,
            reports_engine: self.reports_engine,
            usage: ParticipantUsage {
                customer: ledgers.customer.totals(),
                judge: ledgers.judge.totals(),
                agent: ledgers.agent.totals(),
            },
            started_at,
            finished_at: Utc::now(),
            artifacts_dir: self.writer.as_ref().map(|w| w.dir().to_path_buf()),
            cleanup_error,
        };
        if let Some(writer) = &self.writer
            && let Err(e) = writer.finish(&result)
        {
            tracing::error!(error = %e, "cannot write the run's final artifacts");
            if result.error.is_none() {
                result.error = Some(format!("cannot write artifacts: {e}"));
                result.failure = Some(FailureSource::Harness);
                result.reason = StopReason::Error;
                result.completed = false;
            }
        }
        result
    }
}
