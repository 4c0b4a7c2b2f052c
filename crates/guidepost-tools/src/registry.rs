//! The registry the engine calls tools through: it knows every tool, validates arguments,
//! and runs calls in their own tasks under timeouts, in parallel.

use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use guidepost_core::limits::{Limit, Limits};
use guidepost_core::model::AgentDefinition;
use guidepost_core::tool::{FIXTURE_SERVICE, Idempotency, NATIVE_SERVICE, ServiceKind, Tool, ToolId, ToolService};
use indexmap::IndexMap;
use serde_json::{Map, Value};

use crate::context::ToolContext;
use crate::error::{Result, ToolError};
use crate::fixture::FixtureProvider;
use crate::mcp::McpProvider;
use crate::native::{NativeProvider, NativeTool};
use crate::openapi::OpenApiProvider;
use crate::parlant::ParlantProvider;
use crate::provider::ToolProvider;
use crate::result::{ToolCallRecord, ToolErrorKind, ToolOutcome};
use crate::validate::validate_arguments;

/// Timeout of a call when neither the call nor its service sets one, unless
/// [`Limit::ToolCallTime`](guidepost_core::limits::Limit::ToolCallTime) is configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

struct Service {
    kind: ServiceKind,
    provider: Arc<dyn ToolProvider>,
    timeout: Option<Duration>,
    /// Declared to perform each idempotency key once.
    idempotency_keys: bool,
}

/// One call for [`ToolRegistry::call_many`].
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRequest {
    /// The tool to call.
    pub tool: ToolId,
    /// Its arguments, as the model produced them.
    pub arguments: Map<String, Value>,
}

impl ToolCallRequest {
    /// A call of `tool` with `arguments`.
    pub fn new(tool: ToolId, arguments: Map<String, Value>) -> Self {
        Self { tool, arguments }
    }
}

/// Every tool an agent can call, and the services behind them.
///
/// Build it with [`ToolRegistry::from_definition`], add Rust functions with
/// [`ToolRegistry::register_native`], discover the tools of OpenAPI, MCP and Parlant
/// services with [`ToolRegistry::resolve_tools`], then call tools with
/// [`ToolRegistry::call`] or [`ToolRegistry::call_many`].
pub struct ToolRegistry {
    tools: IndexMap<ToolId, Tool>,
    services: IndexMap<String, Service>,
    native: NativeProvider,
    default_timeout: Duration,
    discovery_timeout: Duration,
    /// Credentials the services' declarations hold (see [`service_secrets`]): removed from
    /// every error and call outcome.
    secrets: Vec<String>,
}

