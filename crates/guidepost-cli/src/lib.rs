//! The library behind the `guidepost` command: the model stack built from flags and the
//! environment ([`models`]), and the Guidepost engine as the simulator's in-process agent
//! ([`simulate`]). The binary uses them, and so do its integration tests, which put the same
//! engine behind a fake Parlant server.
#![deny(clippy::print_stdout)]

#[macro_use]
mod out;

pub mod models;
pub mod simulate;
