//! Integration tests of guidepost-llm-local against the real models.
//!
//! They need SmolLM2 and MiniLM installed (`scripts/fetch-models.sh`) and fail, naming that
//! command, when the files are missing. The Qwen suite is `#[ignore]`d: run it with
//! `cargo test -p guidepost-llm-local -- --ignored` after `scripts/fetch-models.sh --with-qwen`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod integration {
    pub mod common;
    mod embed;
    mod gguf;
    mod qwen;
    mod smollm2;
    mod tokenizer;
}
