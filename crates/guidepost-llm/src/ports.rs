//! The two ports every engine decision goes through: [`ChatModel`] and [`Embedder`].
//!
//! Both are object safe (`async-trait`), because the engine holds `Arc<dyn ChatModel>` and
//! `Arc<dyn Embedder>` chosen from configuration at run time.

use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::{self, BoxStream};

use crate::error::LlmError;
use crate::request::{ChatRequest, ChatResponse, Output, StreamEvent};

/// A stream of text pieces ending with [`StreamEvent::Done`].
pub type TextStream = BoxStream<'static, Result<StreamEvent, LlmError>>;

/// What a model can be relied on to do. The engine picks its prompt styles from it, never
/// from a model's name; configuration can override each choice per task.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelCapabilities {
    /// Tokens the model reads and writes in one call, when known.
    pub context_window: Option<usize>,
    /// Whether answers are held to the requested JSON schema while they are generated
    /// (constrained decoding), so an answer cannot break its schema.
    pub constrained_decoding: bool,
    /// Whether the model answers a compound request (several conditions judged in one
    /// answer, a rationale before each verdict, a draft and its problems before the reply)
    /// as reliably as a single question. Small models do not: they get one yes/no question
    /// per condition and write the reply without a draft.
    pub follows_compound_instructions: bool,
    /// For a model that reports how likely each answer was ([`ChatResponse::decisions`]):
    /// the probability of "yes" from which a yes-or-no question counts as answered yes. 0.5
    /// takes the likelier answer; a model known to answer yes too readily declares more.
    pub verdict_threshold: f32,
}

impl ModelCapabilities {
    /// The same, with `threshold` as [`verdict_threshold`](Self::verdict_threshold).
    pub const fn with_verdict_threshold(mut self, threshold: f32) -> Self {
        self.verdict_threshold = threshold;
        self
    }

    /// A capable hosted model, as providers that say nothing more are taken to be.
    pub const CAPABLE: Self = Self {
        context_window: None,
        constrained_decoding: false,
        follows_compound_instructions: true,
        verdict_threshold: 0.5,
    };

    /// A small model decoding under a grammar, with a context of `context_window` tokens.
    pub const fn small_constrained(context_window: Option<usize>) -> Self {
        Self {
            context_window,
            constrained_decoding: true,
            follows_compound_instructions: false,
            verdict_threshold: 0.5,
        }
    }

    /// A small model behind an API, declared so by its spec (`...#model?small`): it gets
    /// one question per condition and writes replies without a draft. Whether the server holds
    /// answers to their schema is not known, so answers are checked and re-asked as usual.
    pub const SMALL: Self = Self {
        context_window: None,
        constrained_decoding: false,
        follows_compound_instructions: false,
        verdict_threshold: 0.5,
    };
}

/// A model that answers a conversation with text or with JSON conforming to a schema.
///
/// Implementations: the OpenAI-compatible and Anthropic providers, the scripted test model,
/// local inference (in `guidepost-llm-local`), and every middleware layer, which wraps another
/// `ChatModel`.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// A stable identifier of the model, `provider:model` (e.g. `openai:gpt-4.1`).
    fn model_id(&self) -> &str;

    /// What the model can be relied on to do. Every implementation says it (a middleware
    /// layer passes on its inner model's), so no wrapper can hide a small model.
    fn capabilities(&self) -> ModelCapabilities;

    /// Answers `req` in one piece.
    ///
    /// For [`OutputFormat::Json`](crate::OutputFormat::Json) requests the answer is
    /// [`Output::Json`]; providers parse it but only the re-ask middleware validates it
    /// against the schema.
    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError>;

    /// Answers `req` piece by piece. The stream yields [`StreamEvent::Delta`]s and ends with
    /// one [`StreamEvent::Done`] carrying the full answer and its usage.
    ///
    /// The default calls [`complete`](ChatModel::complete) and yields the whole answer as one
    /// delta, which suits models that cannot stream.
    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        let response = self.complete(req).await?;
        Ok(single_shot_stream(response))
    }

    /// Whether the model has something to load before its first answer (local weights not
    /// in memory yet). Hosted models have not.
    fn needs_warm_up(&self) -> bool {
        false
    }

    /// Loads what the first answer would otherwise wait for, so it can happen where a user
    /// expects a wait (before "ready") and not inside the first turn.
    async fn warm_up(&self) -> Result<(), LlmError> {
        Ok(())
    }

    /// Reads the prompt of `req` ahead of time, without answering it, where that saves time
    /// later: a model that keeps what it read (a local model keeps the prompt's keys and
    /// values) then answers a request that begins the same way without reading that part
    /// again. Whether it read: models that keep nothing (hosted ones), a model that is not
    /// loaded yet or busy with an answer, and answers replayed from recordings do nothing
    /// and say `false`. Middleware passes it on unchanged: it is no call (no usage, no limit,
    /// no retry, no recording).
    async fn read_ahead(&self, req: ChatRequest) -> Result<bool, LlmError> {
        let _ = req;
        Ok(false)
    }

    /// Whether [`read_ahead`](Self::read_ahead) can save this model time at all (it keeps
    /// prompt prefixes, and answers are not only replayed): the caller renders nothing to
    /// read ahead otherwise.
    fn reads_ahead(&self) -> bool {
        false
    }
}

