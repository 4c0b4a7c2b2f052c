//! A deterministic model for tests: answers are chosen by rules written in the test, and every
//! request is recorded so the test can assert on what the engine asked.
//!
//! ```
//! use guidepost_llm::{ChatModel, ChatRequest, Output, TaskKind};
//! use guidepost_llm::providers::scripted::{ScriptedModel, last_user_contains};
//! use serde_json::json;
//!
//! # tokio_test_block_on(async {
//! let model = ScriptedModel::new()
//!     .when(last_user_contains("refund"))
//!     .task(TaskKind::Matching)
//!     .reply_json(json!({"applies": true}))
//!     .on(TaskKind::Matching, |_req| Ok(json!({"applies": false})))
//!     .on_text(TaskKind::Generation, |req| Ok(format!("You said: {}", req.last_user_message())));
//!
//! let req = ChatRequest::new(TaskKind::Matching)
//!     .user("I want a refund")
//!     .json_output("Check", json!({"type": "object"}));
//! let answer = model.complete(req).await?;
//! assert_eq!(answer.output, Output::Json(json!({"applies": true})));
//! assert_eq!(model.calls(&TaskKind::Matching), 1);
//! # Ok::<(), guidepost_llm::LlmError>(())
//! # });
//! # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().build().map(|rt| rt.block_on(f)).unwrap()
//! # }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::stream;
use serde_json::Value;

use crate::error::{LlmError, tail_excerpt};
use crate::ports::{ChatModel, TextStream};
use crate::request::{
    ChatRequest, ChatResponse, Output, OutputFormat, Role, StreamEvent, TaskKind, TokenDecision, TokenOption,
};
use crate::tokens::estimate_tokens;
use crate::usage::Usage;

type Predicate = Arc<dyn Fn(&ChatRequest) -> bool + Send + Sync>;
type ComputeJson = Arc<dyn Fn(&ChatRequest) -> Result<Value, LlmError> + Send + Sync>;
type ComputeText = Arc<dyn Fn(&ChatRequest) -> Result<String, LlmError> + Send + Sync>;

#[derive(Clone)]
enum Answer {
    Json(ComputeJson),
    Text(ComputeText),
    Odds(ComputeOdds),
    LabelOdds(ComputeLabelOdds),
    Fail(LlmError),
}

type ComputeLabelOdds = Arc<dyn Fn(&ChatRequest) -> Result<Vec<f32>, LlmError> + Send + Sync>;

type ComputeOdds = Arc<dyn Fn(&ChatRequest) -> Result<f32, LlmError> + Send + Sync>;

struct Rule {
    task: Option<TaskKind>,
    predicates: Vec<Predicate>,
    answer: Answer,
    remaining: Option<AtomicUsize>,
}

impl Rule {
    fn matches(&self, req: &ChatRequest) -> bool {
        self.task.as_ref().is_none_or(|t| *t == req.task)
            && self.predicates.iter().all(|p| p(req))
            && self.remaining.as_ref().is_none_or(|r| r.load(Ordering::SeqCst) > 0)
    }

    /// Takes one use of a limited rule; false when another caller took the last one.
    fn take(&self) -> bool {
        match &self.remaining {
            None => true,
            Some(r) => r.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok(),
        }
    }
}

/// A model whose answers are scripted by rules, tried in the order they were added; the first
/// rule whose task kind and predicates match (and that has uses left) answers.
///
/// Usage is estimated at one token per four characters; the model id is `scripted`.
pub struct ScriptedModel {
    id: String,
    capabilities: crate::ModelCapabilities,
    rules: Vec<Rule>,
    seen: Mutex<Vec<ChatRequest>>,
    read_ahead: Mutex<Vec<ChatRequest>>,
}

impl Default for ScriptedModel {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("id", &self.id)
            .field("rules", &self.rules.len())
            .field("calls", &self.total_calls())
            .finish()
    }
}

impl ScriptedModel {
    /// A model with no rules (every request fails with [`LlmError::NoScriptedRule`]).
    pub fn new() -> Self {
        Self {
            id: "scripted".to_string(),
            capabilities: crate::ModelCapabilities::CAPABLE,
            rules: Vec::new(),
            seen: Mutex::new(Vec::new()),
            read_ahead: Mutex::new(Vec::new()),
        }
    }

