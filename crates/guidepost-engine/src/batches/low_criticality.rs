//! Low-criticality checks: a cheap list of the conditions that hold, no reasoning fields.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{CheckAnswer, LocalVerdict};

/// The answer of a low-criticality batch: the local ids that apply. Items not listed do
/// not apply.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LowCriticalityChecks {
    /// Local ids of the guidelines whose condition holds.
    pub applies: Vec<String>,
}

impl CheckAnswer for LowCriticalityChecks {
    fn verdicts(self) -> Vec<LocalVerdict> {
        self.applies
            .into_iter()
            .map(|id| LocalVerdict { id, applies: true, rationale: None, probability: None })
            .collect()
    }
}
