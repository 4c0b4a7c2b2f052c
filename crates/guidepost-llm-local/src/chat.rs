//! [`LocalChatModel`]: the [`ChatModel`] port on a local GGUF model.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use candle_core::Device;
use guidepost_llm::progress::CallProgress;
use guidepost_llm::{
    ChatModel, ChatRequest, ChatResponse, LlmError, Output, OutputFormat, Role, StreamEvent, TaskKind, TextStream,
    TokenDecision, TokenOption, Usage,
};
use tokio::sync::mpsc;

use crate::chat_template::{ChatTemplate, TemplateMessage};
use crate::constrained::{DECISION_TEXT_CHARS, GrammarCompiler, with_bounded_free_text};
use crate::decoder::{Branch, Decoder, Prefill};
use crate::error::LocalError;
use crate::generate::{self, DecodeParams, FinishReason, Generation, Generator, Prompt, Start};
use crate::gguf::{self, GgufSource, Metadata};
use crate::options::{LocalOptions, configure_kernels, configure_threads};
use crate::requant::RequantReport;
use crate::spec::ChatModelSpec;
use crate::tokenizer::GgufTokenizer;

/// Facts about a loaded chat model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// `general.architecture` (`llama`, `qwen2`).
    pub architecture: String,
    /// The context length in tokens.
    pub context_length: usize,
    /// The number of logits per step.
    pub vocab_size: usize,
    /// The ids that end an answer (`<|im_end|>`, `<|endoftext|>`, the GGUF's eos).
    pub stop_ids: Vec<u32>,
    /// Time to read, requantize and load the model.
    pub load_time: Duration,
    /// What requantization to Q8_0 did.
    pub requantized: RequantReport,
    /// Bytes of quantized weights released after loading because candle multiplies by its
    /// own repacked copy of them (see the crate documentation on memory).
    pub released_bytes: usize,
    /// Bytes of the transformer blocks' weights held in Guidepost's own tiles
    /// ([`LocalOptions::packed`]); 0 where candle multiplies them all.
    pub packed_bytes: usize,
}

/// An answer with the details of how it was generated.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalAnswer {
    /// The answer as the port returns it.
    pub output: Output,
    /// Tokens and timings.
    pub generation: Generation,
}

/// A chat model running on the CPU from a local GGUF file.
///
/// Loading takes about a second (SmolLM2) to three seconds (Qwen-1.5B). Generation runs on a
/// blocking thread, one request at a time per model, and the prompts of the requests waiting
/// meanwhile are read in the same passes where they continue the same cached prefix (see
/// [`LocalOptions::share_passes`]); clones share the loaded model.
/// Greedy decoding (no temperature, or 0) is deterministic. JSON answers are produced by
/// constrained decoding and always parse and conform to the schema.
#[derive(Clone)]
pub struct LocalChatModel {
    inner: Arc<Inner>,
}

struct Inner {
    id: String,
    tokenizer: GgufTokenizer,
    template: ChatTemplate,
    info: ModelInfo,
    options: LocalOptions,
    /// See [`ChatModelSpec::verdict_threshold`].
    verdict_threshold: f32,
    session: Mutex<Session>,
    /// Answers waiting for the session: reading ahead gives way to them.
    waiting: AtomicUsize,
    /// Built on the first structured answer; matchers are made before waiting for the
    /// session, so that a waiting answer's guess is known to the one being read.
    grammar: Mutex<Option<GrammarCompiler>>,
    /// The prompts of the answers waiting for the session, which the answer being read may
    /// read in its pass (see [`LocalOptions::share_passes`]).
    queue: Mutex<Vec<Queued>>,
    /// What those passes read for waiting answers, by ticket.
    read_for: Mutex<HashMap<u64, Prefill>>,
    next_ticket: AtomicU64,
    /// Answers being prepared (rendered, tokenized, their grammar made), not yet queued.
    preparing: AtomicUsize,
}

