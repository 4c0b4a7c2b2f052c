//! Errors of the simulator: user errors in scenario files apart from run-time failures.

use std::path::PathBuf;

use guidepost_llm::LlmError;

/// Where a problem in a scenario file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLocation {
    /// The file.
    pub file: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
}

impl std::fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        Ok(())
    }
}

/// A problem in a scenario file, reported with its location.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {message}")]
pub struct ScenarioError {
    /// Where the problem is.
    pub location: SourceLocation,
    /// What is wrong, naming the step or field.
    pub message: String,
}

/// Failures of an agent under test (transport, protocol, timeouts).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AgentError {
    /// The agent could not be reached or the transport failed.
    #[error("agent transport failed: {0}")]
    Transport(String),
    /// The agent answered something that does not follow its protocol.
    #[error("agent protocol violation: {0}")]
    Protocol(String),
    /// The agent reported an error itself.
    #[error("agent reported an error: {0}")]
    Reported(String),
    /// The agent did not answer in time.
    #[error("agent did not answer within {0:?}")]
    Timeout(std::time::Duration),
    /// The agent's model failed.
    #[error("agent model failed: {0}")]
    Model(#[from] LlmError),
    /// Ending the conversation left something behind (a session or customer that could not
    /// be deleted, a process that did not stop).
    #[error("cleanup failed: {0}")]
    Cleanup(String),
}

/// Every error the simulator's public API returns.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A scenario file is invalid.
    #[error("{0}")]
    Scenario(#[from] ScenarioError),
    /// Several scenario files are invalid (all problems are listed).
    #[error("{} scenario problem(s):\n{}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Scenarios(Vec<ScenarioError>),
    /// An agent definition used for coverage could not be loaded.
    #[error("agent definition {path} does not load:\n{message}")]
    AgentDefinition {
        /// The file.
        path: PathBuf,
        /// The diagnostics.
        message: String,
    },
    /// Invalid options (agent target, limits ...).
    #[error("invalid simulator options: {0}")]
    Options(String),
    /// The agent under test failed.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// A model call of the simulated customer or the judge failed.
    #[error("model call failed: {0}")]
    Model(#[from] LlmError),
    /// A file or folder someone named could not be read (missing, not a regular file, too
    /// big, a symlink loop); the message names it.
    #[error(transparent)]
    Files(#[from] guidepost_core::files::FileError),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

impl SimError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }
}
