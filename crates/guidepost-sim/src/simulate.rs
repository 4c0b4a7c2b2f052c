//! The entry point of `guidepost simulate`: options ([`SimulateArgs`], a `clap::Args` the CLI
//! flattens into its subcommand), the agent target, and [`run`], which loads scenarios, builds
//! the model stack (with record/replay), runs the suite, computes coverage and writes reports.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use guidepost_core::AgentDefinition;
use guidepost_core::definition::load_agent;
use guidepost_llm::{
    CacheMode, ChatModel, LimitsConfig, ModelSettings, ModelSpec, ModelStackBuilder, ProviderRegistry, StackConfig,
    TaskKind, layer,
};

use crate::agents::AgentFactory;
use crate::agents::in_process::{EngineSessionFactory, InProcessFactory};
use crate::agents::jsonl_command::JsonlCommandFactory;
use crate::agents::openai_chat::ChatModelAgentFactory;
use crate::agents::parlant_events::JourneyStateIndex;
use crate::agents::parlant_rest::{ParlantRestConfig, ParlantRestFactory};
use crate::coverage::compute_coverage;
use crate::error::SimError;
use crate::output::junit::write_junit;
use crate::output::report_json::write_json;
use crate::runner::Budget;
use crate::scenario::load_scenarios;
use crate::suite::{SimModels, SuiteOptions, SuiteOutcome, run_suite};

/// Options of `guidepost simulate`.
#[derive(Debug, Clone, clap::Args)]
pub struct SimulateArgs {
    /// Scenario files or folders (searched for .yaml/.yml).
    #[arg(required = true)]
    pub scenarios: Vec<PathBuf>,
    /// The agent under test: `in-process` (the Guidepost engine on each scenario's agent
    /// definition), `parlant:<base url>#<agent id>` (a Guidepost or Parlant server),
    /// `model:<model spec>` (a bare chat model, with --system-prompt) or
    /// `command:<shell command>` (a program speaking JSON lines).
    #[arg(long, default_value = "in-process")]
    pub agent: String,
    /// System prompt file of a `model:` agent.
    #[arg(long)]
    pub system_prompt: Option<PathBuf>,
    /// Agent definition used for journey coverage, and to name the journey states a Parlant
    /// server reports (default: each scenario's `agent`).
    #[arg(long)]
    pub definition: Option<PathBuf>,
    /// Trials per scenario.
    #[arg(long, default_value_t = 1)]
    pub trials: u32,
    /// Runs in flight at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Runs and model calls in flight at once per provider.
    #[arg(long)]
    pub per_provider: Option<usize>,
    /// Artifact folder (Tally layout; the suite report goes under `reports/`).
    #[arg(long, default_value = ".tally")]
    pub out: PathBuf,
    /// Do not write artifacts.
    #[arg(long)]
    pub no_artifacts: bool,
    /// Write the JSON report here.
    #[arg(long)]
    pub report_json: Option<PathBuf>,
    /// Write the JUnit report here.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Record/replay mode of every model call: live, record, replay, replay-or-fail.
    #[arg(long, default_value = "live")]
    pub cache: String,
    /// Folder of recordings (default: the `recordings` folder beside the scenarios' folder,
    /// e.g. examples/recordings for examples/scenarios, when it exists; else ./recordings).
    #[arg(long)]
    pub recordings: Option<PathBuf>,
    /// Token budget of the suite.
    #[arg(long)]
    pub max_tokens: Option<u64>,
    /// Cost budget of the suite in USD.
    #[arg(long)]
    pub max_cost_usd: Option<f64>,
    /// Cost budget of one run in USD.
    #[arg(long)]
    pub run_max_cost_usd: Option<f64>,
    /// Exit 0 when at least this share of runs passed (default: all must pass).
    #[arg(long)]
    pub min_pass_rate: Option<f64>,
    /// Seconds an agent reply may take.
    #[arg(long, default_value_t = 180)]
    pub turn_timeout_secs: u64,
    /// Turn limit of scenarios that set none.
    #[arg(long, default_value_t = 30)]
    pub max_turns: u32,
    /// Hide progress bars.
    #[arg(long)]
    pub no_progress: bool,
    /// Fail (exit 1) when a journey state of a measured agent was never reached.
    #[arg(long)]
    pub require_full_coverage: bool,
}

impl SimulateArgs {
    /// The folder of recordings: `--recordings`, else the `recordings` folder beside the
    /// first scenario folder when it exists, else `recordings`.
    pub fn recordings_dir(&self) -> PathBuf {
        if let Some(dir) = &self.recordings {
            return dir.clone();
        }
        let beside = self.scenarios.first().and_then(|first| {
            let folder = if first.is_dir() { first.as_path() } else { first.parent()? };
            let folder = if folder.as_os_str().is_empty() { Path::new(".") } else { folder };
            let candidate = folder.parent().unwrap_or(Path::new(".")).join("recordings");
            candidate.is_dir().then_some(candidate)
        });
        beside.unwrap_or_else(|| PathBuf::from("recordings"))
    }

