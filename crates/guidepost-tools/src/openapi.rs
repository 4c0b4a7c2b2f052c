//! HTTP tools described by an OpenAPI 3.x document (JSON or YAML, from a path or URL).
//!
//! Every operation with an `operationId` becomes a tool. Its parameters are the path,
//! query and header parameters and the top-level properties of a JSON request body. A call
//! substitutes the path, builds the query string and the JSON body, and returns the JSON
//! response as `data`; a non-2xx status is an error outcome with the status and an excerpt
//! of the body (the service's own failure for 5xx, 401, 403, 407, 408 and 429, see
//! [`ToolOutcome::http_error`]).
//!
//! Every call carries its idempotency key in the `Idempotency-Key` header. An operation
//! that declares that header parameter takes the key (the header is filled by Guidepost,
//! never asked of the model), and its tool counts as performing each key once.

use std::time::Duration;

use async_trait::async_trait;
use guidepost_core::limits::Limits;
use guidepost_core::tool::{Idempotency, Overlap, Tool, ToolId, ToolService};
use indexmap::IndexMap;
use reqwest::Method;
use serde_json::{Map, Value};
use tokio::sync::OnceCell;

use crate::context::ToolContext;
use crate::error::{Result, ToolError};
use crate::json_schema::{parameter_from_schema, resolve};
use crate::parlant::excerpt;
use crate::provider::ToolProvider;
use crate::result::{ToolOutcome, ToolResult};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const METHODS: [&str; 7] = ["get", "put", "post", "delete", "patch", "head", "options"];

