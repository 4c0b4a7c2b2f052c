//! Model Context Protocol servers, over stdio (a child process) or streamable HTTP, through
//! the official Rust MCP SDK (`rmcp`).
//!
//! `tools/list` gives the tools (each `inputSchema` becomes the parameters) and
//! `tools/call` runs them: `structuredContent` becomes `data`, otherwise the text content
//! (parsed as JSON when it is JSON); `isError` makes an error outcome.
//!
//! Every call carries its idempotency key in the request's `_meta`, under
//! [`IDEMPOTENCY_META_KEY`]. A tool whose repeats are harmless says so in its `tools/list`
//! entry: `annotations.idempotentHint: true` (a repeat with the same arguments has no
//! further effect), or `_meta: {"guidepost/idempotency-key": true}` (it performs each key
//! once and answers a repeat with the first outcome).

use std::process::Stdio;
use std::sync::Arc;

use async_trait::async_trait;
use guidepost_core::tool::{Idempotency, Overlap, Tool, ToolId, ToolService};
use indexmap::IndexMap;
use rmcp::model::{CallToolRequestParams, MetaObject, RequestMetaObject};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value};
use tokio::sync::Mutex;

use crate::context::ToolContext;
use crate::error::{Result, ToolError};
use crate::json_schema::parameters_from_object;
use crate::provider::ToolProvider;
use crate::result::{ToolOutcome, ToolResult};

/// The `_meta` entry of a `tools/call` request that carries the call's idempotency key (the
/// same each time the call is sent); in a tool's `tools/list` entry, `true` declares that
/// the tool performs each key once.
pub const IDEMPOTENCY_META_KEY: &str = "guidepost/idempotency-key";

/// How an MCP server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        /// Program and arguments.
        command: Vec<String>,
        /// Extra environment variables.
        env: IndexMap<String, String>,
    },
    /// A streamable HTTP endpoint, such as `http://127.0.0.1:8000/mcp`.
    Http {
        /// The endpoint URL.
        url: String,
    },
}

type Client = Arc<RunningService<RoleClient, ()>>;

/// An MCP server. The connection is opened on first use and reopened after it closes.
pub struct McpProvider {
    service: String,
    transport: McpTransport,
    client: Mutex<Option<Client>>,
}

impl std::fmt::Debug for McpProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpProvider").field("service", &self.service).field("transport", &self.transport).finish()
    }
}

impl McpProvider {
    /// A provider for a declared `mcp` service: `command` (stdio) or `url` (streamable HTTP).
    pub fn new(service: &ToolService) -> Result<Self> {
        let transport = match (&service.url, service.command.is_empty()) {
            (Some(url), true) => McpTransport::Http { url: url.clone() },
            (None, false) => McpTransport::Stdio { command: service.command.clone(), env: service.env.clone() },
            _ => {
                return Err(ToolError::InvalidService {
                    service: service.name.clone(),
                    message: "an MCP service needs exactly one of `url` (streamable HTTP) or `command` (stdio)".into(),
                });
            }
        };
        Ok(Self::with_transport(&service.name, transport))
    }

    /// A provider for the server reached through `transport`.
    pub fn with_transport(service: &str, transport: McpTransport) -> Self {
        Self { service: service.into(), transport, client: Mutex::new(None) }
    }

    fn unavailable(&self, message: String) -> ToolError {
        ToolError::ServiceUnavailable { service: self.service.clone(), message }
    }

    fn describe(&self) -> String {
        match &self.transport {
            McpTransport::Stdio { command, .. } => format!("command `{}`", command.join(" ")),
            McpTransport::Http { url } => url.clone(),
        }
    }

    async fn client(&self) -> Result<Client> {
        let mut slot = self.client.lock().await;
        if let Some(client) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(client.clone());
        }
        let client = Arc::new(self.connect().await?);
        *slot = Some(client.clone());
        Ok(client)
    }

    async fn connect(&self) -> Result<RunningService<RoleClient, ()>> {
        let where_ = self.describe();
        match &self.transport {
            McpTransport::Stdio { command, env } => {
                let Some((program, args)) = command.split_first() else {
                    return Err(self.unavailable("the stdio command is empty".into()));
                };
                let mut cmd = tokio::process::Command::new(program);
                // A server abandoned mid-handshake (discovery timed out) must not outlive us.
                cmd.args(args).envs(env).kill_on_drop(true);
                let (process, _) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(|e| self.unavailable(format!("cannot start {where_}: {e}")))?;
                ().serve(process)
                    .await
                    .map_err(|e| self.unavailable(format!("MCP handshake with {where_} failed: {e}")))
            }
            McpTransport::Http { url } => {
                let transport = StreamableHttpClientTransport::with_client(
                    crate::openapi::http_client(),
                    StreamableHttpClientTransportConfig::with_uri(url.as_str()),
                );
                ().serve(transport)
                    .await
                    .map_err(|e| self.unavailable(format!("MCP handshake with {where_} failed: {e}")))
            }
        }
    }

    async fn forget(&self, client: &Client) {
        let mut slot = self.client.lock().await;
        if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, client)) {
            *slot = None;
        }
    }
}

