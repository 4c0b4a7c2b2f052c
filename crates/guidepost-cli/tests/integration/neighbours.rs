//! `guidepost chat` next to failing neighbours, run as a user runs it: a model provider whose
//! streamed replies stop without their end marker, stall, never end or never stop growing;
//! one whose answers are 100 MiB long; one that fails every call; tool services that hang at
//! discovery; and `guidepost simulate` on corrupt recordings. The limits are lowered through
//! their `GUIDEPOST_*` variables so each run takes a few seconds; each ends within them, says
//! which limit (or service, or file) it hit, and the process's peak resident memory
//! (`VmHWM`, reported at exit) stays under [`PEAK_MEMORY_KIB`].

use std::time::{Duration, Instant};

use guidepost_testkit::misbehaving_openai::{self, Fault};

use crate::guidepost;
use crate::serve::serve_router;

/// The memory `guidepost chat` may use on one turn against any of these neighbours: the
/// process itself (about 30 MiB) and replies and tool results held within their 1 MiB caps,
/// far below the 100 MiB a provider sends (a reply read whole would exceed it).
const PEAK_MEMORY_KIB: u64 = 96 * 1024;

/// An agent whose reply is streamed.
const AGENT: &str = "agent: {name: Otto, language: en, output_mode: stream}
guidelines:
  - {id: shipping, condition: The customer asks about shipping, action: Say that shipping takes 3 days}
";

/// Lowered limits: a streamed reply may stay silent 1 s and take 3 s in all; a model call
/// (retries included) 5 s; listing a tool service's tools 1 s.
const FAST_LIMITS: [(&str, &str); 4] = [
    ("GUIDEPOST_STREAM_IDLE_SECS", "1"),
    ("GUIDEPOST_STREAM_TIMEOUT_SECS", "3"),
    ("GUIDEPOST_MODEL_CALL_TIMEOUT_SECS", "5"),
    ("GUIDEPOST_DISCOVERY_TIMEOUT_SECS", "1"),
];

/// What one `guidepost chat` run did.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    peak_kib: u64,
}

impl Run {
    fn of(output: &std::process::Output, elapsed: Duration) -> Self {
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let peak_kib = stderr
            .lines()
            .find_map(|l| l.strip_prefix("peak memory: "))
            .and_then(|v| v.trim_end_matches(" kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no peak memory reported (killed at the timeout?):\n{stderr}"));
        Run { code: output.status.code().unwrap_or(-1), stdout, stderr, elapsed, peak_kib }
    }

    /// Asserts the run ended within `seconds` and within [`PEAK_MEMORY_KIB`].
    fn assert_bounded(&self, seconds: u64) {
        assert!(self.elapsed < Duration::from_secs(seconds), "took {:?}:\n{}", self.elapsed, self.stderr);
        assert!(self.peak_kib < PEAK_MEMORY_KIB, "peak memory {} KiB:\n{}", self.peak_kib, self.stderr);
    }
}

/// Accepts connections and never answers (holding them open); its base url.
fn silent_server(runtime: &tokio::runtime::Runtime) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let mut held = Vec::new();
        while let Ok(connection) = listener.accept().await {
            held.push(connection);
        }
        Ok::<_, std::io::Error>(())
    });
    format!("http://{addr}")
}

/// Runs `guidepost chat` on `agent` with one customer message, the model and embedder at
/// `url`, the [`FAST_LIMITS`].
fn chat(url: &str, agent: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("otto.yaml");
    std::fs::write(&file, agent).unwrap();
    let started = Instant::now();
    let output = guidepost()
        .args(["chat"])
        .arg(&file)
        .args(["-m", "How long does shipping take?"])
        .env("GUIDEPOST_MODEL", format!("openai-compatible:{url}/v1#gpt-4.1"))
        .env("GUIDEPOST_EMBEDDER", format!("openai-compatible:{url}/v1#fake-embed"))
        .env("GUIDEPOST_REPORT_PEAK_MEMORY", "1")
        .envs(FAST_LIMITS)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    Run::of(&output, elapsed)
}

/// Runs `guidepost chat` against a provider with `fault`.
fn chat_with_fault(fault: Fault) -> Run {
    let (url, runtime) = serve_router(misbehaving_openai::router(fault));
    let run = chat(&url, AGENT);
    runtime.shutdown_background();
    run
}

#[test]
fn a_stream_without_its_end_marker_fails_the_turn() {
    let run = chat_with_fault(Fault::StreamWithoutEndMarker);
    assert_eq!(run.code, 1, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("the stream ended without its end marker"), "{}", run.stderr);
    run.assert_bounded(15);
}