    /// Sets what the model declares it can do (default [`crate::ModelCapabilities::CAPABLE`]),
    /// to see the prompt styles the engine takes for a small model.
    pub fn with_capabilities(mut self, capabilities: crate::ModelCapabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// Sets the model id reported in [`Usage::model`] (default `scripted`).
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Answers every `task` request with the JSON value `answer` computes.
    pub fn on(
        self,
        task: TaskKind,
        answer: impl Fn(&ChatRequest) -> Result<Value, LlmError> + Send + Sync + 'static,
    ) -> Self {
        self.when_task(task).reply_with(answer)
    }

    /// Answers every `task` request with the text `answer` computes.
    pub fn on_text(
        self,
        task: TaskKind,
        answer: impl Fn(&ChatRequest) -> Result<String, LlmError> + Send + Sync + 'static,
    ) -> Self {
        self.when_task(task).reply_text_with(answer)
    }

    /// Starts a rule that applies when `predicate` holds (refine it with [`RuleBuilder::task`],
    /// [`RuleBuilder::and`], [`RuleBuilder::times`]).
    pub fn when(self, predicate: impl Fn(&ChatRequest) -> bool + Send + Sync + 'static) -> RuleBuilder {
        RuleBuilder { model: self, task: None, predicates: vec![Arc::new(predicate)], times: None }
    }

    /// Starts a rule for every request of `task`.
    pub fn when_task(self, task: TaskKind) -> RuleBuilder {
        RuleBuilder { model: self, task: Some(task), predicates: Vec::new(), times: None }
    }

    /// Every request seen, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The requests read ahead of time ([`ChatModel::read_ahead`]), in order; they are not
    /// among [`requests`](Self::requests).
    pub fn read_ahead_requests(&self) -> Vec<ChatRequest> {
        self.read_ahead.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The requests of one task kind, in order.
    pub fn requests_for(&self, task: &TaskKind) -> Vec<ChatRequest> {
        self.requests().into_iter().filter(|r| r.task == *task).collect()
    }

    /// How many requests of `task` were seen (answered or not).
    pub fn calls(&self, task: &TaskKind) -> usize {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).iter().filter(|r| r.task == *task).count()
    }

    /// Requests seen per task kind.
    pub fn calls_by_task(&self) -> BTreeMap<TaskKind, usize> {
        let mut counts = BTreeMap::new();
        for req in self.seen.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            *counts.entry(req.task.clone()).or_insert(0) += 1;
        }
        counts
    }

    /// How many requests were seen in total.
    pub fn total_calls(&self) -> usize {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    fn answer(&self, req: &ChatRequest) -> Result<(Output, Vec<TokenDecision>), LlmError> {
        let calls = {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            seen.push(req.clone());
            seen.len() - 1
        };
        let rule = self.rules.iter().find(|rule| rule.matches(req) && rule.take()).ok_or_else(|| {
            LlmError::NoScriptedRule {
                task: req.task.to_string(),
                excerpt: tail_excerpt(req.last_message(), 200),
                calls,
            }
        })?;
        let is_json = matches!(req.output, OutputFormat::Json { .. });
        if let Answer::Odds(compute) = &rule.answer {
            let yes = compute(req)?.clamp(0.0, 1.0);
            let answer = if yes >= 0.5 { "yes" } else { "no" };
            let option = |token: &str, probability| TokenOption { token: token.into(), probability };
            let decision = TokenDecision { offset: 1, options: vec![option("yes", yes), option("no", 1.0 - yes)] };
            let output = if is_json { Output::Json(Value::from(answer)) } else { Output::Text(answer.into()) };
            return Ok((output, vec![decision]));
        }
        if let Answer::LabelOdds(compute) = &rule.answer {
            let weights = compute(req)?;
            let total: f32 = weights.iter().map(|w| w.max(0.0)).sum();
            let options: Vec<TokenOption> = weights
                .iter()
                .enumerate()
                .map(|(i, w)| TokenOption {
                    token: (i + 1).to_string(),
                    probability: if total > 0.0 { w.max(0.0) / total } else { 0.0 },
                })
                .collect();
            let best = options.iter().max_by(|a, b| a.probability.total_cmp(&b.probability));
            let answer = best.map_or_else(|| "1".to_string(), |o| o.token.clone());
            let output = if is_json { Output::Json(Value::from(answer)) } else { Output::Text(answer) };
            return Ok((output, vec![TokenDecision { offset: 1, options }]));
        }
        let output = match &rule.answer {
            Answer::Odds(_) | Answer::LabelOdds(_) => unreachable!("answered above"),
            Answer::Fail(error) => Err(error.clone()),
            Answer::Json(compute) => {
                let value = compute(req)?;
                Ok(if is_json {
                    Output::Json(value)
                } else {
                    Output::Text(match value {
                        Value::String(text) => text,
                        other => other.to_string(),
                    })
                })
            }
            Answer::Text(compute) => {
                let text = compute(req)?;
                if is_json {
                    serde_json::from_str(&text).map(Output::Json).map_err(|e| LlmError::SchemaViolation {
                        errors: vec![format!("answer is not valid JSON: {e}")],
                        answer: text,
                    })
                } else {
                    Ok(Output::Text(text))
                }
            }
        }?;
        Ok((output, Vec::new()))
    }

    fn usage(&self, req: &ChatRequest, output: &Output) -> Usage {
        let prompt: usize = req.messages.iter().map(|m| estimate_tokens(&m.content)).sum();
        let mut usage = Usage::new(self.id.clone());
        usage.prompt_tokens = prompt as u64;
        usage.completion_tokens = estimate_tokens(&output.to_text()) as u64;
        usage
    }
}

#[async_trait]
impl ChatModel for ScriptedModel {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn capabilities(&self) -> crate::ModelCapabilities {
        self.capabilities
    }

    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        let (output, decisions) = self.answer(&req)?;
        let usage = self.usage(&req, &output);
        let mut response = ChatResponse::new(output, usage);
        response.decisions = decisions;
        Ok(response)
    }

