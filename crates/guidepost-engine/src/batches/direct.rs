//! Direct checks: one boolean per condition, keyed by the condition itself, with no
//! reasoning fields.
//!
//! Small local models judge conditions far better this way. Asked for a rationale first,
//! they restate the condition as if it held ("The customer corrected a detail, so ...")
//! and then follow their own restatement: every guideline "applies" to "Hi, I need a
//! taxi". Asked for the bare verdicts, with each condition spelled out as the key, they
//! tell the conditions apart. The answer is also a fraction of the tokens.

use std::collections::BTreeMap;

use super::{LocalVerdict, boolean_keys_schema, key_number};
use crate::prompt::PromptItem;

/// The schema name of a direct-check answer.
pub const SCHEMA_NAME: &str = "DirectChecks";

/// The answer key of `item`: `"[3] The customer asks about refunds"`.
pub fn key(item: &PromptItem) -> String {
    format!("[{}] {}", item.id, item.condition)
}

/// The answer schema for `items`: one required boolean per item, in order.
pub fn answer_schema(items: &[PromptItem]) -> serde_json::Value {
    boolean_keys_schema(&items.iter().map(key).collect::<Vec<_>>())
}

/// The verdicts of an answer. Keys that name no local id (`[n]` prefix missing) are skipped.
pub fn verdicts(answer: BTreeMap<String, bool>) -> Vec<LocalVerdict> {
    let mut verdicts: Vec<(usize, LocalVerdict)> = answer
        .into_iter()
        .filter_map(|(key, applies)| {
            let id = key_number(&key)?.to_string();
            let order = id.parse::<usize>().ok()?;
            Some((order, LocalVerdict { id, applies, rationale: None, probability: None }))
        })
        .collect();
    verdicts.sort_by_key(|(order, _)| *order);
    verdicts.into_iter().map(|(_, v)| v).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn item(id: &str, condition: &str) -> PromptItem {
        PromptItem::statement(id, condition)
    }

    #[test]
    fn schema_requires_one_boolean_per_condition_in_order() {
        let schema = answer_schema(&[item("1", "The customer greets"), item("2", "The customer asks about refunds")]);
        let keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["[1] The customer greets", "[2] The customer asks about refunds"]);
        assert_eq!(schema["required"], json!(["[1] The customer greets", "[2] The customer asks about refunds"]));
        assert_eq!(schema["additionalProperties"], json!(false));
    }

    #[test]
    fn verdicts_read_the_local_id_from_each_key() {
        let answer: BTreeMap<String, bool> = serde_json::from_value(json!({
            "[10] Tenth": true, "[2] Second": false, "no id": true, "[x] Not a number": true
        }))
        .unwrap();
        let verdicts = verdicts(answer);
        let got: Vec<(&str, bool)> = verdicts.iter().map(|v| (v.id.as_str(), v.applies)).collect();
        assert_eq!(got, [("2", false), ("10", true)]);
        assert!(verdicts.iter().all(|v| v.rationale.is_none()));
    }
}
