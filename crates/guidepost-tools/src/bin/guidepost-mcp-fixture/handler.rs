//! The tools of the MCP test fixture, shared by the stdio binary and the integration
//! tests' streamable HTTP server.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

/// A server with `echo`, `add` (structured content), `weather` (enum + error result) and
/// `sleep` tools.
#[derive(Debug, Clone, Default)]
pub struct FixtureServer;

fn internal(e: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(e.to_string(), None)
}

fn result(value: Value) -> Result<CallToolResponse, ErrorData> {
    serde_json::from_value::<CallToolResult>(value).map(Into::into).map_err(internal)
}

impl ServerHandler for FixtureServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        serde_json::from_value(json!({"tools": [
            {"name": "echo", "description": "Echo the text back",
             "inputSchema": {"type": "object", "properties": {"text": {"type": "string", "description": "What to echo"}}, "required": ["text"]}},
            {"name": "add", "description": "Add two integers",
             "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}},
            {"name": "weather", "description": "Weather of a city",
             "inputSchema": {"type": "object", "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}}, "required": ["city"]}},
            {"name": "sleep", "description": "Sleep for a while",
             "inputSchema": {"type": "object", "properties": {"ms": {"type": "integer"}}, "required": ["ms"]}}
        ]}))
        .map_err(internal)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        match request.name.as_ref() {
            "echo" => {
                let text = args.get("text").and_then(Value::as_str).unwrap_or_default();
                result(json!({"content": [{"type": "text", "text": text}]}))
            }
            "add" => {
                let a = args.get("a").and_then(Value::as_i64).unwrap_or_default();
                let b = args.get("b").and_then(Value::as_i64).unwrap_or_default();
                result(
                    json!({"content": [{"type": "text", "text": format!("{}", a + b)}], "structuredContent": {"sum": a + b}}),
                )
            }
            "weather" => {
                let city = args.get("city").and_then(Value::as_str).unwrap_or_default();
                let unit = args.get("unit").and_then(Value::as_str).unwrap_or_default();
                if city.eq_ignore_ascii_case("paris") {
                    result(
                        json!({"content": [{"type": "text", "text": json!({"city": "Paris", "temperature": 18, "unit": unit}).to_string()}]}),
                    )
                } else {
                    result(
                        json!({"content": [{"type": "text", "text": format!("no weather data for {city}")}], "isError": true}),
                    )
                }
            }
            "sleep" => {
                let ms = args.get("ms").and_then(Value::as_u64).unwrap_or_default();
                tokio::time::sleep(Duration::from_millis(ms)).await;
                result(json!({"content": [{"type": "text", "text": "slept"}]}))
            }
            other => Err(ErrorData::invalid_params(format!("unknown tool {other}"), None)),
        }
    }
}
