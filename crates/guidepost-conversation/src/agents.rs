//! [`AgentPool`]: the runtime of each agent, on its current definition.
//!
//! A runtime is built from the store's definition of the agent and kept while the
//! definition revision stays the same; any change to a definition entity (over the API or
//! by an import) makes the next turn build a fresh one, so a guideline created over REST
//! applies to the very next message. Tool registries are kept per set of services and
//! tools, so a change to a guideline does not restart the agent's MCP servers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use guidepost_core::AgentDefinition;
use guidepost_runtime::{AgentRuntime, RuntimeConfig, RuntimeModels};
use guidepost_store::Store;
use guidepost_tools::registry::ToolRegistry;
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

use crate::error::{ConversationError, Result};
use crate::ports::StoreVariables;

/// How long listing the tools of one agent's services may take before the agent runs
/// with the tools that answered.
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(15);

struct Cached {
    revision: i64,
    runtime: Arc<AgentRuntime>,
    /// Whether every tool service answered when it was built.
    complete: bool,
    built: std::time::Instant,
}

/// How long a runtime built while a tool service did not answer is used before the
/// services are listed again.
pub const RETRY_DISCOVERY_AFTER: Duration = Duration::from_secs(60);

/// The agents' runtimes.
pub struct AgentPool {
    store: Store,
    models: RuntimeModels,
    config: RuntimeConfig,
    runtimes: Mutex<HashMap<String, Cached>>,
    registries: Mutex<HashMap<String, Arc<ToolRegistry>>>,
}

impl AgentPool {
    /// Runtimes on `store`'s definitions, with these models and settings.
    pub fn new(store: Store, models: RuntimeModels, config: RuntimeConfig) -> Self {
        Self { store, models, config, runtimes: Mutex::default(), registries: Mutex::default() }
    }

    /// The models every agent uses.
    pub fn models(&self) -> &RuntimeModels {
        &self.models
    }

    /// The runtime of `agent_id` on its current definition.
    pub async fn runtime(&self, agent_id: &str) -> Result<Arc<AgentRuntime>> {
        let revision = self.store.revision().await?;
        let mut runtimes = self.runtimes.lock().await;
        if let Some(cached) = runtimes.get(agent_id)
            && cached.revision == revision
            && (cached.complete || cached.built.elapsed() < RETRY_DISCOVERY_AFTER)
        {
            return Ok(cached.runtime.clone());
        }
        let definition = self.store.agent_definition(agent_id).await?;
        let (registry, complete) = self.registry(&definition).await?;
        let runtime = Arc::new(
            AgentRuntime::new(Arc::new(definition), self.models.clone(), registry, self.config.clone())
                .with_variables(Arc::new(StoreVariables::new(self.store.clone()))),
        );
        runtimes.insert(
            agent_id.to_string(),
            Cached { revision, runtime: runtime.clone(), complete, built: std::time::Instant::now() },
        );
        Ok(runtime)
    }

    /// The tool registry for a definition's services and tools, with the tools of its
    /// dynamic services listed (those that do not answer in time are left out and logged),
    /// and whether every service answered.
    pub async fn registry(&self, definition: &AgentDefinition) -> Result<(Arc<ToolRegistry>, bool)> {
        let key = {
            let text = serde_json::to_string(&(&definition.services, &definition.tools)).unwrap_or_default();
            hex_digest(&text)
        };
        let mut registries = self.registries.lock().await;
        if let Some(registry) = registries.get(&key) {
            return Ok((registry.clone(), true));
        }
        let mut registry =
            ToolRegistry::from_definition(definition).map_err(|e| ConversationError::AgentCannotRun {
                agent: definition.agent.id.clone(),
                reason: format!("its tools cannot be set up: {e}"),
            })?;
        // A registry whose services did not all answer is used for this runtime but not
        // kept: the next definition change or turn after a restart lists them again.
        let complete = match tokio::time::timeout(DISCOVERY_TIMEOUT, registry.discover_tools()).await {
            Ok(problems) => {
                for problem in &problems {
                    tracing::warn!(agent = %definition.agent.id, %problem, "a tool service could not be listed");
                }
                problems.is_empty()
            }
            Err(_) => {
                tracing::warn!(
                    agent = %definition.agent.id,
                    "listing the tool services took longer than {DISCOVERY_TIMEOUT:?}; going on without them"
                );
                false
            }
        };
        let registry = Arc::new(registry);
        if complete {
            registries.insert(key, registry.clone());
        }
        Ok((registry, complete))
    }
}

fn hex_digest(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}
