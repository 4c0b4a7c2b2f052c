//! The Guidepost model layer: every engine decision that needs a model goes through the
//! [`ChatModel`] and [`Embedder`] ports defined here.
//!
//! - **Ports and data**: [`ChatModel`] (text, streamed text, or JSON conforming to a schema,
//!   always with [`Usage`]), [`Embedder`], [`ChatRequest`], [`ChatResponse`], [`LlmError`].
//! - **Providers** ([`providers`]): OpenAI-compatible chat and embeddings (OpenAI, vLLM,
//!   Ollama, llama.cpp server), Anthropic Messages, and the scripted test model. Local
//!   inference lives in `guidepost-llm-local` and plugs in through a [`ProviderFactory`].
//! - **Middleware** ([`middleware`]): timeouts, retries honouring `Retry-After`, concurrency
//!   and rate limits, schema validation with bounded re-asks, record/replay, usage accounting.
//! - **Configuration**: [`ModelSpec`] strings (`openai:gpt-4.1`,
//!   `openai-compatible:http://127.0.0.1:11434/v1#qwen2.5`, `anthropic:claude-sonnet-4-5`,
//!   `local:smollm2`, `scripted`), one per task kind via [`ModelSettings`]
//!   (`GUIDEPOST_MODEL`, `GUIDEPOST_MODEL_<TASK>`, `GUIDEPOST_EMBEDDER`), assembled by
//!   [`ModelStackBuilder`] into a [`ModelStack`] that routes each request by its task kind.
//! - **Accounting**: [`UsageLedger`] sums calls, tokens, latency and estimated cost per turn
//!   and session; [`count_tokens`] counts `o200k_base` tokens offline.
//!
//! # Example
//!
//! A stack whose every task is served by a scripted model, asked for a typed answer:
//!
//! ```
//! use std::sync::Arc;
//! use guidepost_llm::providers::scripted::ScriptedModel;
//! use guidepost_llm::{ChatRequest, ModelSettings, ModelSpec, ModelStackBuilder, TaskKind, UsageLedger};
//! use serde_json::json;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Check {
//!     rationale: String,
//!     applies: bool,
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let scripted = Arc::new(ScriptedModel::new().on(TaskKind::Matching, |req| {
//!     let refund = req.last_user_message().contains("refund");
//!     Ok(json!({"rationale": "looked for a refund request", "applies": refund}))
//! }));
//! let stack = ModelStackBuilder::new(ModelSettings::single(ModelSpec::Scripted))
//!     .scripted(scripted.clone())
//!     .build()?;
//!
//! let session = UsageLedger::new("session-1");
//! let req = ChatRequest::new(TaskKind::Matching)
//!     .system("Decide whether the guideline applies.")
//!     .user("Customer: I want a refund.")
//!     .ledger(session.child("turn-1"));
//! let (check, usage) = guidepost_llm::generate::<Check>(&stack, req).await?;
//! assert!(check.applies);
//! assert_eq!(usage.calls, 1);
//! assert_eq!(session.totals().answers, 1);
//! assert_eq!(scripted.calls(&TaskKind::Matching), 1);
//! # Ok::<(), guidepost_llm::LlmError>(())
//! # }).unwrap();
//! ```
//!
//! In a server, `ModelStackBuilder::from_env()?.registry(local_factories).build()?` reads the
//! model of every task, the keys (`OPENAI_API_KEY`, `OPENAI_BASE_URL`, `ANTHROPIC_API_KEY`)
//! and the middleware settings (`GUIDEPOST_LLM_*`, see [`StackConfig::from_lookup`]).

pub mod config;
pub mod error;
pub mod http;
pub mod middleware;
pub mod ports;
pub mod progress;
pub mod providers;
pub mod request;
pub mod schema;
pub mod secrets;
pub mod stack;
pub mod tokens;
pub mod usage;
pub mod validate;

pub use config::{
    ACCEPTED_SPECS, ModelSettings, ModelSpec, ProviderFactory, ProviderKeys, ProviderRegistry, is_local_model,
};
pub use error::{LlmError, excerpt, tail_excerpt};
pub use middleware::cache::CacheMode;
pub use middleware::limits::LimitsConfig;
pub use middleware::retry::RetryPolicy;
pub use ports::{ChatModel, Embedder, ModelCapabilities, TextStream, single_shot_stream};
pub use request::{
    ChatMessage, ChatRequest, ChatResponse, Output, OutputFormat, Role, StreamEvent, TaskKind, TokenDecision,
    TokenOption, label_odds, odds,
};
pub use schema::{
    generate, generate_weighed, generate_with_schema, is_strict_compatible, make_strict, schema_name_for,
    strict_schema_for,
};
pub use stack::{ModelStack, ModelStackBuilder, StackConfig, layer, layer_embedder};
pub use tokens::{count_message_tokens, count_tokens, estimate_tokens};
pub use usage::{CallInProgress, ModelPrice, PriceTable, Usage, UsageLedger, UsageTotals};
pub use validate::validate;
