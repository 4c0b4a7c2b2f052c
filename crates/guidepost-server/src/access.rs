//! Who may call what, how often, and keeping secrets out of what the server says.
//!
//! Without API keys and outside production mode the API is open, as a development server
//! should be. With keys (or `production`), every request is classified: the customer-facing
//! operations a chat widget needs (read an agent, create a guest session, read it, post the
//! customer's messages, read and long-poll its events) are open to anyone in production
//! mode, for guest sessions only (a session of a named customer needs a key); a `client`
//! key may do those for any customer; an `admin` key may do everything.
//! A key that does not match is a 401; a caller whose role does not allow the operation gets
//! 401 without a key and 403 with one. Callers are rate-limited per key (per address
//! without one), and customer messages per session, with 429 and `Retry-After`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::Method;
use sha2::{Digest, Sha256};

/// A presented API key that matches none of the server's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the API key is not valid")]
pub struct UnknownKey;

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Everything.
    Admin,
    /// The customer-facing operations, for any customer.
    Client,
}

impl Role {
    /// Reads `admin` or `client`.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "admin" => Some(Self::Admin),
            "client" => Some(Self::Client),
            _ => None,
        }
    }
}

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The API is open (no keys, not production): anyone may do anything.
    Open,
    /// No key, in a protected server.
    Anonymous,
    /// A key with its role; `id` is a fingerprint of the key, never the key.
    Key {
        /// What it may do.
        role: Role,
        /// A short fingerprint, for rate limits and logs.
        id: String,
    },
}

impl Caller {
    /// Whether the caller may do everything.
    pub fn is_admin(&self) -> bool {
        matches!(self, Self::Open | Self::Key { role: Role::Admin, .. })
    }

    /// Whether the caller is unauthenticated in a protected server.
    pub fn is_anonymous(&self) -> bool {
        matches!(self, Self::Anonymous)
    }
}

/// Which operations need what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Health and the API document: anyone, always.
    Public,
    /// What a customer-facing widget needs.
    Customer,
    /// Everything else.
    Admin,
}

/// The access an operation needs, by method and route, as its declaration says (see
/// [`crate::routes::access_of`]).
pub fn access_of(method: &Method, route: &str) -> Access {
    crate::routes::access_of(method, route)
}

/// Whether `caller`, already allowed the operation, may touch a session of `customer_id`:
/// a caller without a key (production mode) reaches guest sessions only; keys and an open
/// API reach every session.
pub fn reaches_session(caller: &Caller, customer_id: &str) -> bool {
    !caller.is_anonymous() || customer_id == guidepost_core::session::GUEST_CUSTOMER
}

/// How the server decides.
#[derive(Debug, Clone, Default)]
pub struct AccessPolicy {
    keys: HashMap<[u8; 32], Role>,
    production: bool,
    /// Requests per minute per key (per address without one); `None`: unlimited.
    pub requests_per_minute: Option<u32>,
    /// Customer messages per minute per session; `None`: unlimited.
    pub messages_per_session_per_minute: Option<u32>,
    /// Requests with a key that matches none, per minute per address; beyond it every
    /// request from that address that presents a key is a 429 until the budget refills, so
    /// keys cannot be guessed at speed. `None`: unlimited.
    pub failed_authentications_per_minute: Option<u32>,
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

impl AccessPolicy {
    /// An open API (development).
    pub fn open() -> Self {
        Self::default()
    }

    /// With these keys; production mode opens the customer-facing operations to callers
    /// without a key.
    pub fn with_keys(keys: impl IntoIterator<Item = (String, Role)>, production: bool) -> Self {
        let keys: HashMap<[u8; 32], Role> = keys.into_iter().map(|(k, r)| (digest(&k), r)).collect();
        let protected = production || !keys.is_empty();
        Self {
            keys,
            production,
            requests_per_minute: protected.then_some(600),
            messages_per_session_per_minute: protected.then_some(30),
            failed_authentications_per_minute: protected.then_some(10),
        }
    }

    /// Whether requests are checked at all.
    pub fn is_protected(&self) -> bool {
        self.production || !self.keys.is_empty()
    }

    /// Reads `role:key` pairs separated by commas or new lines (`admin:s3cret`); the error
    /// names the entry (by position, never by its key).
    pub fn parse_keys(text: &str) -> Result<Vec<(String, Role)>, String> {
        let mut out = Vec::new();
        for (i, entry) in
            text.split([',', '\n']).map(str::trim).filter(|e| !e.is_empty() && !e.starts_with('#')).enumerate()
        {
            let Some((role, key)) = entry.split_once([':', ' ', '\t']) else {
                return Err(format!("API key entry {} is not `role:key`", i + 1));
            };
            let role =
                Role::parse(role).ok_or_else(|| format!("API key entry {}: the role is `admin` or `client`", i + 1))?;
            let key = key.trim();
            if key.len() < 16 {
                return Err(format!("API key entry {}: keys have at least 16 characters", i + 1));
            }
            out.push((key.to_string(), role));
        }
        Ok(out)
    }

    /// Who a request's `Authorization: Bearer <key>` (or `x-api-key`) makes the caller;
    /// `Err` for a key that matches none.
    pub fn caller(&self, presented: Option<&str>) -> Result<Caller, UnknownKey> {
        if !self.is_protected() {
            return Ok(Caller::Open);
        }
        match presented {
            None => Ok(Caller::Anonymous),
            Some(key) => {
                let d = digest(key);
                match self.keys.get(&d) {
                    Some(role) => {
                        Ok(Caller::Key { role: *role, id: d.iter().take(4).map(|b| format!("{b:02x}")).collect() })
                    }
                    None => Err(UnknownKey),
                }
            }
        }
    }

