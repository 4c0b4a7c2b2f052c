//! Previously applied guidelines: must the agent follow them again? Both categories,
//! plain and customer-dependent (the action waits on the customer's answer), share one
//! batch kind: customer-dependent items are flagged in the prompt and get their own rule
//! and field, so a turn never spends two calls on re-application.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{CheckAnswer, LocalVerdict};

/// One previously applied guideline's check.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReapplyCheck {
    /// Local id of the guideline.
    pub id: String,
    /// Why, in one sentence.
    pub rationale: String,
    /// Whether the condition holds again for a new reason.
    pub condition_holds_again: bool,
    /// For customer-dependent items: whether the customer already gave (or refused) what
    /// the action asked for; `false` for the others.
    pub customer_completed: bool,
    /// The verdict: follow the guideline again in the next reply.
    pub should_apply: bool,
}

/// The answer of a previously-applied batch.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReapplyChecks {
    /// One check per guideline.
    pub checks: Vec<ReapplyCheck>,
}

impl CheckAnswer for ReapplyChecks {
    fn verdicts(self) -> Vec<LocalVerdict> {
        self.checks
            .into_iter()
            .map(|c| LocalVerdict {
                id: c.id,
                applies: c.should_apply,
                rationale: Some(c.rationale),
                probability: None,
            })
            .collect()
    }
}
