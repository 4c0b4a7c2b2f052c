//! Limits on untrusted input: the one place that says how much Guidepost accepts from files,
//! models and tool services before it refuses.
//!
//! Definition files, scenarios and recordings come from disk; replies come from model
//! providers; tool results and tool catalogues come from services. Any of them can be huge,
//! deeply nested, slow or endless, by mistake or on purpose. Each [`Limit`] bounds one of
//! those dimensions; exceeding it is a [`LimitExceeded`] error that names the limit, the file
//! or service, and the environment variable that raises it.
//!
//! Every limit has a default that is generous for real agents and small enough to keep one
//! process within a few hundred megabytes and a bounded time. [`Limits::from_env`] reads
//! overrides from the environment (see [`Limit::env_var`]); [`Limits::global`] is that
//! reading, done once per process.
//!
//! ```
//! use guidepost_core::limits::{Limit, Limits};
//!
//! let limits = Limits::from_lookup(|key| (key == "GUIDEPOST_MAX_NESTING_DEPTH").then(|| "32".to_string()))
//!     .expect("valid");
//! assert_eq!(limits.nesting_depth, 32);
//! let error = limits.check_count(Limit::NestingDepth, "agent.yaml", 40).expect_err("too deep");
//! assert!(error.to_string().contains("GUIDEPOST_MAX_NESTING_DEPTH"));
//! ```

use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

/// One named limit on untrusted input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// Size in bytes of one definition, scenario or recording file.
    FileSize,
    /// Nesting depth of mappings and lists in one file.
    NestingDepth,
    /// Size in bytes of one file once its YAML aliases are expanded.
    ExpandedSize,
    /// Files looked at while scanning one folder tree for definitions or scenarios.
    FilesPerScan,
    /// Symbolic links followed in a row while scanning folders (loops are always refused).
    SymlinkDepth,
    /// Size in bytes of one model reply (streamed or not).
    ReplySize,
    /// Tokens a model may write in one reply (`max_tokens`, always sent).
    ReplyTokens,
    /// Size in bytes of one tool result or one tool service's catalogue.
    ToolResultSize,
    /// Total duration of one streamed reply.
    StreamDuration,
    /// Longest silence between two pieces of a streamed reply.
    StreamIdle,
    /// Total time of one model call, retries and re-asks included.
    ModelCallTime,
    /// Time of one tool call.
    ToolCallTime,
    /// Time to discover one tool service's tools (OpenAPI spec, MCP, Parlant plugin).
    DiscoveryTime,
}

/// The unit a limit is expressed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes.
    Bytes,
    /// A count (levels, files, links, tokens).
    Count,
    /// Seconds.
    Seconds,
}

impl Limit {
    /// Every limit, in documentation order.
    pub const ALL: [Limit; 13] = [
        Limit::FileSize,
        Limit::NestingDepth,
        Limit::ExpandedSize,
        Limit::FilesPerScan,
        Limit::SymlinkDepth,
        Limit::ReplySize,
        Limit::ReplyTokens,
        Limit::ToolResultSize,
        Limit::StreamDuration,
        Limit::StreamIdle,
        Limit::ModelCallTime,
        Limit::ToolCallTime,
        Limit::DiscoveryTime,
    ];

