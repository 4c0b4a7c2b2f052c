//! The store test-suite: every test runs on SQLite and on PostgreSQL.
//!
//! PostgreSQL tests need `GUIDEPOST_TEST_DATABASE_URL` (a server where the user may create
//! databases; `scripts/postgres.sh start` prints one). Each test gets a database of its
//! own. Without the variable they are skipped, unless `GUIDEPOST_REQUIRE_POSTGRES=1`
//! (set by `scripts/test.sh`) makes that a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod integration {
    pub mod support;

    mod definitions;
    mod documents;
    mod events;
    mod sessions;
    mod tool_calls;
    mod turns;
    mod values;
}
