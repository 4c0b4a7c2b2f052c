//! Where rate limits are counted: in this process, or, when the server runs on PostgreSQL, in
//! the database, so that N replicas give a caller one budget and not N.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use guidepost_store::{Backend, Store};

use crate::access::RateLimiter;

/// Takes between two prunings of the shared buckets.
const PRUNE_EVERY: u64 = 1000;

/// The server's rate limits: token buckets by name, refilled continuously.
#[derive(Default)]
pub struct Limiter {
    local: RateLimiter,
    /// The store the buckets are shared through (PostgreSQL only).
    shared: Option<Store>,
    takes: AtomicU64,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter").field("shared", &self.is_shared()).finish_non_exhaustive()
    }
}

impl Limiter {
    /// Counts in this process only.
    pub fn local() -> Self {
        Self::default()
    }

    /// Shared through `store` when it is PostgreSQL (the one store replicas share); in this
    /// process otherwise.
    pub fn for_store(store: &Store) -> Self {
        let shared = (store.backend() == Backend::Postgres).then(|| store.clone());
        Self { shared, ..Self::default() }
    }

    /// Whether the buckets are shared by the replicas.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Takes one token from `key`'s bucket of `per_minute`; `Err(wait)` when it is empty.
    pub async fn take(&self, key: &str, per_minute: u32) -> Result<(), Duration> {
        self.count(key, per_minute, true).await
    }

    /// Whether `key`'s bucket holds a token, without taking it; `Err(wait)` when it is empty.
    pub async fn check(&self, key: &str, per_minute: u32) -> Result<(), Duration> {
        self.count(key, per_minute, false).await
    }

    async fn count(&self, key: &str, per_minute: u32, take: bool) -> Result<(), Duration> {
        let Some(store) = &self.shared else {
            return if take { self.local.take(key, per_minute) } else { self.local.check(key, per_minute) };
        };
        if take && self.takes.fetch_add(1, Ordering::Relaxed) % PRUNE_EVERY == PRUNE_EVERY - 1 {
            let store = store.clone();
            tokio::spawn(async move {
                if let Err(error) = store.prune_rate_buckets().await {
                    tracing::warn!(%error, "forgetting old rate-limit buckets failed");
                }
            });
        }
        match store.take_rate_token(key, per_minute, take).await {
            Ok(granted) => granted,
            Err(error) => {
                // The database is out of reach: count here rather than refuse everyone.
                tracing::warn!(%error, "shared rate limits unavailable; counting in this process");
                if take { self.local.take(key, per_minute) } else { self.local.check(key, per_minute) }
            }
        }
    }
}
