//! Test and benchmark support, never linked into the `guidepost` binary.
//!
//! [`fake_openai`] is an OpenAI-compatible chat-completions and embeddings server that
//! answers Guidepost's structured prompts by fixed rules, with a configurable latency,
//! and logs every request (kind, prompt tokens, start and end). It applies the rules of
//! the benchmark's reference harness to Guidepost's prompt shapes: a condition applies
//! when it shares a content word with the last customer message, nothing is re-applied,
//! a journey step waiting for the customer stays until a number arrives, a tool runs when
//! the message has a number. Benchmarks run it in a separate process, so the engine's own
//! CPU time can be measured apart from it: the `guidepost-fake-llm` binary of this crate.
//!
//! [`misbehaving_openai`] is the same server with one fault on its chat completions (a
//! stream without end marker, a stalled, endless or huge stream, a huge answer), for tests
//! that hold the `guidepost` process to its time and memory limits.
//!
//! [`models::Held`] holds back some calls of a chat model (for a while, forever, or with an
//! error), for tests of a turn whose stage hangs, is slow or fails; [`models::InFlight`] counts
//! the calls of a chat model in flight at once, for tests of what is asked together.
//!
//! [`embedders::InFlightEmbedder`] counts the embedding calls in flight at once, for tests of
//! what a turn asks for in one wave.
//!
//! [`booking_service::BookingService`] is a taxi booking service over OpenAPI and MCP that
//! counts the requests and bookings it gets and the idempotency keys they carry, and can
//! hold calls, for tests of side effects done exactly once across crashes and restarts.
//!
//! [`fake_parlant`] is a fake Parlant 3.3.2 server (its routes, status codes, long polls and
//! event sequence) with any agent behind it: scripted turns, or a Guidepost engine, so the
//! simulator's Parlant client is tested against Parlant's wire format.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod booking_service;
pub mod embedders;
pub mod fake_openai;
pub mod fake_parlant;
pub mod misbehaving_openai;
pub mod models;