    /// Takes requests to read ahead, for tests to see them.
    fn reads_ahead(&self) -> bool {
        true
    }

    /// Keeps the request, for tests to see what was read ahead.
    async fn read_ahead(&self, req: ChatRequest) -> Result<bool, LlmError> {
        self.read_ahead.lock().unwrap_or_else(PoisonError::into_inner).push(req);
        Ok(true)
    }

    /// Streams the answer word by word (whitespace kept), then `Done`.
    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        let response = self.complete(req).await?;
        let text = response.output.to_text();
        let mut events: Vec<Result<StreamEvent, LlmError>> =
            text.split_inclusive(' ').map(|piece| Ok(StreamEvent::Delta(piece.to_string()))).collect();
        events.push(Ok(StreamEvent::Done(response)));
        Ok(Box::pin(stream::iter(events)))
    }
}

/// A rule being built; finish it with one of the `reply_*` methods or [`fail`](Self::fail).
#[must_use = "a rule is only added by a reply_* or fail call"]
pub struct RuleBuilder {
    model: ScriptedModel,
    task: Option<TaskKind>,
    predicates: Vec<Predicate>,
    times: Option<usize>,
}

impl RuleBuilder {
    /// Restricts the rule to requests of `task`.
    pub fn task(mut self, task: TaskKind) -> Self {
        self.task = Some(task);
        self
    }

    /// Adds a predicate that must also hold.
    pub fn and(mut self, predicate: impl Fn(&ChatRequest) -> bool + Send + Sync + 'static) -> Self {
        self.predicates.push(Arc::new(predicate));
        self
    }

    /// Lets the rule answer only `n` times; later requests fall through to later rules.
    pub fn times(mut self, n: usize) -> Self {
        self.times = Some(n);
        self
    }

    fn finish(self, answer: Answer) -> ScriptedModel {
        let mut model = self.model;
        model.rules.push(Rule {
            task: self.task,
            predicates: self.predicates,
            answer,
            remaining: self.times.map(AtomicUsize::new),
        });
        model
    }

    /// Answers with a fixed JSON value.
    pub fn reply_json(self, value: Value) -> ScriptedModel {
        self.finish(Answer::Json(Arc::new(move |_| Ok(value.clone()))))
    }

    /// Answers with a fixed text. For a JSON request the text is parsed, and a text that is
    /// not JSON yields [`LlmError::SchemaViolation`], as a real provider would.
    pub fn reply_text(self, text: impl Into<String>) -> ScriptedModel {
        let text = text.into();
        self.finish(Answer::Text(Arc::new(move |_| Ok(text.clone()))))
    }

    /// Answers with the JSON value `compute` returns.
    pub fn reply_with(
        self,
        compute: impl Fn(&ChatRequest) -> Result<Value, LlmError> + Send + Sync + 'static,
    ) -> ScriptedModel {
        self.finish(Answer::Json(Arc::new(compute)))
    }

    /// Answers with the text `compute` returns.
    pub fn reply_text_with(
        self,
        compute: impl Fn(&ChatRequest) -> Result<String, LlmError> + Send + Sync + 'static,
    ) -> ScriptedModel {
        self.finish(Answer::Text(Arc::new(compute)))
    }

    /// Answers a yes-or-no question, reporting how likely "yes" was as `compute` says (and
    /// "no" as the rest), as a local model under a grammar reports it: the answer is the
    /// likelier of the two.
    pub fn reply_odds(
        self,
        compute: impl Fn(&ChatRequest) -> Result<f32, LlmError> + Send + Sync + 'static,
    ) -> ScriptedModel {
        self.finish(Answer::Odds(Arc::new(compute)))
    }