/// Longest an answer that takes the session waits for answers that arrived with it to be
/// prepared and queued, so that their prompts are read in its pass: preparing takes a few
/// milliseconds of the CPU, a pass of the model about a hundred.
const GATHER_WAIT: Duration = Duration::from_millis(20);

/// A request ready to be answered (see `Inner::prepare`).
struct Prepared {
    ticket: u64,
    ids: Arc<Vec<u32>>,
    guess: Arc<Vec<u32>>,
    matcher: Option<llguidance::Matcher>,
    params: DecodeParams,
}

/// An answer waiting for the session: its prompt and guess.
#[derive(Clone)]
struct Queued {
    ticket: u64,
    prompt: Arc<Vec<u32>>,
    guess: Arc<Vec<u32>>,
}

/// Tokens read ahead between two looks at whether an answer waits (about a second on two
/// cores for the default model): the longest an answer waits for reading ahead.
const READ_AHEAD_CHUNK: usize = 48;

/// What one generation at a time needs exclusively.
struct Session {
    generator: Generator,
}

impl std::fmt::Debug for LocalChatModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalChatModel")
            .field("id", &self.inner.id)
            .field("info", &self.inner.info)
            .finish_non_exhaustive()
    }
}

impl LocalChatModel {
    /// Loads the model named by `spec` (`local:qwen2.5-coder-1.5b`, `local:smollm2`,
    /// `local:/path/model.gguf`). Installed models are looked up in `options.models_dir`.
    pub fn load(spec: &str, options: &LocalOptions) -> Result<Self, LocalError> {
        let parsed = ChatModelSpec::parse(spec)?;
        let source = parsed.locate(&options.models_dir())?;
        Self::load_with(parsed.model_id(), &source, options, parsed.verdict_threshold())
    }

    /// Loads the GGUF model at `source`, reporting it as `id`; its yes-or-no answers take the
    /// likelier answer (a verdict threshold of 0.5).
    pub fn load_source(id: impl Into<String>, source: &GgufSource, options: &LocalOptions) -> Result<Self, LocalError> {
        Self::load_with(id, source, options, 0.5)
    }

    fn load_with(
        id: impl Into<String>,
        source: &GgufSource,
        options: &LocalOptions,
        verdict_threshold: f32,
    ) -> Result<Self, LocalError> {
        if let Some(threads) = options.threads {
            configure_threads(threads);
        }
        let kernels = configure_kernels(options.amx, options.packed);
        tracing::debug!(kernels, "local model kernels");
        let start = Instant::now();
        let (content, reader) = gguf::open(source)?;
        let md = Metadata(&content);
        let architecture = md.str("general.architecture")?.to_string();
        let tokenizer = GgufTokenizer::from_gguf(&content)?;
        let token_text =
            |id: Option<u32>| id.and_then(|id| tokenizer.tokens.get(id as usize)).cloned().unwrap_or_default();
        let template = ChatTemplate::new(
            md.opt_str("tokenizer.chat_template"),
            token_text(tokenizer.bos_token_id),
            token_text(tokenizer.eos_token_id),
        )?;
        let context_length = md.opt_u32(&format!("{architecture}.context_length")).map_or(4096, |n| n as usize);
        let vocab_size = content
            .tensor_infos
            .get("token_embd.weight")
            .and_then(|info| info.shape.dims().first().copied())
            .unwrap_or(tokenizer.tokens.len());
        let mut stop_ids: Vec<u32> = Vec::new();
        let candidates =
            ["<|im_end|>", "<|endoftext|>"].iter().filter_map(|t| tokenizer.token_id(t)).chain(tokenizer.eos_token_id);
        for id in candidates {
            if !stop_ids.contains(&id) {
                stop_ids.push(id);
            }
        }
        let device = Device::Cpu;
        let mut reader = reader;
        let (decoder, loaded) = Decoder::load(&content, &mut reader, &device, options.requantize, options.packed)?;
        let info = ModelInfo {
            architecture,
            context_length,
            vocab_size,
            stop_ids: stop_ids.clone(),
            load_time: start.elapsed(),
            requantized: loaded.requantized,
            released_bytes: loaded.released_bytes,
            packed_bytes: loaded.packed_bytes,
        };
        let id = id.into();
        tracing::info!(model = %id, ?info, "local chat model loaded");
        Ok(Self {
            inner: Arc::new(Inner {
                id,
                tokenizer,
                template,
                info,
                options: options.clone(),
                verdict_threshold,
                session: Mutex::new(Session { generator: Generator { decoder, stop_ids } }),
                waiting: AtomicUsize::new(0),
                grammar: Mutex::new(None),
                queue: Mutex::new(Vec::new()),
                read_for: Mutex::new(HashMap::new()),
                next_ticket: AtomicU64::new(0),
                preparing: AtomicUsize::new(0),
            }),
        })
    }

