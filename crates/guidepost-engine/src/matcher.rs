//! [`GuidelineMatcher`]: the entry point the preparation loop calls once per iteration.

use std::collections::BTreeSet;
use std::sync::Arc;

use guidepost_core::JourneyPath;
use guidepost_core::projection::NodeKind;
use guidepost_llm::{ChatModel, Embedder};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::catalog::{CompiledAgent, GuidelineOrigin};
use crate::config::{MatcherConfig, RecheckAfterTools};
use crate::context::MatchingContext;
use crate::error::EngineError;

use crate::journeys::prediction::{JourneyPredictor, Prediction};
use crate::pass::{Pass, PassInput, PredictionInput};
use crate::prompt::ConversationView;
use crate::record::{GuidelineMatch, MatchKind, MatchingRecord, PredictionReason, PredictionRecord};
use crate::touched;

/// The result of one matching pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatchingOutcome {
    /// Matches after relational resolution, in definition order: guidelines, journey
    /// conditions, current journey nodes and clarifications.
    pub matches: Vec<GuidelineMatch>,
    /// Active journeys and where each stands; store these in the turn's `AgentState`.
    pub journey_paths: IndexMap<String, JourneyPath>,
    /// Transitions ahead of each active journey the customer already answered; store these
    /// in the turn's `AgentState` too.
    #[serde(default)]
    pub journey_answers: IndexMap<String, Vec<String>>,
    /// Why everything was decided.
    pub record: MatchingRecord,
    /// Matches before resolution (carried into later iterations of the same turn).
    pub unresolved: Vec<GuidelineMatch>,
    /// Journeys whose guidelines were considered in this turn so far.
    pub considered_journeys: Vec<String>,
    /// How many of the turn's staged tool results this pass saw: a later pass treats the
    /// ones after them as new.
    #[serde(default)]
    pub tool_results_seen: usize,
}

impl MatchingOutcome {
    /// Matches that enable tools (guideline tools and tool nodes): the tool-calling stage
    /// infers calls for these.
    pub fn tool_enabled(&self) -> impl Iterator<Item = &GuidelineMatch> {
        self.matches.iter().filter(|m| !m.tools.is_empty())
    }

    /// Matches without tools that carry an action: what the reply must follow.
    pub fn ordinary(&self) -> impl Iterator<Item = &GuidelineMatch> {
        self.matches.iter().filter(|m| m.tools.is_empty() && m.action.is_some())
    }

    /// Whether `guideline_id` matched.
    pub fn matched(&self, guideline_id: &str) -> bool {
        self.matches.iter().any(|m| m.guideline_id == guideline_id)
    }

    /// The current node of an active journey.
    pub fn journey_node(&self, journey: &str) -> Option<&str> {
        self.journey_paths.get(journey).map(JourneyPath::current)
    }

    /// Active journeys whose current node is a tool node: their transition is pending
    /// until the tool runs (the preparation loop keeps iterating while tools run).
    pub fn journeys_awaiting_tools(&self, agent: &CompiledAgent) -> Vec<&str> {
        self.journey_paths
            .iter()
            .filter(|(j, path)| {
                agent.journey(j).and_then(|g| g.node(path.current())).is_some_and(|n| n.kind == NodeKind::Tool)
            })
            .map(|(j, _)| j.as_str())
            .collect()
    }

    /// Journey nodes matched in this pass (journey id, node id).
    pub fn matched_nodes(&self) -> Vec<(&str, &str)> {
        self.matches
            .iter()
            .filter_map(|m| match &m.kind {
                MatchKind::JourneyNode { journey, node } => Some((journey.as_str(), node.as_str())),
                _ => None,
            })
            .collect()
    }
}

/// Matches guidelines and walks journeys for one turn.
///
/// The preparation loop calls [`match_turn`](Self::match_turn) in its first iteration
/// and [`rematch`](Self::rematch) after tools ran, which re-evaluates only what the new
/// tool results can change.
#[derive(Debug, Clone)]
pub struct GuidelineMatcher {
    agent: Arc<CompiledAgent>,
    model: Arc<dyn ChatModel>,
    journey_model: Arc<dyn ChatModel>,
    embedder: Option<Arc<dyn Embedder>>,
    config: MatcherConfig,
}