impl Default for ToolRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.tools.keys().map(ToString::to_string).collect::<Vec<_>>())
            .field("services", &self.services.keys().collect::<Vec<_>>())
            .field("default_timeout", &self.default_timeout)
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry with the built-in `native` service.
    pub fn new() -> Self {
        let mut registry = Self {
            tools: IndexMap::new(),
            services: IndexMap::new(),
            native: NativeProvider::default(),
            default_timeout: Limits::global().tool_call_time,
            discovery_timeout: Limits::global().discovery_time,
            secrets: Vec::new(),
        };
        registry.refresh_native();
        registry
    }

    /// A registry for an agent definition: fixture tools are served by the built-in
    /// `fixtures` service, declared services get their providers (nothing is contacted
    /// yet), and declared native tools wait for [`ToolRegistry::register_native`].
    pub fn from_definition(definition: &AgentDefinition) -> Result<Self> {
        let mut registry = Self::new();
        let fixtures: Vec<Tool> = definition.tools.iter().filter(|t| t.fixture.is_some()).cloned().collect();
        if !fixtures.is_empty() {
            registry.add_service(FIXTURE_SERVICE, ServiceKind::Fixture, Arc::new(FixtureProvider::new(fixtures)), None);
        }
        for service in &definition.services {
            registry.add_declared(service)?;
        }
        for tool in &definition.tools {
            registry.tools.insert(tool.id.clone(), tool.clone());
        }
        Ok(registry)
    }

    /// A registry for these services alone (nothing declared, nothing contacted yet): to
    /// list what they offer with [`ToolRegistry::discover_tools`].
    pub fn for_services(services: &[ToolService]) -> Result<Self> {
        let mut registry = Self::new();
        for service in services {
            registry.add_declared(service)?;
        }
        Ok(registry)
    }

    /// Adds a declared service, keeping its credentials to scrub them from errors.
    fn add_declared(&mut self, service: &ToolService) -> Result<()> {
        let secrets = service_secrets(service);
        let provider = provider_for(service).map_err(|e| e.scrubbed(&secrets))?;
        self.secrets.extend(secrets);
        self.add_service(&service.name, service.kind, provider, service.timeout_ms.map(Duration::from_millis));
        if let Some(added) = self.services.get_mut(&service.name) {
            added.idempotency_keys = service.idempotency_keys;
        }
        Ok(())
    }

    /// The credentials the services' declarations hold (URL passwords and tokens, credential
    /// `env` entries), for scrubbing what the tools return before anyone sees it.
    pub fn secrets(&self) -> &[String] {
        &self.secrets
    }

    /// `text` without secrets: the services' credentials, the environment's, URL
    /// credentials and key-shaped words.
    pub fn scrub(&self, text: &str) -> String {
        guidepost_llm::secrets::scrub_with(text, &self.secrets)
    }

    /// The outcome with secrets removed from its error message.
    fn scrub_outcome(&self, outcome: ToolOutcome) -> ToolOutcome {
        match outcome {
            ToolOutcome::Error { message, kind } => ToolOutcome::Error { message: self.scrub(&message), kind },
            ok => ok,
        }
    }

    /// Sets the timeout used when neither the call nor its service sets one.
    pub fn with_default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self
    }

    /// Sets how long listing one service's tools may take ([`Limit::DiscoveryTime`]).
    pub fn with_discovery_timeout(mut self, timeout: Duration) -> Self {
        self.discovery_timeout = timeout;
        self
    }

    /// Adds (or replaces) a service and its provider. Static services' tools are listed
    /// when [`ToolRegistry::resolve_tools`] runs; use this for custom providers.
    pub fn add_service(
        &mut self,
        name: impl Into<String>,
        kind: ServiceKind,
        provider: Arc<dyn ToolProvider>,
        timeout: Option<Duration>,
    ) {
        self.services.insert(name.into(), Service { kind, provider, timeout, idempotency_keys: false });
    }

    /// Registers a Rust function as the tool `native:<name>`. When the definition already
    /// declares that tool, its declaration (description, parameters) is kept unless the
    /// native tool declares parameters of its own.
    pub fn register_native(&mut self, native: NativeTool) {
        let id = native.tool.id.clone();
        let mut merged = match self.tools.get(&id) {
            Some(declared) if native.tool.parameters.is_empty() => declared.clone(),
            _ => native.tool.clone(),
        };
        if native.tool.idempotency != Idempotency::Unknown {
            merged.idempotency = native.tool.idempotency;
        }
        self.tools.insert(id, merged);
        self.native.insert(native);
        self.refresh_native();
    }

    fn refresh_native(&mut self) {
        let provider: Arc<dyn ToolProvider> = Arc::new(self.native.clone());
        self.add_service(NATIVE_SERVICE, ServiceKind::Native, provider, None);
    }

    /// Asks every dynamic service (OpenAPI, MCP, Parlant) for its tools, concurrently, and
    /// adds them. A tool also declared in the definition keeps its declared description
    /// and parameters where those are given. Fails with the first unreachable or
    /// misconfigured service; the tools of the services that answered are still added.
    /// Use [`ToolRegistry::discover_tools`] to get every failure instead.
    pub async fn resolve_tools(&mut self) -> Result<()> {
        self.discover_tools().await.into_iter().next().map_or(Ok(()), Err)
    }

    /// Like [`ToolRegistry::resolve_tools`], but returns every failure (one per service
    /// that could not be listed, each naming the service and what went wrong), so a caller
    /// can start with the services that answered and treat the others' tools as
    /// unavailable. Calls to those tools give [`ToolErrorKind::Unavailable`] outcomes (or
    /// reach the service, if it comes up later, for tools declared in the definition).
    pub async fn discover_tools(&mut self) -> Vec<ToolError> {
        let dynamic: Vec<(String, Arc<dyn ToolProvider>)> = self
            .services
            .iter()
            .filter(|(_, s)| s.kind.is_dynamic())
            .map(|(name, s)| (name.clone(), s.provider.clone()))
            .collect();
        // Each service gets its own budget: one that accepts the connection and never
        // answers costs that budget, and only its own tools.
        let budget = self.discovery_timeout;
        let listed = join_all(dynamic.iter().map(|(name, p)| async move {
            match tokio::time::timeout(budget, p.list_tools()).await {
                Ok(result) => result,
                Err(_) => {
                    let mut limits = Limits::global().clone();
                    limits.discovery_time = budget;
                    let what = format!("no list of tools within {budget:?}");
                    let mut error = limits.exceeded(Limit::DiscoveryTime, format!("service `{name}`"), what);
                    if budget < Duration::from_secs(1) {
                        error.allowed = format!("{budget:?}");
                    }
                    Err(ToolError::ServiceUnavailable {
                        service: name.clone(),
                        message: format!("{error}; its tools are unavailable until it answers"),
                    })
                }
            }
        }))
        .await;
        let mut errors = Vec::new();
        for ((name, _), result) in dynamic.iter().zip(listed) {
            match result {
                Ok(tools) => {
                    for tool in tools {
                        self.merge_discovered(tool);
                    }
                }
                Err(e) => {
                    let e = e.scrubbed(&self.secrets);
                    tracing::warn!(service = %name, error = %e, "could not list the tools of a tool service");
                    errors.push(e);
                }
            }
        }
        errors
    }

    fn merge_discovered(&mut self, discovered: Tool) {
        let merged = match self.tools.get(&discovered.id) {
            Some(declared) => Tool {
                description: declared.description.clone().or(discovered.description),
                parameters: if declared.parameters.is_empty() {
                    discovered.parameters
                } else {
                    declared.parameters.clone()
                },
                consequential: declared.consequential || discovered.consequential,
                idempotency: match declared.idempotency {
                    Idempotency::Unknown => discovered.idempotency,
                    declared => declared,
                },
                ..discovered
            },
            None => discovered,
        };
        self.tools.insert(merged.id.clone(), merged);
    }

    /// Every known tool, in registration order.
    pub fn tools(&self) -> impl Iterator<Item = &Tool> {
        self.tools.values()
    }

    /// The tool with this id.
    pub fn tool(&self, id: &ToolId) -> Option<&Tool> {
        self.tools.get(id)
    }

    /// What sending a call of this tool again does: [`Idempotency::Repeatable`] for fixture
    /// tables (they change nothing), what the tool declares (or its service listed), or
    /// [`Idempotency::Keyed`] for every tool of a service declared with `idempotency_keys`.
    pub fn idempotency(&self, id: &ToolId) -> Idempotency {
        let service = self.services.get(&id.service);
        if service.is_some_and(|s| s.kind == ServiceKind::Fixture) {
            return Idempotency::Repeatable;
        }
        match self.tools.get(id).map_or(Idempotency::Unknown, |t| t.idempotency) {
            Idempotency::Unknown if service.is_some_and(|s| s.idempotency_keys) => Idempotency::Keyed,
            own => own,
        }
    }

    /// The tool as it should be presented for this context (Parlant plugin services
    /// recompute dynamic enums per customer); the registered declaration otherwise.
    pub async fn resolve_tool(&self, id: &ToolId, ctx: &ToolContext) -> Result<Tool> {
        let tool = self.tools.get(id).ok_or_else(|| ToolError::UnknownTool(id.clone()))?;
        let Some(service) = self.services.get(&id.service) else {
            return Ok(tool.clone());
        };
        let resolved = service.provider.resolve_tool(tool, ctx).await.map_err(|e| e.scrubbed(&self.secrets))?;
        Ok(resolved.unwrap_or_else(|| tool.clone()))
    }

    /// Calls one tool. Arguments are validated and coerced first; the call runs in its own
    /// task, limited by `timeout` (or the service's `timeout_ms`, or the default). Every
    /// failure, including a panic, becomes an error outcome in the returned record.
    pub async fn call(
        &self,
        id: &ToolId,
        arguments: Map<String, Value>,
        ctx: &ToolContext,
        timeout: Option<Duration>,
    ) -> ToolCallRecord {
        let started = Instant::now();
        let record = |arguments, outcome| ToolCallRecord {
            tool: id.clone(),
            arguments,
            outcome,
            emissions: Vec::new(),
            duration: started.elapsed(),
        };
        let Some(tool) = self.tools.get(id) else {
            return record(arguments, ToolOutcome::unavailable(format!("unknown tool `{id}`")));
        };
        let Some(service) = self.services.get(&id.service) else {
            return record(
                arguments,
                ToolOutcome::unavailable(format!("tool service `{}` is not registered", id.service)),
            );
        };
        let validated = match validate_arguments(tool, &arguments) {
            Ok(v) => v,
            Err(problems) => {
                let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
                let message = format!("invalid arguments for `{id}`: {}", list.join("; "));
                return record(
                    arguments,
                    ToolOutcome::Error { message, kind: ToolErrorKind::InvalidArguments { problems } },
                );
            }
        };
        let limit = timeout.or(service.timeout).unwrap_or(self.default_timeout);
        let scoped = ctx.for_call(id);
        let task = {
            let provider = service.provider.clone();
            let tool = tool.clone();
            let args = validated.clone();
            let ctx = scoped.clone();
            tokio::spawn(async move { provider.call(&tool, args, &ctx).await })
        };
        let abort = task.abort_handle();
        let outcome = match tokio::time::timeout(limit, task).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(join)) if join.is_panic() => ToolOutcome::Error {
                message: format!("`{id}` panicked: {}", panic_text(join.into_panic())),
                kind: ToolErrorKind::Panicked,
            },
            Ok(Err(_)) => ToolOutcome::failed(format!("`{id}` was cancelled")),
            Err(_) => {
                abort.abort();
                tracing::warn!(tool = %id, limit_ms = limit.as_millis() as u64, "tool call timed out and was abandoned");
                ToolOutcome::Error {
                    message: format!("`{id}` did not finish within {} ms", limit.as_millis()),
                    kind: ToolErrorKind::Timeout { after_ms: limit.as_millis() as u64 },
                }
            }
        };
        let mut done = record(validated, self.scrub_outcome(outcome));
        done.emissions = scoped.take_emissions();
        done
    }

    /// Runs several calls in parallel and returns their records in request order.
    pub async fn call_many(
        &self,
        calls: Vec<ToolCallRequest>,
        ctx: &ToolContext,
        timeout: Option<Duration>,
    ) -> Vec<ToolCallRecord> {
        join_all(calls.into_iter().map(|c| async move { self.call(&c.tool, c.arguments, ctx, timeout).await })).await
    }
}

