//! Parallel suites: results independent of the concurrency, trials and pass^k, budgets,
//! reports and the exit code.

use std::sync::Arc;

use guidepost_llm::providers::scripted::{ScriptedModel, schema_is};
use guidepost_llm::{ChatModel, TaskKind};
use guidepost_sim::output::junit::to_junit;
use guidepost_sim::output::report_json::to_json;
use guidepost_sim::runner::Budget;
use guidepost_sim::{AgentTurn, Scenario, SimModels, StopReason, SuiteOptions, run_suite};
use serde_json::{Value, json};

use crate::support::*;

fn scenario(id: &str, turns_to_done: usize) -> Scenario {
    let text = format!(
        "id: {id}\ngoal: Get help number {turns_to_done}\npersona: {{ description: A customer }}\nmax_turns: 6\nmetadata: {{ done_after: {turns_to_done} }}\n"
    );
    Scenario::parse(std::path::Path::new(&format!("{id}.yaml")), &text).unwrap()
}

/// A customer whose answers depend only on the request (goal and turn), so concurrent runs
/// sharing the model stay deterministic.
fn models() -> SimModels {
    let model: Arc<dyn ChatModel> =
        Arc::new(ScriptedModel::new().when(schema_is("CustomerReply")).task(TaskKind::Simulation).reply_with(|req| {
            let system = req.system_text();
            let limit: usize = system.split("Get help number ").nth(1).and_then(|s| s[..1].parse().ok()).unwrap_or(1);
            let turn = customer_turns(req);
            if limit == 9 {
                return Ok(json!({"message": "this is going nowhere", "done": true, "outcome": "gave_up"}));
            }
            Ok(if turn >= limit { done("goal_met") } else { say(&format!("request {turn} of {limit}")) })
        }));
    SimModels { customer: Arc::clone(&model), judge: model }
}

fn comparable(outcome: &guidepost_sim::SuiteOutcome) -> Vec<Value> {
    outcome
        .runs
        .iter()
        .map(|r| {
            json!({
                "id": r.conversation_id, "reason": r.reason, "passed": r.passed(),
                "traces": r.traces.iter().map(|t| json!([t.user_message, t.agent_messages, t.step_id, t.end])).collect::<Vec<_>>(),
            })
        })
        .collect()
}

#[tokio::test]
async fn results_do_not_depend_on_the_concurrency() {
    let scenarios = vec![scenario("alpha", 1), scenario("beta", 3), scenario("gamma", 2), scenario("delta", 9)];
    let agent = ScriptedFactory::new(|turn, m| {
        Ok(AgentTurn::text([format!("reply {turn} to a message of {} words", m.split_whitespace().count().min(9))]))
    });
    let mut options = SuiteOptions { trials: 2, concurrency: 1, ..SuiteOptions::default() };
    let serial = run_suite(&scenarios, agent.clone(), &models(), &options).await;
    options.concurrency = 4;
    options.per_provider_concurrency = Some(3);
    let parallel = run_suite(&scenarios, agent.clone(), &models(), &options).await;
    assert_eq!(comparable(&serial), comparable(&parallel));
    assert_eq!(serial.runs.len(), 8);
    assert_eq!(agent.created.load(std::sync::atomic::Ordering::SeqCst), 16);
    let ids: Vec<&str> = serial.runs.iter().map(|r| r.conversation_id.as_str()).collect();
    assert_eq!(ids[..3], ["alpha-trial0", "alpha-trial1", "beta-trial0"]);

    let report = &parallel.report;
    assert_eq!((report.totals.runs, report.totals.passed, report.totals.failed), (8, 6, 2));
    let delta = report.scenarios.iter().find(|s| s.id == "delta").unwrap();
    assert_eq!(delta.runs[0].reason, StopReason::CustomerEnded);
    assert_eq!(delta.pass_hat_k[&1], 0.0);
    let beta = report.scenarios.iter().find(|s| s.id == "beta").unwrap();
    assert_eq!((beta.passed, beta.pass_hat_k[&2]), (2, 1.0));
    assert!(report.usage.customer.calls > 0);
    assert_eq!(report.exit_code(None), 1);
    assert_eq!(report.exit_code(Some(0.75)), 0);
    assert_eq!(report.exit_code(Some(0.8)), 1);

    let junit = to_junit(report);
    assert!(junit.contains("<testsuites name=\"guidepost simulate\" tests=\"8\" failures=\"2\" errors=\"0\""));
    assert!(junit.contains("<testsuite name=\"delta\" tests=\"2\" failures=\"2\" errors=\"0\">"));
    assert!(junit.contains("<failure message=\"customer-ended\">"));
    let text = guidepost_sim::output::summary::summarize_suite(report);
    assert!(text.contains("  delta 0/2 passed [customer-ended, customer-ended] pass^1=0.00 pass^2=0.00"), "{text}");
    assert!(text.contains("Runs: 6 passed, 2 failed (0 errors), pass rate 0.75"), "{text}");
    let parsed: Value = serde_json::from_str(&to_json(report)).unwrap();
    assert_eq!(parsed["totals"]["pass_rate"], 0.75);
    assert_eq!(parsed["scenarios"][0]["pass_hat_k"]["1"], 1.0);
}

