//! The MCP test fixture's protocol and tools, shared by the stdio binary and the integration
//! tests' streamable HTTP server.
//!
//! Written from the MCP specification with plain JSON-RPC rather than with the SDK the client
//! uses, so the tests show the client talking to a server it shares no code with. Tools:
//! `echo`, `add` (structured content), `weather` (an enum parameter and an error result),
//! `sleep` and `gather` (answers once `n` calls of it are in flight at once: concurrency shown
//! by overlap, not by a stopwatch).

use std::sync::LazyLock;
use std::time::Duration;

use tokio::sync::watch;

use serde_json::{Value, json};

/// The protocol revision answered when the client asks for none.
const PROTOCOL_VERSION: &str = "2025-06-18";

fn tools() -> Value {
    json!([
        {"name": "echo", "description": "Echo the text back",
         "inputSchema": {"type": "object", "properties": {"text": {"type": "string", "description": "What to echo"}}, "required": ["text"]}},
        {"name": "add", "description": "Add two integers",
         "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}},
        {"name": "weather", "description": "Weather of a city",
         "inputSchema": {"type": "object", "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}}, "required": ["city"]}},
        {"name": "sleep", "description": "Sleep for a while",
         "inputSchema": {"type": "object", "properties": {"ms": {"type": "integer"}}, "required": ["ms"]}},
        {"name": "gather", "description": "Wait until n calls of gather are in flight at once",
         "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}
    ])
}

/// Calls of `gather` in flight now, and the most that were at once.
static GATHERING: LazyLock<watch::Sender<(u64, u64)>> = LazyLock::new(|| watch::Sender::new((0, 0)));

/// How long a `gather` call waits for the others before it gives up. It matters only when
/// calls arrive one after the other (the client does not run them concurrently): then they
/// never meet, and each answers with an error instead of hanging.
const GATHER_GUARD: Duration = Duration::from_secs(20);

/// Waits until `n` calls are in flight at once (or the guard passes); the most seen at once.
async fn gather(n: u64) -> u64 {
    GATHERING.send_modify(|(now, most)| {
        *now += 1;
        *most = (*most).max(*now);
    });
    let mut seen = GATHERING.subscribe();
    let _ = tokio::time::timeout(GATHER_GUARD, seen.wait_for(|(_, most)| *most >= n)).await;
    let most = GATHERING.borrow().1;
    GATHERING.send_modify(|(now, _)| *now = now.saturating_sub(1));
    most
}

async fn call_tool(params: &Value) -> Result<Value, (i64, String)> {
    let args = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
    let text = |t: String| json!({"content": [{"type": "text", "text": t}]});
    match params.get("name").and_then(Value::as_str).unwrap_or_default() {
        "echo" => Ok(text(args.get("text").and_then(Value::as_str).unwrap_or_default().to_string())),
        "add" => {
            let a = args.get("a").and_then(Value::as_i64).unwrap_or_default();
            let b = args.get("b").and_then(Value::as_i64).unwrap_or_default();
            Ok(json!({"content": [{"type": "text", "text": (a + b).to_string()}], "structuredContent": {"sum": a + b}}))
        }
        "weather" => {
            let city = args.get("city").and_then(Value::as_str).unwrap_or_default();
            let unit = args.get("unit").and_then(Value::as_str).unwrap_or_default();
            if city.eq_ignore_ascii_case("paris") {
                Ok(text(json!({"city": "Paris", "temperature": 18, "unit": unit}).to_string()))
            } else {
                let mut result = text(format!("no weather data for {city}"));
                result["isError"] = json!(true);
                Ok(result)
            }
        }
        "sleep" => {
            let ms = args.get("ms").and_then(Value::as_u64).unwrap_or_default();
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(text("slept".into()))
        }
        "gather" => {
            let n = args.get("n").and_then(Value::as_u64).unwrap_or(1);
            let most = gather(n).await;
            let mut result = text(json!({"together": most}).to_string());
            if most < n {
                result["isError"] = json!(true);
            }
            Ok(result)
        }
        other => Err((-32602, format!("unknown tool {other}"))),
    }
}

/// Answers one JSON-RPC message: a response for a request, `None` for a notification or a
/// response.
pub async fn handle(message: &Value) -> Option<Value> {
    let id = message.get("id").cloned()?;
    let method = message.get("method").and_then(Value::as_str)?;
    let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
    let result = match method {
        "initialize" => Ok(json!({
            "protocolVersion": params.get("protocolVersion").and_then(Value::as_str).unwrap_or(PROTOCOL_VERSION),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "guidepost-mcp-fixture", "version": "1.0.0"}
        })),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({"tools": tools()})),
        "tools/call" => call_tool(&params).await,
        other => Err((-32601, format!("method not found: {other}"))),
    };
    Some(match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    })
}

/// A message that is not JSON: a parse error with no id, as JSON-RPC prescribes.
pub fn parse_error(detail: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": format!("parse error: {detail}")}})
}
