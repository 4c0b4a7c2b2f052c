//! [`LocalEmbedder`]: sentence embeddings with a BERT model (all-MiniLM-L6-v2) on the CPU.
//!
//! Matches sentence-transformers: inputs truncated at 256 tokens, padded to the longest text
//! of the batch, mean pooling over the attention mask, L2 normalisation. The shipped
//! `tokenizer.json` pads everything to 128; that is overridden here, and the mask keeps pad
//! tokens out of the mean.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use candle_core::{D, DType, Device, Tensor};
use guidepost_llm::{Embedder, LlmError};
use tokenizers::{PaddingStrategy, Tokenizer, TruncationParams};

use crate::bert::{BertConfig, BertEncoder};
use crate::error::LocalError;
use crate::layers::Weights;
use crate::options::{LocalOptions, configure_threads};
use crate::spec::EmbedderSpec;

/// Longest input in tokens, as sentence-transformers configures MiniLM.
const MAX_TOKENS: usize = 256;
/// Texts embedded per forward pass.
const BATCH: usize = 32;

/// A local sentence embedder; vectors are unit length, so a dot product is the cosine.
#[derive(Clone)]
pub struct LocalEmbedder {
    inner: Arc<EmbedInner>,
}

struct EmbedInner {
    id: String,
    tokenizer: Tokenizer,
    model: Mutex<BertEncoder>,
    dimensions: usize,
    device: Device,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("id", &self.inner.id)
            .field("dimensions", &self.inner.dimensions)
            .finish_non_exhaustive()
    }
}

impl LocalEmbedder {
    /// Loads the embedder named by `spec` (`local:all-minilm-l6-v2` or `local:<directory>`).
    pub fn load(spec: &str, options: &LocalOptions) -> Result<Self, LocalError> {
        let parsed = EmbedderSpec::parse(spec)?;
        let dir = parsed.locate(&options.models_dir())?;
        if let Some(threads) = options.threads {
            configure_threads(threads);
        }
        Self::load_dir(parsed.model_id(), &dir)
    }

    /// Loads a BERT model from `dir` (`config.json`, `tokenizer.json`, `model.safetensors`).
    pub fn load_dir(id: impl Into<String>, dir: &Path) -> Result<Self, LocalError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|e| LocalError::io(path, e))
        };
        let config: BertConfig = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| LocalError::Tokenizer(format!("{}: {e}", dir.join("config.json").display())))?;
        let mut tokenizer =
            Tokenizer::from_bytes(read("tokenizer.json")?).map_err(|e| LocalError::Tokenizer(e.to_string()))?;
        let mut padding = tokenizer.get_padding().cloned().unwrap_or_default();
        padding.strategy = PaddingStrategy::BatchLongest;
        tokenizer.with_padding(Some(padding));
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..TruncationParams::default() }))
            .map_err(|e| LocalError::Tokenizer(e.to_string()))?;
        let device = Device::Cpu;
        // Read into memory rather than mmap: no unsafe, and the file is only 90 MB.
        let weights = Weights::from_safetensors(&read("model.safetensors")?, &device)?;
        let model = BertEncoder::load(&config, &weights)?;
        Ok(Self {
            inner: Arc::new(EmbedInner {
                id: id.into(),
                tokenizer,
                model: Mutex::new(model),
                dimensions: config.hidden_size,
                device,
            }),
        })
    }

    /// Embeds `texts` on the current thread (blocking; use [`Embedder::embed`] from async code).
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LocalError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(BATCH) {
            vectors.extend(self.inner.embed_batch(chunk)?);
        }
        Ok(vectors)
    }
}

impl EmbedInner {
    fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LocalError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let encodings = self.tokenizer.encode_batch(inputs, true).map_err(|e| LocalError::Tokenizer(e.to_string()))?;
        let rows = |f: &dyn Fn(&tokenizers::Encoding) -> Vec<u32>| -> Result<Tensor, LocalError> {
            let rows = encodings.iter().map(|e| Tensor::new(f(e), &self.device)).collect::<Result<Vec<_>, _>>()?;
            Ok(Tensor::stack(&rows, 0)?)
        };
        let ids = rows(&|e| e.get_ids().to_vec())?;
        let type_ids = rows(&|e| e.get_type_ids().to_vec())?;
        let mask = rows(&|e| e.get_attention_mask().to_vec())?;
        let hidden = {
            let model = self.model.lock().unwrap_or_else(PoisonError::into_inner);
            model.forward(&ids, &type_ids, &mask)?
        };
        // Mean over the real tokens, then unit length.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f32::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norm = mean.sqr()?.sum_keepdim(D::Minus1)?.sqrt()?.clamp(1e-12, f32::MAX)?;
        Ok(mean.broadcast_div(&norm)?.to_vec2()?)
    }
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn model_id(&self) -> &str {
        &self.inner.id
    }

    fn dimensions(&self) -> usize {
        self.inner.dimensions
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let this = self.clone();
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || this.embed_blocking(&texts))
            .await
            .map_err(|e| LlmError::InvalidResponse {
                detail: format!("local embedder: task failed: {e}"),
                body: String::new(),
            })?
            .map_err(LlmError::from)
    }
}