    /// Short stable name, used in error messages (`file size`, `nesting depth` ...).
    pub fn name(self) -> &'static str {
        match self {
            Limit::FileSize => "file size",
            Limit::NestingDepth => "nesting depth",
            Limit::ExpandedSize => "alias-expanded size",
            Limit::FilesPerScan => "files per folder scan",
            Limit::SymlinkDepth => "symlink depth",
            Limit::ReplySize => "model reply size",
            Limit::ReplyTokens => "model reply tokens",
            Limit::ToolResultSize => "tool result size",
            Limit::StreamDuration => "streamed reply duration",
            Limit::StreamIdle => "streamed reply idle time",
            Limit::ModelCallTime => "model call time",
            Limit::ToolCallTime => "tool call time",
            Limit::DiscoveryTime => "tool discovery time",
        }
    }

    /// The environment variable that sets the limit.
    pub fn env_var(self) -> &'static str {
        match self {
            Limit::FileSize => "GUIDEPOST_MAX_FILE_BYTES",
            Limit::NestingDepth => "GUIDEPOST_MAX_NESTING_DEPTH",
            Limit::ExpandedSize => "GUIDEPOST_MAX_EXPANDED_BYTES",
            Limit::FilesPerScan => "GUIDEPOST_MAX_SCAN_FILES",
            Limit::SymlinkDepth => "GUIDEPOST_MAX_SYMLINK_DEPTH",
            Limit::ReplySize => "GUIDEPOST_MAX_REPLY_BYTES",
            Limit::ReplyTokens => "GUIDEPOST_MAX_REPLY_TOKENS",
            Limit::ToolResultSize => "GUIDEPOST_MAX_TOOL_RESULT_BYTES",
            Limit::StreamDuration => "GUIDEPOST_STREAM_TIMEOUT_SECS",
            Limit::StreamIdle => "GUIDEPOST_STREAM_IDLE_SECS",
            Limit::ModelCallTime => "GUIDEPOST_MODEL_CALL_TIMEOUT_SECS",
            Limit::ToolCallTime => "GUIDEPOST_TOOL_TIMEOUT_SECS",
            Limit::DiscoveryTime => "GUIDEPOST_DISCOVERY_TIMEOUT_SECS",
        }
    }

    /// The unit of the limit's value.
    pub fn unit(self) -> Unit {
        match self {
            Limit::FileSize | Limit::ExpandedSize | Limit::ReplySize | Limit::ToolResultSize => Unit::Bytes,
            Limit::NestingDepth | Limit::FilesPerScan | Limit::SymlinkDepth | Limit::ReplyTokens => Unit::Count,
            Limit::StreamDuration
            | Limit::StreamIdle
            | Limit::ModelCallTime
            | Limit::ToolCallTime
            | Limit::DiscoveryTime => Unit::Seconds,
        }
    }

    /// What the limit bounds, one sentence.
    pub fn description(self) -> &'static str {
        match self {
            Limit::FileSize => "Bytes in one definition, scenario or recording file.",
            Limit::NestingDepth => "Nested mappings and lists in one file (checked before anything recurses).",
            Limit::ExpandedSize => "Bytes of one file once YAML aliases are expanded (bounds alias bombs).",
            Limit::FilesPerScan => "Files looked at while scanning one folder tree.",
            Limit::SymlinkDepth => "Symbolic links followed in a row while scanning folders; loops are refused.",
            Limit::ReplySize => "Bytes of one model reply, counted while it arrives.",
            Limit::ReplyTokens => "Tokens a model may write in one reply (sent as `max_tokens`).",
            Limit::ToolResultSize => "Bytes of one tool result or one service's tool catalogue.",
            Limit::StreamDuration => "Seconds one streamed reply may take from request to end marker.",
            Limit::StreamIdle => "Seconds a streamed reply may stay silent between two pieces.",
            Limit::ModelCallTime => "Seconds one model call may take, retries and re-asks included.",
            Limit::ToolCallTime => "Seconds one tool call may take (a service's `timeout_ms` overrides it).",
            Limit::DiscoveryTime => "Seconds to list one tool service's tools before it is marked unavailable.",
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A limit was exceeded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{subject}: {what} exceeds the {limit} limit of {allowed}; raise it with {env}=<{unit}>", env = limit.env_var(), unit = unit_word(limit.unit()))]
pub struct LimitExceeded {
    /// Which limit.
    pub limit: Limit,
    /// The file, service or model concerned.
    pub subject: String,
    /// What was found, e.g. `5242880 bytes` or `more than 64 levels`.
    pub what: String,
    /// The limit's value, with its unit.
    pub allowed: String,
}

fn unit_word(unit: Unit) -> &'static str {
    match unit {
        Unit::Bytes => "bytes",
        Unit::Count => "count",
        Unit::Seconds => "seconds",
    }
}

/// A limit's value written for people: `4194304 bytes (4.0 MiB)`, `64`, `30 s`.
fn show(limit: Limit, value: u64) -> String {
    match limit.unit() {
        Unit::Bytes if value >= 1 << 20 => format!("{value} bytes ({:.1} MiB)", value as f64 / f64::from(1 << 20)),
        Unit::Bytes => format!("{value} bytes"),
        Unit::Count => value.to_string(),
        Unit::Seconds => format!("{value} s"),
    }
}

/// A limit's environment variable holds something that is not a positive whole number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}: `{value}` is not a positive whole number ({description})")]
pub struct InvalidLimit {
    /// The variable.
    pub var: &'static str,
    /// What it holds.
    pub value: String,
    /// What the limit bounds.
    pub description: &'static str,
}

