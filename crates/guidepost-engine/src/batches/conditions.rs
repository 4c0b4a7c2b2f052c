//! Condition checks: does each condition hold now? Observations and the conditions of
//! guidelines not applied before share this batch; a check judges the condition alone (the
//! action is what the reply carries out, not part of the verdict).

use schemars::JsonSchema;
use serde::Deserialize;

use super::{CheckAnswer, LocalVerdict};

/// One condition's check.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConditionCheck {
    /// Local id of the condition.
    pub id: String,
    /// Why the condition holds or not, in one sentence.
    pub rationale: String,
    /// Whether the condition holds now.
    pub applies: bool,
}

/// The answer of a condition batch.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConditionChecks {
    /// One check per condition.
    pub checks: Vec<ConditionCheck>,
}

impl CheckAnswer for ConditionChecks {
    fn verdicts(self) -> Vec<LocalVerdict> {
        self.checks
            .into_iter()
            .map(|c| LocalVerdict { id: c.id, applies: c.applies, rationale: Some(c.rationale), probability: None })
            .collect()
    }
}
