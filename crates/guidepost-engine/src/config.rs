//! Tunable settings of matching. Defaults are chosen for quality first, then cost; the
//! benchmark (`benches/matching.rs`) measures what they spend.

use serde::{Deserialize, Serialize};

/// How numeric `priority` values of guidelines and journeys take part in resolution.
///
/// The default never drops a match only because another, unrelated match has a higher
/// number: an author who sets `priority: 1` on one guideline does not silence every other
/// guideline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NumericPriority {
    /// Numbers are ignored.
    Ignore,
    /// Numbers only break ties between matches that conflict through `priority`
    /// relationships in both directions (A over B and B over A): the higher number stays,
    /// equal numbers keep both. This is the default. Definition files cannot declare such
    /// cycles (the loader rejects them), so for loaded definitions the default leaves
    /// every match alone; definitions built in code may contain them.
    #[default]
    BreakTies,
    /// Among all matches and active journeys only those with the highest number stay
    /// (entailed matches excluded). Opt-in: one high number silences everything else.
    HighestWins,
}

/// How guideline-check batches ask for their verdicts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictStyle {
    /// [`Single`](Self::Single) for a model that does not follow compound instructions
    /// (see [`guidepost_llm::ModelCapabilities`]), else [`Reasoned`](Self::Reasoned). The
    /// default.
    #[default]
    Auto,
    /// A one-sentence rationale before each verdict (the action shown beside each
    /// condition). Suits hosted models; the rationale is kept in the matching record.
    Reasoned,
    /// One boolean per condition, keyed by the condition, no rationale: a fraction of the
    /// output tokens. Small local models judge conditions far better this way (asked for a
    /// rationale first, they argue every condition into holding).
    Direct,
    /// One call per condition, answered `yes` or `no`, after a worked example. The most
    /// reliable style for small models (judging several conditions at once, they answer
    /// them alike), and cheap on a model that keeps the shared prompt prefix between calls.
    /// A guideline already followed is asked about the latest message alone; one that waits
    /// for the customer's answer is still asked with the others ([`Direct`](Self::Direct)).
    Single,
}

impl VerdictStyle {
    /// The style used with a model that declares `capabilities`.
    pub fn for_model(self, capabilities: &guidepost_llm::ModelCapabilities) -> VerdictStyle {
        match self {
            VerdictStyle::Auto if !capabilities.follows_compound_instructions => VerdictStyle::Single,
            VerdictStyle::Auto => VerdictStyle::Reasoned,
            other => other,
        }
    }
}

/// What the preparation loop checks again after tools ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecheckAfterTools {
    /// Guidelines not matched yet whose condition shares a term with what the tools brought
    /// (their names, descriptions, arguments and results), besides those linked to a tool
    /// that ran by a `reevaluation` relationship. The default: a condition that depends on
    /// a lookup needs no configuration, and unrelated guidelines cost nothing.
    #[default]
    Related,
    /// Every guideline not matched yet: the most thorough and the most costly (a second
    /// round of checks on every turn that runs a tool).
    Unmatched,
    /// Only guidelines linked to a tool that ran by a `reevaluation` relationship
    /// (`reevaluate_after`).
    Declared,
}

/// Settings of the [`crate::GuidelineMatcher`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MatcherConfig {
    /// Inactive journeys considered per turn besides the active ones (by embedding
    /// similarity to the conversation). Guidelines scoped to other journeys are pruned.
    pub journey_top_k: usize,
    /// Upper bound on the estimated prompt tokens one batch spends on its guideline list.
    pub batch_token_budget: usize,
    /// Upper bound on guidelines per batch, whatever their size (accuracy drops when a
    /// model checks too many conditions at once).
    pub max_guidelines_per_batch: usize,
    /// Messages of the conversation shown verbatim in prompts (most recent last); older
    /// ones are replaced by the context's summary or an explicit elision line.
    pub history_window: usize,
    /// Sampling temperature of matching and journey calls.
    pub temperature: f32,
    /// How numeric priorities take part in relational resolution.
    pub numeric_priority: NumericPriority,
    /// Run journey node selection speculatively, in parallel with matching, for predicted
    /// journeys whose first step needs a model decision (saves one sequential wave when
    /// the journey starts).
    pub speculative_journey_selection: bool,
    /// Upper bound on steps one selection may advance at once (fast-forward).
    pub max_advance_steps: usize,
    /// How guideline checks ask for verdicts.
    pub verdicts: VerdictStyle,
    /// How journey steps are decided, when it differs from the checks (a per-task override):
    /// [`VerdictStyle::Single`] walks the transitions one yes-or-no question at a time, any
    /// other style asks for the whole move in one call. `None` follows
    /// [`verdicts`](Self::verdicts), resolved against the journey model's capabilities.
    pub journey_verdicts: Option<VerdictStyle>,
    /// What is checked again after tools ran.
    pub recheck_after_tools: RecheckAfterTools,
    /// The probability of "yes" from which a one-question check holds, for models that
    /// report how likely their answers were; `None` takes the model's declared
    /// [`verdict_threshold`](guidepost_llm::ModelCapabilities::verdict_threshold).
    pub verdict_threshold: Option<f32>,
    /// The same threshold for the questions that move a journey (whether a transition's
    /// condition holds), when it differs from the checks' (a per-task override); `None`
    /// follows [`verdict_threshold`](Self::verdict_threshold).
    pub journey_verdict_threshold: Option<f32>,
    /// Ask each single check in both polarities (the condition, then "it is not true that"
    /// it) and weigh the answers together; twice the questions, each after the shared prompt
    /// prefix.
    pub ask_both_ways: bool,
    /// Where two or more conditional ways lead on from a journey step, ask which one of them
    /// holds (or none, where the journey may stay) in one comparison
    /// ([`crate::batches::single::choose`], both orders), instead of a yes-or-no question per
    /// way (see [`crate::JourneySelector::compare_exits`]).
    pub compare_exits: bool,
    /// Where the yes-or-no questions about a question step's exits leave the way on unsure
    /// or contested, compare the exits side by side before moving (see
    /// [`crate::JourneySelector::second_look`]).
    pub second_look: bool,
}

impl Default for MatcherConfig {
    fn default() -> Self {
        Self {
            journey_top_k: 2,
            batch_token_budget: 3000,
            max_guidelines_per_batch: 60,
            history_window: 12,
            temperature: 0.0,
            numeric_priority: NumericPriority::default(),
            speculative_journey_selection: true,
            max_advance_steps: 4,
            verdicts: VerdictStyle::Auto,
            journey_verdicts: None,
            recheck_after_tools: RecheckAfterTools::Related,
            verdict_threshold: None,
            journey_verdict_threshold: None,
            ask_both_ways: false,
            compare_exits: false,
            second_look: true,
        }
    }
}