    /// The exit code of a finished suite: 0 when the runs passed (see `--min-pass-rate`) and,
    /// with `--require-full-coverage`, every journey state was reached; else 1.
    pub fn exit_code(&self, report: &crate::suite::SuiteReport) -> i32 {
        let code = report.exit_code(self.min_pass_rate);
        if code == 0 && self.require_full_coverage && !report.missed_states().is_empty() { 1 } else { code }
    }
}

/// The agent under test.
#[derive(Clone)]
pub enum AgentTarget {
    /// A Parlant-compatible server.
    ParlantRest(ParlantRestConfig),
    /// A model with a system prompt.
    Model {
        /// The model spec (`openai-compatible:<url>#<model>`, `openai:gpt-4.1` ...).
        spec: ModelSpec,
        /// The system prompt.
        system_prompt: String,
    },
    /// A command speaking JSON lines.
    Command(String),
    /// The in-process engine.
    InProcess(Arc<dyn EngineSessionFactory>),
}

impl std::fmt::Debug for AgentTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ParlantRest(c) => write!(f, "ParlantRest({})", c.base_url),
            Self::Model { spec, .. } => write!(f, "Model({spec})"),
            Self::Command(c) => write!(f, "Command({c})"),
            Self::InProcess(e) => write!(f, "InProcess({})", e.describe()),
        }
    }
}

impl AgentTarget {
    /// Parses `--agent`. `in-process` needs the engine from `plugins`.
    pub fn parse(
        text: &str,
        system_prompt: Option<String>,
        engine: Option<Arc<dyn EngineSessionFactory>>,
    ) -> Result<Self, SimError> {
        if let Some(rest) = text.strip_prefix("parlant:") {
            let (url, agent) = rest
                .rsplit_once('#')
                .ok_or_else(|| SimError::Options(format!("`{text}`: expected parlant:<base url>#<agent id>")))?;
            return Ok(Self::ParlantRest(ParlantRestConfig::new(url, agent)));
        }
        if let Some(spec) = text.strip_prefix("model:") {
            let spec: ModelSpec = spec.parse()?;
            let system_prompt =
                system_prompt.ok_or_else(|| SimError::Options("a `model:` agent needs --system-prompt".into()))?;
            return Ok(Self::Model { spec, system_prompt });
        }
        if let Some(command) = text.strip_prefix("command:") {
            return Ok(Self::Command(command.to_string()));
        }
        if text == "in-process" {
            return engine
                .map(Self::InProcess)
                .ok_or_else(|| SimError::Options("`in-process` needs the Guidepost engine plugged in".into()));
        }
        Err(SimError::Options(format!(
            "unknown agent `{text}`; expected parlant:<url>#<agent id>, model:<spec>, command:<cmd> or in-process"
        )))
    }
}

/// What the binary plugs in.
#[derive(Default, Clone)]
pub struct Plugins {
    /// Provider factories (local models).
    pub registry: ProviderRegistry,
    /// The in-process engine, for `--agent in-process`.
    pub engine: Option<Arc<dyn EngineSessionFactory>>,
    /// Models to use as they are, instead of building a stack (no record/replay then).
    pub models: Option<SimModels>,
    /// Model settings to build the stack from instead of the environment
    /// (`GUIDEPOST_MODEL`, `GUIDEPOST_MODEL_SIMULATION`, `GUIDEPOST_MODEL_JUDGE` ...).
    pub settings: Option<ModelSettings>,
    /// The model serving `scripted` specs (tests).
    pub scripted: Option<Arc<dyn ChatModel>>,
}

/// The suite options `args` describe.
pub fn suite_options(args: &SimulateArgs) -> SuiteOptions {
    SuiteOptions {
        trials: args.trials.max(1),
        concurrency: args.concurrency.max(1),
        per_provider_concurrency: args.per_provider,
        run_budget: Budget { max_tokens: None, max_cost_usd: args.run_max_cost_usd },
        suite_budget: Budget { max_tokens: args.max_tokens, max_cost_usd: args.max_cost_usd },
        turn_timeout: Duration::from_secs(args.turn_timeout_secs.max(1)),
        artifacts_root: (!args.no_artifacts).then(|| args.out.clone()),
        progress: !args.no_progress,
        default_max_turns: Some(args.max_turns),
        ..SuiteOptions::default()
    }
}

/// The middleware settings every model of a simulation uses (the simulated customer, the
/// judge, and an in-process agent): the record/replay cache and the per-provider limit.
pub fn stack_config(args: &SimulateArgs) -> Result<StackConfig, SimError> {
    let cache_mode: CacheMode = args.cache.parse()?;
    Ok(StackConfig {
        recordings: (cache_mode != CacheMode::Live).then(|| args.recordings_dir()),
        cache_mode,
        limits: LimitsConfig { max_concurrency: args.per_provider, ..LimitsConfig::default() },
        ..StackConfig::default()
    })
}

