//! The explainable record of a matching pass: for every candidate its category, batch,
//! verdict, rationale and score; for every journey the decision and path; every effect of
//! relational resolution; model usage per batch. Serializable for the server and CLI.

use guidepost_core::{JourneyPath, ToolId};
use guidepost_llm::Usage;
use serde::{Deserialize, Serialize};

use crate::catalog::Entity;
use crate::categorize::Category;

/// What kind of thing a match is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum MatchKind {
    /// A guideline or observation of the definition.
    Guideline,
    /// An activation condition of a journey.
    JourneyCondition {
        /// The journey it starts.
        journey: String,
    },
    /// The current node of an active journey.
    JourneyNode {
        /// The journey.
        journey: String,
        /// The node (a state id).
        node: String,
    },
    /// A clarification question produced by disambiguation: ask which option the customer
    /// meant. Replaces the ambiguous source and its targets.
    Clarification {
        /// The disambiguation observation.
        source: String,
        /// The plausible targets (guideline or journey ids), and only those.
        options: Vec<String>,
    },
}

/// A guideline that applies to the current turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuidelineMatch {
    /// Guideline id (node guideline id for journey nodes, `clarify:{source}` for
    /// clarifications).
    pub guideline_id: String,
    /// What it is.
    #[serde(flatten)]
    pub kind: MatchKind,
    /// Condition text (for composition and display).
    pub condition: String,
    /// What the agent should do; `None` for observations.
    pub action: Option<String>,
    /// Tools the match enables.
    pub tools: Vec<ToolId>,
    /// 0-10; 10 is a clear match.
    pub score: u8,
    /// Why it matched.
    pub rationale: String,
}

/// The verdict on one candidate guideline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The model (or a fast path) said it applies.
    Matched,
    /// The model said it does not apply.
    NotMatched,
    /// Left out before evaluation: scoped to (or starting) a journey that was not predicted.
    Pruned,
    /// Its batch failed; left unmatched.
    Failed,
    /// The model's answer had no verdict for it; left unmatched.
    NoVerdict,
    /// Not re-evaluated in this iteration: the previous verdict stands.
    Carried,
}

/// One candidate guideline in the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateRecord {
    /// Guideline id.
    pub guideline_id: String,
    /// Its category (none when pruned).
    pub category: Option<Category>,
    /// Index of its batch in [`MatchingRecord::batches`].
    pub batch: Option<usize>,
    /// The verdict.
    pub verdict: Verdict,
    /// The model's rationale, when it gave one.
    pub rationale: Option<String>,
    /// 0-10.
    pub score: u8,
    /// How likely the model found "yes", when it reports it (single checks): what the
    /// verdict threshold was weighed against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f32>,
}

/// How a journey was predicted for this pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PredictionReason {
    /// Active: always considered.
    Active,
    /// Among the top-k most similar inactive journeys.
    Similar,
    /// Considered because there are no more inactive journeys than k (no embedding needed).
    Few,
    /// Not predicted: its guidelines were pruned.
    NotPredicted,
    /// Added by a second pass (activated by a match or by tool results).
    SecondPass,
}

/// One journey's prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictionRecord {
    /// Journey id.
    pub journey_id: String,
    /// Why it was (not) considered.
    pub reason: PredictionReason,
    /// Cosine similarity to the conversation, when computed.
    pub similarity: Option<f32>,
}

/// What node selection decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "decision")]
pub enum JourneyDecision {
    /// The journey started at `node`.
    Started {
        /// Nodes entered, in order.
        steps: Vec<String>,
    },
    /// Stayed at the current node.
    Stayed,
    /// Moved forward through `steps` (several when answers came early).
    Advanced {
        /// Nodes entered, in order.
        steps: Vec<String>,
    },
    /// Went back to a visited node.
    Backtracked {
        /// The revisited node.
        to: String,
    },
    /// Reached the end (or returned to the root): the journey is no longer active.
    Completed,
    /// The customer left the journey: it is no longer active.
    Exited,
    /// Its conditions did not match: it did not start.
    NotStarted,
    /// Deactivated by relational resolution.
    Deactivated,
}

impl JourneyDecision {
    /// The nodes a start or a move entered, in order; `None` for any other decision.
    pub fn steps(&self) -> Option<&[String]> {
        match self {
            Self::Started { steps } | Self::Advanced { steps } => Some(steps),
            _ => None,
        }
    }
}

/// Which deterministic rule decided without a model call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FastPath {
    /// A tool node with one exit after its tool ran.
    ToolDone,
    /// A single unconditional transition.
    Unconditional,
    /// Only one node could be next.
    LoneCandidate,
    /// A tool node whose tool has not run yet: wait for it.
    AwaitingTool,
    /// The node was entered earlier in this turn: the agent has not acted on it yet.
    EnteredThisTurn,
}