/// The credentials a service's declaration holds: the values of its `env` entries with
/// credential names (`*_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`, `*AUTHORIZATION*`) or
/// bearer values, and the credentials inside its URL and spec location.
pub fn service_secrets(service: &ToolService) -> Vec<String> {
    let mut out = guidepost_llm::secrets::secrets_of(
        service
            .env
            .iter()
            .filter(|(name, value)| {
                guidepost_llm::secrets::is_credential_name(name) || value.trim_start().starts_with("Bearer ")
            })
            .map(|(name, value)| (format!("{name}_SECRET"), value.clone())),
    );
    for location in service.url.iter().chain(service.spec.iter()) {
        out.extend(guidepost_llm::secrets::url_secrets(location));
    }
    out
}

/// The service as it may be shown (`GET /services`, an exported definition): the passwords
/// and tokens of its URLs and the values of its credential `env` entries replaced by
/// `[redacted]`. Importing the shown form back keeps the stored credentials (see
/// `guidepost_store`'s import).
pub fn shown_service(service: &ToolService) -> ToolService {
    let known = service_secrets(service);
    let mut shown = service.clone();
    let scrub = |text: &String| guidepost_llm::secrets::scrub_with(text, &known);
    shown.url = service.url.as_ref().map(scrub);
    shown.spec = service.spec.as_ref().map(scrub);
    shown.command = service.command.iter().map(scrub).collect();
    for (name, value) in &mut shown.env {
        *value = if guidepost_llm::secrets::is_credential_name(name) || value.trim_start().starts_with("Bearer ") {
            guidepost_llm::secrets::REDACTED.to_string()
        } else {
            scrub(value)
        };
    }
    shown
}

fn provider_for(service: &ToolService) -> Result<Arc<dyn ToolProvider>> {
    Ok(match service.kind {
        ServiceKind::Openapi => Arc::new(OpenApiProvider::new(service)?),
        ServiceKind::Mcp => Arc::new(McpProvider::new(service)?),
        ServiceKind::Parlant => Arc::new(ParlantProvider::new(service)?),
        ServiceKind::Fixture | ServiceKind::Native => {
            return Err(ToolError::InvalidService {
                service: service.name.clone(),
                message: "fixture and native services are built in and cannot be declared".into(),
            });
        }
    })
}

fn panic_text(payload: Box<dyn Any + Send>) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a non-text panic payload".into()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    fn assert_send<T: Send>(_: &T) {}

    #[test]
    fn the_registry_and_its_calls_can_move_across_tasks() {
        let registry = ToolRegistry::new();
        assert_send_sync(&registry);
        let ctx = ToolContext::default();
        let id = ToolId::new("native", "x");
        let call = registry.call(&id, Map::new(), &ctx, None);
        assert_send(&call);
        let many = registry.call_many(Vec::new(), &ctx, None);
        assert_send(&many);
    }
}