    /// Facts about the loaded model.
    pub fn info(&self) -> &ModelInfo {
        &self.inner.info
    }

    /// The model's tokenizer.
    pub fn tokenizer(&self) -> &GgufTokenizer {
        &self.inner.tokenizer
    }

    /// The prompt text the model sees for `req` (chat template applied, schema added).
    pub fn render_prompt(&self, req: &ChatRequest) -> Result<String, LocalError> {
        self.inner.render_prompt(req)
    }

    /// Answers `req` on the current thread (blocking; use [`ChatModel::complete`] from async
    /// code).
    pub fn answer_blocking(&self, req: &ChatRequest) -> Result<LocalAnswer, LocalError> {
        self.inner.answer(req, &mut |_| {}, None)
    }

    /// Answers `requests` one after another on the current thread, each as
    /// [`answer_blocking`](Self::answer_blocking) would, with every prompt queued before the
    /// first is read: prompts that continue the same cached prefix (checks of one
    /// conversation) are read in shared passes (see [`LocalOptions::share_passes`]).
    pub fn answer_all_blocking(&self, requests: &[ChatRequest]) -> Vec<Result<LocalAnswer, LocalError>> {
        let prepared: Vec<_> = requests.iter().map(|req| self.inner.prepare(req)).collect();
        requests
            .iter()
            .zip(prepared)
            .map(|(req, prepared)| self.inner.finish(req, prepared?, &mut |_| {}, None))
            .collect()
    }
}

impl Inner {
    fn render_prompt(&self, req: &ChatRequest) -> Result<String, LocalError> {
        let mut messages: Vec<TemplateMessage> =
            req.messages.iter().map(|m| TemplateMessage::new(role_name(m.role), m.content.clone())).collect();
        if let OutputFormat::Json { schema, .. } = &req.output
            && self.options.schema_in_prompt
        {
            let instruction = format!("Answer with one JSON value that conforms to this JSON schema:\n{schema}");
            match messages.first_mut() {
                Some(first) if first.role == "system" => {
                    first.content = format!("{}\n\n{instruction}", first.content);
                }
                _ => messages.insert(0, TemplateMessage::new("system", instruction)),
            }
        }
        self.template.render(&messages, true)
    }

    /// Reads the prompt of `req` into the caches without answering it, when no answer is
    /// being written: one that waited would be slowed by it (and, another customer's, soon
    /// push it out of the caches). An answer that comes meanwhile waits at most for the
    /// [`READ_AHEAD_CHUNK`] being read; what was read by then stays. Whether it read.
    fn read_ahead(&self, req: &ChatRequest) -> Result<bool, LocalError> {
        let prompt = self.render_prompt(req)?;
        let ids = self.tokenizer.encode(&prompt)?;
        if ids.is_empty() || ids.len() >= self.info.context_length {
            return Ok(false);
        }
        let mut session = match self.session.try_lock() {
            Ok(session) => session,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return Ok(false),
        };
        let start = Instant::now();
        let decoder = &mut session.generator.decoder;
        // Longer and longer beginnings of the prompt: each continues the cache of the one
        // before (the plan of a prompt that shares its cache's every token but the last).
        let reused = decoder.cached_prefix(&ids);
        let mut end = reused;
        while end < ids.len() && self.waiting.load(Ordering::Acquire) == 0 {
            end = (end + READ_AHEAD_CHUNK).min(ids.len());
            decoder.prefill_guessing(&ids[..end], &[], &mut |_, _| {})?;
        }
        crate::memory::return_free_memory();
        tracing::debug!(
            task = req.task.as_str(),
            prompt_tokens = ids.len(),
            reused,
            new = end.saturating_sub(reused),
            stopped_at = end,
            ms = start.elapsed().as_millis() as u64,
            "local read ahead"
        );
        Ok(true)
    }

