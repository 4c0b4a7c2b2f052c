//! Assembling models from configuration: [`layer`] wraps one model in the middleware, and
//! [`ModelStackBuilder`] builds a [`ModelStack`] (a model per task kind plus an embedder) from
//! [`ModelSettings`].
//!
//! ```
//! use std::sync::Arc;
//! use guidepost_llm::{ModelSettings, ModelStackBuilder, StackConfig, TaskKind, UsageLedger};
//! use guidepost_llm::providers::scripted::ScriptedModel;
//! use serde_json::json;
//!
//! let settings = ModelSettings::from_lookup(|key| match key {
//!     "GUIDEPOST_MODEL" => Some("scripted".to_string()),
//!     _ => None,
//! })?;
//! let scripted = Arc::new(ScriptedModel::new().on(TaskKind::Matching, |_| Ok(json!({}))));
//! let stack = ModelStackBuilder::new(settings)
//!     .config(StackConfig { ledger: Some(UsageLedger::new("server")), ..StackConfig::default() })
//!     .scripted(scripted)
//!     .build()?;
//! assert_eq!(stack.model_for(&TaskKind::Matching).model_id(), "scripted");
//! # Ok::<(), guidepost_llm::LlmError>(())
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::config::{ModelSettings, ModelSpec, ProviderKeys, ProviderRegistry};
use crate::error::LlmError;
use crate::middleware::accounting::Accounting;
use crate::middleware::cache::{CacheMode, RecordReplay};
use crate::middleware::embedding_cache::CachedEmbedder;
use crate::middleware::limits::{Limits, LimitsConfig};
use crate::middleware::reask::Reask;
use crate::middleware::retry::{Retry, RetryPolicy};
use crate::middleware::timeout::{Deadline, Timeout};
use crate::ports::{ChatModel, Embedder, TextStream};
use crate::providers::anthropic::AnthropicChat;
use crate::providers::hashing::HashingEmbedder;
use crate::providers::openai_compat::{OPENAI_BASE_URL, OpenAiChat, OpenAiEmbedder};
use crate::request::{ChatRequest, ChatResponse, TaskKind};
use crate::usage::UsageLedger;

/// The middleware settings applied to every model of a stack.
#[derive(Debug, Clone)]
pub struct StackConfig {
    /// Time budget of one attempt (`None`: unbounded).
    pub timeout: Option<Duration>,
    /// Retry policy.
    pub retry: RetryPolicy,
    /// Limits per provider (shared by the task kinds that use the same spec).
    pub limits: LimitsConfig,
    /// Re-asks after an invalid structured answer (0 = validate only).
    pub max_reasks: u32,
    /// Directory of recordings; `None` disables the cache whatever the mode.
    pub recordings: Option<PathBuf>,
    /// Record/replay mode.
    pub cache_mode: CacheMode,
    /// Ledger receiving every call of the stack (in addition to each request's own ledger).
    pub ledger: Option<UsageLedger>,
    /// Texts whose embeddings are kept in memory (0 disables the cache).
    pub embedding_cache: usize,
    /// Longest silence between two pieces of a stream ([`Limit::StreamIdle`]).
    ///
    /// [`Limit::StreamIdle`]: guidepost_core::limits::Limit::StreamIdle
    pub stream_idle: Duration,
    /// Whole duration of a stream ([`Limit::StreamDuration`]).
    ///
    /// [`Limit::StreamDuration`]: guidepost_core::limits::Limit::StreamDuration
    pub stream_total: Duration,
    /// Whole duration of a call, retries and re-asks included ([`Limit::ModelCallTime`]).
    ///
    /// [`Limit::ModelCallTime`]: guidepost_core::limits::Limit::ModelCallTime
    pub call_deadline: Duration,
}

impl Default for StackConfig {
    fn default() -> Self {
        Self {
            timeout: Some(Duration::from_secs(120)),
            retry: RetryPolicy::default(),
            limits: LimitsConfig::default(),
            max_reasks: 2,
            recordings: None,
            cache_mode: CacheMode::Live,
            ledger: None,
            embedding_cache: 10_000,
            stream_idle: guidepost_core::limits::Limits::global().stream_idle,
            stream_total: guidepost_core::limits::Limits::global().stream_duration,
            call_deadline: guidepost_core::limits::Limits::global().model_call_time,
        }
    }
}

