//! Models loaded once per test process, with one inference thread.

use std::sync::OnceLock;

use guidepost_llm_local::{LocalChatModel, LocalEmbedder, LocalOptions};

/// One thread: tests run in parallel on a small machine, where two candle threads per model
/// collapse (see the crate docs).
pub fn options() -> LocalOptions {
    LocalOptions::default().with_threads(1)
}

/// SmolLM2-135M-Instruct, requantized to Q8_0.
pub fn smollm2() -> &'static LocalChatModel {
    static MODEL: OnceLock<LocalChatModel> = OnceLock::new();
    MODEL.get_or_init(|| {
        LocalChatModel::load("local:smollm2", &options()).unwrap_or_else(|e| panic!("cannot load SmolLM2: {e}"))
    })
}

/// SmolLM2 again, drafting nothing (`draft_tokens: 0`): what answers are without drafts.
pub fn smollm2_without_drafts() -> &'static LocalChatModel {
    static MODEL: OnceLock<LocalChatModel> = OnceLock::new();
    MODEL.get_or_init(|| {
        LocalChatModel::load("local:smollm2", &LocalOptions { draft_tokens: 0, ..options() })
            .unwrap_or_else(|e| panic!("cannot load SmolLM2: {e}"))
    })
}

/// Qwen2.5-Coder-1.5B-Instruct (slow suite only).
pub fn qwen() -> &'static LocalChatModel {
    static MODEL: OnceLock<LocalChatModel> = OnceLock::new();
    MODEL.get_or_init(|| {
        LocalChatModel::load("local:qwen2.5-coder-1.5b", &options())
            .unwrap_or_else(|e| panic!("cannot load Qwen2.5-Coder-1.5B: {e}"))
    })
}

/// all-MiniLM-L6-v2.
pub fn minilm() -> &'static LocalEmbedder {
    static MODEL: OnceLock<LocalEmbedder> = OnceLock::new();
    MODEL.get_or_init(|| {
        LocalEmbedder::load("local:all-minilm-l6-v2", &options())
            .unwrap_or_else(|e| panic!("cannot load all-MiniLM-L6-v2: {e}"))
    })
}

/// A current-thread runtime for the async port tests (inference runs on its blocking pool).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}
