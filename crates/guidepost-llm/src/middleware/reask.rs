//! Structured answers are validated against their schema; a bad one is sent back to the model
//! with the validation errors, a bounded number of times.

use std::time::Instant;

use async_trait::async_trait;

use crate::error::LlmError;
use crate::ports::{ChatModel, TextStream};
use crate::request::{ChatMessage, ChatRequest, ChatResponse, Output, OutputFormat};
use crate::usage::Usage;
use crate::validate::validate;

/// Validates JSON answers and re-asks up to `max_reasks` times. Each re-ask appends the bad
/// answer (as the assistant's turn) and a user message listing the validation errors.
/// Text requests pass through untouched.
#[derive(Debug)]
pub struct Reask<M> {
    inner: M,
    max_reasks: u32,
}

impl<M> Reask<M> {
    /// Wraps `inner`.
    pub fn new(inner: M, max_reasks: u32) -> Self {
        Self { inner, max_reasks }
    }
}

/// Characters of a bad answer sent back with a re-ask: enough to show the model what it
/// wrote, not a copy of a runaway answer per re-ask.
pub const MAX_REASK_EXCERPT: usize = 2_000;

/// Validation errors listed in a re-ask.
pub const MAX_REASK_ERRORS: usize = 20;

/// The start and the end of a bad answer, at most [`MAX_REASK_EXCERPT`] characters in all.
pub fn answer_excerpt(answer: &str) -> String {
    let count = answer.chars().count();
    if count <= MAX_REASK_EXCERPT {
        return answer.to_string();
    }
    let head: String = answer.chars().take(MAX_REASK_EXCERPT * 3 / 4).collect();
    let tail: String = answer.chars().skip(count - MAX_REASK_EXCERPT / 4).collect();
    format!("{head}\n[… {} characters left out …]\n{tail}", count - MAX_REASK_EXCERPT)
}

/// The message that asks the model to correct its answer.
pub fn correction_message(schema_name: &str, errors: &[String]) -> String {
    let list: Vec<String> = errors.iter().map(|e| format!("- {e}")).collect();
    format!(
        "Your answer does not conform to the `{schema_name}` JSON Schema:\n{}\n\
         Answer again with only the corrected JSON.",
        list.join("\n")
    )
}

#[async_trait]
impl<M: ChatModel> ChatModel for Reask<M> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn capabilities(&self) -> crate::ModelCapabilities {
        self.inner.capabilities()
    }

    async fn read_ahead(&self, req: ChatRequest) -> Result<bool, LlmError> {
        self.inner.read_ahead(req).await
    }
    fn reads_ahead(&self) -> bool {
        self.inner.reads_ahead()
    }

    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        let OutputFormat::Json { name, schema, .. } = req.output.clone() else {
            return self.inner.complete(req).await;
        };
        let started = Instant::now();
        let mut spent = Usage::default(); // calls start at 0
        let mut req = req;
        let mut reasks = 0;
        loop {
            let (errors, answer) = match self.inner.complete(req.clone()).await {
                Ok(mut response) => {
                    let checked = match &response.output {
                        Output::Json(value) => validate(&schema, value).map_err(|e| (e, value.to_string())),
                        Output::Text(text) => Err((vec!["the answer is text, not JSON".into()], text.clone())),
                    };
                    match checked {
                        Ok(()) => {
                            response.usage.absorb(&spent);
                            response.usage.latency = started.elapsed().max(response.usage.latency);
                            return Ok(response);
                        }
                        Err((errors, answer)) => {
                            spent.absorb(&response.usage);
                            (errors, answer)
                        }
                    }
                }
                Err(LlmError::SchemaViolation { errors, answer }) => {
                    spent.calls += 1;
                    (errors, answer)
                }
                Err(other) => return Err(other),
            };
            if reasks >= self.max_reasks {
                return Err(LlmError::SchemaViolation { errors, answer });
            }
            reasks += 1;
            tracing::warn!(schema = %name, reasks, errors = ?errors, "structured answer invalid; asking again");
            req.messages.push(ChatMessage::assistant(answer_excerpt(&answer)));
            let shown = &errors[..errors.len().min(MAX_REASK_ERRORS)];
            req.messages.push(ChatMessage::user(correction_message(&name, shown)));
        }
    }

    /// Streams are passed through: a streamed answer is shown as it comes and cannot be
    /// re-asked.
    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        self.inner.stream(req).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use serde_json::json;

    use super::*;
    use crate::providers::scripted::ScriptedModel;
    use crate::request::TaskKind;

    fn schema() -> serde_json::Value {
        json!({"type": "object", "properties": {"applies": {"type": "boolean"}},
               "required": ["applies"], "additionalProperties": false})
    }

    #[test]
    fn a_long_bad_answer_is_sent_back_as_a_bounded_excerpt() {
        let answer = format!("{{\"applies\": \"{}\"}}", "x".repeat(10_000_000));
        let excerpt = answer_excerpt(&answer);
        assert!(excerpt.chars().count() < MAX_REASK_EXCERPT + 100, "{}", excerpt.len());
        assert!(excerpt.starts_with("{\"applies\"") && excerpt.ends_with("xx\"}"));
        assert_eq!(answer_excerpt("{}"), "{}");
    }

    #[tokio::test]
    async fn invalid_then_valid_answer_is_recovered_with_the_error_sent_back() {
        let model = ScriptedModel::new()
            .when_task(TaskKind::Matching)
            .times(1)
            .reply_json(json!({"applies": "yes"}))
            .when_task(TaskKind::Matching)
            .times(1)
            .reply_text("{\"applies\": tru")
            .on(TaskKind::Matching, |_| Ok(json!({"applies": true})));
        let reask = Reask::new(model, 2);
        let req = ChatRequest::new(TaskKind::Matching).user("q").json_output("Check", schema());
        let answer = reask.complete(req).await.unwrap();
        assert_eq!(answer.output, Output::Json(json!({"applies": true})));
        assert_eq!(answer.usage.calls, 3);
        let seen = reask.inner.requests();
        assert_eq!(seen[1].messages.len(), 3);
        assert_eq!(seen[1].messages[1].content, "{\"applies\":\"yes\"}");
        assert!(seen[1].last_message().contains("$.applies: expected boolean"));
        assert!(seen[2].last_message().contains("not valid JSON"));
    }

    #[test]
    fn correction_prompt_snapshot() {
        let errors = vec![
            "$.applies: expected boolean, got string \"yes\"".to_string(),
            "$: missing required property `rationale`".to_string(),
        ];
        insta::assert_snapshot!(correction_message("Check", &errors));
    }

    #[tokio::test]
    async fn gives_up_after_the_bound() {
        let model = ScriptedModel::new().on(TaskKind::Matching, |_| Ok(json!({"nope": 1})));
        let reask = Reask::new(model, 1);
        let req = ChatRequest::new(TaskKind::Matching).user("q").json_output("Check", schema());
        let err = reask.complete(req).await.unwrap_err();
        match err {
            LlmError::SchemaViolation { errors, answer } => {
                assert_eq!(answer, "{\"nope\":1}");
                assert!(errors.iter().any(|e| e.contains("missing required property `applies`")));
            }
            other => panic!("unexpected {other}"),
        }
        assert_eq!(reask.inner.total_calls(), 2);
    }
}
