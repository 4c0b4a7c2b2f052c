//! Client of the Parlant plugin tool-service protocol (Parlant's service kind `sdk`), so
//! existing Parlant tool servers work unchanged: `GET /tools`, `GET /tools/{name}/resolve`
//! and `POST /tools/{name}/calls`, whose body is a stream of back-to-back JSON objects.

use async_trait::async_trait;
use futures::StreamExt;
use guidepost_core::tool::{
    Idempotency, Overlap, ParameterSource, ParameterType, Tool, ToolId, ToolParameter, ToolService,
};
use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::context::{ToolContext, ToolEmission};
use crate::error::{Result, ToolError};
use crate::json_stream::JsonObjectSplitter;
use crate::native::parameter;
use crate::openapi::{encode_component, http_client};
use crate::provider::ToolProvider;
use crate::result::{ToolOutcome, ToolResult};

/// Default cap on one object of a call stream (Parlant's own default is 16 KiB).
pub const DEFAULT_MAX_OBJECT_BYTES: usize = 4 * 1024 * 1024;

/// A Parlant plugin server.
#[derive(Debug, Clone)]
pub struct ParlantProvider {
    service: String,
    base: String,
    client: reqwest::Client,
    max_object_bytes: usize,
}

impl ParlantProvider {
    /// A provider for a declared `parlant` service (uses its `url`).
    pub fn new(service: &ToolService) -> Result<Self> {
        let url = service.url.as_deref().ok_or_else(|| ToolError::InvalidService {
            service: service.name.clone(),
            message: "a Parlant plugin service needs `url`".into(),
        })?;
        Self::from_url(&service.name, url)
    }

    /// A provider for the plugin server at `url`. Like Parlant, only the scheme, host and
    /// port are kept: plugin servers always serve at the root.
    pub fn from_url(service: &str, url: &str) -> Result<Self> {
        let parsed = reqwest::Url::parse(url).map_err(|e| ToolError::InvalidService {
            service: service.into(),
            message: format!("invalid url {url:?}: {e}"),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ToolError::InvalidService {
                service: service.into(),
                message: format!("url {url:?} must start with http:// or https://"),
            });
        }
        if !matches!(parsed.path(), "" | "/") {
            tracing::warn!(service, url, "the path of a Parlant plugin server url is ignored, as Parlant does");
        }
        Ok(Self {
            service: service.into(),
            base: parsed.origin().ascii_serialization(),
            client: http_client(),
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
        })
    }

    /// Sets the cap on the size of one streamed object.
    pub fn with_max_object_bytes(mut self, limit: usize) -> Self {
        self.max_object_bytes = limit;
        self
    }

    fn unavailable(&self, message: String) -> ToolError {
        ToolError::ServiceUnavailable { service: self.service.clone(), message }
    }

    async fn get_json(&self, url: &str) -> Result<Value> {
        let response = self.client.get(url).send().await.map_err(|e| self.unavailable(format!("GET {url}: {e}")))?;
        let status = response.status();
        let body = crate::body::read_capped(response, &format!("service `{}`: GET {url}", self.service))
            .await
            .map_err(|e| self.unavailable(e))?;
        if !status.is_success() {
            return Err(self.unavailable(format!("GET {url} answered HTTP {status}: {}", excerpt(&body))));
        }
        serde_json::from_str(&body).map_err(|e| self.unavailable(format!("GET {url} answered invalid JSON: {e}")))
    }

    fn tool_from_wire(&self, value: Value) -> Result<Tool> {
        let wire: WireTool = serde_json::from_value(value).map_err(|e| ToolError::InvalidService {
            service: self.service.clone(),
            message: format!("unreadable tool description: {e}"),
        })?;
        Ok(wire.into_tool(&self.service))
    }