    /// Answers `req`, passing the text to `on_text` as it is written and telling `progress`
    /// how far it has come (waiting for the model, reading the prompt, writing).
    fn answer(
        &self,
        req: &ChatRequest,
        on_text: &mut dyn FnMut(&str),
        progress: Option<&CallProgress>,
    ) -> Result<LocalAnswer, LocalError> {
        self.preparing.fetch_add(1, Ordering::AcqRel);
        let prepared = self.prepare(req);
        self.preparing.fetch_sub(1, Ordering::AcqRel);
        let prepared = prepared?;
        if let Some(progress) = progress {
            progress.waiting();
        }
        self.finish(req, prepared, on_text, progress)
    }

    /// Renders and tokenizes `req`, makes its grammar's matcher and its guess, and queues its
    /// prompt for a shared pass (see [`LocalOptions::share_passes`]).
    fn prepare(&self, req: &ChatRequest) -> Result<Prepared, LocalError> {
        let prompt = self.render_prompt(req)?;
        let ids = self.tokenizer.encode(&prompt)?;
        let room = self.info.context_length.saturating_sub(ids.len());
        let wanted = req.max_tokens.unwrap_or(self.options.default_max_tokens).max(1) as usize;
        if room == 0 {
            return Err(LocalError::ContextOverflow {
                prompt_tokens: ids.len(),
                max_tokens: wanted,
                context: self.info.context_length,
            });
        }
        let params = DecodeParams {
            max_tokens: wanted.min(room),
            temperature: req.temperature.map(f64::from),
            seed: self.options.seed,
            stop: req.stop.clone(),
            draft_tokens: self.options.draft_tokens,
        };
        let matcher = match &req.output {
            OutputFormat::Text => None,
            OutputFormat::Json { schema, .. } => {
                let mut grammar = lock(&self.grammar);
                if grammar.is_none() {
                    *grammar = Some(GrammarCompiler::new(&self.tokenizer, self.info.vocab_size, &self.info.stop_ids)?);
                }
                let Some(grammar) = grammar.as_ref() else {
                    return Err(LocalError::Grammar("grammar compiler unavailable".into()));
                };
                Some(match req.task {
                    // A reply or a simulated customer's message is as long as it needs to be.
                    TaskKind::Generation | TaskKind::Simulation | TaskKind::Other(_) => grammar.matcher(schema)?,
                    _ => grammar.matcher(&with_bounded_free_text(schema, DECISION_TEXT_CHARS))?,
                })
            }
        };
        let ids = Arc::new(ids);
        let guess = Arc::new(generate::guess(matcher.as_ref(), params.temperature));
        let ticket = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        if self.options.share_passes {
            lock(&self.queue).push(Queued { ticket, prompt: Arc::clone(&ids), guess: Arc::clone(&guess) });
        }
        Ok(Prepared { ticket, ids, guess, matcher, params })
    }

