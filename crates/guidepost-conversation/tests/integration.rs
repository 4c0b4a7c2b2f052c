//! The conversation service's tests, without HTTP: a fake OpenAI-compatible model server
//! speaking the real wire protocol, and the store on SQLite.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod integration {
    pub mod support;

    mod posting;
    mod turns;
    mod waiting;
}
