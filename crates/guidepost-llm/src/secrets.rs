//! Secrets kept out of every error, trace and log line.
//!
//! Three kinds of secret can reach a text Guidepost shows or stores: the credentials the
//! process's environment holds (`OPENAI_API_KEY`, `*_TOKEN`, ...), credentials inside URLs
//! (`https://user:password@host`, `?api_key=...`), and key-shaped words a server echoed
//! (`sk-...`, `Bearer ...`). [`scrub`] removes all three; [`scrub_with`] also removes
//! secrets a caller knows about (a tool service's environment, say).
//!
//! ```
//! use guidepost_llm::secrets::scrub_with;
//!
//! let text = "GET https://api.example.com/v1?api_key=abcdef123456 failed: Bearer sk-0123456789abcdefghij";
//! let clean = scrub_with(text, &["abcdef123456".to_string()]);
//! assert!(!clean.contains("abcdef123456") && !clean.contains("0123456789abcdefghij"));
//! ```

use std::sync::OnceLock;

/// What a removed secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Environment variable name endings that mark a credential.
const CREDENTIAL_SUFFIXES: [&str; 5] = ["_KEY", "_KEYS", "_TOKEN", "_SECRET", "_PASSWORD"];

/// URL query parameters whose values are credentials.
const CREDENTIAL_PARAMS: [&str; 10] =
    ["api_key", "apikey", "api-key", "key", "token", "access_token", "secret", "password", "auth", "sig"];

/// Whether an environment variable (or a configured `env` entry) with this name holds a
/// credential: its name ends in `_KEY`, `_KEYS`, `_TOKEN`, `_SECRET` or `_PASSWORD`, or it
/// names an authorization.
pub fn is_credential_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    CREDENTIAL_SUFFIXES.iter().any(|s| upper.ends_with(s))
        || upper.contains("AUTHORIZATION")
        || upper == "TOKEN"
        || upper == "PASSWORD"
}

/// The values of the process's environment variables that hold credentials (see
/// [`is_credential_name`]; a comma- or newline-separated list and `role:key` entries give
/// each key), and passwords in database URLs. Values shorter than 8 characters are left
/// out: they would mangle ordinary words.
pub fn environment_secrets() -> Vec<String> {
    secrets_of(std::env::vars())
}

/// Like [`environment_secrets`], for these `(name, value)` pairs.
pub fn secrets_of(vars: impl IntoIterator<Item = (String, String)>) -> Vec<String> {
    let mut out = Vec::new();
    for (name, value) in vars {
        if is_credential_name(&name) {
            out.extend(value.split([',', '\n']).map(|v| v.rsplit(':').next().unwrap_or(v).trim().to_string()));
            out.push(value.trim().to_string());
            if let Some(token) = value.trim().strip_prefix("Bearer ") {
                out.push(token.trim().to_string());
            }
        }
        if name.to_ascii_uppercase().ends_with("DATABASE_URL")
            && let Some(password) = url_password(&value)
        {
            out.push(password.to_string());
        }
    }
    out.retain(|s| s.len() >= 8);
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

/// The credentials inside a URL: the password of its user information (or a long user
/// name alone, a token) and the values of its credential query parameters.
pub fn url_secrets(url: &str) -> Vec<String> {
    let mut out: Vec<String> = url_password(url).map(str::to_string).into_iter().collect();
    if let Some((_, rest)) = url.split_once("://")
        && let Some(authority) = rest.split(['/', '?', '#']).next()
        && let Some((user_info, _)) = authority.rsplit_once('@')
        && !user_info.contains(':')
        && user_info.len() >= 16
    {
        out.push(user_info.to_string());
    }
    if let Some((_, query)) = url.split_once('?') {
        let query = query.split('#').next().unwrap_or(query);
        for pair in query.split('&') {
            if let Some((name, value)) = pair.split_once('=')
                && CREDENTIAL_PARAMS.iter().any(|p| name.eq_ignore_ascii_case(p))
                && value.len() >= 8
            {
                out.push(value.to_string());
            }
        }
    }
    out
}

/// The password of a URL's user information (`scheme://user:password@host`).
fn url_password(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let (user_info, _) = authority.rsplit_once('@')?;
    user_info.split_once(':').map(|(_, p)| p).filter(|p| !p.is_empty())
}

/// The environment's secrets, read once (the first time a text is scrubbed).
fn cached_environment_secrets() -> &'static [String] {
    static SECRETS: OnceLock<Vec<String>> = OnceLock::new();
    SECRETS.get_or_init(environment_secrets)
}

