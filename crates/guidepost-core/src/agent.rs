//! The agent: identity and the settings that shape every reply.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How the agent turns matched guidelines into a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CompositionMode {
    /// Free text drafted by the model against the matched guidelines.
    #[default]
    Fluid,
    /// Free text, but approved templates are preferred when one fits the draft.
    CannedFluid,
    /// The draft is rewritten in the style of the closest approved templates.
    CannedComposited,
    /// Only approved templates are ever sent; no match sends the configured no-match reply.
    CannedStrict,
}

impl CompositionMode {
    /// How restrictive the mode is; the most restrictive mode among matched guidelines wins.
    pub fn strictness(self) -> u8 {
        match self {
            Self::Fluid => 0,
            Self::CannedFluid => 1,
            Self::CannedComposited => 2,
            Self::CannedStrict => 3,
        }
    }
}

/// Whether replies are emitted whole or streamed as they are generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// One message event per reply part.
    #[default]
    Block,
    /// A message event whose `chunks` grow as text is generated.
    Stream,
}

/// Preamble settings: a short acknowledgement sent while the reply is prepared.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Preamble {
    /// Whether preambles are sent at all (off by default).
    pub enabled: bool,
    /// Example acknowledgements that set the tone.
    pub examples: Vec<String>,
}

/// An agent's identity and settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    /// Stable id (author-given or derived from the name).
    pub id: String,
    /// Display name, also given to the model as the agent's name.
    pub name: String,
    /// What the agent is for; given to the model as its identity.
    pub description: Option<String>,
    /// Upper bound on preparation iterations per reply (match, call tools, repeat).
    pub max_engine_iterations: u32,
    /// How replies are composed.
    pub composition_mode: CompositionMode,
    /// Whether replies are streamed.
    pub output_mode: OutputMode,
    /// Tags of the agent; entities carrying one of them are in the agent's scope.
    pub tags: Vec<String>,
    /// Preamble settings.
    pub preamble: Preamble,
    /// The reply sent in `canned_strict` mode when no template fits.
    pub no_match_reply: Option<String>,
    /// The language replies are written in: a language code (`zh`, `en`, `pt-BR`), or
    /// `None` (or `customer`) for the language the customer writes in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// The reply sent when every composed reply failed the reply checks (see
    /// [`crate::reply_check`]); a short apology in the agent's language when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_reply: Option<String>,
}

/// Default bound on preparation iterations, as in the response lifecycle.
pub const DEFAULT_MAX_ENGINE_ITERATIONS: u32 = 3;
