//! Which guidelines new tool results can change: after tools ran, the preparation loop checks
//! these again (besides those linked to the tool by a `reevaluation` relationship), so a
//! condition such as "the customer's balance exceeds $10,000" can hold as soon as a lookup
//! returned the balance, without any configuration.
//!
//! A condition is related to a result when they share a content term: a word stem (the
//! customer-and-agent vocabulary every condition uses left out) or, for scripts written
//! without spaces, a two-character sequence. Only what the tool returned counts, not what it
//! was asked: `{"city": "Paris", "temperature": 31}` for a lookup of Paris relates "the
//! temperature is above 30 degrees", not "the city the customer named is unclear".

use std::collections::BTreeSet;

use crate::context::StagedToolResult;

/// Words every condition or tool uses whatever its subject: sharing one says nothing about
/// whether a result bears on a condition.
const COMMON: &[&str] = &[
    "a",
    "about",
    "after",
    "again",
    "all",
    "already",
    "also",
    "an",
    "and",
    "any",
    "are",
    "as",
    "ask",
    "asked",
    "asking",
    "asks",
    "assistant",
    "at",
    "be",
    "been",
    "before",
    "being",
    "but",
    "by",
    "can",
    "check",
    "checks",
    "client",
    "conversation",
    "could",
    "customer",
    "customers",
    "data",
    "did",
    "do",
    "does",
    "done",
    "each",
    "else",
    "error",
    "fetch",
    "fetches",
    "find",
    "finds",
    "for",
    "from",
    "gave",
    "get",
    "gets",
    "give",
    "given",
    "gives",
    "has",
    "have",
    "having",
    "he",
    "her",
    "his",
    "how",
    "i",
    "id",
    "if",
    "in",
    "information",
    "into",
    "is",
    "it",
    "its",
    "just",
    "know",
    "known",
    "list",
    "lists",
    "look",
    "looks",
    "lookup",
    "make",
    "may",
    "me",
    "mention",
    "mentioned",
    "mentions",
    "message",
    "more",
    "most",
    "must",
    "my",
    "name",
    "need",
    "needs",
    "new",
    "no",
    "not",
    "now",
    "of",
    "on",
    "one",
    "only",
    "or",
    "other",
    "our",
    "out",
    "over",
    "please",
    "provide",
    "provided",
    "provides",
    "query",
    "request",
    "requested",
    "requests",
    "result",
    "results",
    "retrieve",
    "retrieves",
    "return",
    "returned",
    "returns",
    "said",
    "say",
    "says",
    "search",
    "searches",
    "she",
    "should",
    "so",
    "some",
    "something",
    "such",
    "tell",
    "tells",
    "than",
    "that",
    "the",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "to",
    "tool",
    "true",
    "false",
    "null",
    "up",
    "us",
    "use",
    "used",
    "user",
    "uses",
    "value",
    "want",
    "wants",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "whether",
    "which",
    "who",
    "why",
    "will",
    "with",
    "would",
    "yes",
    "you",
    "your",
];

/// Characters of tool facts read per result: enough for every key and short value of a
/// typical lookup, bounded for the rare tool that returns a document.
const FACTS_BUDGET: usize = 8_000;

/// The content terms of `text`: word stems of at least three letters outside the common
/// vocabulary, and two-character sequences of runs in scripts written without spaces.
pub(crate) fn terms(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut word = String::new();
    let mut run: Vec<char> = Vec::new();
    let mut previous_lower = false;
    let flush_word = |word: &mut String, out: &mut BTreeSet<String>| {
        if !word.is_empty() {
            let lower = word.to_lowercase();
            if lower.chars().count() >= 3
                && !lower.chars().all(|c| c.is_ascii_digit())
                && !COMMON.contains(&lower.as_str())
            {
                out.insert(stem(&lower));
            }
            word.clear();
        }
    };
    let flush_run = |run: &mut Vec<char>, out: &mut BTreeSet<String>| {
        match run.len() {
            0 => {}
            1 => {
                out.insert(run[0].to_string());
            }
            _ => {
                for pair in run.windows(2) {
                    out.insert(pair.iter().collect());
                }
            }
        }
        run.clear();
    };
    for c in text.chars() {
        if unspaced(c) {
            flush_word(&mut word, &mut out);
            run.push(c);
            previous_lower = false;
        } else if c.is_alphanumeric() {
            flush_run(&mut run, &mut out);
            // camelCase names split into their words.
            if c.is_uppercase() && previous_lower {
                flush_word(&mut word, &mut out);
            }
            word.push(c);
            previous_lower = c.is_lowercase();
        } else {
            flush_word(&mut word, &mut out);
            flush_run(&mut run, &mut out);
            previous_lower = false;
        }
    }
    flush_word(&mut word, &mut out);
    flush_run(&mut run, &mut out);
    out
}

