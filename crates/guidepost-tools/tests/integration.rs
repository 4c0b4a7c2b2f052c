//! Integration tests of guidepost-tools: one binary, with real servers on 127.0.0.1:0.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod integration {
    mod common;
    mod discovery;
    mod execution;
    mod fuzz;
    mod idempotency;
    mod mcp;
    mod openapi;
    mod parlant;
    mod secrets;
    mod validation;
}
