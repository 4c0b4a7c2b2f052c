//! Which model serves which task: [`ModelSpec`] strings, per-task [`ModelSettings`] read from
//! the environment, provider keys, and the [`ProviderFactory`] hook through which other crates
//! (local inference) supply models without this crate depending on them.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::error::LlmError;
use crate::ports::{ChatModel, Embedder};
use crate::request::TaskKind;

/// The forms a model spec string may take, for error messages.
pub const ACCEPTED_SPECS: &str = "`openai:<model>`, `openai-compatible:<base-url>#<model>` (with `?small` \
after the model for a small one), `anthropic:<model>`, `local:<model-name-or-path>`, `scripted`";

/// One model, named by a spec string such as `openai:gpt-4.1`.
///
/// ```
/// use guidepost_llm::ModelSpec;
/// let spec: ModelSpec = "openai-compatible:http://127.0.0.1:11434/v1#qwen2.5".parse()?;
/// assert_eq!(spec, ModelSpec::OpenAiCompatible {
///     base_url: "http://127.0.0.1:11434/v1".into(),
///     model: "qwen2.5".into(),
///     small: false,
/// });
/// assert_eq!(spec.to_string(), "openai-compatible:http://127.0.0.1:11434/v1#qwen2.5");
/// // A small model served over the API, declared so:
/// let small: ModelSpec = "openai-compatible:http://127.0.0.1:11434/v1#qwen2.5:1.5b?small".parse()?;
/// assert!(matches!(&small, ModelSpec::OpenAiCompatible { model, small: true, .. } if model == "qwen2.5:1.5b"));
/// # Ok::<(), guidepost_llm::LlmError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ModelSpec {
    /// OpenAI's API (base URL from `OPENAI_BASE_URL`, default `https://api.openai.com/v1`).
    OpenAi {
        /// Model name, e.g. `gpt-4.1`.
        model: String,
    },
    /// Any server speaking OpenAI's chat-completions protocol (vLLM, Ollama, llama.cpp).
    OpenAiCompatible {
        /// Base URL up to and including `/v1`.
        base_url: String,
        /// Model name as the server knows it.
        model: String,
        /// Declared small (`?small` after the model): it declares
        /// [`ModelCapabilities::SMALL`](crate::ModelCapabilities::SMALL), so the engine asks it
        /// one question per condition and composes without a draft. Otherwise it is taken to be
        /// capable.
        small: bool,
    },
    /// Anthropic's Messages API.
    Anthropic {
        /// Model name, e.g. `claude-sonnet-4-5`.
        model: String,
    },
    /// In-process inference, built by the factory registered for `local`.
    Local {
        /// A known model name (`qwen2.5-coder-1.5b`, `smollm2`, `all-minilm-l6-v2`) or a path.
        model: String,
    },
    /// The scripted test model (answers must be scripted in code).
    Scripted,
}

/// Whether `model_id` (a [`ChatModel::model_id`](crate::ChatModel::model_id),
/// `provider:model`) names a model run on this machine by the `local` provider.
pub fn is_local_model(model_id: &str) -> bool {
    model_id.starts_with("local:")
}

impl ModelSpec {
    /// The scheme of the spec (`openai`, `openai-compatible`, `anthropic`, `local`, `scripted`).
    pub fn scheme(&self) -> &'static str {
        match self {
            ModelSpec::OpenAi { .. } => "openai",
            ModelSpec::OpenAiCompatible { .. } => "openai-compatible",
            ModelSpec::Anthropic { .. } => "anthropic",
            ModelSpec::Local { .. } => "local",
            ModelSpec::Scripted => "scripted",
        }
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelSpec::OpenAi { model } => write!(f, "openai:{model}"),
            ModelSpec::OpenAiCompatible { base_url, model, small } => {
                write!(f, "openai-compatible:{base_url}#{model}{}", if *small { "?small" } else { "" })
            }
            ModelSpec::Anthropic { model } => write!(f, "anthropic:{model}"),
            ModelSpec::Local { model } => write!(f, "local:{model}"),
            ModelSpec::Scripted => f.write_str("scripted"),
        }
    }
}