    /// Waits for the session and answers a prepared request.
    fn finish(
        &self,
        req: &ChatRequest,
        prepared: Prepared,
        on_text: &mut dyn FnMut(&str),
        progress: Option<&CallProgress>,
    ) -> Result<LocalAnswer, LocalError> {
        let Prepared { ticket, ids, guess, mut matcher, params } = prepared;
        let decode = |ids: &[u32]| self.tokenizer.decode(ids);
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let mut session = lock(&self.session);
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        let session = &mut *session;
        let start = self.start(ticket, &ids, &guess, session, progress)?;
        let prompt = Prompt { ids: &ids, start };
        let generation = session.generator.generate(prompt, &params, matcher.as_mut(), &decode, on_text, progress)?;
        self.after_answer(req, &generation, session);
        match &req.output {
            OutputFormat::Text => Ok(LocalAnswer { output: Output::Text(generation.text.clone()), generation }),
            OutputFormat::Json { .. } => {
                if generation.finish == FinishReason::Length {
                    return Err(LocalError::Grammar(format!(
                        "the answer reached the limit of {} tokens before the JSON was complete; it ended: {}",
                        params.max_tokens,
                        guidepost_llm::tail_excerpt(&generation.text, 240)
                    )));
                }
                let value = serde_json::from_str(&generation.text)
                    .map_err(|e| LocalError::Grammar(format!("answer is not JSON ({e}): {}", generation.text)))?;
                Ok(LocalAnswer { output: Output::Json(value), generation })
            }
        }
    }

    /// How the answer with `ticket`, now holding the session, gets its prompt read: from an
    /// earlier answer's pass that read it; else now, with the prompts of the answers still
    /// waiting, when some continue the cache this one keeps (their reads are left for them).
    fn start(
        &self,
        ticket: u64,
        ids: &[u32],
        guess: &[u32],
        session: &mut Session,
        progress: Option<&CallProgress>,
    ) -> Result<Start, LocalError> {
        if !self.options.share_passes {
            return Ok(Start::Now);
        }
        lock(&self.queue).retain(|q| q.ticket != ticket);
        if let Some(prefill) = lock(&self.read_for).remove(&ticket) {
            return Ok(Start::Elsewhere(prefill));
        }
        let began = Instant::now();
        while self.preparing.load(Ordering::Acquire) > 0 && began.elapsed() < GATHER_WAIT {
            std::thread::sleep(Duration::from_micros(200));
        }
        let others: Vec<Queued> = lock(&self.queue).clone();
        if others.is_empty() {
            return Ok(Start::Now);
        }
        let branches: Vec<Branch<'_>> =
            others.iter().map(|q| Branch { prompt: q.prompt.as_slice(), guess: q.guess.as_slice() }).collect();
        let mut on_read = |done: usize, total: usize| {
            if let Some(progress) = progress {
                progress.reading(done, total);
            }
        };
        let (prefill, read) =
            session.generator.decoder.prefill_shared(Branch { prompt: ids, guess }, &branches, &mut on_read)?;
        if !read.is_empty() {
            let mut read_for = lock(&self.read_for);
            let mut queue = lock(&self.queue);
            for (i, their) in read {
                let ticket = others[i].ticket;
                read_for.insert(ticket, their);
                queue.retain(|q| q.ticket != ticket);
            }
        }
        Ok(Start::Read(prefill, began.elapsed()))
    }

    /// After an answer: hands the memory its passes freed back to the system, and logs what
    /// the answer cost (`GUIDEPOST_LOG=guidepost_llm_local=debug`): where the prompt went in
    /// the caches and how long each part took.
    fn after_answer(&self, req: &ChatRequest, generation: &Generation, session: &Session) {
        // What the answer's passes freed goes back to the system, not only to the allocator.
        crate::memory::return_free_memory();
        let (current, saved) = session.generator.decoder.cache_bytes();
        let schema = match &req.output {
            OutputFormat::Json { name, .. } => name.as_str(),
            OutputFormat::Text => "text",
        };
        tracing::debug!(
            task = req.task.as_str(),
            schema,
            prompt_tokens = generation.prompt_tokens,
            reused = generation.cached_prompt_tokens,
            new = generation.prompt_tokens - generation.cached_prompt_tokens,
            generated = generation.token_ids.len(),
            passes = generation.decode_passes,
            drafted = generation.drafted,
            accepted = generation.accepted,
            prefill_ms = generation.prefill.as_millis() as u64,
            decode_ms = generation.decode.as_millis() as u64,
            shared_pass = generation.shared_pass,
            cache_mb = current / (1 << 20),
            saved_caches_mb = saved / (1 << 20),
            "local answer"
        );
    }

