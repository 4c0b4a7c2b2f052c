//! Decorators shared by all providers. Each wraps an inner model and implements the same
//! trait; [`layer`](crate::stack::layer) composes them in this order, innermost first:
//!
//! provider → [`timeout`] (per attempt) → [`retry`] → [`limits`] → [`reask`] → [`cache`] →
//! [`accounting`]
//!
//! Why this order: a timed-out attempt is retried; the limits count and pace logical calls
//! (a retrying call keeps its concurrency slot, so a struggling provider is not flooded by
//! other callers meanwhile); each re-ask passes the limits again; only validated answers are
//! recorded; and accounting sees every answer, replayed ones included.
//!
//! Embedders get timeout → retry → limits → [`embedding_cache`].

pub mod accounting;
pub mod cache;
pub mod embedding_cache;
pub mod limits;
pub mod reask;
pub mod recording;
pub mod retry;
pub mod timeout;