impl FromStr for ModelSpec {
    type Err = LlmError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let text = raw.trim();
        let bad =
            |why: &str| LlmError::Config(format!("invalid model spec `{raw}`: {why}; accepted: {ACCEPTED_SPECS}"));
        if text == "scripted" {
            return Ok(ModelSpec::Scripted);
        }
        let Some((scheme, rest)) = text.split_once(':') else {
            return Err(bad("missing `<provider>:`"));
        };
        let rest = rest.trim();
        let named = |rest: &str| -> Result<String, LlmError> {
            if rest.is_empty() { Err(bad("the model name is empty")) } else { Ok(rest.to_string()) }
        };
        match scheme.trim() {
            "openai" => Ok(ModelSpec::OpenAi { model: named(rest)? }),
            "anthropic" => Ok(ModelSpec::Anthropic { model: named(rest)? }),
            "local" => Ok(ModelSpec::Local { model: named(rest)? }),
            "openai-compatible" => {
                let Some((base_url, model)) = rest.rsplit_once('#') else {
                    return Err(bad("expected `<base-url>#<model>`"));
                };
                if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
                    return Err(bad("the base URL must start with http:// or https://"));
                }
                let (model, small) = match model.trim().rsplit_once('?') {
                    Some((model, "small")) => (model, true),
                    Some((_, other)) => return Err(bad(&format!("unknown option `?{other}` (accepted: `?small`)"))),
                    None => (model, false),
                };
                Ok(ModelSpec::OpenAiCompatible {
                    base_url: base_url.trim_end_matches('/').to_string(),
                    model: named(model.trim())?,
                    small,
                })
            }
            other => Err(bad(&format!("unknown provider `{other}`"))),
        }
    }
}

/// API keys and endpoints of the hosted providers.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ProviderKeys {
    /// `OPENAI_API_KEY`.
    pub openai_api_key: Option<String>,
    /// `OPENAI_BASE_URL` (default `https://api.openai.com/v1`).
    pub openai_base_url: Option<String>,
    /// `ANTHROPIC_API_KEY`.
    pub anthropic_api_key: Option<String>,
    /// `ANTHROPIC_BASE_URL` (default `https://api.anthropic.com`).
    pub anthropic_base_url: Option<String>,
    /// `OPENAI_COMPATIBLE_API_KEY`: the bearer token sent to `openai-compatible:` servers
    /// (OpenAI's own key is never sent to another server).
    pub compatible_api_key: Option<String>,
}

impl fmt::Debug for ProviderKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hidden = |k: &Option<String>| k.as_ref().map(|_| "<set>");
        f.debug_struct("ProviderKeys")
            .field("openai_api_key", &hidden(&self.openai_api_key))
            .field("openai_base_url", &self.openai_base_url)
            .field("anthropic_api_key", &hidden(&self.anthropic_api_key))
            .field("anthropic_base_url", &self.anthropic_base_url)
            .field("compatible_api_key", &hidden(&self.compatible_api_key))
            .finish()
    }
}

impl ProviderKeys {
    /// Reads the keys from the process environment.
    pub fn from_env() -> Self {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Reads the keys through `lookup` (the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let get = |key: &str| lookup(key).filter(|v| !v.trim().is_empty());
        Self {
            openai_api_key: get("OPENAI_API_KEY"),
            openai_base_url: get("OPENAI_BASE_URL"),
            anthropic_api_key: get("ANTHROPIC_API_KEY"),
            anthropic_base_url: get("ANTHROPIC_BASE_URL"),
            compatible_api_key: get("OPENAI_COMPATIBLE_API_KEY"),
        }
    }
}

/// The model of every task kind, with a default, plus the embedder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSettings {
    /// The model of task kinds without their own setting.
    pub default: ModelSpec,
    /// Task kinds with their own model.
    pub per_task: BTreeMap<TaskKind, ModelSpec>,
    /// The embedding model.
    pub embedder: ModelSpec,
}

impl Default for ModelSettings {
    /// The embedded defaults: local Qwen2.5-Coder-1.5B and local all-MiniLM-L6-v2.
    fn default() -> Self {
        Self {
            default: ModelSpec::Local { model: "qwen2.5-coder-1.5b".into() },
            per_task: BTreeMap::new(),
            embedder: ModelSpec::Local { model: "all-minilm-l6-v2".into() },
        }
    }
}

impl ModelSettings {
    /// All task kinds served by `spec`, with the embedder that goes with it (see
    /// [`embedder_for`](Self::embedder_for)).
    pub fn single(spec: ModelSpec) -> Self {
        Self { embedder: Self::embedder_for(&spec), default: spec, per_task: BTreeMap::new() }
    }

    /// The embedder used with a default model when none is configured: OpenAI's
    /// `text-embedding-3-small` for `openai:`, the scripted embedder for `scripted`, and the
    /// local MiniLM otherwise.
    pub fn embedder_for(default: &ModelSpec) -> ModelSpec {
        match default {
            ModelSpec::OpenAi { .. } => ModelSpec::OpenAi { model: "text-embedding-3-small".into() },
            ModelSpec::Scripted => ModelSpec::Scripted,
            _ => ModelSpec::Local { model: "all-minilm-l6-v2".into() },
        }
    }