impl StackConfig {
    /// Reads the middleware settings from the process environment (see
    /// [`from_lookup`](Self::from_lookup)).
    pub fn from_env() -> Result<Self, LlmError> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Reads the middleware settings through `lookup`; unset variables keep the defaults:
    ///
    /// | variable | meaning |
    /// |---|---|
    /// | `GUIDEPOST_LLM_RECORDINGS` | directory of recordings |
    /// | `GUIDEPOST_LLM_CACHE` | `live`, `record`, `replay` or `replay-or-fail` |
    /// | `GUIDEPOST_LLM_TIMEOUT_SECS` | time budget of one attempt (0 = none) |
    /// | `GUIDEPOST_LLM_MAX_ATTEMPTS` | attempts per call, retries included |
    /// | `GUIDEPOST_LLM_MAX_REASKS` | re-asks after an invalid structured answer |
    /// | `GUIDEPOST_LLM_MAX_CONCURRENCY` | calls in flight per provider |
    /// | `GUIDEPOST_LLM_RPM` / `GUIDEPOST_LLM_TPM` | requests / prompt tokens per minute |
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, LlmError> {
        let get = |key: &str| lookup(key).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let number = |key: &str| -> Result<Option<u64>, LlmError> {
            get(key)
                .map(|v| {
                    v.parse::<u64>()
                        .map_err(|_| LlmError::Config(format!("{key}: `{v}` is not a non-negative integer")))
                })
                .transpose()
        };
        let small = |key: &str| -> Result<Option<u32>, LlmError> {
            number(key)?
                .map(|n| u32::try_from(n).map_err(|_| LlmError::Config(format!("{key}: {n} is too large"))))
                .transpose()
        };
        let mut config = Self { recordings: get("GUIDEPOST_LLM_RECORDINGS").map(PathBuf::from), ..Self::default() };
        if let Some(mode) = get("GUIDEPOST_LLM_CACHE") {
            config.cache_mode =
                mode.parse().map_err(|e: LlmError| LlmError::Config(format!("GUIDEPOST_LLM_CACHE: {e}")))?;
            if config.cache_mode != CacheMode::Live && config.recordings.is_none() {
                return Err(LlmError::Config(format!(
                    "GUIDEPOST_LLM_CACHE={mode} needs GUIDEPOST_LLM_RECORDINGS (the recordings directory)"
                )));
            }
        }
        if let Some(secs) = number("GUIDEPOST_LLM_TIMEOUT_SECS")? {
            config.timeout = (secs > 0).then(|| Duration::from_secs(secs));
        }
        if let Some(n) = small("GUIDEPOST_LLM_MAX_ATTEMPTS")? {
            config.retry.max_attempts = n.max(1);
        }
        if let Some(n) = small("GUIDEPOST_LLM_MAX_REASKS")? {
            config.max_reasks = n;
        }
        config.limits.max_concurrency =
            number("GUIDEPOST_LLM_MAX_CONCURRENCY")?.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        config.limits.requests_per_minute = small("GUIDEPOST_LLM_RPM")?;
        config.limits.tokens_per_minute = small("GUIDEPOST_LLM_TPM")?;
        Ok(config)
    }
}

/// Wraps `model` in the middleware: timeout → retry → limits → re-ask → record/replay →
/// accounting (innermost first; see [`middleware`](crate::middleware) for why).
pub fn layer(model: Arc<dyn ChatModel>, config: &StackConfig) -> Arc<dyn ChatModel> {
    // Streams are always bounded (idle and total), even without a per-attempt budget.
    let after = config.timeout.unwrap_or(Duration::MAX);
    let timed: Arc<dyn ChatModel> =
        Arc::new(Timeout::new(model, after).with_stream_budgets(config.stream_idle, config.stream_total));
    let retried = Retry::new(timed, config.retry.clone());
    let limited = Limits::new(retried, config.limits);
    let checked: Arc<dyn ChatModel> = Arc::new(
        Deadline::new(Reask::new(limited, config.max_reasks), config.call_deadline)
            .with_stream_total(config.stream_total),
    );
    let cached: Arc<dyn ChatModel> = match (&config.recordings, config.cache_mode) {
        (Some(dir), mode) if mode != CacheMode::Live => Arc::new(RecordReplay::new(checked, dir.clone(), mode)),
        _ => checked,
    };
    Arc::new(Accounting::new(cached, config.ledger.clone()))
}