/// The HTTP client shared by the HTTP-based providers.
pub(crate) fn http_client() -> reqwest::Client {
    guidepost_llm::http::client_builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("guidepost-tools/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default()
}

/// Percent-encodes `text` for a URL path segment or query component (RFC 3986 unreserved
/// characters stay as they are).
pub(crate) fn encode_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Location {
    Path,
    Query,
    Header,
    Body,
}

#[derive(Debug, Clone)]
struct Operation {
    method: Method,
    path: String,
    locations: IndexMap<String, Location>,
    tool: Tool,
}

#[derive(Debug)]
struct Api {
    base_url: String,
    operations: IndexMap<String, Operation>,
}

/// An HTTP service described by an OpenAPI document. The document is read on first use.
#[derive(Debug)]
pub struct OpenApiProvider {
    service: String,
    spec: String,
    base_url: Option<String>,
    client: reqwest::Client,
    api: OnceCell<Api>,
}

impl OpenApiProvider {
    /// A provider for a declared `openapi` service: the document is read from `spec` (a
    /// path or URL) or from `<url>/openapi.json`; requests go to `url`, or to the
    /// document's first server, or to the origin the document came from.
    pub fn new(service: &ToolService) -> Result<Self> {
        let spec = match (&service.spec, &service.url) {
            (Some(spec), _) => spec.clone(),
            (None, Some(url)) => format!("{}/openapi.json", url.trim_end_matches('/')),
            (None, None) => {
                return Err(ToolError::InvalidService {
                    service: service.name.clone(),
                    message: "an OpenAPI service needs `spec` or `url`".into(),
                });
            }
        };
        Ok(Self {
            service: service.name.clone(),
            spec,
            base_url: service.url.as_ref().map(|u| u.trim_end_matches('/').to_string()),
            client: http_client(),
            api: OnceCell::new(),
        })
    }

    fn invalid(&self, message: String) -> ToolError {
        ToolError::InvalidService { service: self.service.clone(), message }
    }

    fn unavailable(&self, message: String) -> ToolError {
        ToolError::ServiceUnavailable { service: self.service.clone(), message }
    }

    async fn api(&self) -> Result<&Api> {
        self.api.get_or_try_init(|| self.load()).await
    }

    async fn load(&self) -> Result<Api> {
        let is_url = self.spec.starts_with("http://") || self.spec.starts_with("https://");
        let text = if is_url {
            let response = self
                .client
                .get(&self.spec)
                .send()
                .await
                .map_err(|e| self.unavailable(format!("GET {}: {e}", self.spec)))?;
            let status = response.status();
            let text = crate::body::read_capped(response, &format!("service `{}`: GET {}", self.service, self.spec))
                .await
                .map_err(|e| self.unavailable(e))?;
            if !status.is_success() {
                return Err(self.unavailable(format!("GET {} answered HTTP {status}: {}", self.spec, excerpt(&text))));
            }
            text
        } else {
            let path = std::path::PathBuf::from(&self.spec);
            tokio::task::spawn_blocking(move || guidepost_core::files::read_text(&path, Limits::global()))
                .await
                .map_err(|e| self.invalid(format!("cannot read the OpenAPI document {}: {e}", self.spec)))?
                .map_err(|e| self.invalid(format!("the OpenAPI document: {e}")))?
        };
        // Parsed on a blocking thread, so the discovery budget around this call still runs out
        // on time; the depth is checked before any parser recurses.
        let spec = self.spec.clone();
        let doc = tokio::task::spawn_blocking(move || parse_document(&text, Limits::global()))
            .await
            .map_err(|e| self.invalid(format!("parsing the OpenAPI document {spec}: {e}")))?
            .map_err(|e| self.invalid(format!("the OpenAPI document {}: {e}", self.spec)))?;
        let base_url = self.base_url_for(&doc, is_url)?;
        let operations = self.operations(&doc)?;
        Ok(Api { base_url, operations })
    }

    fn base_url_for(&self, doc: &Value, spec_is_url: bool) -> Result<String> {
        if let Some(url) = &self.base_url {
            return Ok(url.clone());
        }
        let origin = spec_is_url
            .then(|| reqwest::Url::parse(&self.spec).ok())
            .flatten()
            .map(|u| u.origin().ascii_serialization());
        let server = doc.pointer("/servers/0/url").and_then(Value::as_str);
        match (server, origin) {
            (Some(s), _) if s.starts_with("http://") || s.starts_with("https://") => Ok(s.trim_end_matches('/').to_string()),
            (Some(s), Some(origin)) => Ok(format!("{origin}{}", s.trim_end_matches('/'))),
            (None, Some(origin)) => Ok(origin),
            _ => Err(self.invalid(format!(
                "no base URL for the operations of {}: set `url` on the service or an absolute `servers` URL in the document",
                self.spec
            ))),
        }
    }

    fn operations(&self, doc: &Value) -> Result<IndexMap<String, Operation>> {
        let paths = doc
            .get("paths")
            .and_then(Value::as_object)
            .ok_or_else(|| self.invalid(format!("the OpenAPI document {} has no `paths`", self.spec)))?;
        let mut out = IndexMap::new();
        for (path, item) in paths {
            let item = resolve(doc, item);
            for method in METHODS {
                let Some(op) = item.get(method) else { continue };
                let Some(name) = op.get("operationId").and_then(Value::as_str) else {
                    tracing::debug!(service = %self.service, path, method, "operation without operationId skipped");
                    continue;
                };
                let operation = self.operation(doc, path, method, item, op, name);
                if out.insert(name.to_string(), operation).is_some() {
                    return Err(self.invalid(format!("operationId `{name}` is used twice in {}", self.spec)));
                }
            }
        }
        Ok(out)
    }

    fn operation(&self, doc: &Value, path: &str, method: &str, item: &Value, op: &Value, name: &str) -> Operation {
        let mut parameters = Vec::new();
        let mut locations = IndexMap::new();
        let declared = item.get("parameters").and_then(Value::as_array).into_iter().flatten();
        let own = op.get("parameters").and_then(Value::as_array).into_iter().flatten();
        let mut merged: IndexMap<(String, String), &Value> = IndexMap::new();
        for p in declared.chain(own) {
            let p = resolve(doc, p);
            let key = (
                p.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                p.get("in").and_then(Value::as_str).unwrap_or_default().to_string(),
            );
            merged.insert(key, p);
        }
        let mut keyed = false;
        for ((pname, place), p) in merged {
            if place == "header" && pname.eq_ignore_ascii_case(crate::IDEMPOTENCY_KEY_HEADER) {
                keyed = true;
                continue;
            }
            let location = match place.as_str() {
                "path" => Location::Path,
                "query" => Location::Query,
                "header" => Location::Header,
                _ => continue,
            };
            let required = location == Location::Path || p.get("required").and_then(Value::as_bool).unwrap_or(false);
            let schema = p.get("schema").cloned().unwrap_or(Value::Null);
            let mut param = parameter_from_schema(doc, &pname, &schema, required);
            if let Some(d) = p.get("description").and_then(Value::as_str) {
                param.description = Some(d.to_string());
            }
            locations.insert(pname, location);
            parameters.push(param);
        }
        if let Some(body) = op.get("requestBody").map(|b| resolve(doc, b))
            && let Some(schema) = body.pointer("/content/application~1json/schema")
        {
            let schema = resolve(doc, schema);
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for (pname, prop) in schema.get("properties").and_then(Value::as_object).into_iter().flatten() {
                if locations.contains_key(pname) {
                    tracing::warn!(service = %self.service, operation = name, parameter = %pname, "body property shadowed by a parameter of the same name");
                    continue;
                }
                parameters.push(parameter_from_schema(doc, pname, prop, required.contains(&pname.as_str())));
                locations.insert(pname.clone(), Location::Body);
            }
        }
        let text = |key: &str| op.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
        let description = match (text("summary"), text("description")) {
            (Some(s), Some(d)) if s != d => Some(format!("{s}\n\n{d}")),
            (Some(s), _) => Some(s.to_string()),
            (None, d) => d.map(str::to_string),
        };
        let tool = Tool {
            id: ToolId::new(self.service.clone(), name),
            description,
            parameters,
            consequential: !matches!(method, "get" | "head" | "options"),
            idempotency: if keyed { Idempotency::Keyed } else { Idempotency::Unknown },
            overlap: Overlap::Auto,
            fixture: None,
        };
        let method = Method::from_bytes(method.to_ascii_uppercase().as_bytes()).unwrap_or(Method::GET);
        Operation { method, path: path.to_string(), locations, tool }
    }

    async fn send(&self, api: &Api, op: &Operation, args: Map<String, Value>, ctx: &ToolContext) -> ToolOutcome {
        let mut path = op.path.clone();
        let mut query = Vec::new();
        let mut headers = Vec::new();
        let mut body = Map::new();
        for (name, value) in args {
            match op.locations.get(&name) {
                Some(Location::Path) => {
                    path = path.replace(&format!("{{{name}}}"), &encode_component(&as_text(&value)))
                }
                Some(Location::Query) => match &value {
                    Value::Array(items) => query.extend(
                        items.iter().map(|i| format!("{}={}", encode_component(&name), encode_component(&as_text(i)))),
                    ),
                    other => query.push(format!("{}={}", encode_component(&name), encode_component(&as_text(other)))),
                },
                Some(Location::Header) => headers.push((name, as_text(&value))),
                Some(Location::Body) | None => {
                    body.insert(name, value);
                }
            }
        }
        let mut url = format!("{}{path}", api.base_url);
        if !query.is_empty() {
            url = format!("{url}?{}", query.join("&"));
        }
        let mut request = self.client.request(op.method.clone(), &url);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        if let Some(key) = ctx.idempotency_key() {
            request = request.header(crate::IDEMPOTENCY_KEY_HEADER, key);
        }
        if op.locations.values().any(|l| *l == Location::Body) {
            request = request.json(&Value::Object(body));
        }
        let what = format!("{} {path}", op.method);
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) if e.is_connect() => return ToolOutcome::unavailable(format!("cannot reach {url} for {what}: {e}")),
            Err(e) => return ToolOutcome::service_error(format!("{what} failed: {e}")),
        };
        let status = response.status();
        let text = match crate::body::read_capped(response, &format!("tool `{}`: {what}", self.service)).await {
            Ok(t) => t,
            Err(e) => return ToolOutcome::service_error(format!("reading the response of {what} failed: {e}")),
        };
        if !status.is_success() {
            return ToolOutcome::http_error(status.as_u16(), format!("HTTP {status} from {what}: {}", excerpt(&text)));
        }
        let data = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        ToolOutcome::Ok(ToolResult::new(data))
    }
}