    /// Reads `GUIDEPOST_MODEL`, `GUIDEPOST_MODEL_<TASK>` and `GUIDEPOST_EMBEDDER` from the
    /// process environment.
    pub fn from_env() -> Result<Self, LlmError> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Reads the settings through `lookup`. `<TASK>` is the upper-case task name:
    /// `MATCHING`, `JOURNEY_SELECTION`, `TOOL_INFERENCE`, `GENERATION`, `SIMULATION`, `JUDGE`.
    /// Unset variables keep the defaults; a bad value is an error naming the variable.
    /// Without `GUIDEPOST_EMBEDDER`, the embedder follows the default model
    /// ([`embedder_for`](Self::embedder_for)).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, LlmError> {
        let parse = |var: &str| -> Result<Option<ModelSpec>, LlmError> {
            match lookup(var).filter(|v| !v.trim().is_empty()) {
                None => Ok(None),
                Some(value) => value.parse().map(Some).map_err(|e| match e {
                    LlmError::Config(msg) => LlmError::Config(format!("{var}: {msg}")),
                    other => other,
                }),
            }
        };
        let mut settings = Self::default();
        if let Some(spec) = parse("GUIDEPOST_MODEL")? {
            settings.default = spec;
        }
        for task in TaskKind::NAMED {
            if task == TaskKind::Embedding {
                continue;
            }
            let var = format!("GUIDEPOST_MODEL_{}", task.as_str().to_uppercase());
            if let Some(spec) = parse(&var)? {
                settings.per_task.insert(task, spec);
            }
        }
        match parse("GUIDEPOST_EMBEDDER")? {
            Some(spec) => settings.embedder = spec,
            None => settings.embedder = Self::embedder_for(&settings.default),
        }
        Ok(settings)
    }

    /// The model serving `task`.
    pub fn spec_for(&self, task: &TaskKind) -> &ModelSpec {
        if *task == TaskKind::Embedding {
            return &self.embedder;
        }
        self.per_task.get(task).unwrap_or(&self.default)
    }
}

/// Builds models for one spec scheme. Crates that must not be a dependency of this one (local
/// inference with candle) register a factory in a [`ProviderRegistry`]; the binary passes the
/// registry to [`ModelStackBuilder`](crate::ModelStackBuilder).
///
/// Construction is synchronous; a factory whose models are slow to load should load lazily on
/// the first call (or the caller runs it in `spawn_blocking`).
pub trait ProviderFactory: Send + Sync {
    /// The scheme this factory serves, e.g. `local`.
    fn scheme(&self) -> &str;

    /// A chat model for `spec` (whose [`ModelSpec::scheme`] is [`scheme`](Self::scheme)).
    fn chat_model(&self, spec: &ModelSpec) -> Result<Arc<dyn ChatModel>, LlmError>;

    /// An embedder for `spec`. The default says the scheme has none.
    fn embedder(&self, spec: &ModelSpec) -> Result<Arc<dyn Embedder>, LlmError> {
        Err(LlmError::Unsupported(format!("provider `{}` has no embedder for `{spec}`", self.scheme())))
    }
}

/// Factories by scheme. Built-in hosted providers need none; a registered factory takes
/// precedence over the built-in one of its scheme.
#[derive(Clone, Default)]
pub struct ProviderRegistry {
    factories: BTreeMap<String, Arc<dyn ProviderFactory>>,
}

impl fmt::Debug for ProviderRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.factories.keys()).finish()
    }
}

