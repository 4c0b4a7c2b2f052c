//! Why a turn failed, and why the runtime's settings were refused.

/// Why a turn failed. The turn ends with an `error` status whose `exception` is this
/// error's message without secrets, and [`crate::TurnTrace::error`] holds the same text.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// Guideline matching lost every model call of the turn's first pass: there is nothing
    /// to reply from. (A later pass that fails leaves the turn degraded, not failed.)
    #[error("guideline matching failed: {0}")]
    Matching(#[source] guidepost_engine::EngineError),
    /// The reply could not be composed: its model call failed, its answer never fitted its
    /// schema, or its prompt did not render.
    #[error("composing the reply failed: {0}")]
    Composition(#[source] guidepost_llm::LlmError),
    /// What earlier attempts of the turn did with tools could not be read: running it could
    /// act twice.
    #[error("the turn cannot run safely: {0}")]
    Journal(#[source] crate::journal::JournalError),
}

impl TurnError {
    /// The message, without the credentials, URL secrets and key-shaped words it may carry
    /// from a provider's answer.
    pub fn scrubbed(&self) -> String {
        guidepost_llm::secrets::scrub(&self.to_string())
    }
}

/// A runtime setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The history bound is not a whole number above 0.
    #[error("{variable} must be a whole number of customer turns above 0, not `{value}`")]
    HistoryTurns {
        /// The environment variable that set it.
        variable: &'static str,
        /// What it said.
        value: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_error_keeps_its_cause_and_loses_its_secrets() {
        let cause = guidepost_llm::LlmError::Http {
            status: 401,
            body: "Incorrect API key provided: sk-proj-abcdefghijklmnopqrstuvwxyz012345.".into(),
            retry_after: None,
        };
        let error = TurnError::Composition(cause);
        assert!(std::error::Error::source(&error).is_some());
        let text = error.scrubbed();
        assert!(text.starts_with("composing the reply failed: "), "{text}");
        assert!(!text.contains("abcdefghijklmnopqrstuvwxyz012345"), "{text}");
    }
}
