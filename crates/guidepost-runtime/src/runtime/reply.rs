//! Stage: the reply: a preamble while the first pass matches (when the agent enables one),
//! then the reply composed and emitted, streamed as it is written in `stream` output mode.

use guidepost_core::payload::{EventPayload, MessagePayload, PREAMBLE_TAG};
use guidepost_llm::secrets::scrub;
use guidepost_llm::{TaskKind, Usage, UsageLedger};
use serde_json::json;

use super::AgentRuntime;
use super::turn::{Ending, Step, Turn, cancellable};
use crate::compose::{ComposeInput, Written, compose};
use crate::error::TurnError;
use crate::events::{EventSink, NewEvent, Visibility};
use crate::history::PromptHistory;
use crate::journal::CallSource;
use crate::trace::CompositionTrace;

const PREAMBLE: &str = include_str!("../prompts/preamble.j2");

impl AgentRuntime {
    /// Sends a short acknowledgement tagged `__preamble__` (only when the agent enables
    /// preambles). A failure to write one is logged and skipped: it never delays or fails
    /// the reply.
    pub(super) async fn preamble(
        &self,
        conversation: &[(String, String)],
        sink: &dyn EventSink,
        trace_id: &str,
        ledger: &UsageLedger,
    ) {
        let agent = &self.definition.agent;
        if !agent.preamble.enabled {
            return;
        }
        let last = crate::prompt::last_customer(conversation).unwrap_or("");
        let prompt = match crate::prompt::render(
            "preamble.j2",
            PREAMBLE,
            json!({"agent_name": agent.name, "agent_description": agent.description, "examples": agent.preamble.examples, "last_message": last}),
        ) {
            Ok(prompt) => prompt,
            Err(error) => return tracing::warn!(%error, "no preamble"),
        };
        let request =
            guidepost_llm::ChatRequest::new(TaskKind::Generation).user(prompt).max_tokens(40).temperature(0.2);
        match self.models.generation.complete(request).await {
            Ok(response) => {
                ledger.record(&TaskKind::Generation, &response.usage);
                let text = response.output.to_text().trim().trim_matches('"').to_string();
                if text.is_empty() {
                    return;
                }
                let mut event = MessagePayload::agent(&agent.id, &agent.name, &text);
                event.tags = Some(vec![PREAMBLE_TAG.to_string()]);
                // Held with the reply: a turn run again after its process died writes a
                // preamble anew, and the session shows one.
                sink.emit(NewEvent::agent(trace_id, EventPayload::Message(event)), Visibility::Held).await;
            }
            Err(error) => tracing::warn!(error = %scrub(&error.to_string()), "no preamble: the model call failed"),
        }
    }