/// Whether `c` belongs to a script written without spaces between words (CJK, kana,
/// Thai and similar), where words are matched by character pairs.
pub fn unspaced(c: char) -> bool {
    is_han(c)
        || matches!(c as u32,
            0x0E00..=0x0EFF      // Thai, Lao
            | 0x1000..=0x109F    // Myanmar
            | 0x1780..=0x17FF    // Khmer
            | 0x3040..=0x30FF) // Hiragana, Katakana
}

/// Whether `c` is a Han character (CJK unified and compatibility ideographs, extensions).
pub(crate) fn is_han(c: char) -> bool {
    matches!(c as u32, 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2FA1F)
}

/// A light stem: common inflections and derivations removed, a doubled final consonant
/// undoubled ("shipped" and "shipping" give "ship"), then the first six characters, so
/// "balance" and "balances", "member" and "membership" meet.
fn stem(word: &str) -> String {
    const SUFFIXES: &[(&str, &str)] = &[
        ("ations", ""),
        ("ation", ""),
        ("ments", ""),
        ("ment", ""),
        ("ship", ""),
        ("ings", ""),
        ("ing", ""),
        ("ies", "y"),
        ("ied", "y"),
        ("'s", ""),
        ("es", ""),
        ("ed", ""),
        ("s", ""),
        ("e", ""),
    ];
    let mut w = word.to_string();
    for (suffix, replacement) in SUFFIXES {
        if let Some(base) = w.strip_suffix(suffix)
            && base.chars().count() >= 3
        {
            w = format!("{base}{replacement}");
            let chars: Vec<char> = w.chars().collect();
            if let [.., a, b] = chars.as_slice()
                && a == b
                && !matches!(a, 'a' | 'e' | 'i' | 'o' | 'u' | 'l' | 's')
                && matches!(*suffix, "ed" | "ing" | "ings")
            {
                w.pop();
            }
            break;
        }
    }
    w.chars().take(6).collect()
}

/// The terms of what one tool call brought: the keys and text values of its result. The
/// tool's name, description, parameters and arguments are left out: they say what was asked
/// (a city, an account), which the conversation already holds and the first check read; a
/// field that only repeats an argument is left out for the same reason.
pub(crate) fn fact_terms(result: &StagedToolResult) -> BTreeSet<String> {
    let mut text = String::new();
    let echoed: Vec<&serde_json::Value> = match &result.arguments {
        serde_json::Value::Object(map) => map.values().filter(|v| !v.is_object() && !v.is_array()).collect(),
        _ => Vec::new(),
    };
    json_text(&result.result, &echoed, &mut text);
    terms(&text)
}

/// Keys and string values of `value`, one per line, within [`FACTS_BUDGET`]. A field whose
/// value repeats an argument (`{"city": "Paris"}` for a lookup of Paris) says nothing new
/// and is left out, key and all.
fn json_text(value: &serde_json::Value, echoed: &[&serde_json::Value], text: &mut String) {
    if text.len() >= FACTS_BUDGET {
        return;
    }
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                if text.len() >= FACTS_BUDGET {
                    return;
                }
                if echoed.contains(&v) {
                    continue;
                }
                text.push_str(k);
                text.push('\n');
                json_text(v, echoed, text);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| json_text(v, echoed, text)),
        serde_json::Value::String(s) => {
            let room = FACTS_BUDGET.saturating_sub(text.len());
            text.extend(s.chars().take(room));
            text.push('\n');
        }
        _ => {}
    }
}

/// Whether a condition (with its description) shares a content term with `facts`. A
/// condition about what the customer said ("The customer asks about shipping") is never
/// related: a lookup cannot change what was said, and the first check already judged it.
pub(crate) fn related(condition: &str, description: Option<&str>, facts: &BTreeSet<String>) -> bool {
    if about_the_customers_words(condition) {
        return false;
    }
    let mut own = terms(condition);
    if let Some(d) = description {
        own.extend(terms(d));
    }
    own.iter().any(|t| facts.contains(t))
}

