//! [`LocalProviderFactory`]: the `local:` scheme for `guidepost-llm`'s provider registry.
//!
//! Register it in a [`ProviderRegistry`](guidepost_llm::ProviderRegistry) and every
//! `local:<model>` spec in the configuration resolves to a model of this crate. The files are
//! checked when the model is built (so a missing model fails at startup, naming the fetch
//! command) unless [`LocalOptions::check_files_at_build`] is off; the weights load on the
//! first call, on a blocking thread. Specs that name the
//! same model share one loaded copy (Qwen-1.5B needs ~3 GB).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use guidepost_llm::{ChatModel, ChatRequest, ChatResponse, Embedder, LlmError, ModelSpec, ProviderFactory, TextStream};
use tokio::sync::OnceCell;

use crate::chat::LocalChatModel;
use crate::embed::LocalEmbedder;
use crate::options::LocalOptions;
use crate::spec::{ChatModelSpec, EmbedderSpec};

/// Dimensions of all-MiniLM-L6-v2, known before it loads.
const MINILM_DIMENSIONS: usize = 384;

/// Builds local chat models and embedders for `local:` specs.
///
/// ```no_run
/// use std::sync::Arc;
/// use guidepost_llm::ProviderRegistry;
/// use guidepost_llm_local::{LocalOptions, LocalProviderFactory};
///
/// let mut registry = ProviderRegistry::new();
/// registry.register(Arc::new(LocalProviderFactory::new(LocalOptions::default())));
/// ```
#[derive(Debug, Default)]
pub struct LocalProviderFactory {
    options: LocalOptions,
    chat: Mutex<HashMap<String, Arc<LazyChatModel>>>,
    embedders: Mutex<HashMap<String, Arc<LazyEmbedder>>>,
}

impl LocalProviderFactory {
    /// A factory that loads models with `options`.
    pub fn new(options: LocalOptions) -> Self {
        Self { options, chat: Mutex::default(), embedders: Mutex::default() }
    }
}

fn local_name(spec: &ModelSpec) -> Result<&str, LlmError> {
    match spec {
        ModelSpec::Local { model } => Ok(model),
        other => Err(LlmError::Config(format!("the local provider cannot build `{other}`"))),
    }
}

impl ProviderFactory for LocalProviderFactory {
    fn scheme(&self) -> &str {
        "local"
    }

    fn chat_model(&self, spec: &ModelSpec) -> Result<Arc<dyn ChatModel>, LlmError> {
        let parsed = ChatModelSpec::parse(local_name(spec)?)?;
        if self.options.check_files_at_build {
            parsed.locate(&self.options.models_dir())?;
        }
        let id = parsed.model_id();
        let mut models = self.chat.lock().unwrap_or_else(PoisonError::into_inner);
        let model = models
            .entry(id.clone())
            .or_insert_with(|| Arc::new(LazyChatModel { id, options: self.options.clone(), model: OnceCell::new() }));
        Ok(Arc::clone(model) as Arc<dyn ChatModel>)
    }

    fn embedder(&self, spec: &ModelSpec) -> Result<Arc<dyn Embedder>, LlmError> {
        let parsed = EmbedderSpec::parse(local_name(spec)?)?;
        if self.options.check_files_at_build {
            parsed.locate(&self.options.models_dir())?;
        }
        let id = parsed.model_id();
        let known_dimensions = if parsed == EmbedderSpec::MiniLm { MINILM_DIMENSIONS } else { 0 };
        let mut embedders = self.embedders.lock().unwrap_or_else(PoisonError::into_inner);
        let embedder = embedders.entry(id.clone()).or_insert_with(|| {
            Arc::new(LazyEmbedder { id, options: self.options.clone(), known_dimensions, embedder: OnceCell::new() })
        });
        Ok(Arc::clone(embedder) as Arc<dyn Embedder>)
    }
}

fn join_error(err: tokio::task::JoinError) -> LlmError {
    LlmError::InvalidResponse { detail: format!("local model: loading task failed: {err}"), body: String::new() }
}

/// A local chat model that loads on its first call.
#[derive(Debug)]
struct LazyChatModel {
    id: String,
    options: LocalOptions,
    model: OnceCell<LocalChatModel>,
}

impl LazyChatModel {
    async fn get(&self) -> Result<&LocalChatModel, LlmError> {
        self.model
            .get_or_try_init(|| async {
                let (id, options) = (self.id.clone(), self.options.clone());
                tokio::task::spawn_blocking(move || LocalChatModel::load(&id, &options))
                    .await
                    .map_err(join_error)?
                    .map_err(LlmError::from)
            })
            .await
    }
}

#[async_trait]
impl ChatModel for LazyChatModel {
    fn model_id(&self) -> &str {
        &self.id
    }

    /// The loaded model's; before it loads, the same with its context not yet known.
    fn capabilities(&self) -> guidepost_llm::ModelCapabilities {
        self.model.get().map_or_else(
            || {
                let threshold = ChatModelSpec::parse(&self.id).map_or(0.5, |spec| spec.verdict_threshold());
                guidepost_llm::ModelCapabilities::small_constrained(None).with_verdict_threshold(threshold)
            },
            ChatModel::capabilities,
        )
    }

    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.get().await?.complete(req).await
    }

    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        self.get().await?.stream(req).await
    }

    fn reads_ahead(&self) -> bool {
        true
    }

    /// Only once loaded: reading ahead is no reason to load the model.
    async fn read_ahead(&self, req: ChatRequest) -> Result<bool, LlmError> {
        match self.model.get() {
            Some(model) => model.read_ahead(req).await,
            None => Ok(false),
        }
    }

    fn needs_warm_up(&self) -> bool {
        self.model.get().is_none()
    }

    async fn warm_up(&self) -> Result<(), LlmError> {
        self.get().await.map(|_| ())
    }
}

/// A local embedder that loads on its first call.
#[derive(Debug)]
struct LazyEmbedder {
    id: String,
    options: LocalOptions,
    known_dimensions: usize,
    embedder: OnceCell<LocalEmbedder>,
}

#[async_trait]
impl Embedder for LazyEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dimensions(&self) -> usize {
        self.embedder.get().map_or(self.known_dimensions, Embedder::dimensions)
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        self.get().await?.embed(texts).await
    }

    fn needs_warm_up(&self) -> bool {
        self.embedder.get().is_none()
    }

    async fn warm_up(&self) -> Result<(), LlmError> {
        self.get().await.map(|_| ())
    }
}

impl LazyEmbedder {
    async fn get(&self) -> Result<&LocalEmbedder, LlmError> {
        self.embedder
            .get_or_try_init(|| async {
                let (id, options) = (self.id.clone(), self.options.clone());
                tokio::task::spawn_blocking(move || LocalEmbedder::load(&id, &options))
                    .await
                    .map_err(join_error)?
                    .map_err(LlmError::from)
            })
            .await
    }
}