    async fn stream_call(&self, tool: &Tool, args: Map<String, Value>, ctx: &ToolContext) -> ToolOutcome {
        let url = format!("{}/tools/{}/calls", self.base, encode_component(&tool.id.name));
        let body = json!({
            "agent_id": ctx.agent_id,
            "session_id": ctx.session_id,
            "customer_id": ctx.customer_id,
            "arguments": encode_arguments(tool, &args),
            "engine_context_id": null,
        });
        // Never retried: the server keeps running a tool after a disconnect, so a retry
        // could repeat its side effects. The call's idempotency key goes with it, the same
        // each time the call is sent.
        let mut request = self.client.post(&url).json(&body);
        if let Some(key) = ctx.idempotency_key() {
            request = request.header(crate::IDEMPOTENCY_KEY_HEADER, key);
        }
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) if e.is_connect() => return ToolOutcome::unavailable(format!("cannot reach {url}: {e}")),
            Err(e) => return ToolOutcome::service_error(format!("POST {url} failed: {e}")),
        };
        let status = response.status();
        if !status.is_success() {
            let text = crate::body::read_capped(response, &url).await.unwrap_or_else(|e| e);
            return ToolOutcome::http_error(
                status.as_u16(),
                format!("POST {url} answered HTTP {status}: {}", error_detail(&text)),
            );
        }
        let mut decoder = CallStreamDecoder::new(&url, self.max_object_bytes);
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => return ToolOutcome::service_error(format!("the response stream of {url} broke: {e}")),
            };
            if let Some(outcome) = decoder.push(&chunk, ctx) {
                return outcome;
            }
        }
        decoder.finish()
    }
}

/// Decodes the body of a Parlant plugin call, concatenated JSON objects in chunks cut
/// anywhere: status, message and custom objects are emitted to the call's context as they
/// arrive; a `result` or `error` object ends the call. Every malformed input (a byte between
/// objects, an object over the size cap, invalid JSON, a malformed result, a stream that ends
/// early) is a [`ToolOutcome`] failure that names the URL and what was wrong, at its offset
/// where there is one.
#[derive(Debug)]
pub struct CallStreamDecoder {
    url: String,
    splitter: JsonObjectSplitter,
}

impl CallStreamDecoder {
    /// A decoder for the response of `url`, refusing objects over `max_object_bytes`.
    pub fn new(url: &str, max_object_bytes: usize) -> Self {
        Self { url: url.to_string(), splitter: JsonObjectSplitter::new(max_object_bytes) }
    }

    /// Takes the next chunk; the outcome once the call has ended.
    pub fn push(&mut self, chunk: &[u8], ctx: &ToolContext) -> Option<ToolOutcome> {
        let url = &self.url;
        let objects = match self.splitter.push(chunk) {
            Ok(o) => o,
            Err(e) => return Some(ToolOutcome::service_error(format!("unreadable response stream from {url}: {e}"))),
        };
        for raw in objects {
            let object: Value = match serde_json::from_slice(&raw) {
                Ok(v) => v,
                Err(e) => {
                    return Some(ToolOutcome::service_error(format!(
                        "invalid JSON object in the stream from {url}: {e}"
                    )));
                }
            };
            if let Some(outcome) = handle_object(object, ctx) {
                return Some(outcome);
            }
        }
        None
    }

    /// The outcome of a body that ended before a `result` or `error` object.
    pub fn finish(&self) -> ToolOutcome {
        let url = &self.url;
        match self.splitter.finish() {
            Ok(()) => ToolOutcome::service_error(format!("the stream from {url} ended without a result")),
            Err(e) => ToolOutcome::service_error(format!("the stream from {url} ended early: {e}")),
        }
    }
}

/// Handles one streamed object: emissions go to the context, terminal objects give the
/// outcome.
fn handle_object(object: Value, ctx: &ToolContext) -> Option<ToolOutcome> {
    let Value::Object(mut map) = object else {
        return Some(ToolOutcome::service_error("the stream held a JSON value that is not an object"));
    };
    if let Some(result) = map.remove("result") {
        return Some(match serde_json::from_value::<ToolResult>(result) {
            Ok(r) => ToolOutcome::Ok(r),
            Err(e) => ToolOutcome::service_error(format!("malformed result object: {e}")),
        });
    }
    if let Some(status) = map.remove("status") {
        let mut data = match map.remove("data") {
            None | Some(Value::Null) => json!({}),
            Some(d) => d,
        };
        let status = status.as_str().map(str::to_string).unwrap_or_else(|| status.to_string());
        // Only the engine may end a turn: a tool's `ready` must not carry stage `completed`.
        if status == "ready"
            && let Some(d) = data.as_object_mut()
            && d.get("stage").and_then(Value::as_str) == Some("completed")
        {
            d.remove("stage");
        }
        ctx.emit(ToolEmission::Status { status, data });
        return None;
    }
    if let Some(message) = map.remove("message") {
        let text = message.as_str().map(str::to_string).unwrap_or_else(|| message.to_string());
        ctx.emit(ToolEmission::Message(text));
        return None;
    }
    if let Some(custom) = map.remove("custom") {
        ctx.emit(ToolEmission::Custom(custom));
        return None;
    }
    if let Some(error) = map.remove("error") {
        let text = error.as_str().map(str::to_string).unwrap_or_else(|| error.to_string());
        return Some(ToolOutcome::failed(format!("the tool reported an error: {text}")));
    }
    let keys: Vec<&String> = map.keys().collect();
    Some(ToolOutcome::service_error(format!("unexpected object in the call stream with keys {keys:?}")))
}