/// `text` without the environment's credentials, URL credentials or key-shaped words.
pub fn scrub(text: &str) -> String {
    scrub_with(text, &[])
}

/// Like [`scrub`], also removing `known` secrets (each at least 8 characters long; shorter
/// ones are ignored).
pub fn scrub_with(text: &str, known: &[String]) -> String {
    let mut out = scrub_urls(text);
    for secret in known.iter().chain(cached_environment_secrets()) {
        if secret.len() >= 8 && out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), REDACTED);
        }
    }
    redact(&out, None)
}

/// `value` with every string in it scrubbed as [`scrub_with`] does, in place: tool-call
/// arguments and tool results, which can carry what a customer pasted, a model copied or a
/// tool service echoed, before they reach an event, a trace or a log. Walks the value
/// without recursion, so a deeply nested result costs no stack.
pub fn scrub_json(value: &mut serde_json::Value, known: &[String]) {
    use serde_json::Value;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::String(text) => {
                let clean = scrub_with(text, known);
                if clean != *text {
                    *text = clean;
                }
            }
            Value::Array(items) => pending.extend(items.iter_mut()),
            Value::Object(fields) => pending.extend(fields.values_mut()),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

/// `text` with the passwords of URLs' user information and the values of credential query
/// parameters replaced.
pub fn scrub_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let end =
            after.find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`')).unwrap_or(after.len());
        let (url, tail) = after.split_at(end);
        out.push_str(&scrub_one_url(url));
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// One URL (after its `scheme://`) with its credentials replaced.
fn scrub_one_url(url: &str) -> String {
    let authority_end = url.find(['/', '?', '#']).unwrap_or(url.len());
    let (authority, path) = url.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _)) => format!("{user}:{REDACTED}@{host}"),
            // A long user name alone is a token (`https://<token>@host`).
            None if user_info.len() >= 16 => format!("{REDACTED}@{host}"),
            None => authority.to_string(),
        },
        None => authority.to_string(),
    };
    let Some((path, query)) = path.split_once('?') else { return format!("{authority}{path}") };
    let (query, fragment) = match query.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (query, None),
    };
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, value))
                if !value.is_empty() && CREDENTIAL_PARAMS.iter().any(|p| name.eq_ignore_ascii_case(p)) =>
            {
                format!("{name}={REDACTED}")
            }
            _ => pair.to_string(),
        })
        .collect();
    let mut out = format!("{authority}{path}?{}", pairs.join("&"));
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

/// Prefixes of provider keys: OpenAI (`sk-`, `sk-proj-`), Anthropic (`sk-ant-`), and
/// bearer tokens in echoed headers.
const KEY_PREFIXES: [&str; 3] = ["sk-", "Bearer ", "bearer "];

