//! Stage: the tool calls of a preparation iteration: inferred for the tool-enabled matches
//! not handled yet, run, staged for the next matching pass and emitted as a `tool` event,
//! their arguments and results without secrets from then on.

use guidepost_core::payload::{EventPayload, ToolCallPayload, ToolPayload};
use guidepost_core::session::ProcessingStage;
use guidepost_engine::{MatchingContext, StagedToolResult};
use guidepost_llm::TaskKind;
use guidepost_llm::secrets::{scrub, scrub_json};
use serde_json::Value;

use super::AgentRuntime;
use super::calls::Made;
use super::turn::{Seen, Step, Turn, cancellable};
use crate::events::{NewEvent, Visibility};
use crate::state::StagedCall;
use crate::tool_calls::{InferenceInput, infer};
use crate::trace::{DegradedStage, IterationTrace, Stage};

impl AgentRuntime {
    /// Stage: the tool calls of `fresh` (tool-enabled matches not handled yet in this turn):
    /// inferred, run, staged for the next pass and emitted as a `tool` event. Whether any
    /// ran.
    pub(super) async fn tool_stage(
        &self,
        turn: &mut Turn<'_>,
        ctx: &mut MatchingContext,
        fresh: &[guidepost_engine::GuidelineMatch],
        it: &mut IterationTrace,
        seen: &Seen<'_>,
    ) -> Step<bool> {
        if fresh.is_empty() {
            return Step::Done(false);
        }
        let iteration = it.iteration;
        turn.sink
            .emit(NewEvent::processing(turn.trace_id(), ProcessingStage::ConsideringTools), Visibility::Live)
            .await;
        let inference = infer(
            self.models.tool_inference.as_ref(),
            InferenceInput {
                definition: &self.definition,
                matches: fresh,
                tools: &self.tool_index,
                history: seen.conversation,
                shown: seen.history.shown,
                earlier: seen.history.earlier.as_deref(),
                staged: &turn.state.tool_calls,
                variables: &turn.state.context_variables,
            },
        );
        let inference = match cancellable(turn.cancel, turn.latch, inference).await {
            Step::Cancelled => return Step::Cancelled,
            Step::Done(i) => i,
        };
        for usage in &inference.usage {
            turn.ledger.record(&TaskKind::ToolInference, usage);
        }
        let insights = &mut turn.state.tool_insights;
        insights.decisions.extend(inference.insights.decisions);
        insights.missing.extend(inference.insights.missing);
        insights.invalid.extend(inference.insights.invalid.into_iter().map(|mut insight| {
            if let Some(value) = insight.invalid_value.as_mut() {
                scrub_json(value, &[]);
            }
            insight
        }));
        let failed: Vec<&crate::trace::InferenceTrace> = inference.traces.iter().filter(|t| t.failed).collect();
        if let Some(first) = failed.first() {
            turn.trace.degraded.push(DegradedStage {
                stage: Stage::ToolInference,
                iteration,
                failed: failed.len(),
                attempted: inference.traces.iter().filter(|t| t.model_call).count(),
                error: scrub(first.rationale.as_deref().unwrap_or("the model call failed")),
            });
        }
        it.tool_inference = inference
            .traces
            .into_iter()
            .map(|mut t| {
                t.rationale = t.rationale.as_deref().map(scrub);
                t
            })
            .collect();
        if inference.calls.is_empty() {
            return Step::Done(false);
        }
        let made = {
            let (cancel, latch) = (turn.cancel, turn.latch);
            // A cancellation is honoured only until a consequential call is under way.
            match cancellable(cancel, latch, self.make_calls(turn, inference.calls)).await {
                Step::Cancelled => return Step::Cancelled,
                Step::Done(made) => made,
            }
        };
        it.tool_calls.extend(self.stage_calls(turn, ctx, made, iteration).await);
        let query = format!(
            "{}\n{}",
            seen.query,
            turn.state.tool_calls.iter().map(|c| c.result.to_string()).collect::<Vec<_>>().join("\n")
        );
        (turn.state.glossary_terms, turn.state.capabilities) = self.retrieve(&query).await;
        Step::Done(true)
    }
}

