//! Native tools: Rust async functions registered through the builder API.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;
use guidepost_core::tool::{
    Idempotency, NATIVE_SERVICE, Overlap, ParameterSource, ParameterType, Tool, ToolId, ToolParameter,
};
use serde_json::{Map, Value};

use crate::context::ToolContext;
use crate::error::Result;
use crate::provider::ToolProvider;
use crate::result::{ToolOutcome, ToolResult};

type Handler = Arc<dyn Fn(Map<String, Value>, ToolContext) -> BoxFuture<'static, ToolOutcome> + Send + Sync>;

/// A required parameter of type `kind` with every other field empty; adjust the public
/// fields (or use struct update syntax) for descriptions, enums, defaults and so on.
///
/// ```
/// use guidepost_core::tool::{ParameterType, ToolParameter};
/// use guidepost_tools::native::parameter;
///
/// let unit = ToolParameter {
///     allowed: vec!["celsius".into(), "fahrenheit".into()],
///     default: Some("celsius".into()),
///     required: false,
///     ..parameter("unit", ParameterType::String)
/// };
/// assert_eq!(unit.name, "unit");
/// ```
pub fn parameter(name: impl Into<String>, kind: ParameterType) -> ToolParameter {
    ToolParameter {
        name: name.into(),
        kind,
        items: None,
        description: None,
        allowed: Vec::new(),
        required: true,
        default: None,
        source: ParameterSource::Any,
        hidden: false,
        examples: Vec::new(),
        precedence: None,
        display_name: None,
        significance: None,
    }
}

/// A Rust async function exposed as a tool of the `native` service.
#[derive(Clone)]
pub struct NativeTool {
    /// The tool's declaration (id `native:<name>`).
    pub tool: Tool,
    handler: Handler,
}

impl fmt::Debug for NativeTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeTool").field("tool", &self.tool).finish_non_exhaustive()
    }
}

impl NativeTool {
    /// A tool named `name` running `handler`. The handler gets the validated arguments and
    /// the call's context; it returns anything convertible to a [`ToolResult`] (a
    /// `serde_json::Value` becomes `data`) or an error whose text the agent will see.
    ///
    /// ```
    /// use guidepost_core::tool::ParameterType;
    /// use guidepost_tools::native::{NativeTool, parameter};
    /// use serde_json::json;
    ///
    /// let add = NativeTool::new("add", |args, _ctx| async move {
    ///     let a = args["a"].as_i64().unwrap_or(0);
    ///     let b = args["b"].as_i64().unwrap_or(0);
    ///     Ok::<_, String>(json!({"sum": a + b}))
    /// })
    /// .description("Adds two numbers")
    /// .parameter(parameter("a", ParameterType::Integer))
    /// .parameter(parameter("b", ParameterType::Integer));
    /// assert_eq!(add.tool.id.to_string(), "native:add");
    /// ```
    pub fn new<F, Fut, R, E>(name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(Map<String, Value>, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<R, E>> + Send + 'static,
        R: Into<ToolResult>,
        E: fmt::Display,
    {
        let handler: Handler = Arc::new(move |args, ctx| {
            let fut = handler(args, ctx);
            Box::pin(async move {
                match fut.await {
                    Ok(result) => ToolOutcome::Ok(result.into()),
                    Err(e) => ToolOutcome::failed(e.to_string()),
                }
            })
        });
        let tool = Tool {
            id: ToolId::new(NATIVE_SERVICE, name),
            description: None,
            parameters: Vec::new(),
            consequential: false,
            idempotency: Idempotency::Unknown,
            overlap: Overlap::Auto,
            fixture: None,
        };
        Self { tool, handler }
    }

    /// Sets the description the model reads.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.tool.description = Some(text.into());
        self
    }

    /// Adds a parameter (declaration order is kept).
    pub fn parameter(mut self, parameter: ToolParameter) -> Self {
        self.tool.parameters.push(parameter);
        self
    }

    /// Marks the tool consequential (payments, cancellations).
    pub fn consequential(mut self, yes: bool) -> Self {
        self.tool.consequential = yes;
        self
    }

    /// Declares that the function performs a call once per idempotency key
    /// ([`ToolContext::idempotency_key`]) and answers a repeat with the first outcome, so a
    /// call whose outcome was lost may be sent again.
    pub fn idempotency_keys(mut self) -> Self {
        self.tool.idempotency = Idempotency::Keyed;
        self
    }
}

/// The built-in `native` service: registered Rust functions.
#[derive(Default, Clone)]
pub struct NativeProvider {
    tools: HashMap<String, NativeTool>,
}

impl fmt::Debug for NativeProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeProvider").field("tools", &self.tools.keys().collect::<Vec<_>>()).finish()
    }
}

impl NativeProvider {
    /// Adds or replaces a tool.
    pub fn insert(&mut self, tool: NativeTool) {
        self.tools.insert(tool.tool.id.name.clone(), tool);
    }
}

#[async_trait]
impl ToolProvider for NativeProvider {
    async fn list_tools(&self) -> Result<Vec<Tool>> {
        Ok(self.tools.values().map(|t| t.tool.clone()).collect())
    }

    async fn call(&self, tool: &Tool, args: Map<String, Value>, ctx: &ToolContext) -> ToolOutcome {
        match self.tools.get(&tool.id.name) {
            Some(native) => (native.handler)(args, ctx.clone()).await,
            None => ToolOutcome::unavailable(format!(
                "native tool `{}` is declared but no Rust function is registered for it",
                tool.id.name
            )),
        }
    }
}