/// Wraps an embedder in timeout → retry → limits → in-memory cache (when
/// [`StackConfig::embedding_cache`] is not 0).
pub fn layer_embedder(embedder: Arc<dyn Embedder>, config: &StackConfig) -> Arc<dyn Embedder> {
    let timed: Arc<dyn Embedder> = match config.timeout {
        Some(after) => Arc::new(Timeout::new(embedder, after)),
        None => embedder,
    };
    let limited = Limits::new(Retry::new(timed, config.retry.clone()), config.limits);
    if config.embedding_cache == 0 {
        Arc::new(limited)
    } else {
        Arc::new(CachedEmbedder::new(limited, config.embedding_cache))
    }
}

/// A model per task kind and an embedder. It is itself a [`ChatModel`] that routes each
/// request by its [`TaskKind`], so the engine can hold one `Arc<dyn ChatModel>`.
#[derive(Clone)]
pub struct ModelStack {
    default: Arc<dyn ChatModel>,
    per_task: BTreeMap<TaskKind, Arc<dyn ChatModel>>,
    embedder: Arc<dyn Embedder>,
    /// The provider models under the middleware, for [`warm_up`](Self::warm_up); empty when
    /// every answer comes from recordings.
    providers: Vec<Arc<dyn ChatModel>>,
    /// The embedder under the middleware.
    raw_embedder: Arc<dyn Embedder>,
}

impl std::fmt::Debug for ModelStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tasks: BTreeMap<&str, &str> = self.per_task.iter().map(|(t, m)| (t.as_str(), m.model_id())).collect();
        f.debug_struct("ModelStack")
            .field("default", &self.default.model_id())
            .field("per_task", &tasks)
            .field("embedder", &self.embedder.model_id())
            .finish()
    }
}

impl ModelStack {
    /// The model serving `task`.
    pub fn model_for(&self, task: &TaskKind) -> Arc<dyn ChatModel> {
        Arc::clone(self.per_task.get(task).unwrap_or(&self.default))
    }

    /// The embedder.
    pub fn embedder(&self) -> Arc<dyn Embedder> {
        Arc::clone(&self.embedder)
    }

    /// The models that have something to load before their first answer (local weights),
    /// by id. Empty for hosted models, and for chat models when every answer is replayed.
    pub fn models_to_warm_up(&self) -> Vec<String> {
        let mut ids: Vec<String> =
            self.providers.iter().filter(|m| m.needs_warm_up()).map(|m| m.model_id().to_string()).collect();
        if self.raw_embedder.needs_warm_up() {
            ids.push(self.raw_embedder.model_id().to_string());
        }
        ids
    }

    /// Loads every model of [`models_to_warm_up`](Self::models_to_warm_up), one after the
    /// other (they compete for the same CPU), so the first turn does not wait for them.
    pub async fn warm_up(&self) -> Result<(), LlmError> {
        for model in self.providers.iter().filter(|m| m.needs_warm_up()) {
            model.warm_up().await?;
        }
        if self.raw_embedder.needs_warm_up() {
            self.raw_embedder.warm_up().await?;
        }
        Ok(())
    }
}

#[async_trait]
impl ChatModel for ModelStack {
    fn model_id(&self) -> &str {
        self.default.model_id()
    }
    fn capabilities(&self) -> crate::ModelCapabilities {
        self.default.capabilities()
    }
    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.model_for(&req.task).complete(req).await
    }
    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        self.model_for(&req.task).stream(req).await
    }
    async fn read_ahead(&self, req: ChatRequest) -> Result<bool, LlmError> {
        self.model_for(&req.task).read_ahead(req).await
    }
    fn reads_ahead(&self) -> bool {
        self.default.reads_ahead() || self.per_task.values().any(|m| m.reads_ahead())
    }
}

/// Builds a [`ModelStack`] from settings, keys, registered factories and middleware settings.
#[derive(Debug, Clone)]
pub struct ModelStackBuilder {
    settings: ModelSettings,
    keys: ProviderKeys,
    registry: ProviderRegistry,
    config: StackConfig,
    scripted: Option<Arc<dyn ChatModel>>,
    scripted_embedder: Option<Arc<dyn Embedder>>,
}

