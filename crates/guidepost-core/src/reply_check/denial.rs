//! Replies that deny what a tool has just returned.
//!
//! A small model that saw a failed lookup earlier in the conversation often keeps apologising
//! after the next lookup succeeds ("Sorry, I can't get Beijing's weather" right under a tool
//! result with Beijing's weather). Such a reply says it cannot help or has no data, while every
//! tool call of the turn succeeded with data, and repeats none of that data.

use serde_json::Value;

/// Phrases that say the agent cannot help or has nothing to tell, lowercased, by language.
const INABILITY: &[&str] = &[
    // English
    "unable to",
    "can't",
    "can’t",
    "cannot",
    "can not",
    "couldn't",
    "couldn’t",
    "could not",
    "not able to",
    "don't have",
    "don’t have",
    "do not have",
    "no information",
    "no data",
    "not available",
    "unavailable",
    // Chinese
    "无法",
    "不能",
    "没法",
    "没办法",
    "查不到",
    "找不到",
    "暂时没有",
    "没有该",
    "没有这个",
    "不支持",
    // French, German, Spanish, Portuguese, Japanese
    "impossible de",
    "je ne peux pas",
    "pas disponible",
    "kann ich nicht",
    "nicht verfügbar",
    "keine daten",
    "no puedo",
    "no está disponible",
    "não consigo",
    "não está disponível",
    "できません",
    "ありません",
];

/// Words that say something went wrong, beside [`INABILITY`], lowercased, by language. An
/// apology alone is not one ("Sorry for the wait, all is well" claims success), nor is a bare
/// "problem" ("no problem").
const FAILURE: &[&str] = &[
    // English
    "failed",
    "went wrong",
    "an error",
    "error occurred",
    "a problem",
    "technical issue",
    "trouble",
    "try again",
    "unfortunately",
    "didn't work",
    "did not work",
    "not working",
    "none of",
    "wasn't able",
    "weren't able",
    // Chinese
    "失败",
    "出错",
    "错误",
    "故障",
    "异常",
    "出了问题",
    "出现问题",
    "稍后再试",
    // French, German, Spanish, Portuguese, Japanese
    "erreur",
    "un problème",
    "échoué",
    "malheureusement",
    "fehler",
    "leider",
    "kann ich gerade keine",
    "un problema",
    "desafortunadamente",
    "erro",
    "um problema",
    "infelizmente",
    "エラー",
    "失敗",
    "問題が発生",
];

/// Whether `reply` says that something could not be done or went wrong (an inability, an
/// apology, a failure), in the languages Guidepost's checks know.
pub(super) fn admits_failure(reply: &str) -> bool {
    let lower = reply.to_lowercase();
    INABILITY.iter().chain(FAILURE).any(|phrase| lower.contains(phrase))
}

/// Words in a result that say the lookup itself found nothing: a reply saying so is right.
const EMPTY_RESULT: &[&str] = &[
    "not_found",
    "not found",
    "notfound",
    "unavailable",
    "not available",
    "no_data",
    "no data",
    "none",
    "failed",
    "failure",
    "error",
    "closed",
    "sold_out",
    "sold out",
    "cancelled",
    "canceled",
    "denied",
    "rejected",
    "expired",
];

/// How deep into a result its values are read.
const MAX_DEPTH: usize = 32;

/// The phrase by which `reply` denies having data although every tool call of the turn
/// returned some (`turn`) and the reply tells none of it. What the customer just said (the
/// city asked about) is no sign the reply tells the data.
pub(super) fn denies(
    reply: &str,
    turn: &super::facts::TurnResults,
    last_customer: Option<&str>,
) -> Option<&'static str> {
    if turn.any_empty || turn.values.is_empty() {
        return None;
    }
    let phrase = inability(reply)?;
    let customer = last_customer.map(str::to_lowercase).unwrap_or_default();
    let told: Vec<String> = turn.values.iter().filter(|v| !customer.contains(&v.to_lowercase())).cloned().collect();
    (!told.is_empty() && !tells(reply, &told)).then_some(phrase)
}

/// The first phrase of `reply` that says the agent cannot help or has no data.
pub(super) fn inability(reply: &str) -> Option<&'static str> {
    let lower = reply.to_lowercase();
    INABILITY.iter().copied().find(|phrase| lower.contains(phrase))
}

