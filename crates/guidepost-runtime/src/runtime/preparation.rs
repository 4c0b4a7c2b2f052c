//! Stage: preparation, in iterations: match guidelines and walk journeys, then infer and
//! run the tool calls of the tool-enabled matches, and match again on what the tools
//! returned, until nothing new happens.

use std::collections::BTreeSet;
use std::time::Instant;

use guidepost_engine::record::JourneyDecision;
use guidepost_engine::{MatchingContext, MatchingOutcome};
use guidepost_llm::TaskKind;
use guidepost_llm::secrets::scrub;

use super::AgentRuntime;
use super::turn::{Ending, Seen, Step, Turn, cancellable};
use crate::error::TurnError;
use crate::hooks::HookAction;
use crate::trace::{DegradedStage, IterationTrace, Stage};

impl AgentRuntime {
    /// Stage: preparation, in iterations. Each matches (the first pass over everything, later
    /// passes over what the new tool results can change), then infers and runs the calls of
    /// the tool-enabled matches not handled yet; it ends when no tool ran, a hook bails or
    /// `max_engine_iterations` is reached. `Some` when the turn ends here (cancelled).
    pub(super) async fn prepare(
        &self,
        turn: &mut Turn<'_>,
        ctx: &mut MatchingContext,
        seen: &Seen<'_>,
    ) -> Result<Option<Ending>, TurnError> {
        let mut previous: Option<MatchingOutcome> = None;
        let mut handled: BTreeSet<String> = BTreeSet::new();
        let max = self.max_iterations();
        for iteration in 1..=max {
            let iteration_started = Instant::now();
            turn.state.iterations = iteration;
            if self.hooks.on_iteration_start(iteration, &mut turn.state, turn.sink).await == HookAction::Bail {
                break;
            }
            let outcome = match self.match_pass(turn, ctx, previous.as_ref(), iteration, seen).await? {
                Step::Cancelled => return Ok(Some(Ending::Cancelled)),
                Step::Done(Some(outcome)) => outcome,
                // A later pass lost every call: the turn goes on with what the earlier passes
                // decided (the reply is marked degraded).
                Step::Done(None) => {
                    turn.trace.iterations.push(IterationTrace {
                        iteration,
                        duration_ms: iteration_started.elapsed().as_millis() as u64,
                        ..IterationTrace::default()
                    });
                    break;
                }
            };
            let mut record = outcome.record.clone();
            for batch in &mut record.batches {
                batch.error = batch.error.as_deref().map(scrub);
            }
            let mut it = IterationTrace { iteration, matching: Some(record), ..IterationTrace::default() };
            let fresh: Vec<_> =
                outcome.tool_enabled().filter(|m| !handled.contains(&m.guideline_id)).cloned().collect();
            handled.extend(fresh.iter().map(|m| m.guideline_id.clone()));
            previous = Some(outcome);
            let ran_tools = match self.tool_stage(turn, ctx, &fresh, &mut it, seen).await {
                Step::Cancelled => return Ok(Some(Ending::Cancelled)),
                Step::Done(ran) => ran,
            };
            it.duration_ms = iteration_started.elapsed().as_millis() as u64;
            turn.trace.iterations.push(it);
            let bail = self.hooks.on_iteration_end(iteration, &mut turn.state, turn.sink).await == HookAction::Bail;
            if !ran_tools || bail {
                break;
            }
            if iteration == max {
                tracing::warn!(
                    trace_id = turn.trace_id(),
                    max,
                    "max_engine_iterations reached with tool results not yet matched on"
                );
            }
        }
        // Consequential calls an earlier attempt made that this one did not decide still
        // reach the reply: they changed the world.
        let unreached = self.make_unreached_calls(turn).await;
        if !unreached.is_empty() {
            let iteration = turn.state.iterations;
            let staged = self.stage_calls(turn, ctx, unreached, iteration).await;
            if let Some(last) = turn.trace.iterations.last_mut() {
                last.tool_calls.extend(staged);
            }
        }
        // The engine's record of the move says where the journey rests now (its readers, the
        // simulator's coverage among them, follow the moves as recorded).
        for asked in turn.state.ask_before_tools(self.matcher.agent()) {
            let record = turn.trace.iterations.iter_mut().rev().filter_map(|it| it.matching.as_mut()).find_map(|m| {
                m.journeys.iter_mut().rev().find(|r| r.journey_id == asked.journey && r.decision.steps().is_some())
            });
            let Some(record) = record else { continue };
            if let JourneyDecision::Started { steps } | JourneyDecision::Advanced { steps } = &mut record.decision
                && let Some(last) = steps.last_mut()
                && *last == asked.tool_step
            {
                last.clone_from(&asked.question);
            }
            record.path_after = turn.state.journey_paths.get(&asked.journey).cloned();
            record.correction = Some(match record.correction.take() {
                Some(earlier) => format!("{earlier}; {}", asked.note),
                None => asked.note,
            });
        }
        turn.state.prepared_to_respond = true;
        turn.trace.tool_insights = turn.state.tool_insights.clone();
        Ok(None)
    }

