//! The server's tests: a real HTTP server on a free port, a fake OpenAI-compatible model
//! server speaking the real wire protocol, and the store on SQLite (PostgreSQL too where
//! `GUIDEPOST_TEST_DATABASE_URL` is set).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod integration {
    pub mod support;

    mod abuse;
    mod access;
    mod bad_input;
    mod conformance;
    mod definitions;
    mod openapi;
    mod openapi_fuzz;
    mod session_access;
    mod turns;
}
