//! Actionable checks: does a guideline's condition hold for the next reply?

use schemars::JsonSchema;
use serde::Deserialize;

use super::{CheckAnswer, LocalVerdict};

/// One guideline's check.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionableCheck {
    /// Local id of the guideline.
    pub id: String,
    /// Why the condition holds or not, in one sentence.
    pub rationale: String,
    /// Whether the guideline applies to the next reply.
    pub applies: bool,
}

/// The answer of an actionable batch.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionableChecks {
    /// One check per guideline.
    pub checks: Vec<ActionableCheck>,
}

impl CheckAnswer for ActionableChecks {
    fn verdicts(self) -> Vec<LocalVerdict> {
        self.checks
            .into_iter()
            .map(|c| LocalVerdict { id: c.id, applies: c.applies, rationale: Some(c.rationale) })
            .collect()
    }
}