    /// Stage: composes the reply and emits it, streamed as it is written in `stream` output
    /// mode (the message event exists from its first words, and the turn can no longer be
    /// cancelled), shown to the sink's preview otherwise.
    pub(super) async fn emit_reply(
        &self,
        turn: &mut Turn<'_>,
        conversation: &[(String, String)],
        history: &PromptHistory<'_>,
    ) -> Result<Ending, TurnError> {
        let input = turn.input;
        let (sink, cancel, latch) = (turn.sink, turn.cancel, turn.latch);
        let state = &turn.state;
        let trace_id = &input.trace_id;
        let agent = &self.definition.agent;
        let streaming = agent.output_mode == guidepost_core::OutputMode::Stream;
        // Reply text as it is written; `None` when a refused reply is written anew.
        let (chunk_tx, mut chunk_rx) = tokio::sync::mpsc::unbounded_channel::<Option<String>>();
        let compose_input = ComposeInput {
            definition: &self.definition,
            definition_grounding: &self.grounding,
            state,
            history: conversation,
            shown: history.shown,
            earlier: history.earlier.as_deref(),
            customer_name: input.customer_name.as_deref(),
            self_check: self.self_check(),
            reply_checks: self.config.reply_checks.as_deref().unwrap_or(&guidepost_core::reply_check::ReplyCheck::ALL),
            now: self.clock.now(),
            preview: sink.wants_preview(),
        };
        // A request whose outcome is lost and was not sent again: the customer is told it is
        // being checked, in words no model chose (a model might say it went through).
        if state.tool_calls.iter().any(|c| c.source == CallSource::Unconfirmed) {
            let text = compose_input.outcome_check();
            latch.set();
            turn.trace.composition = CompositionTrace { outcome_check: true, ..CompositionTrace::default() };
            let mut message = MessagePayload::agent(&agent.id, &agent.name, &text);
            message.degraded = turn.trace.is_degraded().then(|| turn.trace.degraded_json());
            sink.emit(NewEvent::agent(trace_id, EventPayload::Message(message)), Visibility::Held).await;
            self.hooks.on_messages_emitted(state, sink).await;
            return Ok(Ending::Sent(vec![text]));
        }
        let model = self.models.generation.as_ref();
        let output_mode = agent.output_mode;
        // The chunk sender lives inside this future, so the forwarder below sees the end of
        // the stream as soon as composition returns.
        let composing = async move {
            let mut on_written = move |written: Written<'_>| {
                let _ = chunk_tx.send(match written {
                    Written::Text(text) => Some(text.to_string()),
                    Written::Restart => None,
                });
            };
            compose(model, compose_input, output_mode, &mut on_written).await
        };
        // A streamed reply is emitted while it is generated: the message event exists from
        // the first chunk, so the turn can no longer be cancelled from then on.
        let forward = async {
            // `Some` once the message event was emitted, with its id when the sink stored it.
            let mut event_id: Option<Option<String>> = None;
            let mut chunks: Vec<Option<String>> = Vec::new();
            // In `block` mode the sink's preview gets the reply while it is written; the
            // message event follows once its checks pass.
            let mut preview = String::new();
            while let Some(chunk) = chunk_rx.recv().await {
                if !streaming {
                    match chunk {
                        Some(piece) => preview.push_str(&piece),
                        None => preview.clear(),
                    }
                    sink.preview(trace_id, &preview).await;
                    continue;
                }
                // A streamed reply is never refused and written anew.
                let Some(chunk) = chunk else { continue };
                chunks.push(Some(chunk));
                let text: String = chunks.iter().flatten().map(String::as_str).collect();
                let mut message = MessagePayload::agent(&agent.id, &agent.name, &text);
                message.chunks = Some(chunks.clone());
                let event = NewEvent::agent(trace_id, EventPayload::Message(message));
                match &event_id {
                    None => {
                        latch.set();
                        event_id = Some(sink.emit(event, Visibility::Live).await);
                    }
                    Some(Some(id)) => sink.update(id, event).await,
                    Some(None) => {}
                }
            }
            (event_id, chunks)
        };
        let (composed, (stream_event, mut chunks)) = if streaming {
            let mut both = std::pin::pin!(async { futures::join!(composing, forward) });
            let finished = tokio::select! {
                biased;
                _ = cancel.cancelled() => None,
                v = &mut both => Some(v),
            };
            match finished {
                Some(v) => v,
                None if latch.can_cancel() => return Ok(Ending::Cancelled),
                // Emitting already started: the reply is finished, then the turn ends.
                None => both.await,
            }
        } else {
            let composed = match cancellable(cancel, latch, async { futures::join!(composing, forward).0 }).await {
                Step::Cancelled => return Ok(Ending::Cancelled),
                Step::Done(c) => c,
            };
            (composed, (None, Vec::new()))
        };
        let mut composed = composed.map_err(TurnError::Composition)?;
        for usage in &composed.usage {
            turn.ledger.record(&TaskKind::Generation, usage);
        }
        let state = &turn.state;
        let trace = &mut turn.trace;
        trace.composition = CompositionTrace {
            mode: serde_json::to_value(composed.mode)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            template_id: composed.template_id.clone(),
            self_check: composed.self_check.clone(),
            reply_checks: composed.reply_checks.clone(),
            fallback: composed.fallback,
            mended_from: composed.mended.clone(),
            outcome_check: false,
            followed: composed.followed.clone(),
            model_calls: composed.usage.iter().map(|u| u.calls).sum(),
            prompt_tokens: composed.usage.iter().map(|u: &Usage| u.prompt_tokens).sum(),
        };
        if let Some(draft) = composed.draft.as_mut() {
            let _ = self.hooks.on_draft_generated(draft, state).await;
        }
        latch.set();
        let mut text = composed.text.clone();
        // The hook sees the whole reply on both paths. A streamed reply was shown as it was
        // written; an edit replaces its text in the finished message event.
        let _ = self.hooks.on_message_generated(&mut text, state).await;
        if streaming {
            chunks.push(None);
            let mut message = MessagePayload::agent(&agent.id, &agent.name, &text);
            message.chunks = Some(chunks);
            message.degraded = trace.degraded_for_customers();
            let event = NewEvent::agent(trace_id, EventPayload::Message(message));
            match stream_event {
                Some(Some(id)) => sink.update(&id, event).await,
                Some(None) => {}
                None => {
                    sink.emit(event, Visibility::Live).await;
                }
            }
        } else {
            if text.trim().is_empty() {
                return Ok(Ending::Sent(Vec::new()));
            }
            let mut message = MessagePayload::agent(&agent.id, &agent.name, &text);
            message.canned_responses = composed.template_id.as_ref().map(|id| vec![(id.clone(), text.clone())]);
            // What the checks refused, and the draft the reply was corrected from, stay in the
            // trace: the customer sees which checks refused a reply, never its text.
            if composed.fallback || !composed.reply_checks.is_empty() {
                let problems: Vec<serde_json::Value> = composed
                    .reply_checks
                    .iter()
                    .map(|reply| reply.iter().map(|p| json!({"check": p.check.name()})).collect())
                    .collect();
                message.reply_checks = Some(json!({"fallback": composed.fallback, "problems": problems}));
            }
            message.degraded = trace.degraded_for_customers();
            sink.emit(NewEvent::agent(trace_id, EventPayload::Message(message)), Visibility::Held).await;
        }
        self.hooks.on_messages_emitted(state, sink).await;
        Ok(Ending::Sent(vec![text]))
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use crate::events::message_text;
    use guidepost_llm::providers::scripted::ScriptedModel;
    use tokio_util::sync::CancellationToken;

    #[tokio::test]
    async fn emit_reply_sends_the_composed_message_and_traces_it() {
        let reply = "Shipping takes 3 days.";
        let model = ScriptedModel::new()
            .when_task(TaskKind::Generation)
            .reply_json(json!({"draft": reply, "problems": [], "reply": reply}));
        let rt = runtime(model);
        let session = MemorySession::new();
        let input = input(&session, "How long is shipping?");
        let (cancel, latch) = (CancellationToken::new(), EmittingLatch::default());
        let mut turn = Turn::new(rt.definition(), &input, &session, &cancel, &latch, "test");
        let (_, conversation, _) = rt.load_context(&mut turn).await;
        let history = rt.prompt_history(&input, &conversation);
        let Ok(Ending::Sent(sent)) = rt.emit_reply(&mut turn, &conversation, &history).await else {
            panic!("no reply")
        };
        assert_eq!(sent, [reply]);
        assert!(latch.is_set(), "emitting started: the turn can no longer be cancelled");
        assert_eq!(session.events().iter().rev().find_map(message_text), Some(reply));
        assert_eq!(turn.trace.composition.model_calls, 1);
        assert_eq!(turn.ledger.totals().calls, 1);
    }
}
