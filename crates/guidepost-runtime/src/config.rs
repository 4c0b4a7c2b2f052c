//! What a runtime runs on: the models by role ([`RuntimeModels`]) and its settings
//! ([`RuntimeConfig`]).

use std::sync::Arc;

use guidepost_engine::MatcherConfig;
use guidepost_llm::{ChatModel, Embedder};

use crate::error::ConfigError;

/// Models by role.
#[derive(Clone)]
pub struct RuntimeModels {
    /// Guideline matching.
    pub matching: Arc<dyn ChatModel>,
    /// Journey node selection.
    pub journey_selection: Arc<dyn ChatModel>,
    /// Tool-call inference.
    pub tool_inference: Arc<dyn ChatModel>,
    /// Reply composition.
    pub generation: Arc<dyn ChatModel>,
    /// Embeddings for journey prediction and glossary retrieval.
    pub embedder: Option<Arc<dyn Embedder>>,
}

impl RuntimeModels {
    /// The same model for every role.
    pub fn single(model: Arc<dyn ChatModel>, embedder: Option<Arc<dyn Embedder>>) -> Self {
        Self {
            matching: model.clone(),
            journey_selection: model.clone(),
            tool_inference: model.clone(),
            generation: model,
            embedder,
        }
    }
}

/// Settings.
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    /// Overrides the agent's `max_engine_iterations`.
    pub max_engine_iterations: Option<u32>,
    /// Matcher settings.
    pub matcher: MatcherConfig,
    /// Whether the reply call writes a draft and lists its problems before the final reply.
    /// `None` (the default) does so when the reply model follows compound instructions (see
    /// [`guidepost_llm::ModelCapabilities`]): a small model copies its draft from its own
    /// earlier messages, and the check then finds nothing wrong; asked for the reply alone,
    /// it follows the current step.
    pub self_check: Option<bool>,
    /// The checks every composed reply must pass before it is sent (see
    /// [`guidepost_core::reply_check`]); `None` (the default) runs them all.
    pub reply_checks: Option<Vec<guidepost_core::reply_check::ReplyCheck>>,
    /// How many of the customer's latest turns composition and tool inference see word for
    /// word; the turns before them are summed up by what was done and found in them (see
    /// [`crate::history`]). `None` means [`crate::history::DEFAULT_HISTORY_TURNS`].
    pub history_turns: Option<usize>,
    /// How long a turn a model works on may show nothing before it sends a status that says
    /// how far it has come; `None` means [`crate::PULSE_EVERY`].
    pub pulse_every: Option<std::time::Duration>,
}

impl RuntimeConfig {
    /// The defaults, with what the environment sets: `GUIDEPOST_HISTORY_TURNS` (see
    /// [`RuntimeConfig::history_turns`]). An unusable value is an error naming the variable.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`RuntimeConfig::from_env`] with the variables read through `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        let variable = "GUIDEPOST_HISTORY_TURNS";
        if let Some(value) = var(variable) {
            let turns = value
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| ConfigError::HistoryTurns { variable, value: value.clone() })?;
            config.history_turns = Some(turns);
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_bound_comes_from_the_environment_and_is_checked() {
        let config = RuntimeConfig::from_vars(|_| None).unwrap();
        assert_eq!(config.history_turns, None);
        let config =
            RuntimeConfig::from_vars(|name| (name == "GUIDEPOST_HISTORY_TURNS").then(|| " 20 ".into())).unwrap();
        assert_eq!(config.history_turns, Some(20));
        for bad in ["0", "-3", "twelve", ""] {
            let err = RuntimeConfig::from_vars(|_| Some(bad.into())).unwrap_err().to_string();
            assert!(err.contains("GUIDEPOST_HISTORY_TURNS") && err.contains(&format!("`{bad}`")), "{err}");
        }
    }
}
