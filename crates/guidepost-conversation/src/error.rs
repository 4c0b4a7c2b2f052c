//! Why an operation of the conversation service failed.

use guidepost_store::StoreError;

/// Why an operation failed. The HTTP server maps each to its status: the store's errors as
/// it maps them everywhere (a session that does not exist is a 404), [`Self::Unavailable`]
/// to 503, [`Self::Timeout`] to 504, the rest to 500.
#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    /// The store refused or failed (an unknown session or event, a database error).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The agent cannot run: its tools could not be set up.
    #[error("agent `{agent}` cannot run: {reason}")]
    AgentCannotRun {
        /// The agent.
        agent: String,
        /// Why, without secrets.
        reason: String,
    },
    /// The agent could not write a message it was asked for (its model failed); the text
    /// is without secrets.
    #[error("the agent could not write the message: {0}")]
    Unavailable(String),
    /// Nothing came within the time the caller was willing to wait.
    #[error("nothing came in time")]
    Timeout,
    /// Something that should not fail did (a task that stopped, an event that was not
    /// stored).
    #[error("{0}")]
    Internal(String),
}

/// The result of an operation of the conversation service.
pub type Result<T> = std::result::Result<T, ConversationError>;