/// What a successful tool result says, for telling whether a reply repeats any of it: its
/// numbers and its strings of two characters or more, `None` when the result itself reports
/// that nothing was found (an empty list, a `false` flag, a status such as `not_found`).
pub(super) fn result_values(result: &Value) -> Option<Vec<String>> {
    let data = result.get("data").unwrap_or(result);
    let mut values = Vec::new();
    let mut empty = false;
    walk(data, &mut values, &mut empty, 0);
    (!empty && !values.is_empty()).then_some(values)
}

fn walk(value: &Value, values: &mut Vec<String>, empty: &mut bool, depth: usize) {
    // A deeply nested result cannot exhaust the stack: what lies deeper is not read.
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::Null | Value::Bool(false) => *empty = true,
        Value::Bool(true) => {}
        Value::Number(n) => values.push(n.to_string()),
        Value::String(s) => {
            let lower = s.to_lowercase();
            if EMPTY_RESULT.iter().any(|w| lower == *w || lower.starts_with(&format!("{w} "))) {
                *empty = true;
            }
            if s.trim().chars().count() >= 2 {
                values.push(s.trim().to_string());
            }
        }
        Value::Array(items) if items.is_empty() => *empty = true,
        Value::Array(items) => items.iter().for_each(|v| walk(v, values, empty, depth + 1)),
        Value::Object(map) if map.is_empty() => *empty = true,
        Value::Object(map) => {
            for (key, v) in map {
                let key = key.to_lowercase();
                if matches!(key.as_str(), "error" | "errors") && !v.is_null() {
                    *empty = true;
                }
                walk(v, values, empty, depth + 1);
            }
        }
    }
}

/// Whether `reply` tells what a result holds: it repeats two of its `values`, or all of them
/// when there are fewer (naming the city asked about, which the result echoes, is not
/// telling its weather).
pub(super) fn tells(reply: &str, values: &[String]) -> bool {
    let lower = reply.to_lowercase();
    let mut distinct: Vec<String> = values.iter().map(|v| v.to_lowercase()).collect();
    distinct.sort();
    distinct.dedup();
    let told = distinct.iter().filter(|v| mentions(&lower, v)).count();
    told >= distinct.len().min(2)
}

/// Whether `lower` contains `value` (both lowercased); a number counts as itself, not as part
/// of a longer number (15 is not in 150).
fn mentions(lower: &str, value: &str) -> bool {
    if value.parse::<f64>().is_err() {
        return lower.contains(value);
    }
    lower.match_indices(value).any(|(at, _)| {
        let before = lower[..at].chars().next_back();
        let after = lower[at + value.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_digit()) && !after.is_some_and(|c| c.is_ascii_digit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_inability_in_several_languages() {
        assert_eq!(inability("对不起，我无法提供北京的天气信息。"), Some("无法"));
        assert_eq!(inability("Sorry, I can't look that up right now."), Some("can't"));
        assert_eq!(inability("Désolé, impossible de trouver cette ville."), Some("impossible de"));
        assert_eq!(inability("北京现在晴朗，15°C。"), None);
    }

    #[test]
    fn values_of_a_result_and_of_an_empty_one() {
        let weather = json!({"data": {"city": "北京", "temperature": 15, "condition": "晴朗"}});
        assert_eq!(result_values(&weather), Some(vec!["北京".into(), "15".into(), "晴朗".into()]));
        assert_eq!(result_values(&json!({"data": {"orders": []}})), None);
        assert_eq!(result_values(&json!({"data": {"status": "not_found", "order": "A1"}})), None);
        assert_eq!(result_values(&json!({"data": {"available": false, "day": "Monday"}})), None);
        assert_eq!(result_values(&json!({"data": {"ok": true}})), None);
    }

    #[test]
    fn telling_takes_two_values_and_numbers_match_whole() {
        let values: Vec<String> = ["北京", "15", "晴朗", "45"].iter().map(|v| v.to_string()).collect();
        assert!(tells("北京现在晴朗，气温15°C。", &values));
        assert!(!tells("抱歉，无法提供北京的天气。", &values));
        assert!(!tells("北京气温150°C，湿度450%", &values));
        assert!(tells("It is SHIPPED", &["shipped".to_string()]));
        assert!(tells("Beijing: 15", &["BEIJING".to_string(), "15".to_string()]));
    }
}
