//! The context a tool runs in, and what it may emit while running.

use std::fmt;
use std::sync::{Arc, Mutex};

use guidepost_core::tool::ToolId;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Something a tool emits while it runs, before its result: Parlant plugin tools send these
/// as `{"message"}`, `{"status"}` and `{"custom"}` objects; native tools call
/// [`ToolContext::emit`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolEmission {
    /// A complete message from the agent to the customer.
    Message(String),
    /// A session status update (`typing`, `processing`, ...). `data` is `{}` when the tool
    /// sent `null`, so clients reading `data.stage` keep working.
    Status {
        /// The status name.
        status: String,
        /// Extra data, such as `{"stage": "Looking up order"}`.
        data: Value,
    },
    /// A custom session event.
    Custom(Value),
}

/// Called with every emission the moment it arrives, so the engine can publish it as a
/// session event before the call finishes.
pub type EmissionListener = Arc<dyn Fn(&ToolId, &ToolEmission) + Send + Sync>;

/// Who and where a tool is called for. Cheap to clone.
#[derive(Clone, Default)]
pub struct ToolContext {
    /// The agent's id.
    pub agent_id: String,
    /// The session's id.
    pub session_id: String,
    /// The customer's id (`guest` for anonymous customers).
    pub customer_id: String,
    /// Free-form data for tools (Parlant's `plugin_data`); not sent over the wire.
    pub plugin_data: Map<String, Value>,
    listener: Option<EmissionListener>,
    call: Option<CallScope>,
    idempotency_key: Option<String>,
}

#[derive(Clone)]
struct CallScope {
    tool: ToolId,
    emissions: Arc<Mutex<Vec<ToolEmission>>>,
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("agent_id", &self.agent_id)
            .field("session_id", &self.session_id)
            .field("customer_id", &self.customer_id)
            .field("plugin_data", &self.plugin_data)
            .field("listener", &self.listener.is_some())
            .field("idempotency_key", &self.idempotency_key)
            .finish()
    }
}

impl ToolContext {
    /// A context for this agent, session and customer.
    pub fn new(agent_id: impl Into<String>, session_id: impl Into<String>, customer_id: impl Into<String>) -> Self {
        Self {
            agent_id: agent_id.into(),
            session_id: session_id.into(),
            customer_id: customer_id.into(),
            ..Self::default()
        }
    }

    /// The same context for one call identified by `key`: the call's idempotency key, the
    /// same each time the call is sent (again after its process died). A service that
    /// performs each key once makes a repeat harmless; the HTTP-based services send it as
    /// the `Idempotency-Key` header, MCP services in the request's `_meta` (under
    /// [`crate::mcp::IDEMPOTENCY_META_KEY`]), and native tools read it with
    /// [`ToolContext::idempotency_key`].
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// The idempotency key of the call this context is for, when the caller gave one.
    pub fn idempotency_key(&self) -> Option<&str> {
        self.idempotency_key.as_deref()
    }

    /// Sets a listener that sees every emission as it happens.
    pub fn with_listener(mut self, listener: EmissionListener) -> Self {
        self.listener = Some(listener);
        self
    }

    /// Records an emission of the running call and passes it to the listener. Outside a
    /// registry call there is no call to attach it to, and the emission is dropped.
    pub fn emit(&self, emission: ToolEmission) {
        if let Some(scope) = &self.call {
            if let Some(listener) = &self.listener {
                listener(&scope.tool, &emission);
            }
            if let Ok(mut list) = scope.emissions.lock() {
                list.push(emission);
            }
        }
    }

    /// The id of the tool being called, inside a registry call.
    pub fn tool(&self) -> Option<&ToolId> {
        self.call.as_ref().map(|c| &c.tool)
    }

    /// A copy scoped to one call of `tool`, collecting that call's emissions.
    pub(crate) fn for_call(&self, tool: &ToolId) -> Self {
        let mut ctx = self.clone();
        ctx.call = Some(CallScope { tool: tool.clone(), emissions: Arc::new(Mutex::new(Vec::new())) });
        ctx
    }

    /// The emissions collected so far by a call-scoped context.
    pub(crate) fn take_emissions(&self) -> Vec<ToolEmission> {
        self.call
            .as_ref()
            .and_then(|c| c.emissions.lock().ok().map(|mut list| std::mem::take(&mut *list)))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn call_scoped_contexts_collect_and_forward_emissions() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let ctx = ToolContext::new("a", "s", "c").with_listener(Arc::new(move |tool, e| {
            sink.lock().unwrap().push((tool.to_string(), e.clone()));
        }));
        let scoped = ctx.for_call(&ToolId::new("svc", "t"));
        scoped.emit(ToolEmission::Message("hi".into()));
        let clone = scoped.clone();
        clone.emit(ToolEmission::Custom(serde_json::json!({"x": 1})));
        assert_eq!(scoped.take_emissions().len(), 2);
        assert_eq!(seen.lock().unwrap()[0].0, "svc:t");
        assert!(scoped.take_emissions().is_empty());
    }
}