impl AgentRuntime {
    /// Stages calls that were made (or reused): their results go to the next matching pass
    /// and the turn's state, without secrets, and out as one `tool` event; a lost call
    /// marks the turn degraded. The staged calls, for the iteration's trace.
    pub(super) async fn stage_calls(
        &self,
        turn: &mut Turn<'_>,
        ctx: &mut MatchingContext,
        made: Vec<Made>,
        iteration: u32,
    ) -> Vec<StagedCall> {
        let lost: Vec<String> = made
            .iter()
            .filter_map(|m| match &m.record.outcome {
                guidepost_tools::ToolOutcome::Error { message, kind } if lost_call(kind) => {
                    Some(format!("{}: {message}", m.record.tool))
                }
                _ => None,
            })
            .collect();
        if let Some(first) = lost.first() {
            turn.trace.degraded.push(DegradedStage {
                stage: Stage::ToolCalls,
                iteration,
                failed: lost.len(),
                attempted: made.len(),
                error: scrub(first),
            });
        }
        let mut event_calls = Vec::new();
        let mut staged = Vec::new();
        for Made { record, source, call_id } in made {
            // The call has run with what the model inferred; from here on (the event, the
            // trace, the logs, the next prompts) its arguments and result carry no secrets.
            // The services' own credentials too: a service may echo the ones it was called with.
            let known = self.tools.secrets();
            let mut result = serde_json::to_value(record.outcome.to_result(&record.tool)).unwrap_or(Value::Null);
            scrub_json(&mut result, known);
            let mut arguments = record.arguments;
            arguments.values_mut().for_each(|v| scrub_json(v, known));
            let call = StagedCall {
                tool: record.tool.clone(),
                arguments: arguments.clone(),
                ok: record.outcome.is_ok(),
                result: result.clone(),
                duration_ms: record.duration.as_millis() as u64,
                call_id: Some(call_id),
                source,
            };
            event_calls.push(ToolCallPayload { tool_id: record.tool.to_string(), arguments, result });
            ctx.staged_tool_results.push(StagedToolResult {
                tool: record.tool,
                arguments: Value::Object(call.arguments.clone()),
                result: call.result.clone(),
            });
            staged.push(call.clone());
            turn.state.tool_calls.push(call);
        }
        if !event_calls.is_empty() {
            let event = EventPayload::Tool(ToolPayload { tool_calls: event_calls });
            turn.sink.emit(NewEvent::agent(turn.trace_id(), event), Visibility::Held).await;
        }
        staged
    }
}

/// Whether a failed tool call cost the turn its result: it timed out, panicked, could not
/// reach its service, its service failed (an HTTP 5xx, 401 or 429, a result over the size
/// limit or one that does not decode), or its outcome was lost and is being checked. A tool
/// that answered with a failure of its own (an error fixture, a 404) gave the reply a fact to
/// use, and invalid arguments are the model's inference at work, not a loss.
fn lost_call(kind: &guidepost_tools::ToolErrorKind) -> bool {
    use guidepost_tools::ToolErrorKind as K;
    matches!(kind, K::Timeout { .. } | K::ServiceError | K::Panicked | K::Unavailable | K::Unconfirmed)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use guidepost_engine::MatchKind;
    use guidepost_llm::providers::scripted::ScriptedModel;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    #[tokio::test]
    async fn tool_stage_runs_the_inferred_calls_and_stages_their_results() {
        let model = ScriptedModel::new().when_task(TaskKind::ToolInference).reply_json(json!({"tools": [
            {"tool": "get_weather", "rationale": "asked", "decision": "needs_to_run", "calls": [{"arguments": {"city": "Paris"}}]}
        ]}));
        let rt = runtime(model);
        let session = MemorySession::new();
        let input = input(&session, "What's the weather in Paris?");
        let (cancel, latch) = (CancellationToken::new(), EmittingLatch::default());
        let mut turn = Turn::new(rt.definition(), &input, &session, &cancel, &latch, "test");
        let (mut ctx, conversation, query) = rt.load_context(&mut turn).await;
        let seen = Seen { history: rt.prompt_history(&input, &conversation), conversation: &conversation, query };
        let weather = rt.definition().guideline("weather").unwrap();
        let fresh = [guidepost_engine::GuidelineMatch {
            guideline_id: "weather".into(),
            kind: MatchKind::Guideline,
            condition: weather.condition.clone(),
            action: weather.action.clone(),
            tools: weather.tools.clone(),
            score: 10,
            rationale: "asked".into(),
        }];
        let mut it = IterationTrace { iteration: 1, ..IterationTrace::default() };
        assert!(matches!(rt.tool_stage(&mut turn, &mut ctx, &fresh, &mut it, &seen).await, Step::Done(true)));
        assert_eq!(turn.state.tool_calls.len(), 1);
        assert_eq!(turn.state.tool_calls[0].result["data"], json!({"temperature": 12}));
        assert_eq!(ctx.staged_tool_results.len(), 1, "the next pass sees the result");
        assert_eq!(it.tool_calls.len(), 1);
        let tool_events = session.events().into_iter().filter(|e| e.kind == guidepost_core::EventKind::Tool).count();
        assert_eq!(tool_events, 1);
        // Nothing fresh: no call, nothing run.
        assert!(matches!(rt.tool_stage(&mut turn, &mut ctx, &[], &mut it, &seen).await, Step::Done(false)));
    }
}
