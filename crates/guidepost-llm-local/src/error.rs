//! The error type of local inference.

use std::path::PathBuf;

use guidepost_llm::LlmError;

/// The command that installs the local models, named in every "model missing" error.
pub const FETCH_HINT: &str =
    "run `scripts/fetch-models.sh` (add `--with-qwen` for the Qwen model) or `guidepost models fetch`";

/// Everything that can go wrong when loading or running a local model.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// A model spec string is not one this crate knows.
    #[error("invalid local model spec `{spec}`: {reason}")]
    InvalidSpec {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The model's files are not installed.
    #[error("local model `{model}` is not installed: {path} is missing; {hint}", path = .path.display(), hint = FETCH_HINT)]
    ModelMissing {
        /// The model name.
        model: String,
        /// The first missing file.
        path: PathBuf,
    },
    /// Reading a model file failed.
    #[error("cannot read {path}: {source}", path = .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The GGUF file is malformed or lacks a key Guidepost needs.
    #[error("invalid GGUF model: {0}")]
    Gguf(String),
    /// The model's architecture has no loader here.
    #[error("unsupported model architecture `{0}` (supported: llama, qwen2, qwen3)")]
    UnsupportedArchitecture(String),
    /// The tokenizer could not be built or failed on a text.
    #[error("tokenizer error: {0}")]
    Tokenizer(String),
    /// The chat template could not be compiled or rendered.
    #[error("chat template error: {0}")]
    Template(String),
    /// The JSON schema uses something the constrained decoder cannot compile.
    #[error("unsupported JSON schema for constrained decoding: {0}")]
    Schema(String),
    /// Constrained decoding failed (the grammar rejected every token, or the answer did not
    /// finish within the token limit).
    #[error("constrained decoding error: {0}")]
    Grammar(String),
    /// The prompt and the requested answer do not fit in the model's context.
    #[error("prompt of {prompt_tokens} tokens plus {max_tokens} answer tokens exceeds the context of {context} tokens")]
    ContextOverflow {
        /// Tokens in the rendered prompt.
        prompt_tokens: usize,
        /// Requested answer tokens.
        max_tokens: usize,
        /// The model's context length.
        context: usize,
    },
    /// The tensor computation failed.
    #[error("inference failed: {0}")]
    Inference(#[from] candle_core::Error),
    /// A safetensors file lacks a tensor the model needs, or holds it in another shape.
    #[error("invalid model weights: {0}")]
    Weights(String),
    /// Installing the models failed.
    #[error("model fetch failed: {0}")]
    Fetch(String),
    /// A model file does not have the pinned checksum.
    #[error("checksum mismatch for {what}: expected sha256 {expected}, got {actual}; remove it and {hint}", hint = FETCH_HINT)]
    Checksum {
        /// The file (or the concatenation of parts).
        what: String,
        /// The pinned sha256.
        expected: String,
        /// The sha256 found.
        actual: String,
    },
}

impl LocalError {
    /// A [`LocalError::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }
}

impl From<LocalError> for LlmError {
    fn from(err: LocalError) -> Self {
        match err {
            LocalError::InvalidSpec { .. }
            | LocalError::ModelMissing { .. }
            | LocalError::Checksum { .. }
            | LocalError::Fetch(_) => LlmError::Config(err.to_string()),
            LocalError::UnsupportedArchitecture(_) | LocalError::ContextOverflow { .. } | LocalError::Schema(_) => {
                LlmError::Unsupported(err.to_string())
            }
            other => LlmError::InvalidResponse { detail: format!("local model: {other}"), body: String::new() },
        }
    }
}