#[test]
fn a_stalled_stream_ends_at_the_idle_limit() {
    let run = chat_with_fault(Fault::StalledStream);
    assert_eq!(run.code, 1, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("GUIDEPOST_STREAM_IDLE_SECS"), "{}", run.stderr);
    run.assert_bounded(15);
}

#[test]
fn an_endless_stream_ends_at_the_stream_time_limit() {
    let run = chat_with_fault(Fault::EndlessStream);
    assert_eq!(run.code, 1, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("GUIDEPOST_STREAM_TIMEOUT_SECS"), "{}", run.stderr);
    run.assert_bounded(15);
}

#[test]
fn a_stream_that_never_stops_growing_is_cut_at_the_reply_size_limit() {
    let run = chat_with_fault(Fault::HugeStream);
    assert_eq!(run.code, 1, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("GUIDEPOST_MAX_REPLY_BYTES"), "{}", run.stderr);
    run.assert_bounded(15);
}

#[test]
fn answers_of_100_mib_are_refused_at_the_reply_size_limit_without_being_read_whole() {
    let run = chat_with_fault(Fault::HugeAnswer);
    assert_eq!(run.code, 1, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("GUIDEPOST_MAX_REPLY_BYTES"), "{}", run.stderr);
    run.assert_bounded(15);
}

#[test]
fn a_model_that_fails_every_call_fails_the_turn_quickly() {
    let state = guidepost_testkit::fake_openai::FakeState::new(Duration::ZERO);
    state.reject_keys();
    let (url, runtime) = serve_router(guidepost_testkit::fake_openai::router(state));
    let run = chat(&url, AGENT);
    runtime.shutdown_background();
    assert_eq!(run.code, 1, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("401"), "{}", run.stderr);
    run.assert_bounded(15);
}

#[test]
fn tool_services_that_hang_at_discovery_cost_one_discovery_limit_and_the_agent_still_replies() {
    let (url, runtime) = serve_router(guidepost_testkit::fake_openai::router(
        guidepost_testkit::fake_openai::FakeState::new(Duration::ZERO),
    ));
    let silent = silent_server(&runtime);
    let agent = format!(
        "{AGENT}services:
  - {{name: hung_openapi, kind: openapi, url: '{silent}', spec: '{silent}/openapi.json'}}
  - {{name: hung_mcp_http, kind: mcp, url: '{silent}/mcp'}}
  - {{name: hung_plugin, kind: parlant, url: '{silent}'}}
  - {{name: hung_mcp_stdio, kind: mcp, command: [sleep, '3600']}}
"
    );
    let run = chat(&url, &agent);
    runtime.shutdown_background();
    assert_eq!(run.code, 0, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("Otto> "), "the agent replied:\n{}", run.stdout);
    for service in ["hung_openapi", "hung_mcp_http", "hung_plugin", "hung_mcp_stdio"] {
        let line = run
            .stderr
            .lines()
            .find(|l| l.starts_with("warning: ") && l.contains(&format!("`{service}`")))
            .unwrap_or_else(|| panic!("no warning names {service}:\n{}", run.stderr));
        assert!(line.contains("GUIDEPOST_DISCOVERY_TIMEOUT_SECS"), "{line}");
    }
    run.assert_bounded(15);
}

#[test]
fn a_corrupt_recording_fails_the_run_as_corrupt_not_as_missing() {
    // Every recording of the examples cut in half.
    let recordings = tempfile::tempdir().unwrap();
    let source = crate::repo_root().join("examples/recordings");
    for task in std::fs::read_dir(&source).unwrap() {
        let task = task.unwrap().path();
        let copy = recordings.path().join(task.file_name().unwrap());
        std::fs::create_dir_all(&copy).unwrap();
        for file in std::fs::read_dir(&task).unwrap() {
            let file = file.unwrap().path();
            let text = std::fs::read(&file).unwrap();
            std::fs::write(copy.join(file.file_name().unwrap()), &text[..text.len() / 2]).unwrap();
        }
    }
    let started = Instant::now();
    let output = guidepost()
        .args(["simulate", "examples/scenarios/taxi-happy-path.yaml", "--cache", "replay-or-fail", "--recordings"])
        .arg(recordings.path())
        .args(["--no-progress", "--no-artifacts"])
        .env("GUIDEPOST_REPORT_PEAK_MEMORY", "1")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let run = Run::of(&output, started.elapsed());
    assert_ne!(run.code, 0, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    let console = format!("{}{}", run.stdout, run.stderr);
    assert!(console.contains("is corrupt"), "the reason is on the console:\n{console}");
    assert!(!console.contains("no recording"), "not reported as missing:\n{console}");
    run.assert_bounded(30);
}
