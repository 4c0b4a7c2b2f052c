//! Stage: the turn's context: context variables, the conversation as its prompts show it,
//! and the glossary terms and capabilities relevant to it.

use guidepost_engine::MatchingContext;

use super::AgentRuntime;
use super::turn::{Turn, TurnInput};
use crate::history::{DEFAULT_HISTORY_TURNS, Earlier, PromptHistory};
use crate::variables::load_variables;

/// What glossary terms and capabilities are retrieved for: the conversation's latest six
/// messages, newest first.
pub(super) fn retrieval_query(conversation: &[(String, String)]) -> String {
    conversation.iter().rev().take(6).map(|(_, t)| t.as_str()).collect::<Vec<_>>().join("\n")
}

impl AgentRuntime {
    /// Stage: the turn's context. Context variables (tools refreshing stale ones), the
    /// conversation as every prompt of the turn shows it (by the matcher's rules), and the
    /// glossary terms and capabilities relevant to its latest messages.
    pub(super) async fn load_context(&self, turn: &mut Turn<'_>) -> (MatchingContext, Vec<(String, String)>, String) {
        let input = turn.input;
        turn.state.previous_journey_paths = input.previous_state.journey_paths.clone();
        turn.state.context_variables = load_variables(
            &self.definition,
            self.variables.as_ref(),
            self.clock.as_ref(),
            &self.tools,
            &input.customer,
            &turn.tool_ctx,
        )
        .await;
        let mut ctx = MatchingContext::new(input.events.clone(), input.previous_state.clone());
        ctx.variables = turn.state.context_variables.clone();
        ctx.customer_name = input.customer_name.clone();
        let conversation: Vec<(String, String)> = ctx.messages().into_iter().map(|m| (m.speaker, m.text)).collect();
        let query = retrieval_query(&conversation);
        (turn.state.glossary_terms, turn.state.capabilities) = self.retrieve(&query).await;
        (ctx, conversation, query)
    }

    /// The glossary terms and capabilities relevant to `query`, retrieved side by side (one
    /// wave of embedding calls, when the agent has more of either than a prompt takes).
    pub(super) async fn retrieve(&self, query: &str) -> (Vec<guidepost_core::Term>, Vec<guidepost_core::Capability>) {
        let embedder = self.models.embedder.as_deref();
        futures::join!(
            self.knowledge.terms(&self.definition, embedder, query),
            self.knowledge.capabilities(&self.definition, embedder, query)
        )
    }

    /// The conversation as this turn's composition and tool inference show it.
    pub(super) fn prompt_history<'a>(
        &self,
        input: &TurnInput,
        conversation: &'a [(String, String)],
    ) -> PromptHistory<'a> {
        let earlier = Earlier {
            definition: &self.definition,
            events: &input.events,
            applied_guideline_ids: &input.previous_state.applied_guideline_ids,
        };
        crate::history::bound(conversation, self.config.history_turns.unwrap_or(DEFAULT_HISTORY_TURNS), earlier)
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
    async fn load_context_reads_variables_the_conversation_and_the_glossary() {
        let rt = runtime(ScriptedModel::new());
        let session = MemorySession::new();
        let input = input(&session, "How long is shipping?");
        let (cancel, latch) = (CancellationToken::new(), EmittingLatch::default());
        let mut turn = Turn::new(rt.definition(), &input, &session, &cancel, &latch, "test");
        let (ctx, conversation, query) = rt.load_context(&mut turn).await;
        assert_eq!(ctx.variables.get("plan"), Some(&json!("premium")));
        assert_eq!(conversation, [("customer".to_string(), "How long is shipping?".to_string())]);
        assert_eq!(query, "How long is shipping?");
        assert_eq!(turn.state.glossary_terms.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["express"]);
        assert_eq!(turn.ledger.totals().calls, 0, "no model call");
    }
}
