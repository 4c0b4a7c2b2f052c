//! Building the model stack from flags and the environment, with local models for
//! `local:` specs.

use std::sync::Arc;

use anyhow::{Context, Result};
use guidepost_llm::{ModelSettings, ModelSpec, ModelStack, ModelStackBuilder, ProviderRegistry};

/// Serves `local:` specs with candle (feature `local`).
#[cfg(feature = "local")]
struct LocalFactory {
    options: guidepost_llm_local::LocalOptions,
}

#[cfg(feature = "local")]
impl guidepost_llm::ProviderFactory for LocalFactory {
    fn scheme(&self) -> &str {
        "local"
    }

    fn chat_model(&self, spec: &ModelSpec) -> Result<Arc<dyn guidepost_llm::ChatModel>, guidepost_llm::LlmError> {
        let model = guidepost_llm_local::LocalChatModel::load(&spec.to_string(), &self.options)
            .map_err(|e| guidepost_llm::LlmError::Config(e.to_string()))?;
        Ok(Arc::new(model))
    }

    fn embedder(&self, spec: &ModelSpec) -> Result<Arc<dyn guidepost_llm::Embedder>, guidepost_llm::LlmError> {
        let model = guidepost_llm_local::LocalEmbedder::load(&spec.to_string(), &self.options)
            .map_err(|e| guidepost_llm::LlmError::Config(e.to_string()))?;
        Ok(Arc::new(model))
    }
}

fn registry(threads: Option<usize>) -> ProviderRegistry {
    #[allow(unused_mut)]
    let mut registry = ProviderRegistry::new();
    #[cfg(feature = "local")]
    {
        let options = guidepost_llm_local::LocalOptions { threads, ..Default::default() };
        registry.register(Arc::new(LocalFactory { options }));
    }
    #[cfg(not(feature = "local"))]
    let _ = threads;
    registry
}

/// The model stack: `--model`/`--embedder` first, then `GUIDEPOST_MODEL`,
/// `GUIDEPOST_MODEL_<TASK>`, `GUIDEPOST_EMBEDDER`, else the local defaults.
pub fn stack(model: Option<&str>, embedder: Option<&str>, threads: Option<usize>) -> Result<ModelStack> {
    let mut builder = ModelStackBuilder::from_env().context("reading the model settings from the environment")?;
    if let Some(spec) = model {
        let spec: ModelSpec = spec.parse().with_context(|| format!("--model {spec}"))?;
        builder = builder.settings(ModelSettings::single(spec));
    }
    if let Some(spec) = embedder {
        let spec: ModelSpec = spec.parse().with_context(|| format!("--embedder {spec}"))?;
        builder = builder.embedder_spec(spec);
    }
    builder.registry(registry(threads)).build().context("building the model stack")
}