impl GuidelineMatcher {
    /// A matcher for `agent` using `model` for decisions and `embedder` for journey
    /// prediction (without an embedder every journey is considered).
    pub fn new(
        agent: Arc<CompiledAgent>,
        model: Arc<dyn ChatModel>,
        embedder: Option<Arc<dyn Embedder>>,
        config: MatcherConfig,
    ) -> Self {
        Self { agent, journey_model: model.clone(), model, embedder, config }
    }

    /// Uses `model` for journey node selection (`GUIDEPOST_MODEL_JOURNEY_SELECTION`); the
    /// checks' model selects otherwise.
    pub fn with_journey_model(mut self, model: Arc<dyn ChatModel>) -> Self {
        self.journey_model = model;
        self
    }

    /// Reads ahead ([`ChatModel::read_ahead`]) what the first checks of a conversation begin
    /// with, on the models that ask them one at a time (see [`crate::VerdictStyle::Single`]):
    /// the other styles' prompts begin with what the turn brings. How many requests a model
    /// read; a failure is only logged (nothing depends on it).
    pub async fn read_ahead(&self) -> usize {
        let definition = &self.agent.definition;
        let conversation = ConversationView {
            agent_name: definition.agent.name.clone(),
            agent_description: definition.agent.description.clone(),
            ..ConversationView::default()
        };
        self.read_ahead_on(&conversation).await
    }

    /// Reads ahead, after a turn, what the next turn's checks begin with: the conversation
    /// of `ctx` (the session as the turn left it, its reply included), shown as the checks
    /// show it. While the customer writes, a model that keeps prompt prefixes reads the
    /// reply it just wrote; the next check reads only the customer's new message and its
    /// statement. How many requests a model read.
    pub async fn read_ahead_after(&self, ctx: &MatchingContext) -> usize {
        let conversation = ConversationView::build(&self.agent.definition, ctx, self.config.history_window);
        self.read_ahead_on(&conversation).await
    }

    async fn read_ahead_on(&self, conversation: &ConversationView) -> usize {
        let journeys = self.config.journey_verdicts.unwrap_or(self.config.verdicts);
        let asked = [
            (&self.model, self.config.verdicts, guidepost_llm::TaskKind::Matching),
            (&self.journey_model, journeys, guidepost_llm::TaskKind::JourneySelection),
        ];
        let (mut read, mut seen) = (0, Vec::new());
        for (model, style, task) in asked {
            let single = style.for_model(&model.capabilities()) == crate::VerdictStyle::Single;
            if !single || !model.reads_ahead() || seen.contains(&model.model_id()) {
                continue;
            }
            seen.push(model.model_id());
            let conditions = self.agent.check_conditions();
            let temperature = self.config.temperature;
            let requests = crate::batches::single::read_ahead_requests(conditions, conversation, &task, temperature);
            match requests {
                Ok(requests) => {
                    for request in requests {
                        match model.read_ahead(request).await {
                            Ok(true) => read += 1,
                            Ok(false) => {}
                            Err(error) => tracing::debug!(%error, "reading ahead failed"),
                        }
                    }
                }
                Err(error) => tracing::warn!(%error, "the prompts to read ahead could not be rendered"),
            }
        }
        read
    }

    /// The compiled definition.
    pub fn agent(&self) -> &CompiledAgent {
        &self.agent
    }

    /// The settings.
    pub fn config(&self) -> &MatcherConfig {
        &self.config
    }

