//! Guidepost's conversation simulator: a model plays the customer (persona, goal, optional
//! step graph), talks to the agent under test turn by turn, and every run is written in the
//! file formats Tally's viewers read.
//!
//! - Definitions: [`Trajectory`] (goal, [`Persona`], [`steps::StepGraph`], limits) and
//!   scenario files ([`scenario`]) with scripts mixing fixed and simulated turns, checkpoints
//!   on engine events and policies.
//! - One run: [`run_trajectory`] selects steps ([`selection`]: preconditions first, then ranking
//!   with one threshold, then graceful continuation), detects loops ([`loops`]), asks the
//!   simulated customer ([`customer`]) for a message, calls the agent ([`AgentUnderTest`]),
//!   judges satisfaction from engine state or with the judge ([`satisfaction`]), and stops for a
//!   [`StopReason`]. Each turn is a [`StepTrace`], appended to the artifacts at once.
//! - Many runs: [`run_suite`] runs scenarios × trials in parallel with caps and budgets,
//!   computes pass^k and usage per participant; [`coverage`] lists the journey states,
//!   transitions and guidelines exercised and missed; [`output`] writes JSONL, Tally
//!   conversations, the artifact folder, JSON and JUnit reports.
//! - The `guidepost simulate` command: [`SimulateArgs`] and [`run`]. Wiring it in the CLI:
//!
//! ```ignore
//! #[derive(clap::Subcommand)]
//! enum Command { Simulate(guidepost_sim::SimulateArgs), /* … */ }
//!
//! Command::Simulate(args) => {
//!     let plugins = guidepost_sim::Plugins { registry, engine: Some(engine_sessions), ..Default::default() };
//!     match guidepost_sim::run(&args, plugins).await {
//!         Ok(outcome) => {
//!             println!("{}", guidepost_sim::output::summary::summarize_suite(&outcome.report));
//!             std::process::exit(outcome.report.exit_code(args.min_pass_rate));
//!         }
//!         Err(e) => { eprintln!("{e}"); std::process::exit(2) }
//!     }
//! }
//! ```
//!
//! ```
//! use std::sync::Arc;
//! use guidepost_llm::{TaskKind, UsageLedger};
//! use guidepost_llm::providers::scripted::ScriptedModel;
//! use guidepost_sim::agents::{AgentTurn, AgentUnderTest};
//! use guidepost_sim::customer::{CustomerOptions, SimulatedCustomer};
//! use guidepost_sim::judge::Judge;
//! use guidepost_sim::runner::{ParticipantLedgers, RunEnv, RunSetup};
//! use guidepost_sim::selection::StepRanker;
//! use guidepost_sim::{AgentError, Persona, StopReason, Trajectory, run_trajectory};
//! use serde_json::json;
//!
//! struct Echo;
//! #[async_trait::async_trait]
//! impl AgentUnderTest for Echo {
//!     async fn reply(&mut self, message: &str) -> Result<AgentTurn, AgentError> {
//!         Ok(AgentTurn::text([format!("You said: {message}")]))
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // The customer opens, then declares its goal met.
//! let model = Arc::new(
//!     ScriptedModel::new()
//!         .when_task(TaskKind::Simulation).times(1)
//!         .reply_json(json!({"message": "Hi, is the shop open today?", "done": false, "outcome": null}))
//!         .on(TaskKind::Simulation, |_| Ok(json!({"message": "Thanks!", "done": true, "outcome": "goal_met"}))),
//! );
//! let ledgers = ParticipantLedgers::under(&UsageLedger::new("example"), "run");
//! let env = RunEnv {
//!     customer: SimulatedCustomer::new(model.clone(), ledgers.customer.clone(), CustomerOptions::default()),
//!     ranker: StepRanker::new(model.clone(), ledgers.customer.clone()),
//!     judge: Judge::new(model.clone(), ledgers.judge.clone()),
//!     ledgers,
//!     budgets: Vec::new(),
//!     turn_timeout: std::time::Duration::from_secs(5),
//!     artifacts_root: None,
//!     progress: indicatif::ProgressBar::hidden(),
//! };
//! let setup = RunSetup {
//!     scenario_id: "opening-hours".into(),
//!     trial: 0,
//!     trajectory: Trajectory {
//!         goal: "Find out whether the shop is open today".into(),
//!         persona: Persona { name: Some("Ann".into()), description: "A brief customer".into(), guardrails: vec![] },
//!         steps: None,
//!         max_turns: Some(5),
//!         conversation_id: "opening-hours-trial0".into(),
//!         metadata: Default::default(),
//!         loop_detection: Default::default(),
//!     },
//!     script: Vec::new(),
//!     expect: Vec::new(),
//!     policies: Vec::new(),
//! };
//! let result = run_trajectory(&setup, &mut Echo, &env).await;
//! assert_eq!(result.reason, StopReason::GoalReached);
//! assert_eq!(result.traces.len(), 1);
//! assert_eq!(result.traces[0].agent_texts(), ["You said: Hi, is the shop open today?"]);
//! # });
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod agents;
pub mod coverage;
pub mod customer;
pub mod error;
pub mod judge;
pub mod loops;
pub mod message;
pub mod observations;
pub mod output;
pub mod policy;
mod prompts;
pub mod reply_quality;
pub mod runner;
pub mod satisfaction;
pub mod scenario;
pub mod selection;
pub mod simulate;
pub mod steps;
pub mod suite;
pub mod trajectory;
mod transcript;
pub mod workload;

pub use agents::{AgentFactory, AgentTurn, AgentUnderTest, ToolCallRecord, TurnItem};
pub use error::{AgentError, ScenarioError, SimError};
pub use observations::{
    EngineExpectation, EngineObservations, JourneyStateReached, ToolCalled, UnattributedJourneyNode,
};
pub use runner::{RunResult, RunSetup, ScriptItem, run_trajectory};
pub use scenario::{Scenario, load_scenarios};
pub use simulate::{AgentTarget, Plugins, SimulateArgs, run};
pub use suite::{SimModels, SuiteOptions, SuiteOutcome, SuiteReport, run_suite};
pub use trajectory::{Persona, StepTrace, StopReason, Trajectory};