/// Loads an agent definition file, reporting its problems as `guidepost check` does (one
/// rendered diagnostic each, with file:line:col and the source line). The file is read
/// within [`Limit::FileSize`](guidepost_core::limits::Limit::FileSize) and decoded with
/// [`decode`](guidepost_core::definition::text::decode): invalid UTF-8 and control
/// characters are positioned errors, a byte-order mark is skipped.
pub fn load_definition(path: &Path) -> Result<AgentDefinition, SimError> {
    let name = path.display().to_string();
    let failed = |message: String| SimError::AgentDefinition { path: path.to_path_buf(), message };
    let limits = guidepost_core::limits::Limits::global();
    let bytes = guidepost_core::files::read(path, limits)?;
    let source = guidepost_core::definition::text::decode(&name, bytes, limits).map_err(|d| failed(d.render(None)))?;
    let loaded = load_agent(std::slice::from_ref(&source));
    let message = loaded.diagnostics.iter().map(|d| d.render(Some(&source.text))).collect::<Vec<_>>().join("\n");
    loaded.definition.ok_or_else(|| failed(message))
}

/// Runs `guidepost simulate`: the CLI calls this, prints [`SuiteReport`](crate::suite::SuiteReport)
/// details it wants, and exits with `outcome.report.exit_code(args.min_pass_rate)` (or 2 on
/// `Err`).
pub async fn run(args: &SimulateArgs, plugins: Plugins) -> Result<SuiteOutcome, SimError> {
    let scenarios = load_scenarios(&args.scenarios)?;
    let system_prompt = match &args.system_prompt {
        Some(path) => Some(guidepost_core::files::read_text(path, guidepost_core::limits::Limits::global())?),
        None => None,
    };
    let target = AgentTarget::parse(&args.agent, system_prompt, plugins.engine.clone())?;
    let config = stack_config(args)?;
    let mut builder = match plugins.settings.clone() {
        Some(settings) => ModelStackBuilder::new(settings).keys(guidepost_llm::ProviderKeys::from_env()),
        None => ModelStackBuilder::from_env()?,
    }
    .registry(plugins.registry.clone())
    .config(config.clone());
    if let Some(scripted) = plugins.scripted.clone() {
        builder = builder.scripted(scripted);
    }
    let models = match plugins.models.clone() {
        Some(models) => models,
        None => {
            let stack = builder.clone().build()?;
            SimModels { customer: stack.model_for(&TaskKind::Simulation), judge: stack.model_for(&TaskKind::Judge) }
        }
    };
    // The agent definitions the scenarios name (or --definition), loaded before any run so a
    // broken one fails the command at once; coverage is measured per definition.
    let mut definition_of: HashMap<&str, PathBuf> = HashMap::new();
    let mut definitions: Vec<(PathBuf, AgentDefinition)> = Vec::new();
    for scenario in &scenarios {
        let Some(path) = args.definition.clone().or_else(|| scenario.agent_definition.clone()) else { continue };
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        if !definitions.iter().any(|(p, _)| p == &path) {
            definitions.push((path.clone(), load_definition(&path)?));
        }
        definition_of.insert(scenario.id.as_str(), path);
    }
    let factory: Arc<dyn AgentFactory> = match target {
        AgentTarget::ParlantRest(config) => {
            let mut config = config;
            config.turn_timeout = Duration::from_secs(args.turn_timeout_secs.max(1));
            // Parlant names journey states by node id; the definitions' state ids name them.
            config.journey_states = Arc::new(JourneyStateIndex::from_definitions(definitions.iter().map(|(_, d)| d)));
            Arc::new(ParlantRestFactory { config })
        }
        AgentTarget::Model { spec, system_prompt } => {
            let model = layer(builder.provider(&spec)?, &config);
            Arc::new(ChatModelAgentFactory::new(model, system_prompt))
        }
        AgentTarget::Command(command) => Arc::new(JsonlCommandFactory { command }),
        AgentTarget::InProcess(sessions) => {
            Arc::new(InProcessFactory { sessions, definition: args.definition.clone() })
        }
    };
    let mut options = suite_options(args);
    for (id, path) in &definition_of {
        if let Some((_, definition)) = definitions.iter().find(|(p, _)| p == path) {
            options.definitions.insert((*id).to_string(), Arc::new(definition.clone()));
        }
    }
    let mut outcome = run_suite(&scenarios, factory, &models, &options).await;
    for (path, definition) in &definitions {
        let runs = outcome.runs.iter().filter(|r| definition_of.get(r.scenario_id.as_str()) == Some(path));
        outcome.report.coverage.push(compute_coverage(definition, runs));
    }
    if let Some(path) = &args.report_json {
        write_json(&outcome.report, path)?;
    }
    // Beside the conversations, so `guidepost serve --simulations <out>` shows the suite's
    // outcome and coverage on the web page.
    if !args.no_artifacts {
        let stamp = outcome.report.started_at.format("%Y%m%dT%H%M%S%3fZ");
        write_json(&outcome.report, &args.out.join("reports").join(format!("{stamp}.json")))?;
    }
    if let Some(path) = &args.junit {
        write_junit(&outcome.report, path)?;
    }
    Ok(outcome)
}
