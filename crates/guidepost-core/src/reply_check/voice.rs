//! Whose voice a reply is in: the agent's, or the customer's.
//!
//! A model that continues a conversation from the wrong side writes the customer's next
//! message instead of the agent's: it restates the customer's request ("Hello, I want to
//! check tomorrow's weather in Paris"), or talks about the customer's things as its own ("I
//! have $15,000 in my account"). Both are told from the words alone.

use std::collections::BTreeSet;

/// The letters and digits of a text, lowercased: what two texts share when spacing and
/// punctuation are ignored.
pub(super) fn letters(text: &str) -> String {
    text.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

/// Words too common to show that two texts talk about the same thing.
const STOPWORDS: &[&str] = &[
    "the", "and", "is", "are", "you", "your", "to", "of", "in", "for", "it", "what", "with", "can", "this", "that",
    "please", "would", "will", "have", "not", "do", "my", "me", "be", "we", "our", "hi", "hello", "hey", "how",
    "about", "there", "want", "like", "need", "know", "tell", "could", "which", "when", "where", "yes", "no", "thanks",
    "thank",
];

/// The content units of a text: Latin words of three letters or more (not stopwords), and
/// pairs of adjacent characters in scripts written without spaces.
pub(super) fn content_units(text: &str) -> BTreeSet<String> {
    let mut units = BTreeSet::new();
    let lower = text.to_lowercase();
    for word in lower.split(|c: char| !c.is_alphanumeric()) {
        let latin: String = word.chars().filter(char::is_ascii_alphanumeric).collect();
        if latin.chars().count() >= 3 && !STOPWORDS.contains(&latin.as_str()) {
            units.insert(latin);
        }
        let dense: Vec<char> = word.chars().filter(|c| is_dense_script(*c)).collect();
        for pair in dense.windows(2) {
            units.insert(pair.iter().collect());
        }
    }
    units
}

pub(super) fn is_dense_script(c: char) -> bool {
    matches!(c, '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}' | '\u{3040}'..='\u{30FF}' | '\u{AC00}'..='\u{D7AF}' | '\u{0E00}'..='\u{0E7F}')
}

/// The share of `customer`'s content units that `reply` repeats (0 when the customer's
/// message has fewer than two).
pub(super) fn overlap(reply: &str, customer: &str) -> f64 {
    let theirs = content_units(customer);
    if theirs.len() < 2 {
        return 0.0;
    }
    let ours = content_units(reply);
    theirs.intersection(&ours).count() as f64 / theirs.len() as f64
}

/// First-person requests to be told or shown something: the customer's part of a
/// conversation. With `true`, an agent never opens its reply with it ("I want to know the
/// weather in Paris"); with `false`, an agent may ("I'd like to check your order number"),
/// so it counts only in a reply that also repeats what the customer just asked.
/// Matched at word starts, case-insensitively.
const REQUESTS: &[(&str, bool)] = &[
    ("i want to know", true),
    ("i want to check", true),
    ("i want to find out", true),
    ("i want to look up", true),
    ("i want to ask", true),
    ("i'd like to know", true),
    ("i would like to know", true),
    ("i'd like to find out", true),
    ("i would like to find out", true),
    ("i need to know", false),
    ("i'd like to check", false),
    ("i would like to check", false),
    ("i'm looking for", true),
    ("i am looking for", true),
    ("我想查询", true),
    ("我想查一下", true),
    ("我想查", true),
    ("我想知道", true),
    ("我想了解", true),
    ("我想问", true),
    ("我要查", true),
    ("帮我查", true),
    ("我需要知道", false),
];

fn find_phrase(lower: &str, phrase: &str) -> Option<usize> {
    lower.match_indices(phrase).map(|(i, _)| i).find(|&i| {
        phrase.chars().next().is_some_and(|c| !c.is_ascii_alphabetic())
            || lower[..i].chars().next_back().is_none_or(|c| !c.is_alphanumeric())
    })
}

/// The request phrase that puts `reply` in the customer's voice, if any: a first-person
/// request that opens the reply (after a greeting), or one anywhere in a reply that repeats
/// at least half of what the customer just asked.
pub(super) fn customer_request(reply: &str, last_customer: Option<&str>) -> Option<String> {
    let lower = reply.to_lowercase();
    let opening_end = lower
        .char_indices()
        .filter(|(_, c)| matches!(c, '.' | '!' | '?' | '。' | '！' | '？' | '\n'))
        .map(|(i, _)| i)
        .find(|&i| !is_greeting(&lower[..i]))
        .unwrap_or(lower.len());
    for (phrase, never_opens) in REQUESTS {
        let Some(at) = find_phrase(&lower, phrase) else { continue };
        let opens = at <= opening_end && is_greeting(&lower[..at]);
        if (*never_opens && opens) || last_customer.is_some_and(|c| overlap(reply, c) >= 0.5) {
            return Some((*phrase).to_string());
        }
    }
    None
}

/// A sentence of the customer's latest message, in the first person, that the reply repeats
/// word for word ("Hello! I need a taxi. Can you give me the pickup address?" after "Hello,
/// I need a taxi."): an agent answers such a sentence, it does not say it.
pub(super) fn restated_sentence(reply: &str, last_customer: Option<&str>) -> Option<String> {
    let reply_letters = letters(reply);
    let customer = last_customer?;
    customer
        .split(['.', '!', '?', '。', '！', '？', '\n', ',', '，'])
        .map(str::trim)
        .filter(|sentence| !is_greeting(&sentence.to_lowercase()))
        .find(|sentence| {
            let lower = sentence.to_lowercase();
            let first_person = lower.contains('我')
                || lower
                    .split(|c: char| !c.is_alphanumeric() && c != '\'')
                    .any(|w| matches!(w, "i" | "i'm" | "my" | "me"));
            let own = letters(sentence);
            let long_enough = own.chars().count() >= 8 || own.chars().filter(|c| is_dense_script(*c)).count() >= 4;
            first_person && long_enough && reply_letters.contains(&own)
        })
        .map(str::to_string)
}

/// Whether `prefix` is empty or only a greeting and punctuation ("Hello, ", "你好，").
pub(super) fn is_greeting(prefix: &str) -> bool {
    const GREETINGS: &[&str] = &["hi", "hello", "hey", "good morning", "good evening", "你好", "您好", "嗨", "bonjour"];
    let mut rest = prefix.trim_matches(|c: char| !c.is_alphanumeric());
    for g in GREETINGS {
        if let Some(r) = rest.strip_prefix(g) {
            rest = r.trim_matches(|c: char| !c.is_alphanumeric());
            break;
        }
    }
    rest.is_empty()
}

/// `my <thing>` in the reply where the conversation calls the thing the customer's: the
/// customer said `my <thing>`, or the agent said `your <thing>` (and the Chinese forms).
pub(super) fn customer_possession(reply: &str, history: &[(String, String)]) -> Option<String> {
    let mut theirs = BTreeSet::new();
    for (speaker, text) in history {
        let markers: &[&str] = if speaker == "customer" { &["my ", "我的"] } else { &["your ", "你的", "您的"] };
        let lower = text.to_lowercase();
        for marker in markers {
            for (i, _) in lower.match_indices(marker) {
                if let Some(thing) = thing_after(&lower[i + marker.len()..]) {
                    theirs.insert(thing);
                }
            }
        }
    }
    let lower = reply.to_lowercase();
    for marker in ["my ", "我的"] {
        for (i, _) in lower.match_indices(marker) {
            let word_start = marker != "my " || lower[..i].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
            if let Some(thing) = thing_after(&lower[i + marker.len()..])
                && word_start
                && theirs.contains(&thing)
            {
                return Some(format!("{}{thing}", marker));
            }
        }
    }
    None
}

/// The noun after a possessive: the next Latin word, or the next two characters of a dense
/// script.
fn thing_after(rest: &str) -> Option<String> {
    let first = rest.chars().next()?;
    if is_dense_script(first) {
        let pair: String = rest.chars().take_while(|c| is_dense_script(*c)).take(2).collect();
        return (pair.chars().count() == 2).then_some(pair);
    }
    let word: String = rest.chars().take_while(|c| c.is_alphanumeric()).collect();
    (word.chars().count() >= 3).then_some(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(s, t)| (s.to_string(), t.to_string())).collect()
    }

    #[test]
    fn a_reply_that_asks_what_the_customer_asked_is_in_their_voice() {
        let customer = "Hi, what is the weather in Paris tomorrow?";
        assert_eq!(customer_request("你好，我想查询巴黎明天的天气。", Some(customer)).as_deref(), Some("我想查询"));
        assert_eq!(
            customer_request("Hello! I want to know the weather in Paris tomorrow.", Some(customer)).as_deref(),
            Some("i want to know")
        );
        assert!(customer_request("Could you tell me which city you mean?", Some(customer)).is_none());
        assert!(customer_request("请问您想查询哪个城市的天气？", Some("我想查天气")).is_none());
        assert!(customer_request("Tomorrow in Paris: 18°C and sunny.", Some(customer)).is_none());
    }

    #[test]
    fn a_reply_repeating_the_customers_own_sentence_is_in_their_voice() {
        let customer = "Hello, I need a taxi.";
        assert_eq!(
            restated_sentence(
                "Hello! I need a taxi. Can you please provide me with the pickup address?",
                Some(customer)
            )
            .as_deref(),
            Some("I need a taxi")
        );
        let customer = "Nice. Which fund should I put that money in?";
        assert!(
            restated_sentence("Your balance is 15000 USD. Which fund should I put that money in?", Some(customer))
                .is_some()
        );
        assert!(restated_sentence("帮我查一下上海的天气，谢谢", None).is_none());
        assert!(restated_sentence("好的，我来查上海。", Some("我想知道上海的天气")).is_none());
        assert_eq!(
            restated_sentence("我想知道上海的天气。", Some("你好！我想知道上海的天气")).as_deref(),
            Some("我想知道上海的天气")
        );
        // Repeating a detail the customer gave is not speaking for them.
        assert!(
            restated_sentence(
                "Pickup at 12 Oak Street, to the central station. Correct?",
                Some("To the central station.")
            )
            .is_none()
        );
        assert!(restated_sentence("Hello! How can I help?", Some("Hello")).is_none());
    }

    #[test]
    fn the_customers_things_are_not_the_agents() {
        let history = h(&[("customer", "What's my balance?"), ("agent", "Your balance is $15,000.")]);
        assert_eq!(
            customer_possession("I have $15,000 in my balance, should I invest?", &history).as_deref(),
            Some("my balance")
        );
        assert!(customer_possession("Let me ask my colleague.", &history).is_none());
    }
}
