//! Routing candidate guidelines to the kind of check they need.

use guidepost_core::Criticality;
use serde::{Deserialize, Serialize};

use crate::catalog::MatchableGuideline;

/// The kind of check a candidate guideline gets; each has its own prompt and schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// A condition without an action: does the fact hold now?
    Observational,
    /// A condition with an action, not applied before in this session.
    Actionable,
    /// Applied before: should the action be carried out again?
    PreviouslyApplied,
    /// Applied before, and completing it needs the customer's answer: did they answer?
    PreviouslyAppliedCustomerDependent,
    /// Low criticality: a cheap check without reasoning fields.
    LowCriticality,
    /// An observation with disambiguation targets: is the customer's intent ambiguous?
    Disambiguation,
    /// Journey node selection (one check per active or starting journey).
    JourneyNodeSelection,
}

impl Category {
    /// The batch kind a category is evaluated in. Observations and guidelines not applied
    /// before share one condition check (a verdict judges the condition alone, so one call
    /// serves both); both previously-applied categories share one prompt (customer-dependent
    /// items are flagged); every other category has its own.
    pub fn batch_kind(self) -> Category {
        match self {
            Self::Observational => Self::Actionable,
            Self::PreviouslyAppliedCustomerDependent => Self::PreviouslyApplied,
            other => other,
        }
    }

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Observational => "observational",
            Self::Actionable => "actionable",
            Self::PreviouslyApplied => "previously_applied",
            Self::PreviouslyAppliedCustomerDependent => "previously_applied_customer_dependent",
            Self::LowCriticality => "low_criticality",
            Self::Disambiguation => "disambiguation",
            Self::JourneyNodeSelection => "journey_node_selection",
        }
    }
}

/// Whether an action asks the customer for something, so that completing it needs their
/// answer. A heuristic on the action text (no indexing calls at startup); a guideline's
/// `metadata.customer_dependent` overrides it.
pub fn asks_customer(action: &str) -> bool {
    let a = action.trim().to_lowercase();
    const EN: [&str; 6] = ["ask ", "ask,", "request ", "collect ", "confirm with", "find out"];
    EN.iter().any(|p| a.starts_with(p) || a.contains(&format!(" {p}")))
        || a.contains("ask the customer")
        || a.contains("询问")
        || a.contains("请用户")
        || a.starts_with("问")
}

/// The category of `guideline`, given whether it was applied before in the session and
/// whether it heads a disambiguation with at least two targets.
pub fn categorize(guideline: &MatchableGuideline, previously_applied: bool, disambiguation_head: bool) -> Category {
    if guideline.is_observation() {
        return if disambiguation_head { Category::Disambiguation } else { Category::Observational };
    }
    if previously_applied && guideline.track {
        return if guideline.customer_dependent {
            Category::PreviouslyAppliedCustomerDependent
        } else {
            Category::PreviouslyApplied
        };
    }
    if guideline.criticality == Criticality::Low {
        return Category::LowCriticality;
    }
    Category::Actionable
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::GuidelineOrigin;

    fn g(action: Option<&str>, criticality: Criticality) -> MatchableGuideline {
        MatchableGuideline {
            id: "g".into(),
            condition: "c".into(),
            action: action.map(String::from),
            description: None,
            criticality,
            priority: 0,
            track: true,
            tools: vec![],
            examples: vec![],
            tags: vec![],
            journey: None,
            origin: GuidelineOrigin::Definition,
            customer_dependent: action.is_some_and(asks_customer),
        }
    }

    #[test]
    fn routes_by_shape_and_history() {
        assert_eq!(categorize(&g(None, Criticality::Medium), false, false), Category::Observational);
        assert_eq!(categorize(&g(None, Criticality::Medium), false, true), Category::Disambiguation);
        assert_eq!(categorize(&g(Some("Explain"), Criticality::Medium), false, false), Category::Actionable);
        assert_eq!(categorize(&g(Some("Explain"), Criticality::Low), false, false), Category::LowCriticality);
        assert_eq!(categorize(&g(Some("Explain"), Criticality::Low), true, false), Category::PreviouslyApplied);
        assert_eq!(
            categorize(&g(Some("Ask for the order number"), Criticality::High), true, false),
            Category::PreviouslyAppliedCustomerDependent
        );
    }

    #[test]
    fn customer_dependence_heuristic() {
        assert!(asks_customer("Ask the customer for their order number"));
        assert!(asks_customer("Politely ask for the recipient name"));
        assert!(asks_customer("友好地询问用户想查询哪个城市的天气"));
        assert!(!asks_customer("Explain our refund policy"));
    }
}