    /// Whether the caller may perform an operation needing `access`.
    pub fn allows(&self, caller: &Caller, access: Access) -> bool {
        match (access, caller) {
            (Access::Public, _) | (_, Caller::Open) => true,
            (Access::Admin, c) => c.is_admin(),
            (Access::Customer, Caller::Key { .. }) => true,
            (Access::Customer, Caller::Anonymous) => self.production,
        }
    }
}

/// Token buckets by name, refilled continuously.
#[derive(Debug, Default)]
pub struct RateLimiter {
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl RateLimiter {
    /// Takes one token from `key`'s bucket of `per_minute`; `Err(wait)` when it is empty.
    pub fn take(&self, key: &str, per_minute: u32) -> Result<(), Duration> {
        let capacity = f64::from(per_minute.max(1));
        let rate = capacity / 60.0;
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if buckets.len() > 100_000 {
            // Full buckets carry no information: forget them.
            buckets.retain(|_, (tokens, at)| *tokens + now.duration_since(*at).as_secs_f64() * rate < capacity);
        }
        let (tokens, at) = buckets.entry(key.to_string()).or_insert((capacity, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * rate).min(capacity);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64(((1.0 - *tokens) / rate).max(0.001)))
        }
    }
}

impl RateLimiter {
    /// Whether `key`'s bucket of `per_minute` holds a token, without taking it; `Err(wait)`
    /// when it is empty.
    pub fn check(&self, key: &str, per_minute: u32) -> Result<(), Duration> {
        let capacity = f64::from(per_minute.max(1));
        let rate = capacity / 60.0;
        let buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((tokens, at)) = buckets.get(key) else { return Ok(()) };
        let tokens = (tokens + Instant::now().duration_since(*at).as_secs_f64() * rate).min(capacity);
        if tokens >= 1.0 { Ok(()) } else { Err(Duration::from_secs_f64(((1.0 - tokens) / rate).max(0.001))) }
    }
}

/// The bucket of an address's requests with keys that matched none.
pub fn failure_key(address: Option<IpAddr>) -> String {
    format!("failed-key:{}", address.map_or_else(|| "unknown".to_string(), |a| a.to_string()))
}

/// The rate-limit key of a caller.
pub fn rate_key(caller: &Caller, address: Option<IpAddr>) -> String {
    match caller {
        Caller::Key { id, .. } => format!("key:{id}"),
        _ => format!("ip:{}", address.map_or_else(|| "unknown".to_string(), |a| a.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_decide_by_operation() {
        let keys = AccessPolicy::parse_keys("admin:aaaaaaaaaaaaaaaa, client:cccccccccccccccc").unwrap();
        let p = AccessPolicy::with_keys(keys.clone(), false);
        let admin = p.caller(Some("aaaaaaaaaaaaaaaa")).unwrap();
        let client = p.caller(Some("cccccccccccccccc")).unwrap();
        let anonymous = p.caller(None).unwrap();
        assert!(p.caller(Some("wrong")).is_err());
        let list_guidelines = access_of(&Method::GET, "/guidelines");
        let post_event = access_of(&Method::POST, "/sessions/{session_id}/events");
        assert!(p.allows(&admin, list_guidelines) && !p.allows(&client, list_guidelines));
        assert!(p.allows(&client, post_event) && !p.allows(&anonymous, post_event));
        let production = AccessPolicy::with_keys(keys, true);
        assert!(production.allows(&production.caller(None).unwrap(), post_event));
        assert!(!production.allows(&production.caller(None).unwrap(), list_guidelines));
        assert!(production.allows(&Caller::Anonymous, access_of(&Method::GET, "/healthz")));
        assert_eq!(AccessPolicy::open().caller(None), Ok(Caller::Open));
        assert!(AccessPolicy::parse_keys("root:aaaaaaaaaaaaaaaa").unwrap_err().contains("entry 1"));
        assert!(!AccessPolicy::parse_keys("admin:short").unwrap_err().contains("short"), "errors never show keys");
    }

    #[test]
    fn methods_a_path_does_not_declare_need_nothing_on_public_paths_and_admin_elsewhere() {
        assert_eq!(access_of(&Method::GET, "/agents/{agent_id}"), Access::Customer);
        assert_eq!(access_of(&Method::HEAD, "/agents/{agent_id}"), Access::Admin);
        assert_eq!(access_of(&Method::DELETE, "/healthz"), Access::Public);
        assert_eq!(access_of(&Method::HEAD, "/assets/{name}"), Access::Public);
        assert_eq!(access_of(&Method::PUT, "/sessions"), Access::Admin);
        assert_eq!(access_of(&Method::GET, "/metrics"), Access::Admin);
        assert_eq!(access_of(&Method::GET, ""), Access::Admin, "an unmatched request");
        assert_eq!(access_of(&Method::GET, "/no/such/route"), Access::Admin);
    }

    #[test]
    fn buckets_refill_and_say_how_long_to_wait() {
        let limiter = RateLimiter::default();
        for _ in 0..3 {
            assert!(limiter.take("k", 3).is_ok());
        }
        let wait = limiter.take("k", 3).unwrap_err();
        assert!(wait > Duration::from_secs(5) && wait <= Duration::from_secs(20), "{wait:?}");
        assert!(limiter.take("other", 3).is_ok());
        assert!(limiter.check("k", 3).is_err(), "checking an empty bucket says so");
        assert!(limiter.check("other", 3).is_ok() && limiter.check("unseen", 3).is_ok());
        for _ in 0..2 {
            assert!(limiter.check("other", 3).is_ok(), "checking takes nothing");
        }
    }
}
