//! The Guidepost conversation service: what happens between a customer's message and the
//! agent's reply, with no HTTP in sight.
//!
//! [`Conversations`] is the service the HTTP server's routes call, as meilisearch's routes
//! call its index scheduler. It owns
//!
//! - **accepting what is posted** to a session ([`Conversations::post`] with a typed
//!   [`Post`]): a customer's message is stored together with the turn that answers it; a
//!   human agent's message, a client's custom or status event are stored; the agent can be
//!   asked to take a turn, or to say something now;
//! - **running turns** ([`scheduler::TurnScheduler`]): one at a time per session, across
//!   every process that shares the store, claimed through a lease; a newer message or
//!   [`Conversations::cancel`] stops a turn still preparing; the agent's runtime
//!   ([`agents::AgentPool`]) runs on what the session holds ([`input`]);
//! - **holding back and committing events** ([`sink`]): progress shows at once, what the
//!   turn decided is committed with its end, and every event and trace leaves the service
//!   without the deployment's secrets ([`redaction`]);
//! - **waiting for events** ([`Conversations::wait_for_events`],
//!   [`Conversations::follow_events`]): long polls and streams wake on each commit;
//! - **shutdown** ([`Conversations::shutdown`]): turns still preparing are handed back to
//!   the next process, turns replying finish.
//!
//! ```no_run
//! # async fn run(models: guidepost_conversation::RuntimeModels) -> anyhow::Result<()> {
//! use std::time::Duration;
//! use guidepost_conversation::{Conversations, Post};
//! use guidepost_store::EventFilter;
//!
//! let store = guidepost_store::Store::open("sqlite://.guidepost/guidepost.db").await?;
//! let conversations = Conversations::new(store, models, Default::default(), Default::default());
//! conversations.start().await;
//! let message = Post::CustomerMessage { text: "I need a taxi".into(), participant: None, metadata: Default::default() };
//! let posted = conversations.post("session-1", message).await?;
//! let filter = EventFilter { trace_id: Some(posted.trace_id.clone()), min_offset: posted.offset + 1, ..Default::default() };
//! let events = conversations.wait_for_events("session-1", &filter, Duration::from_secs(60)).await?;
//! conversations.shutdown(Duration::from_secs(10)).await;
//! # Ok(()) }
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod agents;
pub mod error;
pub mod input;
pub mod journal;
pub mod ports;
mod posting;
pub mod redaction;
pub mod scheduler;
pub mod sink;
mod waiting;

use std::sync::Arc;
use std::time::Duration;

use guidepost_store::Store;

pub use error::{ConversationError, Result};
pub use guidepost_runtime::{RuntimeConfig, RuntimeModels};
pub use posting::{FIRST_STATUS_WAIT, Post};
pub use scheduler::{TurnObserver, TurnSettings};
pub use waiting::is_whole;

use crate::agents::AgentPool;
use crate::journal::StoreJournal;
use crate::ports::StoreEmbeddings;
use crate::redaction::Redactor;
use crate::scheduler::{TurnScheduler, Unobserved};

/// How the service runs.
#[derive(Clone)]
pub struct ConversationSettings {
    /// Leases, turns in flight, turn timeout.
    pub turns: TurnSettings,
    /// Secrets never repeated in events, traces and errors (API keys, provider credentials).
    pub secrets: Vec<String>,
    /// Told how the turns of this process end.
    pub observer: Arc<dyn TurnObserver>,
}

impl Default for ConversationSettings {
    fn default() -> Self {
        Self { turns: TurnSettings::default(), secrets: Vec::new(), observer: Arc::new(Unobserved) }
    }
}

/// The conversation service.
pub struct Conversations {
    store: Store,
    agents: Arc<AgentPool>,
    scheduler: Arc<TurnScheduler>,
    redactor: Arc<Redactor>,
}

impl Conversations {
    /// The service on `store`, running agents with `models` and `config`. The embedder's
    /// vectors are cached in the store.
    pub fn new(store: Store, mut models: RuntimeModels, config: RuntimeConfig, settings: ConversationSettings) -> Self {
        if let Some(embedder) = models.embedder.take() {
            models.embedder = Some(Arc::new(StoreEmbeddings::new(embedder, store.clone())));
        }
        let redactor = Arc::new(Redactor::new(settings.secrets));
        let worker = format!("worker-{}", uuid::Uuid::new_v4().simple());
        let journal = Arc::new(StoreJournal::new(store.clone(), worker.clone()));
        let agents = Arc::new(AgentPool::new(store.clone(), models, config, journal.clone()));
        let scheduler = TurnScheduler::new(
            store.clone(),
            agents.clone(),
            settings.turns,
            redactor.clone(),
            settings.observer,
            worker,
            journal,
        );
        Self { store, agents, scheduler, redactor }
    }

    /// Where everything is kept.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The models every agent uses.
    pub fn models(&self) -> &RuntimeModels {
        self.agents.models()
    }

    /// The secrets nothing that leaves the service repeats.
    pub fn redactor(&self) -> &Arc<Redactor> {
        &self.redactor
    }

    /// The turn scheduler (its worker id and lease, for diagnostics).
    pub fn scheduler(&self) -> &Arc<TurnScheduler> {
        &self.scheduler
    }

    /// Takes up the turns a previous process left unfinished, and from then on, every half
    /// lease, turns whose lease expired or that another replica queued.
    pub async fn start(&self) {
        self.scheduler.recover().await;
        let scheduler = self.scheduler.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(scheduler.lease() / 2) => {}
                    () = scheduler.stopping().cancelled() => return,
                }
                scheduler.recover().await;
            }
        });
    }

    /// A conversation with `agent_id` opened: while the customer writes their first message,
    /// the models read ahead what its first model calls begin with (see
    /// [`guidepost_runtime::AgentRuntime::read_ahead`]), in the background. Nothing waits
    /// for it and nothing depends on it: it only saves the first turn time on a model that
    /// keeps prompt prefixes and is idle.
    pub fn read_ahead(&self, agent_id: &str) {
        let models = self.agents.models();
        let roles = [&models.matching, &models.journey_selection, &models.tool_inference, &models.generation];
        if !roles.iter().any(|model| model.reads_ahead()) {
            // Hosted models, or answers replayed: nothing to read, not even the agent.
            return;
        }
        let (agents, agent_id) = (self.agents.clone(), agent_id.to_string());
        tokio::spawn(async move {
            match agents.runtime(&agent_id).await {
                Ok(runtime) => {
                    let read = runtime.read_ahead().await;
                    tracing::debug!(agent = %agent_id, read, "read ahead for a new conversation");
                }
                Err(error) => tracing::debug!(agent = %agent_id, %error, "no agent to read ahead for"),
            }
        });
    }

    /// Asks the unfinished turns of `session_id` to stop, in every process that shares the
    /// store: a pending one will not start, a running one stops (ending with `cancelled` and
    /// `ready`) unless it is already replying. How many turns were asked.
    pub async fn cancel(&self, session_id: &str) -> Result<u64> {
        self.store.require_session(session_id).await?;
        Ok(self.scheduler.cancel(session_id).await?)
    }

    /// Stops: waits for events end at once, no new turn starts, turns still preparing are
    /// handed back once their running tool calls returned (the next process runs them from
    /// their start, reusing what those calls returned), and turns already replying finish,
    /// for up to `grace`.
    pub async fn shutdown(&self, grace: Duration) {
        self.scheduler.shutdown(grace).await;
    }
}