impl ModelStackBuilder {
    /// A builder for `settings` with no keys, no factories and default middleware.
    pub fn new(settings: ModelSettings) -> Self {
        Self {
            settings,
            keys: ProviderKeys::default(),
            registry: ProviderRegistry::new(),
            config: StackConfig::default(),
            scripted: None,
            scripted_embedder: None,
        }
    }

    /// Settings, keys and middleware settings from the process environment.
    pub fn from_env() -> Result<Self, LlmError> {
        Ok(Self::new(ModelSettings::from_env()?).keys(ProviderKeys::from_env()).config(StackConfig::from_env()?))
    }

    /// Replaces the model settings (e.g. one model given on a command line).
    pub fn settings(mut self, settings: ModelSettings) -> Self {
        self.settings = settings;
        self
    }

    /// The model settings.
    pub fn settings_ref(&self) -> &ModelSettings {
        &self.settings
    }

    /// Sets the embedding model.
    pub fn embedder_spec(mut self, spec: ModelSpec) -> Self {
        self.settings.embedder = spec;
        self
    }

    /// Sets the provider keys.
    pub fn keys(mut self, keys: ProviderKeys) -> Self {
        self.keys = keys;
        self
    }

    /// Sets the factories for schemes built elsewhere (`local`).
    pub fn registry(mut self, registry: ProviderRegistry) -> Self {
        self.registry = registry;
        self
    }

    /// Sets the middleware settings.
    pub fn config(mut self, config: StackConfig) -> Self {
        self.config = config;
        self
    }

    /// The model that serves `scripted` specs.
    pub fn scripted(mut self, model: Arc<dyn ChatModel>) -> Self {
        self.scripted = Some(model);
        self
    }

    /// The embedder that serves a `scripted` embedder spec (default: [`HashingEmbedder`]).
    pub fn scripted_embedder(mut self, embedder: Arc<dyn Embedder>) -> Self {
        self.scripted_embedder = Some(embedder);
        self
    }

    fn openai_key(&self, spec: &ModelSpec) -> Result<String, LlmError> {
        self.keys
            .openai_api_key
            .clone()
            .ok_or_else(|| LlmError::Config(format!("OPENAI_API_KEY is not set (needed by `{spec}`)")))
    }

    /// The bare provider model of `spec`, without middleware.
    pub fn provider(&self, spec: &ModelSpec) -> Result<Arc<dyn ChatModel>, LlmError> {
        if let Some(factory) = self.registry.get(spec.scheme()) {
            return factory.chat_model(spec);
        }
        match spec {
            ModelSpec::OpenAi { model } => {
                let key = self.openai_key(spec)?;
                Ok(Arc::new(OpenAiChat::openai(model, Some(key), self.keys.openai_base_url.clone())))
            }
            ModelSpec::OpenAiCompatible { base_url, model, small } => {
                let mut chat = OpenAiChat::compatible(base_url, model);
                if let Some(key) = &self.keys.compatible_api_key {
                    chat = chat.with_api_key(key);
                }
                if *small {
                    chat = chat.with_capabilities(crate::ModelCapabilities::SMALL);
                }
                Ok(Arc::new(chat))
            }
            ModelSpec::Anthropic { model } => {
                let key =
                    self.keys.anthropic_api_key.clone().ok_or_else(|| {
                        LlmError::Config(format!("ANTHROPIC_API_KEY is not set (needed by `{spec}`)"))
                    })?;
                Ok(Arc::new(AnthropicChat::new(model, Some(key), self.keys.anthropic_base_url.clone())))
            }
            ModelSpec::Scripted => self.scripted.clone().ok_or_else(|| {
                LlmError::Config("the `scripted` model must be supplied in code (ModelStackBuilder::scripted)".into())
            }),
            ModelSpec::Local { .. } => Err(no_local_factory(spec)),
        }
    }