/// A stream of one delta (the whole answer as text) followed by `Done`.
pub fn single_shot_stream(response: ChatResponse) -> TextStream {
    let text = match &response.output {
        Output::Text(text) => text.clone(),
        Output::Json(value) => value.to_string(),
    };
    Box::pin(stream::iter([Ok(StreamEvent::Delta(text)), Ok(StreamEvent::Done(response))]))
}

/// A model that maps texts to vectors.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// A stable identifier of the model, `provider:model`.
    fn model_id(&self) -> &str;

    /// The length of every vector this embedder returns (0 when not known before the first
    /// call).
    fn dimensions(&self) -> usize;

    /// One vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError>;

    /// Whether the embedder has something to load before its first answer.
    fn needs_warm_up(&self) -> bool {
        false
    }

    /// Loads what the first call would otherwise wait for.
    async fn warm_up(&self) -> Result<(), LlmError> {
        Ok(())
    }
}

// Blanket impls: the engine passes models around as `Arc<dyn ChatModel>`, while the middleware
// decorators are generic over their inner model (`Retry<M: ChatModel>`). Forwarding through
// `Arc<T>` lets an `Arc<dyn ChatModel>` (or an `Arc` shared with other owners) be wrapped by
// any decorator without another box, and lets tests keep an `Arc` to a scripted model to
// inspect it after handing a clone to the stack.

/// Forwards to the shared model, so an `Arc<dyn ChatModel>` can be wrapped by middleware.
#[async_trait]
impl<T: ChatModel + ?Sized> ChatModel for Arc<T> {
    fn model_id(&self) -> &str {
        (**self).model_id()
    }
    fn capabilities(&self) -> ModelCapabilities {
        (**self).capabilities()
    }
    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        (**self).complete(req).await
    }
    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        (**self).stream(req).await
    }
    fn needs_warm_up(&self) -> bool {
        (**self).needs_warm_up()
    }
    async fn warm_up(&self) -> Result<(), LlmError> {
        (**self).warm_up().await
    }
    async fn read_ahead(&self, req: ChatRequest) -> Result<bool, LlmError> {
        (**self).read_ahead(req).await
    }
    fn reads_ahead(&self) -> bool {
        (**self).reads_ahead()
    }
}

/// Forwards to the shared embedder, so an `Arc<dyn Embedder>` can be wrapped and shared.
#[async_trait]
impl<T: Embedder + ?Sized> Embedder for Arc<T> {
    fn model_id(&self) -> &str {
        (**self).model_id()
    }
    fn dimensions(&self) -> usize {
        (**self).dimensions()
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        (**self).embed(texts).await
    }
    fn needs_warm_up(&self) -> bool {
        (**self).needs_warm_up()
    }
    async fn warm_up(&self) -> Result<(), LlmError> {
        (**self).warm_up().await
    }
}

/// Shows the model id, so structures holding `Arc<dyn ChatModel>` can derive `Debug`.
impl std::fmt::Debug for dyn ChatModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ChatModel({})", self.model_id())
    }
}

/// Shows the model id, so structures holding `Arc<dyn Embedder>` can derive `Debug`.
impl std::fmt::Debug for dyn Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Embedder({})", self.model_id())
    }
}
