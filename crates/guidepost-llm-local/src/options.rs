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
    /// Most tokens drafted after each pass of a greedy answer, and evaluated in the same pass:
    /// under a grammar that forces what comes next (the JSON layout after a value), that, as
    /// the model would write it; otherwise what followed the answer's last words earlier in
    /// the prompt or the answer. The answer takes those the model chooses without a pass of
    /// their own (its text is the same as without drafts). 0 turns drafting off.
    pub draft_tokens: usize,
    /// Let the quantized matrix products use the CPU's AMX tiles where it has them (Intel Xeon
    /// from Sapphire Rapids on). Off by default: the tiles hold the 4-bit weights a byte per
    /// value beside the vector kernels' own copy, and the default model then took 2,774 MiB
    /// resident once loaded instead of 1,448 (and 8.8 s to load instead of 3.4), for prompts
    /// read 1.39 times and answers written 1.17 times as fast as by the 256-bit vector kernels
    /// (`local_bench`, two threads, one run). Without it such a CPU keeps its 512-bit vector
    /// kernels, which read prompts 1.34-1.38 times as fast as the 256-bit ones, in the same
    /// memory (two runs). Process-wide and effective only before the first model runs: see
    /// [`configure_kernels`]. `GUIDEPOST_LOCAL_AMX=1` turns it on for [`Self::from_env`].
    /// With [`Self::packed`] on a CPU with AVX-512 BF16 the blocks' Q4_K weights never reach
    /// candle (Guidepost's own kernels use the AMX tiles, without a second copy), so this
    /// changes nothing for them.
    pub amx: bool,
    /// Read the prompts of answers waiting for the model in the pass of the one being read,
    /// where they continue the same cached prefix (the checks of one turn, asked side by
    /// side): a pass streams every weight once however many rows it holds, so a check read
    /// with others costs a few rows instead of a pass of its own. Answers are what each
    /// would be alone. `GUIDEPOST_LOCAL_SHARED_PASSES=0` turns it off for
    /// [`Self::from_env`].
    pub share_passes: bool,
    /// Multiply the transformer blocks' Q4_K and Q6_K weights in Guidepost's own tiles
    /// (`guidepost_kernels::quant`) on CPUs with AVX-512 VNNI and BF16: one compact copy of
    /// the weights (4.6 and 6.6 bits a value, where candle's tiles take 6 and 10), read by
    /// vector kernels for the few rows of a generated token and, where the CPU has AMX tiles,
    /// by tile products in bfloat16 for the many rows of a prompt (no second copy: the
    /// weights are expanded a strip at a time). Other CPUs and types stay with candle.
    /// `GUIDEPOST_LOCAL_PACKED=0` turns it off for [`Self::from_env`];
    /// `GUIDEPOST_LOCAL_NO_TILES=1` keeps the AMX tiles out of it (the vector kernels then read
    /// prompts too).
    pub packed: bool,
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
            amx: false,
            share_passes: true,
            packed: true,
        }
    }
}

