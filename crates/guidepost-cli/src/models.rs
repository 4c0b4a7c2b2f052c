//! Building the model stack from flags and the environment, with local models for
//! `local:` specs.

use anyhow::{Context, Result};
use guidepost_llm::{ModelSettings, ModelSpec, ModelStack, ModelStackBuilder, ProviderRegistry};

/// Provider factories for schemes built outside the model layer (`local`). With
/// `replay_only` (every call answered from recordings) local model files are not required
/// until a call reaches a model.
pub fn registry(threads: Option<usize>, replay_only: bool) -> ProviderRegistry {
    #[allow(unused_mut)]
    let mut registry = ProviderRegistry::new();
    #[cfg(feature = "local")]
    {
        let mut options = guidepost_llm_local::LocalOptions::from_env();
        if threads.is_some() {
            options.threads = threads;
        }
        options.check_files_at_build = !replay_only;
        registry.register(std::sync::Arc::new(guidepost_llm_local::LocalProviderFactory::new(options)));
    }
    #[cfg(not(feature = "local"))]
    let _ = (threads, replay_only);
    registry
}

/// The model stack: `--model`/`--embedder` first, then `GUIDEPOST_MODEL`,
/// `GUIDEPOST_MODEL_<TASK>`, `GUIDEPOST_EMBEDDER`, else the local defaults; calls in flight per provider capped at `default_concurrency` unless
/// `GUIDEPOST_LLM_MAX_CONCURRENCY` says otherwise (a server with a thousand sessions must
/// not open ten thousand connections to one provider).
pub fn stack_with(
    model: Option<&str>,
    embedder: Option<&str>,
    threads: Option<usize>,
    default_concurrency: Option<usize>,
) -> Result<ModelStack> {
    stack_observed(model, embedder, threads, default_concurrency, None, None, true)
}

/// As [`stack_with`], with every call of the stack also counted in `ledger` (progress
/// displays read its calls in flight). Without `asks_models` (work that no model decides,
/// such as relationship cases given what matched) local weights need not be installed.
pub fn stack_observed(
    model: Option<&str>,
    embedder: Option<&str>,
    threads: Option<usize>,
    default_concurrency: Option<usize>,
    ledger: Option<guidepost_llm::UsageLedger>,
    cache: Option<(guidepost_llm::CacheMode, std::path::PathBuf)>,
    asks_models: bool,
) -> Result<ModelStack> {
    let mut builder = crate::config_file::stack_builder().context("reading the model settings")?;
    if let Some(spec) = model {
        let spec: ModelSpec = spec.parse().with_context(|| format!("--model {spec}"))?;
        builder = builder.settings(ModelSettings::single(spec));
    }
    if let Some(spec) = embedder {
        let spec: ModelSpec = spec.parse().with_context(|| format!("--embedder {spec}"))?;
        builder = builder.embedder_spec(spec);
    }
    let mut config = local_friendly(guidepost_llm::StackConfig::from_env()?, &builder);
    if config.limits.max_concurrency.is_none() {
        config.limits.max_concurrency = default_concurrency;
    }
    if ledger.is_some() {
        config.ledger = ledger;
    }
    if let Some((mode, recordings)) = cache {
        config.cache_mode = mode;
        config.recordings = (mode != guidepost_llm::CacheMode::Live).then_some(recordings);
    }
    // Every chat answer replayed: local weights need not be installed.
    let replay_only = config.cache_mode == guidepost_llm::CacheMode::ReplayOrFail && config.recordings.is_some();
    builder
        .config(config)
        .registry(registry(threads, replay_only || !asks_models))
        .build()
        .context("building the model stack")
}

/// A local model on a busy CPU can take minutes for one long prompt: the per-call timeout
/// (meant for remote providers that stop answering) is lifted for local specs unless
/// `GUIDEPOST_LLM_TIMEOUT_SECS` sets one explicitly.
pub fn local_friendly(
    mut config: guidepost_llm::StackConfig,
    builder: &ModelStackBuilder,
) -> guidepost_llm::StackConfig {
    let local = builder.settings_ref().default.scheme() == "local"
        || builder.settings_ref().per_task.values().any(|s| s.scheme() == "local");
    if local && std::env::var_os("GUIDEPOST_LLM_TIMEOUT_SECS").is_none() {
        config.timeout = None;
    }
    config
}

/// `guidepost models fetch`.
#[cfg(feature = "local")]
pub fn fetch(with_qwen: bool, dir: Option<std::path::PathBuf>) -> Result<std::process::ExitCode> {
    use guidepost_llm_local::{ModelKind, fetch_models};
    let dir = dir.unwrap_or_else(guidepost_llm_local::default_models_dir);
    let which: Vec<ModelKind> = if with_qwen { ModelKind::ALL.to_vec() } else { ModelKind::DEFAULT.to_vec() };
    let report = fetch_models(&dir, &which).with_context(|| format!("installing models into {}", dir.display()))?;
    for kind in &report.installed {
        outln!("installed {} into {}", kind.name(), dir.display());
    }
    for kind in &report.already_present {
        outln!("{} is already installed (checksum verified)", kind.name());
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// `guidepost models fetch` without local inference compiled in.
#[cfg(not(feature = "local"))]
pub fn fetch(_with_qwen: bool, _dir: Option<std::path::PathBuf>) -> Result<std::process::ExitCode> {
    anyhow::bail!("this guidepost was built without the `local` feature; use scripts/fetch-models.sh")
}

/// The runtime's models from a stack: one per task kind, and the stack's embedder.
pub fn runtime_models(stack: &ModelStack) -> guidepost_runtime::RuntimeModels {
    use guidepost_llm::TaskKind;
    guidepost_runtime::RuntimeModels {
        matching: stack.model_for(&TaskKind::Matching),
        journey_selection: stack.model_for(&TaskKind::JourneySelection),
        tool_inference: stack.model_for(&TaskKind::ToolInference),
        generation: stack.model_for(&TaskKind::Generation),
        embedder: Some(stack.embedder()),
    }
}

/// Reports on standard error every model call of this process that `--cache replay-or-fail`
/// found no recording for, and whether there was one: the command that replays then fails,
/// also where the engine degraded around the failed call (a journey check that kept the
/// journey where it was) and the run's outcome alone would not show it.
pub fn report_replay_misses() -> bool {
    let misses = guidepost_llm::middleware::cache::replay_misses();
    let Some(first) = misses.first() else { return false };
    eprintln!(
        "error: {} model call(s) had no recording (replay-or-fail), so the run fails: record them with \
         `--cache replay`. The first: {}",
        misses.len(),
        guidepost_llm::excerpt(first, 1500)
    );
    true
}
