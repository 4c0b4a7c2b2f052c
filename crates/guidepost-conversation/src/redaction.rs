//! [`Redactor`]: the secrets a deployment knows (its API keys, its providers' credentials)
//! taken out of everything that leaves the service.
//!
//! Everything a turn writes passes here once, on its way to the store: each event its sink
//! stores or holds back (live progress and streamed replies included), the events that
//! close a turn that did not run, the turn's trace and its error, and the error of an
//! utterance. The runtime already scrubs what looks like a secret (key-shaped words,
//! credentials in URLs; see [`guidepost_llm::secrets`]); this removes the exact values the
//! deployment was configured with, wherever they are echoed.
//!
//! ```
//! use guidepost_conversation::redaction::Redactor;
//!
//! let redactor = Redactor::new(["sk-planted-0123456789".to_string()]);
//! let mut data = serde_json::json!({"exception": "401: key sk-planted-0123456789 refused"});
//! redactor.json(&mut data);
//! assert_eq!(data["exception"], "401: key *** refused");
//! ```

use serde_json::Value;

/// What a removed secret is replaced with.
pub const MASK: &str = "***";

/// Secrets shorter than this are ignored: they would mangle ordinary words.
pub const MIN_SECRET_LEN: usize = 8;

/// Known secrets, each replaced by [`MASK`] wherever it appears.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret that contains another is masked whole.
    secrets: Vec<String>,
}

impl Redactor {
    /// No secrets.
    pub const fn empty() -> Self {
        Self { secrets: Vec::new() }
    }

    /// These secrets (short ones are ignored).
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut redactor = Self::empty();
        redactor.extend(secrets);
        redactor
    }

    /// Adds these secrets (short ones are ignored).
    pub fn extend(&mut self, secrets: impl IntoIterator<Item = String>) {
        self.secrets.extend(secrets.into_iter().filter(|s| s.len() >= MIN_SECRET_LEN));
        self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        self.secrets.dedup();
    }

    /// Whether there is anything to redact.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every secret replaced.
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        self.mask(&mut out);
        out
    }

    /// Replaces every secret in `text`, in place.
    pub fn mask(&self, text: &mut String) {
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                *text = text.replace(secret.as_str(), MASK);
            }
        }
    }

    /// Replaces every secret in `value`'s strings and object keys, in place. Walks the value
    /// without recursion, so a deeply nested tool result costs no stack.
    pub fn json(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        let mut pending = vec![value];
        while let Some(value) = pending.pop() {
            match value {
                Value::String(text) => self.mask(text),
                Value::Array(items) => pending.extend(items.iter_mut()),
                Value::Object(fields) => {
                    if fields.keys().any(|k| self.secrets.iter().any(|s| k.contains(s.as_str()))) {
                        let taken = std::mem::take(fields);
                        *fields = taken.into_iter().map(|(k, v)| (self.text(&k), v)).collect();
                    }
                    pending.extend(fields.values_mut());
                }
                Value::Null | Value::Bool(_) | Value::Number(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_secrets_are_masked_short_ones_ignored() {
        let r = Redactor::new(["sk-planted-0123456789".to_string(), "tiny".to_string()]);
        assert_eq!(r.text("Incorrect API key provided: sk-planted-0123456789."), "Incorrect API key provided: ***.");
        assert_eq!(r.text("a tiny word"), "a tiny word");
        assert!(Redactor::new(["tiny".to_string()]).is_empty());
    }

    #[test]
    fn a_longer_secret_that_holds_a_shorter_one_is_masked_whole() {
        let r = Redactor::new(["abcdefgh".to_string(), "abcdefgh-ijklmnop".to_string()]);
        assert_eq!(r.text("key abcdefgh-ijklmnop and abcdefgh"), "key *** and ***");
    }

    #[test]
    fn every_string_and_key_of_a_value_is_masked_in_place() {
        let r = Redactor::new(["gp-planted-admin-4d8e1b6a0c".to_string()]);
        let mut value = json!({
            "message": "your key is gp-planted-admin-4d8e1b6a0c",
            "tool_calls": [{"arguments": {"gp-planted-admin-4d8e1b6a0c": ["x gp-planted-admin-4d8e1b6a0c y", 3, null]}}],
            "plain": "nothing here",
        });
        r.json(&mut value);
        assert!(!value.to_string().contains("gp-planted-admin"), "{value}");
        assert_eq!(value["tool_calls"][0]["arguments"]["***"][0], "x *** y");
        assert_eq!(value["plain"], "nothing here");
        // Deep nesting costs no stack.
        let mut deep = json!("gp-planted-admin-4d8e1b6a0c");
        for _ in 0..100_000 {
            deep = Value::Array(vec![deep]);
        }
        r.json(&mut deep);
        let mut inner = &deep;
        while let Some(next) = inner.get(0) {
            inner = next;
        }
        assert_eq!(inner, "***");
        // serde_json drops a value recursively; this one is leaked instead.
        std::mem::forget(deep);
    }
}