    /// Stage: one matching pass, its usage and failures recorded and its matches absorbed
    /// into the turn's state. `None` when a later pass lost every call (recorded as a
    /// degraded stage); an error when the first pass did.
    pub(super) async fn match_pass(
        &self,
        turn: &mut Turn<'_>,
        ctx: &MatchingContext,
        previous: Option<&MatchingOutcome>,
        iteration: u32,
        seen: &Seen<'_>,
    ) -> Result<Step<Option<MatchingOutcome>>, TurnError> {
        let matching = match previous {
            None => {
                // The preamble, when enabled, is written while the first pass matches.
                let preamble = self.preamble(seen.conversation, turn.sink, turn.trace_id(), &turn.ledger);
                let first = async { futures::join!(self.matcher.match_turn(ctx), preamble).0 };
                cancellable(turn.cancel, turn.latch, first).await
            }
            Some(p) => cancellable(turn.cancel, turn.latch, self.matcher.rematch(ctx, p)).await,
        };
        let outcome = match matching {
            Step::Cancelled => return Ok(Step::Cancelled),
            Step::Done(Ok(outcome)) => outcome,
            Step::Done(Err(guidepost_engine::EngineError::AllBatchesFailed { first, failed }))
                if previous.is_some() =>
            {
                turn.trace.degraded.push(DegradedStage {
                    stage: Stage::Matching,
                    iteration,
                    failed,
                    attempted: failed,
                    error: scrub(&first.to_string()),
                });
                return Ok(Step::Done(None));
            }
            Step::Done(Err(error)) => return Err(TurnError::Matching(error)),
        };
        let failed_batches: Vec<&str> = outcome.record.batches.iter().filter_map(|b| b.error.as_deref()).collect();
        if let Some(first) = failed_batches.first() {
            turn.trace.degraded.push(DegradedStage {
                stage: Stage::Matching,
                iteration,
                failed: failed_batches.len(),
                attempted: outcome.record.model_calls(),
                error: scrub(first),
            });
        }
        for batch in &outcome.record.batches {
            if let Some(usage) = &batch.usage {
                let task = match batch.category {
                    guidepost_engine::Category::JourneyNodeSelection => TaskKind::JourneySelection,
                    _ => TaskKind::Matching,
                };
                turn.ledger.record(&task, usage);
            }
        }
        turn.state.absorb(&outcome);
        Ok(Step::Done(Some(outcome)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use guidepost_llm::providers::scripted::ScriptedModel;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    #[tokio::test]
    async fn match_pass_absorbs_the_matches_and_records_their_usage() {
        let model = ScriptedModel::new().when_task(TaskKind::Matching).reply_with(|req| {
            let applies =
                |n: &str| req.last_user_message().contains(&format!("[{n}] The customer asks about shipping"));
            Ok(json!({"checks": [
                {"id": "1", "rationale": "r", "applies": applies("1")},
                {"id": "2", "rationale": "r", "applies": applies("2")},
            ]}))
        });
        let rt = runtime(model);
        let session = MemorySession::new();
        let input = input(&session, "How long is shipping?");
        let (cancel, latch) = (CancellationToken::new(), EmittingLatch::default());
        let mut turn = Turn::new(rt.definition(), &input, &session, &cancel, &latch, "test");
        let (ctx, conversation, query) = rt.load_context(&mut turn).await;
        let seen = Seen { history: rt.prompt_history(&input, &conversation), conversation: &conversation, query };
        let Ok(Step::Done(Some(outcome))) = rt.match_pass(&mut turn, &ctx, None, 1, &seen).await else {
            panic!("the pass failed")
        };
        assert_eq!(outcome.matches.iter().map(|m| m.guideline_id.as_str()).collect::<Vec<_>>(), ["shipping"]);
        assert!(turn.state.all_matches().any(|m| m.guideline_id == "shipping"));
        assert_eq!(turn.ledger.totals().calls, 1);
        assert!(turn.trace.degraded.is_empty());
    }
}
