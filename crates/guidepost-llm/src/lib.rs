//! The Guidepost model layer: every engine decision that needs a model goes through the
//! [`ChatModel`] and [`Embedder`] ports defined here.
//!
//! - Ports and data: [`ChatModel`], [`Embedder`], [`ChatRequest`], [`ChatResponse`],
//!   [`Usage`], [`LlmError`].
//! - Configuration: [`ModelSpec`] strings (`openai:gpt-4.1`, `anthropic:claude-sonnet-4-5`,
//!   `openai-compatible:<url>#<model>`, `local:<model>`, `scripted`), per-task
//!   [`ModelSettings`], and the [`ProviderFactory`] hook for local inference.
//! - Accounting: [`UsageLedger`] sums tokens, latency and cost per turn and session.

pub mod config;
pub mod error;
pub mod middleware;
pub mod ports;
pub mod providers;
pub mod request;
pub mod schema;
pub mod stack;
pub mod tokens;
pub mod usage;
pub mod validate;

pub use config::{ACCEPTED_SPECS, ModelSettings, ModelSpec, ProviderFactory, ProviderKeys, ProviderRegistry};
pub use error::LlmError;
pub use middleware::cache::CacheMode;
pub use middleware::limits::LimitsConfig;
pub use middleware::retry::RetryPolicy;
pub use ports::{ChatModel, Embedder, TextStream, single_shot_stream};
pub use request::{ChatMessage, ChatRequest, ChatResponse, Output, OutputFormat, Role, StreamEvent, TaskKind};
pub use schema::{generate, make_strict, schema_name_for, strict_schema_for};
pub use stack::{ModelStack, ModelStackBuilder, StackConfig, layer, layer_embedder};
pub use tokens::{count_message_tokens, count_tokens, estimate_tokens};
pub use usage::{ModelPrice, PriceTable, Usage, UsageLedger, UsageTotals};
pub use validate::validate;