/// Speech acts a condition can ascribe to the customer.
const SPEECH: &[&str] = &[
    "agrees",
    "answers",
    "asks",
    "complains",
    "confirms",
    "declines",
    "expresses",
    "gives",
    "greets",
    "inquires",
    "is asking",
    "mentions",
    "provided",
    "provides",
    "refuses",
    "replies",
    "reports",
    "requests",
    "says",
    "says that",
    "states",
    "thanks",
    "wants",
    "would like",
    "has asked",
    "has said",
    "has mentioned",
    "has provided",
    "has given",
    "has requested",
    "just said",
    "has just said",
];

/// Whether `condition` is about what the customer said or asked: "The customer asks ...",
/// "User wants ...", "顾客询问 ...".
fn about_the_customers_words(condition: &str) -> bool {
    let c = condition.trim().to_lowercase();
    let rest = c.strip_prefix("the ").unwrap_or(&c);
    let after_subject = ["customer ", "user ", "client ", "caller "].iter().find_map(|s| rest.strip_prefix(s));
    if let Some(after) = after_subject {
        return SPEECH.iter().any(|verb| after.strip_prefix(verb).is_some_and(|r| r.starts_with(' ')));
    }
    let after_subject = ["顾客", "客户", "用户", "客人"].iter().find_map(|s| c.strip_prefix(s));
    after_subject.is_some_and(|after| {
        [
            "问",
            "询问",
            "想",
            "要",
            "说",
            "提到",
            "请求",
            "要求",
            "表示",
            "打招呼",
            "感谢",
            "确认",
            "拒绝",
            "抱怨",
            "投诉",
        ]
        .iter()
        .any(|verb| after.starts_with(verb))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use guidepost_core::ToolId;

    fn staged(tool: &str, result: serde_json::Value) -> StagedToolResult {
        StagedToolResult { tool: ToolId::new("fixtures", tool), arguments: json!({}), result }
    }

    #[test]
    fn inflections_and_names_meet() {
        let facts = terms("getAccountBalances shipped_orders membership");
        for condition in [
            "The customer's balance exceeds $10,000",
            "The order has been shipping for a week",
            "The customer is a premium member",
            "The account is overdrawn",
        ] {
            assert!(facts.iter().any(|f| terms(condition).contains(f)), "{condition} vs {facts:?}");
        }
    }

    #[test]
    fn what_the_customer_said_is_not_changed_by_a_lookup() {
        let facts = terms("check_order_status status shipped carrier");
        assert!(!related("The customer asks about standard shipping questions", None, &facts));
        assert!(!related("User wants to change the shipping address", None, &facts));
        assert!(!related("顾客询问运输状态", None, &terms("运输状态 已发货")));
        assert!(related("The customer's order has shipped", None, &facts));
        assert!(related("The customer is waiting for a shipped order", None, &facts));
    }

    #[test]
    fn the_common_vocabulary_relates_nothing() {
        let facts = fact_terms(&staged("get_weather", json!({"city": "Paris", "temperature": 31})));
        assert!(!related("The customer asks to speak with a human", None, &facts), "{facts:?}");
        assert!(related("The temperature in the city is above 30 degrees", None, &facts));
    }

    #[test]
    fn unspaced_scripts_relate_by_character_pairs() {
        let facts = fact_terms(&staged("get_weather", json!({"城市": "北京", "天气": "暴雨", "气温": 18})));
        assert!(related("当天有暴雨", None, &facts), "{facts:?}");
        assert!(!related("顾客想投诉服务", None, &facts));
    }

    #[test]
    fn only_what_the_tool_returned_counts() {
        let mut result = staged("get_balance", json!({"balance": -40, "pickup": "Oak Street"}));
        result.arguments = json!({"pickup": "Oak Street", "account": "checking"});
        let facts = fact_terms(&result);
        assert!(related("The customer's balance is negative", None, &facts), "{facts:?}");
        // What the call was asked (an argument echoed back, the tool's own name) is not new.
        assert!(!related("The pickup address is vague", None, &facts), "{facts:?}");
        assert!(!related("The checking account is the customer's main account", None, &facts), "{facts:?}");
        assert!(!related("The customer wants to get something", None, &facts), "{facts:?}");
    }

    #[test]
    fn a_long_result_is_read_within_a_budget() {
        let long = "word ".repeat(10_000) + "needle";
        let facts = fact_terms(&staged("search", json!({"text": long})));
        assert!(!facts.contains("needl"));
    }
}