/// `text` with `secret` and key-shaped words (a known prefix followed by at least 16 key
/// characters) replaced by `[redacted]`.
pub fn redact(text: &str, secret: Option<&str>) -> String {
    let mut out = match secret.map(str::trim).filter(|s| s.len() >= 8) {
        Some(secret) => text.replace(secret, REDACTED),
        None => text.to_string(),
    };
    let is_key_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    for prefix in KEY_PREFIXES {
        let mut result = String::with_capacity(out.len());
        let mut rest = out.as_str();
        while let Some(at) = rest.find(prefix) {
            let after = &rest[at + prefix.len()..];
            let key_len = after.find(|c: char| !is_key_char(c)).unwrap_or(after.len());
            result.push_str(&rest[..at + prefix.len()]);
            if key_len >= 16 {
                result.push_str(REDACTED);
            } else {
                result.push_str(&after[..key_len]);
            }
            rest = &after[key_len..];
        }
        result.push_str(rest);
        out = result;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_credentials_go() {
        assert_eq!(
            scrub_urls("GET https://me:hunter22@api.example.com/x?api_key=abc&page=2#top failed"),
            "GET https://me:[redacted]@api.example.com/x?api_key=[redacted]&page=2#top failed"
        );
        assert_eq!(scrub_urls("see http://example.com/a?b=c."), "see http://example.com/a?b=c.");
        assert_eq!(scrub_urls("https://ghp_0123456789abcdef@github.com/x"), "https://[redacted]@github.com/x");
        assert_eq!(scrub_urls("ssh://git@github.com/x"), "ssh://git@github.com/x");
        assert_eq!(scrub_urls("no url here"), "no url here");
        assert_eq!(
            url_secrets("https://me:hunter22@h/x?token=0123456789&page=2"),
            ["hunter22".to_string(), "0123456789".to_string()]
        );
        assert_eq!(scrub_urls("odd ://@:?&= end"), "odd ://@:?&= end");
    }

    #[test]
    fn every_string_of_a_json_value_is_scrubbed() {
        let known = ["planted-secret-0123".to_string()];
        let mut value = serde_json::json!({
            "query": "key planted-secret-0123 please",
            "nested": [{"url": "https://me:hunter22@h/x"}, 42, null, ["Bearer sk-0123456789abcdefghij"]],
            "plain": "nothing here",
        });
        scrub_json(&mut value, &known);
        let text = value.to_string();
        for secret in ["planted-secret-0123", "hunter22", "0123456789abcdefghij"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert_eq!(value["plain"], "nothing here");
        assert_eq!(value["nested"][1], 42);
        // Deep nesting costs no stack.
        let mut deep = serde_json::json!("sk-0123456789abcdefghij");
        for _ in 0..100_000 {
            deep = serde_json::Value::Array(vec![deep]);
        }
        scrub_json(&mut deep, &[]);
        let mut inner = &deep;
        while let Some(next) = inner.get(0) {
            inner = next;
        }
        assert_eq!(inner, "sk-[redacted]");
        // serde_json drops a value recursively; this one is leaked instead.
        std::mem::forget(deep);
    }

    #[test]
    fn credential_variables_give_their_values() {
        let vars = [
            ("OPENAI_API_KEY", "sk-planted-0123456789"),
            ("GUIDEPOST_API_KEYS", "admin:aaaaaaaaaaaaaaaa,client:cccccccccccccccc"),
            ("SERVICE_AUTHORIZATION", "Bearer tok-0123456789"),
            ("DATABASE_URL", "postgres://me:dbpassword1@host/db"),
            ("HOME", "/root/some/long/path"),
            ("SHORT_TOKEN", "tiny"),
        ];
        let secrets = secrets_of(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        for expected in
            ["sk-planted-0123456789", "aaaaaaaaaaaaaaaa", "cccccccccccccccc", "tok-0123456789", "dbpassword1"]
        {
            assert!(secrets.iter().any(|s| s == expected), "{expected} in {secrets:?}");
        }
        assert!(!secrets.iter().any(|s| s.contains("/root") || s == "tiny"), "{secrets:?}");
        let text = "401: Bearer tok-0123456789 for admin:aaaaaaaaaaaaaaaa";
        let clean = scrub_with(text, &secrets);
        assert!(!clean.contains("tok-0123456789") && !clean.contains("aaaaaaaaaaaaaaaa"), "{clean}");
    }
}