    /// The bare embedder of `spec`, without middleware.
    pub fn embedder_provider(&self, spec: &ModelSpec) -> Result<Arc<dyn Embedder>, LlmError> {
        if let Some(factory) = self.registry.get(spec.scheme()) {
            return factory.embedder(spec);
        }
        match spec {
            ModelSpec::OpenAi { model } => {
                let key = self.openai_key(spec)?;
                let base = self.keys.openai_base_url.as_deref().unwrap_or(OPENAI_BASE_URL);
                Ok(Arc::new(OpenAiEmbedder::new(base, model, spec.to_string()).with_api_key(key)))
            }
            ModelSpec::OpenAiCompatible { base_url, model, .. } => {
                let mut embedder = OpenAiEmbedder::new(base_url, model, spec.to_string());
                if let Some(key) = &self.keys.compatible_api_key {
                    embedder = embedder.with_api_key(key);
                }
                Ok(Arc::new(embedder))
            }
            ModelSpec::Anthropic { .. } => Err(LlmError::Config(format!(
                "`{spec}` cannot embed (Anthropic has no embeddings API); set GUIDEPOST_EMBEDDER"
            ))),
            ModelSpec::Scripted => {
                Ok(self.scripted_embedder.clone().unwrap_or_else(|| Arc::new(HashingEmbedder::default())))
            }
            ModelSpec::Local { .. } => Err(no_local_factory(spec)),
        }
    }

    /// Builds the stack. Task kinds that name the same spec share one layered model, so they
    /// share its limits.
    pub fn build(self) -> Result<ModelStack, LlmError> {
        let mut built: BTreeMap<String, Arc<dyn ChatModel>> = BTreeMap::new();
        let mut providers = Vec::new();
        let mut get = |spec: &ModelSpec| -> Result<Arc<dyn ChatModel>, LlmError> {
            let name = spec.to_string();
            if let Some(model) = built.get(&name) {
                return Ok(Arc::clone(model));
            }
            let provider = self.provider(spec)?;
            providers.push(Arc::clone(&provider));
            let model = layer(provider, &self.config);
            built.insert(name, Arc::clone(&model));
            Ok(model)
        };
        let default = get(&self.settings.default)?;
        let mut per_task = BTreeMap::new();
        for (task, spec) in &self.settings.per_task {
            per_task.insert(task.clone(), get(spec)?);
        }
        // Nothing to load for answers that all come from recordings.
        let replay_only = self.config.cache_mode == CacheMode::ReplayOrFail && self.config.recordings.is_some();
        if replay_only {
            providers.clear();
        }
        let raw_embedder = self.embedder_provider(&self.settings.embedder)?;
        let embedder = layer_embedder(Arc::clone(&raw_embedder), &self.config);
        Ok(ModelStack { default, per_task, embedder, providers, raw_embedder })
    }
}

fn no_local_factory(spec: &ModelSpec) -> LlmError {
    LlmError::Config(format!(
        "no provider is registered for `{spec}`: local models need the guidepost-llm-local \
         factory (register it in the ProviderRegistry), or choose a hosted model with \
         GUIDEPOST_MODEL / GUIDEPOST_EMBEDDER"
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn lookup(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |key| vars.iter().find(|(k, _)| *k == key).map(|(_, v)| (*v).to_string())
    }

    #[test]
    fn stack_config_from_variables() {
        let config = StackConfig::from_lookup(lookup(&[
            ("GUIDEPOST_LLM_RECORDINGS", "tests/recordings"),
            ("GUIDEPOST_LLM_CACHE", "replay-or-fail"),
            ("GUIDEPOST_LLM_TIMEOUT_SECS", "0"),
            ("GUIDEPOST_LLM_MAX_CONCURRENCY", "4"),
            ("GUIDEPOST_LLM_RPM", "500"),
        ]))
        .unwrap();
        assert_eq!(config.cache_mode, CacheMode::ReplayOrFail);
        assert_eq!(config.recordings, Some(PathBuf::from("tests/recordings")));
        assert_eq!(config.timeout, None);
        assert_eq!(config.limits.max_concurrency, Some(4));
        assert_eq!(config.limits.requests_per_minute, Some(500));
        assert_eq!(config.limits.tokens_per_minute, None);

        let bad = StackConfig::from_lookup(lookup(&[("GUIDEPOST_LLM_RPM", "fast")])).unwrap_err();
        assert!(bad.to_string().contains("GUIDEPOST_LLM_RPM: `fast`"), "{bad}");
        let mode = StackConfig::from_lookup(lookup(&[("GUIDEPOST_LLM_CACHE", "sometimes")])).unwrap_err();
        assert!(mode.to_string().contains("accepted: live, record, replay, replay-or-fail"), "{mode}");
        let no_dir = StackConfig::from_lookup(lookup(&[("GUIDEPOST_LLM_CACHE", "replay")])).unwrap_err();
        assert!(no_dir.to_string().contains("needs GUIDEPOST_LLM_RECORDINGS"), "{no_dir}");
    }
}
