//! The built-in `fixtures` service: tables of inputs to results from the definition file.

use std::collections::HashMap;

use async_trait::async_trait;
use guidepost_core::tool::{Fixture, FixtureOutcome, Tool};
use indexmap::IndexMap;
use serde_json::{Map, Value};

use crate::context::ToolContext;
use crate::error::Result;
use crate::provider::ToolProvider;
use crate::result::{ToolOutcome, ToolResult};

/// Serves every tool that has a fixture table, using [`Fixture::outcome_for`].
#[derive(Debug, Default, Clone)]
pub struct FixtureProvider {
    tools: Vec<Tool>,
    tables: HashMap<String, Fixture>,
}

impl FixtureProvider {
    /// A provider for `tools`; tools without a fixture are ignored.
    pub fn new(tools: impl IntoIterator<Item = Tool>) -> Self {
        let mut provider = Self::default();
        for tool in tools {
            if let Some(fixture) = &tool.fixture {
                provider.tables.insert(tool.id.name.clone(), fixture.clone());
                provider.tools.push(tool);
            }
        }
        provider
    }
}

#[async_trait]
impl ToolProvider for FixtureProvider {
    async fn list_tools(&self) -> Result<Vec<Tool>> {
        Ok(self.tools.clone())
    }

    async fn call(&self, tool: &Tool, args: Map<String, Value>, _ctx: &ToolContext) -> ToolOutcome {
        let Some(fixture) = self.tables.get(&tool.id.name) else {
            return ToolOutcome::unavailable(format!("`{}` has no fixture table", tool.id));
        };
        let lookup: IndexMap<String, Value> = args.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        match fixture.outcome_for(&lookup) {
            Some(FixtureOutcome::Result(data)) => ToolOutcome::Ok(ToolResult::new(data.clone())),
            Some(FixtureOutcome::Error(message)) => ToolOutcome::failed(message.clone()),
            None => ToolOutcome::failed(format!(
                "no fixture row of `{}` matches the arguments {}",
                tool.id,
                Value::Object(args)
            )),
        }
    }
}
