//! Errors of setting up tool services. Failures of individual calls are not errors but
//! [`crate::ToolOutcome::Error`] values.

use guidepost_core::tool::ToolId;

/// A problem building the registry or discovering a service's tools.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// No tool with this id is registered.
    #[error("unknown tool `{0}`")]
    UnknownTool(ToolId),
    /// A tool was registered twice.
    #[error("tool `{0}` is already registered")]
    DuplicateTool(ToolId),
    /// A service could not be reached, or answered something unusable.
    #[error("tool service `{service}` is unavailable: {message}")]
    ServiceUnavailable {
        /// The service name.
        service: String,
        /// What went wrong, with the URL or command and HTTP status where known.
        message: String,
    },
    /// A service's declaration or description (OpenAPI document, tool schema) is invalid.
    #[error("tool service `{service}` is misconfigured: {message}")]
    InvalidService {
        /// The service name.
        service: String,
        /// What is wrong and where.
        message: String,
    },
}

impl ToolError {
    /// The error with secrets removed from its message: the credentials the process's
    /// environment holds, URL credentials, key-shaped words and `known` secrets (a
    /// service's configured credentials). Every error the registry returns or logs is
    /// scrubbed so.
    pub fn scrubbed(self, known: &[String]) -> Self {
        let scrub = |text: String| guidepost_llm::secrets::scrub_with(&text, known);
        match self {
            Self::ServiceUnavailable { service, message } => {
                Self::ServiceUnavailable { service, message: scrub(message) }
            }
            Self::InvalidService { service, message } => Self::InvalidService { service, message: scrub(message) },
            other => other,
        }
    }
}

/// Result of setting up tool services.
pub type Result<T> = std::result::Result<T, ToolError>;
