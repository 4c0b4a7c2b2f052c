//! Model specs: the strings configuration uses to name a local model.
//!
//! | Spec | Model |
//! |---|---|
//! | `local:qwen2.5-coder-1.5b` (the default chat model) | Qwen2.5-Coder-1.5B-Instruct Q4_K_M |
//! | `local:smollm2` | SmolLM2-135M-Instruct (Q4_1, requantized to Q8_0) |
//! | `local:/path/to/model.gguf` | any GGUF of the `llama`, `qwen2` (or untested `qwen3`) architecture |
//! | `local:all-minilm-l6-v2` (the default embedder) | all-MiniLM-L6-v2 |
//! | `local:/path/to/dir` (embedder) | a BERT directory with `config.json`, `tokenizer.json`, `model.safetensors` |
//!
//! The `local:` prefix is optional.

use std::path::{Path, PathBuf};

use crate::error::LocalError;
use crate::fetch::ModelKind;
use crate::gguf::GgufSource;

/// The default chat model spec.
pub const DEFAULT_CHAT_SPEC: &str = "local:qwen2.5-coder-1.5b";
/// The default embedder spec.
pub const DEFAULT_EMBEDDER_SPEC: &str = "local:all-minilm-l6-v2";

/// A parsed chat model spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatModelSpec {
    /// A model installed by `scripts/fetch-models.sh` / `guidepost models fetch`.
    Installed(ModelKind),
    /// A GGUF file given by path.
    Gguf(PathBuf),
}

/// See [`ChatModelSpec::verdict_threshold`].
pub const QWEN_VERDICT_THRESHOLD: f32 = 0.7;

impl ChatModelSpec {
    /// Parses `local:qwen2.5-coder-1.5b`, `local:smollm2` or `local:<path to .gguf>`.
    pub fn parse(spec: &str) -> Result<Self, LocalError> {
        let name = spec.strip_prefix("local:").unwrap_or(spec).trim();
        match name {
            "qwen2.5-coder-1.5b" | "qwen2.5-coder-1.5b-instruct" | "qwen" => Ok(Self::Installed(ModelKind::Qwen)),
            "smollm2" | "smollm2-135m" | "smollm2-135m-instruct" => Ok(Self::Installed(ModelKind::SmolLm2)),
            path if is_path(path) => Ok(Self::Gguf(PathBuf::from(path))),
            _ => Err(LocalError::InvalidSpec {
                spec: spec.to_string(),
                reason: "expected local:qwen2.5-coder-1.5b, local:smollm2 or local:<path to a .gguf file>".into(),
            }),
        }
    }

    /// The probability of "yes" from which this model's yes-or-no answers count as yes
    /// (its [`verdict_threshold`](guidepost_llm::ModelCapabilities::verdict_threshold)).
    ///
    /// Qwen2.5-Coder-1.5B answers yes too readily. Measured with the single-check prompt on
    /// 258 labelled checks of the example agents (English and Chinese statements), "yes"
    /// from 0.5 / 0.6 / 0.7 / 0.8 was right 79.5 / 81.8 / 82.2 / 79.8 % of the time; on
    /// `examples/eval` the decisions were right 75.1 / 77.3 / 82.3 / 80.1 %. Hence
    /// [`QWEN_VERDICT_THRESHOLD`]. Other models take the likelier answer.
    pub fn verdict_threshold(&self) -> f32 {
        match self {
            Self::Installed(ModelKind::Qwen) => QWEN_VERDICT_THRESHOLD,
            _ => 0.5,
        }
    }

    /// The model id reported in usage (`local:smollm2`, `local:model.gguf`).
    pub fn model_id(&self) -> String {
        match self {
            Self::Installed(kind) => format!("local:{}", kind.name()),
            Self::Gguf(path) => format!("local:{}", path.display()),
        }
    }