#[tokio::test]
async fn a_suite_budget_stops_runs_cleanly_and_agent_creation_failures_are_errors() {
    let scenarios = vec![scenario("alpha", 3), scenario("beta", 3)];
    let agent = ScriptedFactory::new(|_, _| Ok(AgentTurn::text(["ok"])));
    let options = SuiteOptions {
        concurrency: 1,
        suite_budget: Budget { max_tokens: Some(1), max_cost_usd: None },
        ..SuiteOptions::default()
    };
    let outcome = run_suite(&scenarios, agent, &models(), &options).await;
    assert!(outcome.runs.iter().all(|r| r.reason == StopReason::BudgetExceeded));
    assert_eq!(outcome.runs[1].traces.len(), 0, "the second run stops before its first turn");

    struct Broken;
    #[async_trait::async_trait]
    impl guidepost_sim::AgentFactory for Broken {
        fn describe(&self) -> String {
            "broken".into()
        }
        async fn create(&self) -> Result<Box<dyn guidepost_sim::AgentUnderTest>, guidepost_sim::AgentError> {
            Err(guidepost_sim::AgentError::Transport("no server".into()))
        }
    }
    let outcome = run_suite(&scenarios[..1], Arc::new(Broken), &models(), &SuiteOptions::default()).await;
    assert_eq!(outcome.runs[0].reason, StopReason::Error);
    assert_eq!(outcome.report.totals.errors, 1);
    assert!(
        to_junit(&outcome.report)
            .contains("<error message=\"agent failed to start: agent transport failed: no server\">")
    );
}

#[tokio::test]
async fn the_per_provider_cap_bounds_runs_in_flight() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    struct Tracked {
        active: Arc<AtomicUsize>,
        peak: Arc<AtomicUsize>,
    }
    struct Session(Arc<AtomicUsize>, Arc<AtomicUsize>);
    #[async_trait::async_trait]
    impl guidepost_sim::AgentUnderTest for Session {
        async fn start(&mut self, _: &str) -> Result<(), guidepost_sim::AgentError> {
            let now = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            self.1.fetch_max(now, Ordering::SeqCst);
            Ok(())
        }
        async fn reply(&mut self, _: &str) -> Result<AgentTurn, guidepost_sim::AgentError> {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            Ok(AgentTurn::text(["ok"]))
        }
        async fn finish(&mut self) -> Result<(), guidepost_sim::AgentError> {
            self.0.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }
    }
    #[async_trait::async_trait]
    impl guidepost_sim::AgentFactory for Tracked {
        fn describe(&self) -> String {
            "tracked".into()
        }
        async fn create(&self) -> Result<Box<dyn guidepost_sim::AgentUnderTest>, guidepost_sim::AgentError> {
            Ok(Box::new(Session(Arc::clone(&self.active), Arc::clone(&self.peak))))
        }
    }
    let scenarios = vec![scenario("alpha", 2), scenario("beta", 2), scenario("gamma", 2)];
    let peak = Arc::new(AtomicUsize::new(0));
    let factory = Arc::new(Tracked { active: Arc::default(), peak: Arc::clone(&peak) });
    let uncapped = SuiteOptions { concurrency: 4, ..SuiteOptions::default() };
    run_suite(&scenarios, factory.clone(), &models(), &uncapped).await;
    assert_eq!(peak.load(Ordering::SeqCst), 3, "three runs at once without a cap");
    peak.store(0, Ordering::SeqCst);
    let capped = SuiteOptions { concurrency: 4, per_provider_concurrency: Some(1), ..SuiteOptions::default() };
    let outcome = run_suite(&scenarios, factory, &models(), &capped).await;
    assert_eq!(peak.load(Ordering::SeqCst), 1);
    assert_eq!(outcome.report.totals.passed, 3);
}