impl LocalOptions {
    /// The defaults, with the thread count from `GUIDEPOST_LOCAL_THREADS` when set, and the
    /// switches named on [`Self::amx`], [`Self::share_passes`] and [`Self::packed`] (the models directory
    /// already follows `GUIDEPOST_MODELS_DIR`).
    pub fn from_env() -> Self {
        let threads = std::env::var("GUIDEPOST_LOCAL_THREADS").ok().and_then(|t| t.trim().parse().ok());
        let amx = std::env::var("GUIDEPOST_LOCAL_AMX").is_ok_and(|v| v.trim() == "1");
        let share_passes = std::env::var("GUIDEPOST_LOCAL_SHARED_PASSES").map_or(true, |v| v.trim() != "0");
        let packed = std::env::var("GUIDEPOST_LOCAL_PACKED").map_or(true, |v| v.trim() != "0");
        Self { threads, amx, share_passes, packed, ..Self::default() }
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
static KERNELS: OnceLock<&'static str> = OnceLock::new();

/// Chooses the quantized kernels candle runs, once for the process, before the first model
/// runs (candle picks them on first use). Candle multiplies a product of 32 rows or more by
/// the CPU's AMX tiles where it has them, from a second copy of the weights a byte per value
/// (see [`LocalOptions::amx`]); unless `amx`, such a CPU keeps its 512-bit vector kernels
/// (AVX-512 VNNI) and the decoder evaluates at most 31 positions per pass (`AMX_FREE_ROWS`,
/// through `rows_per_product`), so no product reaches 32 rows and the tiles are never made; a CPU
/// with AMX but without AVX-512 VNNI gets the 256-bit kernels. A choice made in the environment (`MISTRALRS_FORCE_AVX2`,
/// `MISTRALRS_FORCE_AVXVNNI`, candle's own switches) stands, as do its rows per product.
/// With `packed` on a CPU whose AMX tiles Guidepost's own kernels use
/// ([`LocalOptions::packed`]), no product of Q4_K weights (the only type candle tiles in AMX)
/// reaches candle, so the rows stay uncapped. Returns what is in force, for the log.
pub fn configure_kernels(amx: bool, packed: bool) -> &'static str {
    KERNELS.get_or_init(|| {
        if packed && guidepost_kernels::quant::support().tiles {
            return "Guidepost's tiles for Q4_K and Q6_K weights (AMX for prompts, AVX-512 VNNI for tokens), candle's kernels for the rest";
        }
        let chosen = ["MISTRALRS_FORCE_AVX2", "MISTRALRS_FORCE_AVXVNNI"].iter().any(|v| std::env::var_os(v).is_some());
        if chosen {
            return "as the environment chose";
        }
        if amx || !has_amx() {
            return "candle's choice";
        }
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vnni") {
            let _ = ROWS_PER_PRODUCT.set(AMX_FREE_ROWS);
            return "AVX-512 VNNI, at most 31 rows per product (the CPU's AMX tiles left unused)";
        }
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avxvnni") && std::is_x86_feature_detected!("avx2") {
            set_env(&[("MISTRALRS_FORCE_AVXVNNI", "1")]);
            return "AVX-VNNI (the CPU's AMX tiles left unused)";
        }
        set_env(&[("MISTRALRS_FORCE_AVX2", "1")]);
        "AVX2 (the CPU's AMX tiles left unused)"
    })
}

/// Candle multiplies a product of this many rows or fewer by its vector kernels, and one of
/// more rows by the AMX tiles where the CPU has them.
pub(crate) const AMX_FREE_ROWS: usize = 31;

static ROWS_PER_PRODUCT: OnceLock<usize> = OnceLock::new();

/// The most positions the decoder evaluates in one pass (the rows of every product in it):
/// [`AMX_FREE_ROWS`] where [`configure_kernels`] keeps a CPU's AMX tiles unused behind its
/// 512-bit kernels, else `usual`.
pub(crate) fn rows_per_product(usual: usize) -> usize {
    ROWS_PER_PRODUCT.get().map_or(usual, |&cap| cap.min(usual))
}

/// Whether the CPU has AMX tiles for 8-bit integers (CPUID leaf 7: AMX-TILE and AMX-INT8).
fn has_amx() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let info = std::arch::x86_64::__cpuid_count(7, 0);
        info.edx & (1 << 24) != 0 && info.edx & (1 << 25) != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Sets the number of CPU threads candle uses for the whole process and returns the count in
/// force. Only the first call has an effect, and only if no model has run yet: candle sizes
/// its thread pools once, from `CANDLE_NUM_THREADS` / `RAYON_NUM_THREADS`, on first use.
///
/// Why it matters: on a busy 2-core machine two inference threads collapse to a fraction of
/// the speed of one (measured 5 vs 47 tokens/s), so tests and shared servers should use 1.
pub fn configure_threads(threads: usize) -> usize {
    *THREADS.get_or_init(|| {
        let threads = threads.max(1);
        let value = threads.to_string();
        set_env(&[("RAYON_NUM_THREADS", &value), ("CANDLE_NUM_THREADS", &value)]);
        threads
    })
}

/// Exports settings in the variables candle and rayon read when they build their pools and
/// pick their kernels. `std::env::set_var` is `unsafe` in edition 2024; this is its only use.
#[allow(unsafe_code)]
fn set_env(pairs: &[(&str, &str)]) {
    // SAFETY: set_var is unsound only if another thread reads the environment through libc
    // (`getenv`) at the same time; Rust's own `std::env` accesses take a lock. This runs once
    // per setting (guarded by `THREADS` and `KERNELS`), while loading the first local model and
    // before candle starts its pools or picks its kernels; Guidepost's inference stack is pure
    // Rust and does not call `getenv` from C.
    for (name, value) in pairs {
        unsafe { std::env::set_var(name, value) };
    }
}