    /// Where the GGUF bytes are, checking that the files exist.
    pub fn locate(&self, models_dir: &Path) -> Result<GgufSource, LocalError> {
        match self {
            Self::Installed(kind) => {
                kind.ensure_installed(models_dir)?;
                let mut files = kind.weight_files(models_dir);
                if files.len() == 1 { Ok(GgufSource::File(files.remove(0))) } else { Ok(GgufSource::Parts(files)) }
            }
            Self::Gguf(path) if path.is_file() => Ok(GgufSource::File(path.clone())),
            Self::Gguf(path) => Err(LocalError::ModelMissing { model: self.model_id(), path: path.clone() }),
        }
    }
}

/// A parsed embedder spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmbedderSpec {
    /// all-MiniLM-L6-v2 as installed by the fetch command.
    MiniLm,
    /// A BERT model directory (`config.json`, `tokenizer.json`, `model.safetensors`).
    Dir(PathBuf),
}

impl EmbedderSpec {
    /// Parses `local:all-minilm-l6-v2` or `local:<directory>`.
    pub fn parse(spec: &str) -> Result<Self, LocalError> {
        let name = spec.strip_prefix("local:").unwrap_or(spec).trim();
        match name {
            "all-minilm-l6-v2" | "minilm" => Ok(Self::MiniLm),
            path if is_path(path) => Ok(Self::Dir(PathBuf::from(path))),
            _ => Err(LocalError::InvalidSpec {
                spec: spec.to_string(),
                reason: "expected local:all-minilm-l6-v2 or local:<model directory>".into(),
            }),
        }
    }

    /// The model id reported by the embedder.
    pub fn model_id(&self) -> String {
        match self {
            Self::MiniLm => format!("local:{}", ModelKind::MiniLm.name()),
            Self::Dir(path) => format!("local:{}", path.display()),
        }
    }

    /// The model directory, checking that the files exist.
    pub fn locate(&self, models_dir: &Path) -> Result<PathBuf, LocalError> {
        let dir = match self {
            Self::MiniLm => {
                ModelKind::MiniLm.ensure_installed(models_dir)?;
                crate::fetch::minilm_dir(models_dir)
            }
            Self::Dir(dir) => dir.clone(),
        };
        for file in ["config.json", "tokenizer.json", "model.safetensors"] {
            let path = dir.join(file);
            if !path.is_file() {
                return Err(LocalError::ModelMissing { model: self.model_id(), path });
            }
        }
        Ok(dir)
    }
}

fn is_path(name: &str) -> bool {
    name.contains('/') || name.contains('\\') || name.ends_with(".gguf")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn only_the_model_measured_to_lean_towards_yes_raises_its_threshold() {
        assert_eq!(ChatModelSpec::parse(DEFAULT_CHAT_SPEC).unwrap().verdict_threshold(), QWEN_VERDICT_THRESHOLD);
        assert_eq!(ChatModelSpec::parse("local:smollm2").unwrap().verdict_threshold(), 0.5);
        assert_eq!(ChatModelSpec::parse("local:/models/other.gguf").unwrap().verdict_threshold(), 0.5);
    }

    #[test]
    fn parses_chat_specs() {
        assert_eq!(ChatModelSpec::parse(DEFAULT_CHAT_SPEC).unwrap(), ChatModelSpec::Installed(ModelKind::Qwen));
        assert_eq!(ChatModelSpec::parse("local:smollm2").unwrap().model_id(), "local:smollm2");
        assert_eq!(ChatModelSpec::parse("local:/m/x.gguf").unwrap(), ChatModelSpec::Gguf(PathBuf::from("/m/x.gguf")));
        assert!(ChatModelSpec::parse("local:gpt-5").is_err());
    }

    #[test]
    fn parses_embedder_specs() {
        assert_eq!(EmbedderSpec::parse(DEFAULT_EMBEDDER_SPEC).unwrap(), EmbedderSpec::MiniLm);
        assert!(EmbedderSpec::parse("local:nothing").is_err());
    }

    #[test]
    fn a_missing_gguf_path_names_the_file() {
        let err = ChatModelSpec::parse("local:/nonexistent/m.gguf").unwrap().locate(Path::new("/tmp")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/m.gguf"), "{err}");
    }
}