/// Parses an OpenAPI document, JSON or YAML, within [`Limits`]: nested no deeper than
/// [`Limit::NestingDepth`](guidepost_core::limits::Limit::NestingDepth) (checked on the raw
/// text before anything recurses) and, for YAML, with aliases bounded in expansion.
fn parse_document(text: &str, limits: &Limits) -> std::result::Result<Value, String> {
    use guidepost_core::definition::{source, text as raw};
    let looks_like_json = text.trim_start_matches('\u{feff}').trim_start().starts_with(['{', '[']);
    if looks_like_json {
        raw::check_json_depth(text, limits).map_err(|e| format!("line {}: {}", e.span.line, e.message))?;
        if let Ok(doc) = serde_json::from_str(text.trim_start_matches('\u{feff}')) {
            return Ok(doc);
        }
    }
    match source::parse_with(text, limits) {
        Ok(node) => Ok(node.to_json()),
        Err(e) => Err(format!("neither JSON nor YAML: line {}: {}", e.span.line, e.message)),
    }
}

fn as_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[async_trait]
impl ToolProvider for OpenApiProvider {
    async fn list_tools(&self) -> Result<Vec<Tool>> {
        Ok(self.api().await?.operations.values().map(|o| o.tool.clone()).collect())
    }

    async fn call(&self, tool: &Tool, args: Map<String, Value>, ctx: &ToolContext) -> ToolOutcome {
        let api = match self.api().await {
            Ok(api) => api,
            Err(e) => return ToolOutcome::unavailable(e.to_string()),
        };
        match api.operations.get(&tool.id.name) {
            Some(op) => self.send(api, op, args, ctx).await,
            None => ToolOutcome::unavailable(format!(
                "the OpenAPI document {} has no operation `{}`",
                self.spec, tool.id.name
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn encodes_components() {
        assert_eq!(encode_component("a b/c?d=é"), "a%20b%2Fc%3Fd%3D%C3%A9");
        assert_eq!(encode_component("Safe-._~1"), "Safe-._~1");
    }
}
