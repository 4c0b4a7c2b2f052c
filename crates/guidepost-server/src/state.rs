//! What every handler shares.

use std::sync::Arc;

use guidepost_conversation::Conversations;
use guidepost_core::{Agent, Journey, Tag};
use guidepost_store::Store;

use crate::error::{ApiError, ApiResult};
use crate::metrics::Metrics;

/// The server's shared state.
pub struct AppState {
    /// Where everything is kept.
    pub store: Store,
    /// Messages, turns and waiting for events.
    pub conversations: Arc<Conversations>,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// Evaluations running in this process.
    pub evaluations: crate::routes::evaluations::RunningEvaluations,
    /// Who may do what.
    pub access: crate::access::AccessPolicy,
    /// Request and message rates.
    pub limiter: crate::rates::Limiter,
    /// The simulator's artifact folder, when runs are shown.
    pub simulations: Option<std::path::PathBuf>,
    /// How much one caller can make the server hold.
    pub bounds: crate::bounds::Bounds,
    /// The proxies whose `X-Forwarded-For` names the client.
    pub proxies: crate::client::TrustedProxies,
}

/// The state as handlers receive it.
pub type State = axum::extract::State<Arc<AppState>>;

impl AppState {
    /// Checks that every tag id names a tag: a declared one, `agent:<id>` of an existing
    /// agent or `journey:<id>` of an existing journey. An unknown one is a 404, as on the
    /// reference server.
    pub async fn check_tags(&self, tags: &[String]) -> ApiResult<()> {
        for tag in tags {
            let exists = if let Some(agent) = tag.strip_prefix("agent:") {
                self.store.get::<Agent>(agent).await?.is_some()
            } else if let Some(journey) = tag.strip_prefix("journey:") {
                self.store.get::<Journey>(journey).await?.is_some()
            } else {
                self.store.get::<Tag>(tag).await?.is_some()
            };
            if !exists {
                return Err(ApiError::NotFound { kind: "tag", id: tag.clone() });
            }
        }
        Ok(())
    }
}