    fn pass(&self) -> Pass<'_> {
        Pass {
            agent: &self.agent,
            model: self.model.as_ref(),
            journey_model: self.journey_model.as_ref(),
            config: &self.config,
        }
    }

    fn predictor(&self) -> JourneyPredictor<'_> {
        JourneyPredictor { agent: &self.agent, embedder: self.embedder.as_deref(), top_k: self.config.journey_top_k }
    }

    /// The first pass of a turn: predicts journeys, evaluates every candidate guideline,
    /// selects journey nodes and resolves relationships.
    ///
    /// Fails only when every model call failed; a failed batch otherwise leaves its
    /// guidelines unmatched, with the error in the record.
    pub async fn match_turn(&self, ctx: &MatchingContext) -> Result<MatchingOutcome, EngineError> {
        let paths_in = ctx.previous_state.journey_paths.clone();
        let active: Vec<String> = paths_in.keys().cloned().collect();
        let predictor = self.predictor();
        // An embedding call is not waited for: the pass starts and takes the prediction
        // when it arrives.
        let prediction = if predictor.needs_embedding(ctx, &active) {
            PredictionInput::Pending(Box::pin(async move { predictor.predict(ctx, &active).await }))
        } else {
            PredictionInput::Ready(predictor.predict(ctx, &active).await)
        };
        self.pass()
            .run(PassInput {
                ctx,
                iteration: 1,
                paths_in,
                answers_in: ctx.previous_state.journey_answers.clone(),
                evaluate_only: None,
                select_only: None,
                carried: Vec::new(),
                prediction,
                considered_before: Vec::new(),
            })
            .await
    }

    /// A later pass of the same turn, after tools ran (their results are staged in
    /// `ctx`). Re-evaluates only:
    /// - guidelines with a `reevaluation` relationship to a tool that ran;
    /// - guidelines not matched yet whose condition the new results relate to (by default;
    ///   see [`RecheckAfterTools`]);
    /// - journeys whose current node is a tool node whose tool ran;
    /// - journeys newly activated, and unpredicted journeys the tool results point to
    ///   (a second pass over their conditions and guidelines).
    ///
    /// Everything else keeps its verdict from `previous`.
    pub async fn rematch(
        &self,
        ctx: &MatchingContext,
        previous: &MatchingOutcome,
    ) -> Result<MatchingOutcome, EngineError> {
        let tools_ran = ctx.tools_ran();
        let mut evaluate: BTreeSet<String> = BTreeSet::new();
        for tool in &tools_ran {
            evaluate.extend(self.agent.reevaluated_by(tool));
        }
        evaluate.extend(self.touched(ctx, previous));
        let select: BTreeSet<String> = previous
            .journey_paths
            .iter()
            .filter(|(j, path)| {
                self.agent
                    .journey(j)
                    .and_then(|g| g.node(path.current()))
                    .is_some_and(|n| n.kind == NodeKind::Tool && n.tools.iter().any(|t| tools_ran.contains(t)))
            })
            .map(|(j, _)| j.clone())
            .collect();
        let prediction = PredictionInput::Ready(self.later_pass_prediction(previous));
        self.pass()
            .run(PassInput {
                ctx,
                iteration: previous.record.iteration + 1,
                paths_in: previous.journey_paths.clone(),
                answers_in: previous.journey_answers.clone(),
                evaluate_only: Some(evaluate),
                select_only: Some(select),
                carried: previous.unresolved.clone(),
                prediction,
                considered_before: previous.considered_journeys.clone(),
            })
            .await
    }

    /// Guidelines and journey conditions not matched yet in this turn that the tool results
    /// staged since `previous` may have made true.
    fn touched(&self, ctx: &MatchingContext, previous: &MatchingOutcome) -> BTreeSet<String> {
        let fresh = ctx.staged_tool_results.get(previous.tool_results_seen..).unwrap_or_default();
        let mode = self.config.recheck_after_tools;
        if fresh.is_empty() || mode == RecheckAfterTools::Declared {
            return BTreeSet::new();
        }
        let facts: BTreeSet<String> = fresh.iter().flat_map(touched::fact_terms).collect();
        let matched: BTreeSet<&str> = previous.unresolved.iter().map(|m| m.guideline_id.as_str()).collect();
        self.agent
            .guidelines()
            .iter()
            .filter(|g| matches!(g.origin, GuidelineOrigin::Definition | GuidelineOrigin::JourneyCondition(_)))
            .filter(|g| !matched.contains(g.id.as_str()))
            .filter(|g| {
                mode == RecheckAfterTools::Unmatched || touched::related(&g.condition, g.description.as_deref(), &facts)
            })
            .map(|g| g.id.clone())
            .collect()
    }

    /// Journeys for a later pass: the ones the first pass considered (it checked their
    /// conditions); the others stay unpredicted. A condition that tool results can make true
    /// is checked again through a `reevaluation` relationship to the tool.
    fn later_pass_prediction(&self, previous: &MatchingOutcome) -> Prediction {
        let record = |j: &String, reason| PredictionRecord { journey_id: j.clone(), reason, similarity: None };
        let records = self
            .agent
            .journeys()
            .keys()
            .map(|j| {
                if previous.journey_paths.contains_key(j) {
                    record(j, PredictionReason::Active)
                } else if previous.considered_journeys.contains(j) {
                    record(j, PredictionReason::Similar)
                } else {
                    record(j, PredictionReason::NotPredicted)
                }
            })
            .collect();
        Prediction { records, embedding_calls: 0 }
    }
}