    /// The port's answer: output, usage, and the choices the grammar left the model.
    fn response(&self, answer: LocalAnswer, latency: Duration) -> ChatResponse {
        let usage = self.usage(&answer.generation, latency);
        let mut response = ChatResponse::new(answer.output, usage);
        response.decisions = answer
            .generation
            .decisions
            .iter()
            .map(|d| TokenDecision {
                offset: d.offset,
                options: d
                    .options
                    .iter()
                    .map(|&(id, probability)| TokenOption {
                        token: self.tokenizer.decode(&[id]).unwrap_or_default(),
                        probability,
                    })
                    .collect(),
            })
            .collect();
        response
    }

    fn usage(&self, generation: &Generation, latency: Duration) -> Usage {
        let mut usage = Usage::new(self.id.clone());
        usage.prompt_tokens = generation.prompt_tokens as u64;
        // The prompt's prefix shared with the previous call is not evaluated again: reported
        // like a hosted provider's cached prompt tokens.
        usage.cached_tokens = generation.cached_prompt_tokens as u64;
        usage.completion_tokens = generation.token_ids.len() as u64;
        usage.latency = latency;
        usage.calls = 1;
        usage
    }
}

/// Locks `mutex`, through a poisoning (what it guards stays whole between statements).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn role_name(role: Role) -> &'static str {
    role.as_str()
}

fn join_error(err: tokio::task::JoinError) -> LlmError {
    LlmError::InvalidResponse { detail: format!("local model: inference task failed: {err}"), body: String::new() }
}

#[async_trait]
impl ChatModel for LocalChatModel {
    fn model_id(&self) -> &str {
        &self.inner.id
    }

    /// A small model on the CPU, decoding JSON under the schema's grammar.
    fn capabilities(&self) -> guidepost_llm::ModelCapabilities {
        guidepost_llm::ModelCapabilities::small_constrained(Some(self.inner.info.context_length))
            .with_verdict_threshold(self.inner.verdict_threshold)
    }

    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        let inner = Arc::clone(&self.inner);
        let start = Instant::now();
        let progress = guidepost_llm::progress::call();
        let answer = tokio::task::spawn_blocking(move || inner.answer(&req, &mut |_| {}, progress.as_ref()))
            .await
            .map_err(join_error)??;
        Ok(self.inner.response(answer, start.elapsed()))
    }

    /// It keeps the caches of the prompts it read.
    fn reads_ahead(&self) -> bool {
        true
    }

    async fn read_ahead(&self, req: ChatRequest) -> Result<bool, LlmError> {
        let inner = Arc::clone(&self.inner);
        Ok(tokio::task::spawn_blocking(move || inner.read_ahead(&req)).await.map_err(join_error)??)
    }

    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        let inner = Arc::clone(&self.inner);
        let (tx, rx) = mpsc::unbounded_channel::<Result<StreamEvent, LlmError>>();
        let progress = guidepost_llm::progress::call();
        tokio::task::spawn_blocking(move || {
            let start = Instant::now();
            let deltas = tx.clone();
            let on_text = &mut |piece: &str| {
                // A closed receiver only means the caller stopped listening.
                let _ = deltas.send(Ok(StreamEvent::Delta(piece.to_string())));
            };
            let result = inner.answer(&req, on_text, progress.as_ref());
            let last =
                result.map_err(LlmError::from).map(|answer| StreamEvent::Done(inner.response(answer, start.elapsed())));
            let _ = tx.send(last);
        });
        let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
        Ok(Box::pin(stream))
    }
}