/// The values of every limit. [`Default`] gives the documented defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// [`Limit::FileSize`], bytes (default 4 MiB).
    pub file_size: u64,
    /// [`Limit::NestingDepth`], levels (default 64).
    pub nesting_depth: usize,
    /// [`Limit::ExpandedSize`], bytes (default 16 MiB).
    pub expanded_size: u64,
    /// [`Limit::FilesPerScan`] (default 10,000).
    pub files_per_scan: usize,
    /// [`Limit::SymlinkDepth`] (default 8).
    pub symlink_depth: usize,
    /// [`Limit::ReplySize`], bytes (default 1 MiB).
    pub reply_size: usize,
    /// [`Limit::ReplyTokens`] (default 4,096).
    pub reply_tokens: u32,
    /// [`Limit::ToolResultSize`], bytes (default 1 MiB).
    pub tool_result_size: usize,
    /// [`Limit::StreamDuration`] (default 300 s).
    pub stream_duration: Duration,
    /// [`Limit::StreamIdle`] (default 60 s).
    pub stream_idle: Duration,
    /// [`Limit::ModelCallTime`] (default 300 s).
    pub model_call_time: Duration,
    /// [`Limit::ToolCallTime`] (default 30 s).
    pub tool_call_time: Duration,
    /// [`Limit::DiscoveryTime`] (default 20 s).
    pub discovery_time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            file_size: 4 << 20,
            nesting_depth: 64,
            expanded_size: 16 << 20,
            files_per_scan: 10_000,
            symlink_depth: 8,
            reply_size: 1 << 20,
            reply_tokens: 4_096,
            tool_result_size: 1 << 20,
            stream_duration: Duration::from_secs(300),
            stream_idle: Duration::from_secs(60),
            model_call_time: Duration::from_secs(300),
            tool_call_time: Duration::from_secs(30),
            discovery_time: Duration::from_secs(20),
        }
    }
}

