//! Settings shared by the local chat models and embedders.

use std::path::PathBuf;
use std::sync::OnceLock;

/// How local models are found and run.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalOptions {
    /// Where installed models live; `None` means [`default_models_dir`].
    pub models_dir: Option<PathBuf>,
    /// CPU threads for inference; `None` keeps candle's default (`RAYON_NUM_THREADS` /
    /// `CANDLE_NUM_THREADS`, else the physical cores). Process-wide and effective only before
    /// the first model runs: see [`configure_threads`].
    pub threads: Option<usize>,
    /// Requantize Q4_1/Q5_0/Q5_1 tensors to Q8_0 at load (SIMD kernels; ~5x faster).
    pub requantize: bool,
    /// Answer length when a request sets no `max_tokens`.
    pub default_max_tokens: u32,
    /// For JSON answers, append the schema to the system prompt (small models follow a schema
    /// better when they see it; constrained decoding enforces it either way).
    pub schema_in_prompt: bool,
    /// Seed of the sampler when a request sets a temperature above zero.
    pub seed: u64,
    /// Check that a model's files are installed when the model is built (so a missing model
    /// fails at startup). Off when every call is expected to come from recordings: the
    /// files are then only needed if a call reaches the model, and that call fails naming the
    /// fetch command.
    pub check_files_at_build: bool,
    /// Most tokens drafted after each pass of a greedy answer, from what followed the answer's
    /// last words earlier in the prompt or the answer, and evaluated in the same pass: the
    /// answer takes those the model chooses without a pass of their own (its text is the same
    /// as without drafts). 0 turns drafting off.
    pub draft_tokens: usize,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            models_dir: None,
            threads: None,
            requantize: true,
            default_max_tokens: 512,
            schema_in_prompt: true,
            seed: 299_792_458,
            check_files_at_build: true,
            draft_tokens: 8,
        }
    }
}

impl LocalOptions {
    /// The defaults, with the thread count from `GUIDEPOST_LOCAL_THREADS` when set (the models
    /// directory already follows `GUIDEPOST_MODELS_DIR`).
    pub fn from_env() -> Self {
        let threads = std::env::var("GUIDEPOST_LOCAL_THREADS").ok().and_then(|t| t.trim().parse().ok());
        Self { threads, ..Self::default() }
    }

    /// The models directory these options point at.
    pub fn models_dir(&self) -> PathBuf {
        self.models_dir.clone().unwrap_or_else(default_models_dir)
    }

    /// Sets the models directory.
    pub fn with_models_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.models_dir = Some(dir.into());
        self
    }

    /// Sets the inference thread count.
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }
}

/// `$GUIDEPOST_MODELS_DIR`, else `$HOME/.cache/guidepost/models`, else `.guidepost/models`.
pub fn default_models_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("GUIDEPOST_MODELS_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => PathBuf::from(home).join(".cache/guidepost/models"),
        None => PathBuf::from(".guidepost/models"),
    }
}

static THREADS: OnceLock<usize> = OnceLock::new();

/// Sets the number of CPU threads candle uses for the whole process and returns the count in
/// force. Only the first call has an effect, and only if no model has run yet: candle sizes
/// its thread pools once, from `CANDLE_NUM_THREADS` / `RAYON_NUM_THREADS`, on first use.
///
/// Why it matters: on a busy 2-core machine two inference threads collapse to a fraction of
/// the speed of one (measured 5 vs 47 tokens/s), so tests and shared servers should use 1.
pub fn configure_threads(threads: usize) -> usize {
    *THREADS.get_or_init(|| {
        let threads = threads.max(1);
        set_thread_env(threads);
        threads
    })
}

/// Exports the thread count in the variables candle and rayon read when they build their
/// pools. `std::env::set_var` is `unsafe` in edition 2024; this is its only use.
#[allow(unsafe_code)]
fn set_thread_env(threads: usize) {
    let value = threads.to_string();
    // SAFETY: set_var is unsound only if another thread reads the environment through libc
    // (`getenv`) at the same time; Rust's own `std::env` accesses take a lock. This runs once
    // (guarded by `THREADS`), while loading the first local model and before candle starts its
    // pools; Guidepost's inference stack is pure Rust and does not call `getenv` from C.
    unsafe {
        std::env::set_var("RAYON_NUM_THREADS", &value);
        std::env::set_var("CANDLE_NUM_THREADS", &value);
    }
}