/// Encodes arguments the way every Parlant 3.3.2 plugin server understands them: scalars as
/// strings, arrays as arrays, objects as JSON text, and every declared parameter without a
/// value as an explicit `null` (as Parlant's engine sends).
fn encode_arguments(tool: &Tool, args: &Map<String, Value>) -> Map<String, Value> {
    tool.parameters
        .iter()
        .map(|p| {
            let value = match args.get(&p.name) {
                None | Some(Value::Null) => Value::Null,
                Some(Value::Array(items)) => Value::Array(items.iter().map(encode_scalar).collect()),
                Some(other) => encode_scalar(other),
            };
            (p.name.clone(), value)
        })
        .collect()
}

fn encode_scalar(value: &Value) -> Value {
    match value {
        // Deliberate workaround: a 3.3.2 server converts booleans with
        // `bool(v.capitalize())`, which rejects JSON booleans and reads every non-empty
        // string (even "false") as true. The empty string is its only false value.
        Value::Bool(true) => json!("true"),
        Value::Bool(false) => json!(""),
        Value::Number(n) => json!(n.to_string()),
        Value::String(_) | Value::Null => value.clone(),
        other => json!(other.to_string()),
    }
}

/// The useful part of an error body: the last traceback line of a FastAPI `detail` list,
/// a `detail` string, or an excerpt of the text.
fn error_detail(body: &str) -> String {
    match serde_json::from_str::<Value>(body).ok().and_then(|v| v.get("detail").cloned()) {
        Some(Value::Array(lines)) => lines
            .iter()
            .rev()
            .find_map(|l| l.as_str().map(str::trim).filter(|l| !l.is_empty()))
            .map(excerpt)
            .unwrap_or_else(|| excerpt(body)),
        Some(Value::String(text)) => excerpt(&text),
        _ => excerpt(body),
    }
}

/// At most 300 characters of `text`.
pub(crate) fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[derive(Deserialize)]
struct WireTool {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    parameters: IndexMap<String, (WireDescriptor, WireOptions)>,
    #[serde(default)]
    required: Vec<String>,
    #[serde(default)]
    consequential: bool,
    #[serde(default)]
    overlap: Option<i64>,
    #[serde(default)]
    metadata: Map<String, Value>,
}

#[derive(Deserialize)]
struct WireDescriptor {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    item_type: Option<String>,
    #[serde(rename = "enum", default)]
    allowed: Option<Vec<Value>>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    examples: Option<Vec<Value>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireOptions {
    hidden: bool,
    source: Option<String>,
    description: Option<String>,
    significance: Option<String>,
    examples: Vec<Value>,
    precedence: Option<i64>,
    display_name: Option<String>,
}

fn wire_type(name: &str) -> ParameterType {
    serde_json::from_value(json!(name)).unwrap_or(ParameterType::String)
}

impl WireTool {
    fn into_tool(self, service: &str) -> Tool {
        let required = self.required;
        let parameters = self
            .parameters
            .into_iter()
            .map(|(name, (d, o))| {
                let mut p: ToolParameter = parameter(name.clone(), wire_type(&d.kind));
                p.items = d.item_type.as_deref().map(wire_type);
                p.description = o.description.or(d.description).filter(|s| !s.is_empty());
                p.allowed = d.allowed.unwrap_or_default();
                p.required = required.contains(&name);
                p.source = match o.source.as_deref() {
                    Some("customer") => ParameterSource::Customer,
                    Some("context") => ParameterSource::Context,
                    _ => ParameterSource::Any,
                };
                p.hidden = o.hidden;
                p.examples = if o.examples.is_empty() { d.examples.unwrap_or_default() } else { o.examples };
                p.precedence =
                    o.precedence.filter(|v| *v != i64::MAX).map(|v| v.clamp(i32::MIN.into(), i32::MAX.into()) as i32);
                p.display_name = o.display_name;
                p.significance = o.significance;
                p
            })
            .collect();
        let description = self.description.trim();
        Tool {
            id: ToolId::new(service, self.name),
            description: (!description.is_empty()).then(|| description.to_string()),
            parameters,
            consequential: self.consequential,
            // A plugin tool says it performs each idempotency key once in its metadata.
            idempotency: if self.metadata.get("idempotency_keys") == Some(&Value::Bool(true)) {
                Idempotency::Keyed
            } else {
                Idempotency::Unknown
            },
            overlap: match self.overlap {
                Some(1) => Overlap::None,
                Some(3) => Overlap::Always,
                _ => Overlap::Auto,
            },
            fixture: None,
        }
    }
}

#[async_trait]
impl ToolProvider for ParlantProvider {
    async fn list_tools(&self) -> Result<Vec<Tool>> {
        let url = format!("{}/tools", self.base);
        let body = self.get_json(&url).await?;
        let Some(Value::Array(tools)) = body.get("tools").cloned() else {
            return Err(self.unavailable(format!("GET {url} answered without a `tools` list")));
        };
        tools.into_iter().map(|t| self.tool_from_wire(t)).collect()
    }