impl Limits {
    /// The limits of this process: the defaults with the environment's overrides, read once.
    /// An invalid variable leaves that limit at its default; programs call
    /// [`from_env`](Self::from_env) at start to report it.
    pub fn global() -> &'static Limits {
        static GLOBAL: OnceLock<Limits> = OnceLock::new();
        GLOBAL.get_or_init(|| Limits::from_lookup_lenient(|key| std::env::var(key).ok(), |_| {}))
    }

    /// The defaults with overrides from the process environment.
    pub fn from_env() -> Result<Self, InvalidLimit> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// The defaults with overrides read through `lookup` (a variable name to its value).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, InvalidLimit> {
        let mut first = None;
        let limits = Self::from_lookup_lenient(lookup, |e| {
            first.get_or_insert(e);
        });
        match first {
            Some(error) => Err(error),
            None => Ok(limits),
        }
    }

    fn from_lookup_lenient(lookup: impl Fn(&str) -> Option<String>, mut invalid: impl FnMut(InvalidLimit)) -> Self {
        let mut limits = Self::default();
        for limit in Limit::ALL {
            let Some(raw) = lookup(limit.env_var()) else { continue };
            let raw = raw.trim();
            if raw.is_empty() {
                continue;
            }
            match raw.parse::<u64>() {
                Ok(n) if n > 0 => limits.set(limit, n),
                _ => invalid(InvalidLimit {
                    var: limit.env_var(),
                    value: raw.to_string(),
                    description: limit.description(),
                }),
            }
        }
        limits
    }

    /// Sets one limit from a number in its [`Unit`].
    pub fn set(&mut self, limit: Limit, value: u64) {
        let count = usize::try_from(value).unwrap_or(usize::MAX);
        let secs = Duration::from_secs(value);
        match limit {
            Limit::FileSize => self.file_size = value,
            Limit::NestingDepth => self.nesting_depth = count,
            Limit::ExpandedSize => self.expanded_size = value,
            Limit::FilesPerScan => self.files_per_scan = count,
            Limit::SymlinkDepth => self.symlink_depth = count,
            Limit::ReplySize => self.reply_size = count,
            Limit::ReplyTokens => self.reply_tokens = u32::try_from(value).unwrap_or(u32::MAX),
            Limit::ToolResultSize => self.tool_result_size = count,
            Limit::StreamDuration => self.stream_duration = secs,
            Limit::StreamIdle => self.stream_idle = secs,
            Limit::ModelCallTime => self.model_call_time = secs,
            Limit::ToolCallTime => self.tool_call_time = secs,
            Limit::DiscoveryTime => self.discovery_time = secs,
        }
    }

    /// One limit's value in its [`Unit`].
    pub fn get(&self, limit: Limit) -> u64 {
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        match limit {
            Limit::FileSize => self.file_size,
            Limit::NestingDepth => n(self.nesting_depth),
            Limit::ExpandedSize => self.expanded_size,
            Limit::FilesPerScan => n(self.files_per_scan),
            Limit::SymlinkDepth => n(self.symlink_depth),
            Limit::ReplySize => n(self.reply_size),
            Limit::ReplyTokens => u64::from(self.reply_tokens),
            Limit::ToolResultSize => n(self.tool_result_size),
            Limit::StreamDuration => self.stream_duration.as_secs(),
            Limit::StreamIdle => self.stream_idle.as_secs(),
            Limit::ModelCallTime => self.model_call_time.as_secs(),
            Limit::ToolCallTime => self.tool_call_time.as_secs(),
            Limit::DiscoveryTime => self.discovery_time.as_secs(),
        }
    }

    /// The error for `limit` exceeded by `subject`, `what` saying what was found.
    pub fn exceeded(&self, limit: Limit, subject: impl Into<String>, what: impl Into<String>) -> LimitExceeded {
        LimitExceeded { limit, subject: subject.into(), what: what.into(), allowed: show(limit, self.get(limit)) }
    }

    /// `Ok` when `found` (in the limit's unit) is within `limit`, else the error.
    pub fn check_count(&self, limit: Limit, subject: &str, found: u64) -> Result<(), LimitExceeded> {
        if found <= self.get(limit) {
            return Ok(());
        }
        let what = match limit.unit() {
            Unit::Bytes => format!("{found} bytes"),
            Unit::Count => format!("{found}"),
            Unit::Seconds => format!("{found} s"),
        };
        Err(self.exceeded(limit, subject, what))
    }

    /// A Markdown table of every limit: variable, default, meaning (for documentation).
    pub fn table() -> String {
        let defaults = Limits::default();
        let mut out = String::from("| limit | variable | default | bounds |\n|---|---|---|---|\n");
        for limit in Limit::ALL {
            out.push_str(&format!(
                "| {} | `{}` | {} | {} |\n",
                limit.name(),
                limit.env_var(),
                show(limit, defaults.get(limit)),
                limit.description()
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_limit_round_trips_through_set_and_get() {
        let mut limits = Limits::default();
        for (i, limit) in Limit::ALL.into_iter().enumerate() {
            let value = 7 + i as u64;
            limits.set(limit, value);
            assert_eq!(limits.get(limit), value, "{limit}");
        }
    }

    #[test]
    fn environment_overrides_and_rejects_nonsense() {
        let limits = Limits::from_lookup(|k| (k == "GUIDEPOST_MAX_FILE_BYTES").then(|| " 1000 ".into())).unwrap();
        assert_eq!(limits.file_size, 1000);
        let err = Limits::from_lookup(|k| (k == "GUIDEPOST_STREAM_IDLE_SECS").then(|| "soon".into())).unwrap_err();
        assert_eq!(err.var, "GUIDEPOST_STREAM_IDLE_SECS");
        assert!(Limits::from_lookup(|k| (k == "GUIDEPOST_MAX_SCAN_FILES").then(|| "0".into())).is_err());
    }

    #[test]
    fn the_error_names_the_limit_the_subject_and_the_way_to_raise_it() {
        let err = Limits::default().check_count(Limit::FileSize, "agents/a.yaml", 5 << 20).unwrap_err();
        assert_eq!(
            err.to_string(),
            "agents/a.yaml: 5242880 bytes exceeds the file size limit of 4194304 bytes (4.0 MiB); \
             raise it with GUIDEPOST_MAX_FILE_BYTES=<bytes>"
        );
        assert!(Limits::default().check_count(Limit::FileSize, "a", 4 << 20).is_ok());
    }

    #[test]
    fn names_and_variables_are_unique() {
        let mut names: Vec<_> = Limit::ALL.iter().map(|l| l.name()).collect();
        let mut vars: Vec<_> = Limit::ALL.iter().map(|l| l.env_var()).collect();
        names.sort_unstable();
        names.dedup();
        vars.sort_unstable();
        vars.dedup();
        assert_eq!((names.len(), vars.len()), (Limit::ALL.len(), Limit::ALL.len()));
        assert!(Limits::table().lines().count() == Limit::ALL.len() + 2);
    }
}
