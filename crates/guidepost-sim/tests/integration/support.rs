//! Shared helpers: scripted models, a scripted agent reporting engine observations, run setups.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use guidepost_llm::providers::scripted::{ScriptedModel, schema_is};
use guidepost_llm::{ChatRequest, Role, TaskKind, UsageLedger};
use guidepost_sim::agents::{AgentFactory, AgentTurn, AgentUnderTest};
use guidepost_sim::customer::{CustomerOptions, SimulatedCustomer};
use guidepost_sim::judge::Judge;
use guidepost_sim::runner::{ParticipantLedgers, RunEnv, RunSetup};
use guidepost_sim::selection::StepRanker;
use guidepost_sim::steps::{StepDefinition, StepGraph};
use guidepost_sim::{AgentError, Persona, Trajectory};
use serde_json::{Value, json};

/// A customer answer.
pub fn say(message: &str) -> Value {
    json!({"message": message, "done": false, "outcome": null})
}

/// A customer ending the conversation.
pub fn done(outcome: &str) -> Value {
    json!({"message": "Bye", "done": true, "outcome": outcome})
}

/// Customer turns so far in a customer request (its own messages are role-flipped to assistant).
pub fn customer_turns(req: &ChatRequest) -> usize {
    req.messages.iter().filter(|m| m.role == Role::Assistant).count()
}

/// A builder of scripted simulator models.
pub struct Models {
    pub model: ScriptedModel,
}

impl Models {
    pub fn new() -> Self {
        Self { model: ScriptedModel::new() }
    }

    /// The customer answers `answers[i]` at its turn i (by counting its own earlier messages),
    /// repeating the last one.
    pub fn customer(mut self, answers: Vec<Value>) -> Self {
        self.model = self.model.when(schema_is("CustomerReply")).task(TaskKind::Simulation).reply_with(move |req| {
            let i = customer_turns(req).min(answers.len().saturating_sub(1));
            Ok(answers.get(i).cloned().unwrap_or_else(|| say("hello")))
        });
        self
    }

    /// The ranker answers with `candidates` ([(step id, confidence)]) every time.
    pub fn ranking(mut self, candidates: Vec<(&str, f64)>) -> Self {
        let candidates: Vec<Value> =
            candidates.iter().map(|(id, c)| json!({"step_id": id, "confidence": c, "reason": "fits"})).collect();
        self.model = self
            .model
            .when(schema_is("StepRanking"))
            .reply_json(json!({"reasoning": "ranked", "candidates": candidates}));
        self
    }

    /// The ranker answers with a function of the request.
    pub fn ranking_with(mut self, f: impl Fn(&ChatRequest) -> Vec<(String, f64)> + Send + Sync + 'static) -> Self {
        self.model = self.model.when(schema_is("StepRanking")).reply_with(move |req| {
            let candidates: Vec<Value> =
                f(req).into_iter().map(|(id, c)| json!({"step_id": id, "confidence": c, "reason": "fits"})).collect();
            Ok(json!({"reasoning": "ranked", "candidates": candidates}))
        });
        self
    }

    /// The judge says `satisfied` every time.
    pub fn judge(mut self, satisfied: bool) -> Self {
        self.model = self
            .model
            .when(schema_is("StepJudgement"))
            .reply_json(json!({"reasoning": "judged", "satisfied": satisfied}));
        self
    }

    pub fn build(self) -> Arc<ScriptedModel> {
        Arc::new(self.model)
    }
}

/// A run environment over one scripted model.
pub fn env(model: &Arc<ScriptedModel>, artifacts: Option<&std::path::Path>) -> RunEnv {
    let ledgers = ParticipantLedgers::under(&UsageLedger::new("test"), "run");
    RunEnv {
        customer: SimulatedCustomer::new(model.clone(), ledgers.customer.clone(), CustomerOptions::default()),
        ranker: StepRanker::new(model.clone(), ledgers.customer.clone()),
        judge: Judge::new(model.clone(), ledgers.judge.clone()),
        ledgers,
        budgets: Vec::new(),
        turn_timeout: Duration::from_secs(5),
        artifacts_root: artifacts.map(std::path::Path::to_path_buf),
        progress: indicatif::ProgressBar::hidden(),
    }
}

/// A trajectory with an optional graph.
pub fn trajectory(steps: Option<StepGraph>, max_turns: Option<u32>) -> Trajectory {
    Trajectory {
        goal: "Book a taxi to the station".into(),
        persona: Persona {
            name: Some("Ann".into()),
            description: "A busy commuter".into(),
            guardrails: vec!["Be brief".into()],
        },
        steps,
        max_turns,
        conversation_id: "test-trial0".into(),
        metadata: Default::default(),
        loop_detection: Default::default(),
    }
}

/// A graph of `steps` starting at the first, with `terminals`.
pub fn graph(steps: Vec<StepDefinition>, terminals: &[&str]) -> StepGraph {
    let start = steps[0].id.clone();
    StepGraph { steps, start, terminals: terminals.iter().map(|s| (*s).to_string()).collect() }
}

/// A setup without script.
pub fn setup(trajectory: Trajectory) -> RunSetup {
    RunSetup {
        scenario_id: "test".into(),
        trial: 0,
        trajectory,
        script: Vec::new(),
        expect: Vec::new(),
        policies: Vec::new(),
    }
}

type Script = Arc<dyn Fn(usize, &str) -> Result<AgentTurn, AgentError> + Send + Sync>;

/// An agent answering by a function of (turn index, customer message).
pub struct ScriptedAgent {
    script: Script,
    turn: usize,
    pub delay: Option<Duration>,
}

impl ScriptedAgent {
    pub fn new(f: impl Fn(usize, &str) -> Result<AgentTurn, AgentError> + Send + Sync + 'static) -> Self {
        Self { script: Arc::new(f), turn: 0, delay: None }
    }

    /// An agent that echoes.
    pub fn echo() -> Self {
        Self::new(|_, m| Ok(AgentTurn::text([format!("Agent heard: {m}")])))
    }
}

#[async_trait]
impl AgentUnderTest for ScriptedAgent {
    async fn reply(&mut self, customer_message: &str) -> Result<AgentTurn, AgentError> {
        if let Some(d) = self.delay {
            tokio::time::sleep(d).await;
        }
        let turn = self.turn;
        self.turn += 1;
        (self.script)(turn, customer_message)
    }
}

/// Makes scripted agents.
pub struct ScriptedFactory {
    pub script: Script,
    pub created: AtomicUsize,
}

impl ScriptedFactory {
    pub fn new(f: impl Fn(usize, &str) -> Result<AgentTurn, AgentError> + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(Self { script: Arc::new(f), created: AtomicUsize::new(0) })
    }
}

#[async_trait]
impl AgentFactory for ScriptedFactory {
    fn describe(&self) -> String {
        "scripted agent".into()
    }
    async fn create(&self) -> Result<Box<dyn AgentUnderTest>, AgentError> {
        self.created.fetch_add(1, Ordering::SeqCst);
        let script = Arc::clone(&self.script);
        Ok(Box::new(ScriptedAgent { script, turn: 0, delay: None }))
    }
}