    /// Answers with one of the labels "1", "2", ... (a numbered choice), reporting how likely
    /// each was as `compute` weighs them (normalized), as a local model under a grammar
    /// reports it: the answer is the likeliest.
    pub fn reply_label_odds(
        self,
        compute: impl Fn(&ChatRequest) -> Result<Vec<f32>, LlmError> + Send + Sync + 'static,
    ) -> ScriptedModel {
        self.finish(Answer::LabelOdds(Arc::new(compute)))
    }

    /// Fails with `error` (to test error handling above the model).
    pub fn fail(self, error: LlmError) -> ScriptedModel {
        self.finish(Answer::Fail(error))
    }
}

/// Holds when the last user message contains `needle`.
pub fn last_user_contains(needle: impl Into<String>) -> impl Fn(&ChatRequest) -> bool + Send + Sync + 'static {
    let needle = needle.into();
    move |req| req.last_user_message().contains(&needle)
}

/// Holds when a system message contains `needle`.
pub fn system_contains(needle: impl Into<String>) -> impl Fn(&ChatRequest) -> bool + Send + Sync + 'static {
    let needle = needle.into();
    move |req| req.messages.iter().any(|m| m.role == Role::System && m.content.contains(&needle))
}

/// Holds when any message (system, user or assistant) contains `needle`.
pub fn prompt_contains(needle: impl Into<String>) -> impl Fn(&ChatRequest) -> bool + Send + Sync + 'static {
    let needle = needle.into();
    move |req| req.messages.iter().any(|m| m.content.contains(&needle))
}

/// Holds when the request asks for JSON with the schema named `name`.
pub fn schema_is(name: impl Into<String>) -> impl Fn(&ChatRequest) -> bool + Send + Sync + 'static {
    let name = name.into();
    move |req| req.schema_name() == Some(name.as_str())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use futures::StreamExt;
    use serde_json::json;

    use super::*;

    fn matching(text: &str) -> ChatRequest {
        ChatRequest::new(TaskKind::Matching)
            .system("check guidelines")
            .user(text)
            .json_output("Checks", json!({"type": "object"}))
    }

    #[tokio::test]
    async fn first_matching_rule_answers_and_times_limit_uses() {
        let model = ScriptedModel::new()
            .when(last_user_contains("hello"))
            .times(1)
            .reply_json(json!({"n": 1}))
            .when(schema_is("Checks"))
            .and(system_contains("guidelines"))
            .reply_json(json!({"n": 2}));
        let a = model.complete(matching("hello")).await.unwrap();
        let b = model.complete(matching("hello")).await.unwrap();
        assert_eq!(a.output, Output::Json(json!({"n": 1})));
        assert_eq!(b.output, Output::Json(json!({"n": 2})));
        assert_eq!(model.calls(&TaskKind::Matching), 2);
        assert_eq!(model.requests()[0].last_user_message(), "hello");
        assert!(a.usage.prompt_tokens > 0);
        assert_eq!(a.usage.model, "scripted");
    }

    #[tokio::test]
    async fn no_rule_names_task_and_prompt() {
        let model = ScriptedModel::new().on(TaskKind::Generation, |_| Ok(json!("hi")));
        let err = model.complete(matching("where is my parcel?")).await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("matching"), "{text}");
        assert!(text.contains("where is my parcel?"), "{text}");
        assert_eq!(model.calls_by_task()[&TaskKind::Matching], 1);
    }

    #[tokio::test]
    async fn text_for_json_request_must_parse() {
        let model = ScriptedModel::new().when_task(TaskKind::Matching).reply_text("{not json");
        let err = model.complete(matching("x")).await.unwrap_err();
        assert!(matches!(err, LlmError::SchemaViolation { ref answer, .. } if answer == "{not json"));
    }

    #[tokio::test]
    async fn streams_words_then_done() {
        let model = ScriptedModel::new().on_text(TaskKind::Generation, |_| Ok("a b c".into()));
        let req = ChatRequest::new(TaskKind::Generation).user("hi");
        let events: Vec<_> = model.stream(req).await.unwrap().collect().await;
        assert_eq!(events.len(), 4);
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                Ok(StreamEvent::Delta(d)) => Some(d.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "a b c");
        assert!(matches!(events.last(), Some(Ok(StreamEvent::Done(_)))));
    }

    #[tokio::test]
    async fn failing_rule_returns_its_error() {
        let model = ScriptedModel::new()
            .when_task(TaskKind::Judge)
            .fail(LlmError::Timeout { after: std::time::Duration::from_secs(1) });
        let err = model.complete(ChatRequest::new(TaskKind::Judge).user("x")).await.unwrap_err();
        assert!(matches!(err, LlmError::Timeout { .. }));
    }
}
