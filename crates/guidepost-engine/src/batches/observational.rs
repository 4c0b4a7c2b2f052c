//! Observational checks: does a fact about the conversation hold now?

use schemars::JsonSchema;
use serde::Deserialize;

use super::{CheckAnswer, LocalVerdict};

/// One condition's check.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObservationCheck {
    /// Local id of the condition.
    pub id: String,
    /// Why it holds or not, in one sentence.
    pub rationale: String,
    /// Whether it holds now.
    pub applies: bool,
}

/// The answer of an observational batch.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObservationChecks {
    /// One check per condition.
    pub checks: Vec<ObservationCheck>,
}

impl CheckAnswer for ObservationChecks {
    fn verdicts(self) -> Vec<LocalVerdict> {
        self.checks
            .into_iter()
            .map(|c| LocalVerdict { id: c.id, applies: c.applies, rationale: Some(c.rationale) })
            .collect()
    }
}
