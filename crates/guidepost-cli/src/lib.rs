//! The library behind the `guidepost` command: the model stack built from flags and the
//! environment ([`models`]), and the Guidepost engine as the simulator's in-process agent
//! ([`simulate`]). The binary uses them, and so do its integration tests, which put the same
//! engine behind a fake Parlant server.
#![deny(clippy::print_stdout)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

#[macro_use]
mod out;

pub mod config_file;
pub mod models;
pub mod simulate;
