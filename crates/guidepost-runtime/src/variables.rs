//! Context variable values for a turn: customer, tag and global scopes, tool-backed values
//! refreshed when stale.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};
use guidepost_core::{AgentDefinition, ContextVariable};
use guidepost_tools::context::ToolContext;
use guidepost_tools::registry::ToolRegistry;
use guidepost_tools::result::ToolOutcome;
use indexmap::IndexMap;
use serde_json::Value;

use crate::clock::Clock;

/// A stored variable value.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredValue {
    /// The value.
    pub value: Value,
    /// When it was set.
    pub updated: DateTime<Utc>,
}

/// Which values a key addresses: one customer, customers with a tag, or everyone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// One customer, by id.
    Customer(String),
    /// Customers carrying a tag.
    Tag(String),
    /// Everyone.
    Global,
}

/// Where variable values live. A store that fails to read answers `None` (the
/// definition's default is used) and logs why; one that fails to write logs why (the
/// value is used for this turn and refreshed again on the next).
#[async_trait::async_trait]
pub trait VariableStore: Send + Sync {
    /// The value of `variable` for `scope`.
    async fn get(&self, variable: &str, scope: &Scope) -> Option<StoredValue>;
    /// Sets the value of `variable` for `scope`.
    async fn set(&self, variable: &str, scope: Scope, value: StoredValue);
}

/// Variable values in memory.
#[derive(Debug, Default)]
pub struct MemoryVariables {
    values: Mutex<HashMap<(String, Scope), StoredValue>>,
}

#[async_trait::async_trait]
impl VariableStore for MemoryVariables {
    async fn get(&self, variable: &str, scope: &Scope) -> Option<StoredValue> {
        self.values.lock().unwrap_or_else(PoisonError::into_inner).get(&(variable.to_string(), scope.clone())).cloned()
    }

    async fn set(&self, variable: &str, scope: Scope, value: StoredValue) {
        self.values.lock().unwrap_or_else(PoisonError::into_inner).insert((variable.to_string(), scope), value);
    }
}

/// Who the turn is for.
#[derive(Debug, Clone, Default)]
pub struct CustomerRef {
    /// Customer id.
    pub id: String,
    /// Tag ids of the customer.
    pub tags: Vec<String>,
}

async fn lookup(store: &dyn VariableStore, variable: &ContextVariable, customer: &CustomerRef) -> Option<StoredValue> {
    if let Some(v) = store.get(&variable.id, &Scope::Customer(customer.id.clone())).await {
        return Some(v);
    }
    for tag in &customer.tags {
        if let Some(v) = store.get(&variable.id, &Scope::Tag(tag.clone())).await {
            return Some(v);
        }
    }
    store.get(&variable.id, &Scope::Global).await
}

/// Loads the values of every variable: customer value, else a value for one of the
/// customer's tags, else the global value, else the definition's default. A tool-backed
/// variable whose value is missing or older than its freshness is refreshed by calling
/// its tool (and stored for the customer); if that fails, the stale value is kept.
pub async fn load_variables(
    definition: &AgentDefinition,
    store: &dyn VariableStore,
    clock: &dyn Clock,
    tools: &ToolRegistry,
    customer: &CustomerRef,
    ctx: &ToolContext,
) -> IndexMap<String, Value> {
    values(definition, store, clock, Some((tools, ctx)), customer).await
}

/// The values of every variable as [`load_variables`] finds them, none refreshed (no tool
/// is called, nothing is stored): what the prompts of a turn that is not running show, for
/// reading them ahead.
pub async fn stored_variables(
    definition: &AgentDefinition,
    store: &dyn VariableStore,
    clock: &dyn Clock,
    customer: &CustomerRef,
) -> IndexMap<String, Value> {
    values(definition, store, clock, None, customer).await
}

async fn values(
    definition: &AgentDefinition,
    store: &dyn VariableStore,
    clock: &dyn Clock,
    refresh: Option<(&ToolRegistry, &ToolContext)>,
    customer: &CustomerRef,
) -> IndexMap<String, Value> {
    let now = clock.now();
    let mut out = IndexMap::new();
    for variable in &definition.variables {
        let stored = lookup(store, variable, customer).await;
        let stale = match (&variable.tool, &stored, &variable.freshness) {
            (Some(_), None, _) => true,
            (Some(_), Some(s), Some(fresh)) => fresh.is_stale(s.updated, now),
            _ => false,
        };
        let mut value = stored.map(|s| s.value).or_else(|| variable.value.clone());
        if stale
            && let Some(tool) = &variable.tool
            && let Some((tools, ctx)) = refresh
        {
            let record = tools.call(tool, serde_json::Map::new(), ctx, None).await;
            match record.outcome {
                ToolOutcome::Ok(result) => {
                    store
                        .set(
                            &variable.id,
                            Scope::Customer(customer.id.clone()),
                            StoredValue { value: result.data.clone(), updated: now },
                        )
                        .await;
                    value = Some(result.data);
                }
                ToolOutcome::Error { message, .. } => {
                    tracing::warn!(variable = %variable.name, %message, "could not refresh context variable")
                }
            }
        }
        if let Some(v) = value {
            out.insert(variable.name.clone(), v);
        }
    }
    out
}