    async fn resolve_tool(&self, tool: &Tool, ctx: &ToolContext) -> Result<Option<Tool>> {
        let url = format!(
            "{}/tools/{}/resolve?agent_id={}&session_id={}&customer_id={}",
            self.base,
            encode_component(&tool.id.name),
            encode_component(&ctx.agent_id),
            encode_component(&ctx.session_id),
            encode_component(&ctx.customer_id),
        );
        let body = self.get_json(&url).await?;
        let wire =
            body.get("tool").cloned().ok_or_else(|| self.unavailable(format!("GET {url} answered without `tool`")))?;
        self.tool_from_wire(wire).map(Some)
    }

    async fn call(&self, tool: &Tool, args: Map<String, Value>, ctx: &ToolContext) -> ToolOutcome {
        self.stream_call(tool, args, ctx).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn reads_the_wire_tool_of_the_reference() {
        let wire = json!({"name":"get_weather","creation_utc":"2026-11-21T13:17:13.257876Z",
         "description":"Get the weather forecast for a city.","metadata":{"team":"weather","version":2},
         "parameters":{
          "city":[{"type":"string","description":"City to look up","examples":["Paris","Tel Aviv"]},
                  {"hidden":false,"source":"customer","description":"City to look up","significance":"Needed to know where",
                   "examples":["Paris","Tel Aviv"],"precedence":1,"display_name":"city name"}],
          "unit":[{"type":"string","enum":["celsius","fahrenheit"]},
                  {"hidden":false,"source":"any","description":null,"significance":null,"examples":[],
                   "precedence":9223372036854775807i64,"display_name":null}],
          "guests":[{"type":"array","item_type":"integer"},{}],
          "odd":[{"type":"timedelta"},{}],
          "weird":[{"type":"blob"},{}]},
         "required":["city"],"consequential":false,"overlap":1});
        let tool = WireTool::deserialize(wire).unwrap().into_tool("toys");
        assert_eq!(tool.id.to_string(), "toys:get_weather");
        assert_eq!(tool.overlap, Overlap::None);
        let city = &tool.parameters[0];
        assert!(city.required && city.source == ParameterSource::Customer && city.precedence == Some(1));
        assert_eq!(city.display_name.as_deref(), Some("city name"));
        assert_eq!(tool.parameters[1].allowed.len(), 2);
        assert_eq!(tool.parameters[1].precedence, None);
        assert_eq!(tool.parameters[2].items, Some(ParameterType::Integer));
        assert_eq!(tool.parameters[3].kind, ParameterType::Timedelta);
        assert_eq!(tool.parameters[4].kind, ParameterType::String);
    }

    #[test]
    fn encodes_arguments_for_python_servers() {
        let mut tool = Tool {
            id: ToolId::new("s", "t"),
            description: None,
            parameters: ["n", "flag", "off", "list", "missing"]
                .iter()
                .map(|n| parameter(*n, ParameterType::String))
                .collect(),
            consequential: false,
            idempotency: Idempotency::Unknown,
            overlap: Overlap::Auto,
            fixture: None,
        };
        tool.parameters[4].required = false;
        let args = json!({"n": 3, "flag": true, "off": false, "list": [1, true]});
        let encoded = encode_arguments(&tool, args.as_object().unwrap());
        assert_eq!(
            Value::Object(encoded),
            json!({"n": "3", "flag": "true", "off": "", "list": ["1", "true"], "missing": null})
        );
    }

    #[test]
    fn error_details_keep_the_last_traceback_line() {
        let body =
            r#"{"detail":["Traceback (most recent call last):\n","  File \"x.py\"\n","ValueError: sync kaboom\n"]}"#;
        assert_eq!(error_detail(body), "ValueError: sync kaboom");
        assert_eq!(error_detail("Internal Server Error"), "Internal Server Error");
    }
}