/// The tool an MCP tool description declares.
fn tool_from_mcp(service: &str, tool: &Value) -> Option<Tool> {
    let name = tool.get("name")?.as_str()?;
    let schema = tool.get("inputSchema").cloned().unwrap_or(Value::Null);
    let hint = |name: &str| tool.pointer(&format!("/annotations/{name}")).and_then(Value::as_bool);
    let consequential = hint("destructiveHint").unwrap_or(false) && !hint("readOnlyHint").unwrap_or(false);
    let keyed = tool.get("_meta").and_then(|m| m.get(IDEMPOTENCY_META_KEY)) == Some(&Value::Bool(true));
    let idempotency = match (keyed, hint("idempotentHint").unwrap_or(false) || hint("readOnlyHint").unwrap_or(false)) {
        (true, _) => Idempotency::Keyed,
        (false, true) => Idempotency::Repeatable,
        (false, false) => Idempotency::Unknown,
    };
    Some(Tool {
        id: ToolId::new(service, name),
        description: tool.get("description").and_then(Value::as_str).map(str::to_string),
        parameters: parameters_from_object(&schema, &schema),
        consequential,
        idempotency,
        overlap: Overlap::Auto,
        fixture: None,
    })
}

/// The outcome a `tools/call` result describes: `isError` with its text content is a
/// failure; `structuredContent` is the data; otherwise one text content is the data (as
/// JSON when it parses), several are joined, and other content is kept as it is.
pub fn outcome_from_mcp(result: &Value) -> ToolOutcome {
    let texts: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect();
    if result.get("isError").and_then(Value::as_bool).unwrap_or(false) {
        let text = if texts.is_empty() { "the MCP tool reported an error".to_string() } else { texts.join("\n") };
        return ToolOutcome::failed(text);
    }
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        return ToolOutcome::Ok(ToolResult::new(structured.clone()));
    }
    let data = match texts.as_slice() {
        [] => result.get("content").cloned().unwrap_or(Value::Null),
        [one] => serde_json::from_str(one).unwrap_or_else(|_| Value::String((*one).to_string())),
        many => Value::String(many.join("\n")),
    };
    ToolOutcome::Ok(ToolResult::new(data))
}

#[async_trait]
impl ToolProvider for McpProvider {
    async fn list_tools(&self) -> Result<Vec<Tool>> {
        let client = self.client().await?;
        let tools = match client.list_all_tools().await {
            Ok(tools) => tools,
            Err(e) => {
                self.forget(&client).await;
                return Err(self.unavailable(format!("tools/list on {} failed: {e}", self.describe())));
            }
        };
        Ok(tools
            .iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .filter_map(|t| tool_from_mcp(&self.service, &t))
            .collect())
    }

    async fn call(&self, tool: &Tool, args: Map<String, Value>, ctx: &ToolContext) -> ToolOutcome {
        let client = match self.client().await {
            Ok(c) => c,
            Err(e) => return ToolOutcome::unavailable(e.to_string()),
        };
        let mut params = CallToolRequestParams::new(tool.id.name.clone());
        params.arguments = Some(args);
        if let Some(key) = ctx.idempotency_key() {
            let mut meta = Map::new();
            meta.insert(IDEMPOTENCY_META_KEY.to_string(), Value::String(key.to_string()));
            params.meta = Some(RequestMetaObject(MetaObject(meta)));
        }
        match client.call_tool(params).await {
            Ok(result) => match serde_json::to_value(&result) {
                Ok(value) => match crate::body::check_size(&value, &format!("tool `{}`", tool.id)) {
                    Ok(()) => outcome_from_mcp(&value),
                    Err(e) => ToolOutcome::service_error(e),
                },
                Err(e) => ToolOutcome::service_error(format!("unreadable tools/call result: {e}")),
            },
            Err(e) => {
                if client.is_closed() {
                    self.forget(&client).await;
                }
                ToolOutcome::service_error(format!("tools/call `{}` on {} failed: {e}", tool.id.name, self.describe()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_results() {
        let ok = outcome_from_mcp(&json!({"content": [{"type": "text", "text": "{\"a\": 1}"}]}));
        assert_eq!(ok, ToolOutcome::Ok(ToolResult::new(json!({"a": 1}))));
        let text = outcome_from_mcp(&json!({"content": [{"type": "text", "text": "hello"}]}));
        assert_eq!(text, ToolOutcome::Ok(ToolResult::new(json!("hello"))));
        let structured = outcome_from_mcp(&json!({"content": [], "structuredContent": {"b": 2}}));
        assert_eq!(structured, ToolOutcome::Ok(ToolResult::new(json!({"b": 2}))));
        let err = outcome_from_mcp(&json!({"content": [{"type": "text", "text": "no such city"}], "isError": true}));
        assert_eq!(err, ToolOutcome::failed("no such city"));
    }
}
