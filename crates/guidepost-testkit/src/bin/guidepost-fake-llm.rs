//! The benchmark's fake OpenAI-compatible model server as a process of its own, so a
//! benchmark measures the engine's CPU time apart from the model's.
//!
//! ```text
//! guidepost-fake-llm [--port N] [--latency-ms N] [--reject-keys]
//! ```
//!
//! Prints `listening <port>` once it accepts connections (`--port 0`, the default, picks a
//! free port). `guidepost bench` and `guidepost load` start it from the folder of the
//! `guidepost` binary.

use std::process::ExitCode;
use std::time::Duration;

fn usage(problem: &str) -> ExitCode {
    eprintln!("guidepost-fake-llm: {problem}\nusage: guidepost-fake-llm [--port N] [--latency-ms N] [--reject-keys]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut port: u16 = 0;
    let mut latency_ms: u64 = 0;
    let mut reject_keys = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> Result<u64, ExitCode> {
            args.next().and_then(|v| v.parse().ok()).ok_or_else(|| usage(&format!("{name} needs a number")))
        };
        match arg.as_str() {
            "--port" => match number("--port").map(u16::try_from) {
                Ok(Ok(p)) => port = p,
                Ok(Err(_)) => return usage("--port is out of range"),
                Err(code) => return code,
            },
            "--latency-ms" => match number("--latency-ms") {
                Ok(ms) => latency_ms = ms,
                Err(code) => return code,
            },
            "--reject-keys" => reject_keys = true,
            other => return usage(&format!("unknown argument `{other}`")),
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("guidepost-fake-llm: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(guidepost_testkit::fake_openai::serve(port, Duration::from_millis(latency_ms), reject_keys))
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("guidepost-fake-llm: {e}");
            ExitCode::FAILURE
        }
    }
}
