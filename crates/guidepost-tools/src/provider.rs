//! The port every tool service implements.

use async_trait::async_trait;
use guidepost_core::tool::Tool;
use serde_json::{Map, Value};

use crate::context::ToolContext;
use crate::error::Result;
use crate::result::ToolOutcome;

/// One tool service: lists its tools and runs calls.
///
/// The registry validates arguments before [`ToolProvider::call`], runs the call in its own
/// task under a timeout and turns panics into error outcomes, so implementations only do
/// the service-specific work. A call must report every failure as a
/// [`ToolOutcome::Error`]; nothing it does can fail the turn.
#[async_trait]
pub trait ToolProvider: Send + Sync {
    /// The tools this service offers. Static services return what they were built with;
    /// dynamic services (OpenAPI, MCP, Parlant) ask the service, and fail with
    /// [`crate::ToolError::ServiceUnavailable`] when it cannot be reached.
    async fn list_tools(&self) -> Result<Vec<Tool>>;

    /// The tool as it should be shown for this context. Parlant plugin services recompute
    /// dynamic enums per customer (`GET /tools/{name}/resolve`); the default is `None`,
    /// meaning "as listed".
    async fn resolve_tool(&self, _tool: &Tool, _ctx: &ToolContext) -> Result<Option<Tool>> {
        Ok(None)
    }

    /// Calls `tool` with validated arguments (coerced, defaults filled, in declared order).
    async fn call(&self, tool: &Tool, args: Map<String, Value>, ctx: &ToolContext) -> ToolOutcome;
}