impl ProviderRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the factory of its scheme.
    pub fn register(&mut self, factory: Arc<dyn ProviderFactory>) -> &mut Self {
        self.factories.insert(factory.scheme().to_string(), factory);
        self
    }

    /// The factory of `scheme`, if one is registered.
    pub fn get(&self, scheme: &str) -> Option<&Arc<dyn ProviderFactory>> {
        self.factories.get(scheme)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parse_table() {
        let ok: [(&str, ModelSpec); 8] = [
            ("openai:gpt-4.1", ModelSpec::OpenAi { model: "gpt-4.1".into() }),
            (" anthropic:claude-sonnet-4-5 ", ModelSpec::Anthropic { model: "claude-sonnet-4-5".into() }),
            (
                "openai-compatible:http://127.0.0.1:11434/v1/#qwen2.5:7b",
                ModelSpec::OpenAiCompatible {
                    base_url: "http://127.0.0.1:11434/v1".into(),
                    model: "qwen2.5:7b".into(),
                    small: false,
                },
            ),
            (
                "openai-compatible:http://127.0.0.1:11434/v1#qwen2.5:1.5b?small",
                ModelSpec::OpenAiCompatible {
                    base_url: "http://127.0.0.1:11434/v1".into(),
                    model: "qwen2.5:1.5b".into(),
                    small: true,
                },
            ),
            ("local:qwen2.5-coder-1.5b", ModelSpec::Local { model: "qwen2.5-coder-1.5b".into() }),
            ("local:smollm2", ModelSpec::Local { model: "smollm2".into() }),
            ("local:/models/x.gguf", ModelSpec::Local { model: "/models/x.gguf".into() }),
            ("scripted", ModelSpec::Scripted),
        ];
        for (text, want) in ok {
            assert_eq!(text.parse::<ModelSpec>().unwrap(), want, "{text}");
        }
        let bad = [
            ("gpt-4.1", "missing `<provider>:`"),
            ("openai:", "model name is empty"),
            ("azure:gpt", "unknown provider `azure`"),
            ("openai-compatible:http://x/v1", "expected `<base-url>#<model>`"),
            ("openai-compatible:ftp://x#m", "must start with http"),
            ("openai-compatible:http://x/v1#", "model name is empty"),
            ("openai-compatible:http://x/v1#m?tiny", "unknown option `?tiny`"),
            ("openai-compatible:http://x/v1#?small", "model name is empty"),
        ];
        for (text, why) in bad {
            let err = text.parse::<ModelSpec>().unwrap_err().to_string();
            assert!(err.contains(why), "{text}: {err}");
            assert!(err.contains(&format!("`{text}`")), "{err}");
            assert!(err.contains("accepted:"), "{err}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_spec_round_trips_through_its_string(
            scheme in 0..5usize,
            model in "[a-z0-9][a-z0-9._:/-]{0,20}",
            port in 1u16..,
            small: bool,
        ) {
            let spec = match scheme {
                0 => ModelSpec::OpenAi { model },
                1 => ModelSpec::Anthropic { model },
                2 => ModelSpec::Local { model },
                3 => ModelSpec::OpenAiCompatible { base_url: format!("http://127.0.0.1:{port}/v1"), model, small },
                _ => ModelSpec::Scripted,
            };
            proptest::prop_assert_eq!(spec.to_string().parse::<ModelSpec>().unwrap(), spec);
        }

        #[test]
        fn parsing_never_panics(text in ".{0,40}") {
            let _ = text.parse::<ModelSpec>();
        }
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "openai:gpt-4.1",
            "openai-compatible:https://h/v1#m",
            "anthropic:claude-haiku-4-5",
            "local:smollm2",
            "scripted",
        ] {
            assert_eq!(text.parse::<ModelSpec>().unwrap().to_string(), text);
        }
    }

    #[test]
    fn settings_from_lookup() {
        let env: BTreeMap<&str, &str> = [
            ("GUIDEPOST_MODEL", "openai:gpt-4.1"),
            ("GUIDEPOST_MODEL_MATCHING", "openai:gpt-4.1-mini"),
            ("GUIDEPOST_MODEL_JOURNEY_SELECTION", "anthropic:claude-sonnet-4-5"),
            ("GUIDEPOST_EMBEDDER", "openai:text-embedding-3-small"),
            ("GUIDEPOST_MODEL_JUDGE", ""),
        ]
        .into_iter()
        .collect();
        let settings = ModelSettings::from_lookup(|k| env.get(k).map(|v| (*v).to_string())).unwrap();
        assert_eq!(settings.spec_for(&TaskKind::Matching).to_string(), "openai:gpt-4.1-mini");
        assert_eq!(settings.spec_for(&TaskKind::JourneySelection).scheme(), "anthropic");
        assert_eq!(settings.spec_for(&TaskKind::Judge).to_string(), "openai:gpt-4.1");
        assert_eq!(settings.spec_for(&TaskKind::Embedding).to_string(), "openai:text-embedding-3-small");
    }

    #[test]
    fn settings_error_names_the_variable() {
        let err = ModelSettings::from_lookup(|k| (k == "GUIDEPOST_MODEL_TOOL_INFERENCE").then(|| "nope".to_string()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("GUIDEPOST_MODEL_TOOL_INFERENCE"), "{err}");
        assert!(err.contains("`nope`"), "{err}");
    }

    #[test]
    fn defaults_are_local_and_keys_hide_secrets() {
        let settings = ModelSettings::from_lookup(|_| None).unwrap();
        assert_eq!(settings.default.scheme(), "local");
        assert_eq!(settings.embedder.scheme(), "local");
        let openai =
            ModelSettings::from_lookup(|k| (k == "GUIDEPOST_MODEL").then(|| "openai:gpt-4.1".to_string())).unwrap();
        assert_eq!(openai.embedder.to_string(), "openai:text-embedding-3-small");
        let keys = ProviderKeys::from_lookup(|k| (k == "OPENAI_API_KEY").then(|| "sk-secret".into()));
        assert!(!format!("{keys:?}").contains("sk-secret"));
        assert_eq!(keys.openai_api_key.as_deref(), Some("sk-secret"));
    }
}