/// One journey's decision in the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JourneyRecord {
    /// Journey id.
    pub journey_id: String,
    /// What happened.
    #[serde(flatten)]
    pub decision: JourneyDecision,
    /// Path before this pass (`None` when inactive).
    pub path_before: Option<JourneyPath>,
    /// Path after this pass (`None` when inactive or finished).
    pub path_after: Option<JourneyPath>,
    /// The model's rationale, or a description of the fast path.
    pub rationale: String,
    /// The fast path that decided, if any.
    pub fast_path: Option<FastPath>,
    /// Index of its batch in [`MatchingRecord::batches`], when a model call decided.
    pub batch: Option<usize>,
    /// A model answer the engine could not follow, and what it did instead.
    pub correction: Option<String>,
}

/// Why relational resolution dropped or added an entity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum ResolutionReason {
    /// A `dependency` target is not active.
    UnmetDependency {
        /// The relationship.
        relationship: String,
        /// The target that is not active.
        target: String,
    },
    /// No target of a `dependency_any` group is active.
    UnmetDependencyAny {
        /// The group.
        group: String,
    },
    /// A journey-scoped guideline or node whose journey is not active.
    JourneyInactive {
        /// The journey.
        journey: String,
    },
    /// An active entity has priority over it.
    Deprioritized {
        /// The relationship.
        relationship: String,
        /// The active entity that wins.
        by: String,
    },
    /// A higher numeric priority won (tie-break or highest-wins mode).
    NumericPriority {
        /// The winning entity.
        by: String,
        /// Winner's priority.
        winner: i32,
        /// This entity's priority.
        priority: i32,
    },
    /// An active entity entails it.
    Entailed {
        /// The relationship.
        relationship: String,
        /// The active source.
        by: String,
    },
    /// Disambiguation found the customer's intent ambiguous; a clarification replaces it.
    Disambiguated {
        /// The disambiguation observation.
        source: String,
    },
}

/// Whether an entity was added or dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Added to the matches (or journeys).
    Added,
    /// Removed from the matches (or journeys).
    Dropped,
}

/// One effect of resolution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolutionRecord {
    /// The entity affected.
    pub entity: Entity,
    /// Added or dropped.
    pub effect: Effect,
    /// Why.
    #[serde(flatten)]
    pub reason: ResolutionReason,
}

/// One model call (or the failure of one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchRecord {
    /// The kind of check.
    pub category: Category,
    /// The guidelines checked (for journey selection: the journey id).
    pub items: Vec<String>,
    /// The wave (sequential step) the call belonged to, from 1.
    pub wave: u32,
    /// Model usage, when the call returned.
    pub usage: Option<Usage>,
    /// Estimated prompt tokens (characters / 4).
    pub estimated_prompt_tokens: usize,
    /// The error, when the call failed.
    pub error: Option<String>,
}

/// Everything one matching pass decided and why.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MatchingRecord {
    /// Preparation iteration (1 for the first pass of a turn).
    pub iteration: u32,
    /// Journey prediction.
    pub predictions: Vec<PredictionRecord>,
    /// Every candidate guideline.
    pub candidates: Vec<CandidateRecord>,
    /// Journey decisions.
    pub journeys: Vec<JourneyRecord>,
    /// Effects of relational resolution.
    pub resolutions: Vec<ResolutionRecord>,
    /// Model calls.
    pub batches: Vec<BatchRecord>,
    /// Sequential waves of model calls.
    pub waves: u32,
    /// Embedding calls made.
    pub embedding_calls: u32,
}

impl MatchingRecord {
    /// Model calls made.
    pub fn model_calls(&self) -> usize {
        self.batches.iter().filter(|b| b.usage.is_some() || b.error.is_some()).count()
    }

    /// Prompt tokens reported by the model (estimated ones for failed calls).
    pub fn prompt_tokens(&self) -> u64 {
        self.batches
            .iter()
            .map(|b| b.usage.as_ref().map_or(b.estimated_prompt_tokens as u64, |u| u.prompt_tokens))
            .sum()
    }

    /// The record of one candidate.
    pub fn candidate(&self, guideline_id: &str) -> Option<&CandidateRecord> {
        self.candidates.iter().find(|c| c.guideline_id == guideline_id)
    }

    /// The record of one journey.
    pub fn journey(&self, journey_id: &str) -> Option<&JourneyRecord> {
        self.journeys.iter().rev().find(|j| j.journey_id == journey_id)
    }
}
