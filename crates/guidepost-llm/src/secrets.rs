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
    // The password as sent: `p%40ss` in the URL is `p@ss` on the wire and in an echo.
    if let Some(password) = url_password(url)
        && password.contains('%')
    {
        out.push(unescape(password, "%", 2));
    }
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
/// ones are ignored), in the forms a server or a log can give them too: base64 (a `Basic`
/// authorization, or a fragment of a key), percent- or backslash-escaped, or spelled with a
/// space between its characters (see [`scrub_encoded`]).
pub fn scrub_with(text: &str, known: &[String]) -> String {
    let mut out = scrub_urls(text);
    let secrets: Vec<&str> =
        known.iter().chain(cached_environment_secrets()).map(String::as_str).filter(|s| s.len() >= 8).collect();
    for secret in &secrets {
        if out.contains(secret) {
            out = out.replace(secret, REDACTED);
        }
    }
    redact(&scrub_encoded(&out, &secrets), None)
}

/// How long a piece of a secret must be to count as a fragment of it.
const FRAGMENT: usize = 12;

/// Known secrets and every fragment of them ([`FRAGMENT`] bytes in a row), to look for in
/// decoded text in one pass.
struct Known<'a> {
    whole: &'a [&'a str],
    fragments: std::collections::HashSet<&'a [u8]>,
}

impl<'a> Known<'a> {
    fn new(secrets: &'a [&'a str]) -> Self {
        let fragments = secrets.iter().flat_map(|s| s.as_bytes().windows(FRAGMENT)).collect();
        Self { whole: secrets, fragments }
    }

    /// Whether `decoded` holds a known secret, a fragment of one or a key-shaped word.
    fn revealed_by(&self, decoded: &str) -> bool {
        if decoded.len() < 8 {
            return false;
        }
        self.whole.iter().any(|s| decoded.contains(s))
            || decoded.as_bytes().windows(FRAGMENT).any(|w| self.fragments.contains(w))
            || redact(decoded, None) != decoded
    }
}

/// The texts a token may stand for once decoded: base64 (standard or URL-safe, read from each
/// of the four positions a piece of a longer text can start at), percent escapes, and
/// backslash escapes (`\u0073`, `\x73`).
fn decodings(token: &str) -> Vec<String> {
    use base64::Engine as _;
    let mut out = Vec::new();
    let base64ish = token.len() >= 12
        && token.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_'));
    if base64ish {
        let body = token.trim_end_matches('=');
        for skip in 0..4.min(body.len()) {
            let piece = &body[skip..];
            let piece = &piece[..piece.len() - piece.len() % 4];
            for engine in
                [&base64::engine::general_purpose::STANDARD_NO_PAD, &base64::engine::general_purpose::URL_SAFE_NO_PAD]
            {
                if let Ok(bytes) = engine.decode(piece) {
                    out.push(String::from_utf8_lossy(&bytes).into_owned());
                }
            }
        }
    }
    if token.contains('%') {
        out.push(unescape(token, "%", 2));
    }
    if token.contains(r"\u") {
        out.push(unescape(token, r"\u", 4));
    }
    if token.contains(r"\x") {
        out.push(unescape(token, r"\x", 2));
    }
    out
}

/// `token` with every `marker` followed by `digits` hex digits decoded (`%2D` with `%` and 2,
/// `\u002d` with `\u` and 4, `\x2d` with `\x` and 2); what does not decode stays as it is.
fn unescape(token: &str, marker: &str, digits: usize) -> String {
    let mut bytes = Vec::with_capacity(token.len());
    let mut rest = token;
    while let Some(at) = rest.find(marker) {
        bytes.extend_from_slice(&rest.as_bytes()[..at]);
        let after = &rest[at + marker.len()..];
        let code = after.get(..digits).and_then(|hex| u32::from_str_radix(hex, 16).ok());
        match code {
            Some(code) if digits == 4 => {
                let mut buf = [0u8; 4];
                bytes.extend_from_slice(char::from_u32(code).unwrap_or('?').encode_utf8(&mut buf).as_bytes());
                rest = &after[digits..];
            }
            Some(code) => {
                bytes.push(u8::try_from(code).unwrap_or(b'?'));
                rest = &after[digits..];
            }
            None => {
                bytes.extend_from_slice(marker.as_bytes());
                rest = after;
            }
        }
    }
    bytes.extend_from_slice(rest.as_bytes());
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Whether `c` ends a token [`scrub_encoded`] looks at.
fn is_delimiter(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';' | '(' | ')' | '[' | ']' | '{' | '}' | '<' | '>' | '`')
}

