//! Guidepost tool services: the runtime that validates tool arguments and executes tool
//! calls for the engine.
//!
//! # Services
//!
//! | Kind | Provider | Tools come from |
//! |---|---|---|
//! | fixture | [`FixtureProvider`] | `fixture` tables in the definition file (the built-in `fixtures` service) |
//! | native | [`NativeProvider`] | Rust async functions registered with [`ToolRegistry::register_native`] |
//! | openapi | [`OpenApiProvider`] | operations of an OpenAPI 3.x document (JSON or YAML, path or URL) |
//! | mcp | [`McpProvider`] | an MCP server over stdio or streamable HTTP (`tools/list`) |
//! | parlant | [`ParlantProvider`] | a Parlant plugin server (`GET /tools`) |
//!
//! # Calls
//!
//! [`ToolRegistry::call`] validates and coerces the arguments against the tool's
//! parameters before anything runs ([`validate`]), then runs the call in its own task with
//! a timeout. Every failure — invalid arguments, an error from the tool, an HTTP error, a
//! timeout, a panic, an unreachable service — is a [`ToolOutcome::Error`] the agent can talk
//! about, never an error that fails the turn. [`ToolRegistry::call_many`] runs calls in
//! parallel. Messages, statuses and custom events a tool emits while running are collected
//! in the [`ToolCallRecord`] and passed to the context's listener as they arrive.
//!
//! # Example
//!
//! ```
//! use guidepost_core::tool::{ParameterType, ToolId};
//! use guidepost_tools::native::{NativeTool, parameter};
//! use guidepost_tools::{ToolContext, ToolRegistry};
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let mut registry = ToolRegistry::new();
//! registry.register_native(
//!     NativeTool::new("double", |args, _ctx| async move {
//!         Ok::<_, String>(json!(args["n"].as_i64().unwrap_or(0) * 2))
//!     })
//!     .parameter(parameter("n", ParameterType::Integer)),
//! );
//! let ctx = ToolContext::new("agent", "session", "customer");
//! let id = ToolId::new("native", "double");
//!
//! // "21" is coerced to the integer 21 before the call.
//! let args = json!({"n": "21"}).as_object().cloned().unwrap_or_default();
//! let record = registry.call(&id, args, &ctx, None).await;
//! assert_eq!(record.result().data, json!(42));
//!
//! // Bad arguments never reach the tool; the failure is a result the agent can explain.
//! let args = json!({"n": "many"}).as_object().cloned().unwrap_or_default();
//! let record = registry.call(&id, args, &ctx, None).await;
//! assert!(record.result().data.as_str().unwrap_or("").starts_with("Tool call error: invalid arguments"));
//! # });
//! ```
//!
//! An engine builds the registry from a loaded definition with
//! [`ToolRegistry::from_definition`], registers its native functions, and calls
//! [`ToolRegistry::resolve_tools`] at startup to discover the tools of dynamic services.

/// The HTTP request header that carries a call's idempotency key to OpenAPI and Parlant
/// plugin services.
pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";

pub mod body;
pub mod context;
pub mod error;
pub mod fixture;
mod json_schema;
pub mod json_stream;
pub mod mcp;
pub mod native;
pub mod openapi;
pub mod parlant;
pub mod provider;
pub mod registry;
pub mod result;
pub mod validate;

pub use context::{EmissionListener, ToolContext, ToolEmission};
pub use error::{Result, ToolError};
pub use fixture::FixtureProvider;
pub use mcp::{McpProvider, McpTransport};
pub use native::{NativeProvider, NativeTool};
pub use openapi::OpenApiProvider;
pub use parlant::ParlantProvider;
pub use provider::ToolProvider;
pub use registry::{DEFAULT_TIMEOUT, ToolCallRequest, ToolRegistry};
pub use result::{
    ArgumentProblem, ControlMode, Lifespan, ProblemKind, ToolCallRecord, ToolControl, ToolErrorKind, ToolOutcome,
    ToolResult, TransientGuideline,
};