/// `text` with every token that encodes one of `secrets` (or a key-shaped word) replaced, the
/// credentials of a `Basic` authorization always, and runs of single characters separated by
/// spaces that spell one out.
pub fn scrub_encoded(text: &str, secrets: &[&str]) -> String {
    let known = Known::new(secrets);
    let mut out = String::with_capacity(text.len());
    let mut basic_next = false;
    let mut rest = text;
    while !rest.is_empty() {
        let start = rest.find(|c: char| !is_delimiter(c)).unwrap_or(rest.len());
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let end = rest.find(is_delimiter).unwrap_or(rest.len());
        let token = &rest[..end];
        rest = &rest[end..];
        if token.is_empty() {
            continue;
        }
        let credentials = basic_next && token.len() >= 8;
        basic_next = token.eq_ignore_ascii_case("basic") || token.ends_with(":Basic") || token.ends_with(":basic");
        if credentials || decodings(token).iter().any(|d| known.revealed_by(d)) {
            out.push_str(REDACTED);
        } else {
            out.push_str(token);
        }
    }
    scrub_spaced(&out, &known)
}

/// `text` with runs of at least 8 single characters separated by single spaces ("s k - a b
/// c ...") replaced when, spaces removed, they spell a secret, a fragment of one or a
/// key-shaped word.
fn scrub_spaced(text: &str, known: &Known<'_>) -> String {
    let pieces: Vec<&str> = text.split(' ').collect();
    let single = |p: &str| p.chars().count() == 1;
    let mut out: Vec<String> = Vec::with_capacity(pieces.len());
    let mut i = 0;
    while i < pieces.len() {
        let run = pieces[i..].iter().take_while(|p| single(p)).count();
        if run >= 8 && known.revealed_by(&pieces[i..i + run].concat()) {
            out.push(REDACTED.to_string());
            i += run;
        } else {
            out.push(pieces[i].to_string());
            i += 1;
        }
    }
    out.join(" ")
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
    fn encoded_secrets_go_too() {
        use base64::Engine as _;
        let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
        let known = vec!["s3cr3t-pass-0123".to_string()];
        // A tool service that echoes the Basic authorization it got (user:password of its URL).
        let basic = format!("401: credentials Basic {} refused", b64("me:s3cr3t-pass-0123"));
        let clean = scrub_with(&basic, &known);
        assert!(clean.contains("Basic [redacted] refused"), "{clean}");
        // A Basic authorization is a secret even when nobody said which.
        assert_eq!(scrub_with("Authorization: Basic dXNlcjpwYXNzd29yZA==", &[]), "Authorization: Basic [redacted]");
        // A fragment of a key inside a longer base64 text, at every alignment.
        for prefix in ["", "x", "xy"] {
            let text = format!("blob {} end", b64(&format!("{prefix}key=s3cr3t-pass-0123&more")));
            assert_eq!(scrub_with(&text, &known), "blob [redacted] end", "{prefix}");
        }
        // Percent- and backslash-escaped, and spelled out with spaces.
        assert!(!scrub_with("url https://h/x?next=s3cr3t%2Dpass%2D0123", &known).contains("pass"));
        assert!(!scrub_with(r#"{"detail": "bad key s3cr3t-pass-0123"}"#, &known).contains("pass"));
        let spaced = "key was s 3 c r 3 t - p a s s - 0 1 2 3 (rejected)";
        assert_eq!(scrub_with(spaced, &known), "key was [redacted] (rejected)");
        // A key-shaped word spaced out, not known to anyone.
        assert!(scrub_with("s k - p r o j - A B C D E F G H I J K L M N O P Q R", &[]).contains(REDACTED));
        // Ordinary text is left alone.
        for text in ["Basic plan costs 10 dollars", "a b c d e f g h i j", "ID QUJDREVGR0hJSktM shipped", "100% sure"] {
            assert_eq!(scrub_with(text, &known), text);
        }
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
