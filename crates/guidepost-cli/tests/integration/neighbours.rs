//! `guidepost chat` next to failing neighbours, run as a user runs it: a model provider whose
//! streamed replies stop without their end marker, stall, never end or never stop growing;
//! one whose answers are 100 MiB long; one that fails every call; tool services that hang at
//! discovery; and `guidepost simulate` on corrupt recordings. Each run lowers, through its
//! `GUIDEPOST_*` variable, only the limit it is about and raises the others far beyond the
//! test, so the limit that ends the run is the one meant, however busy the machine: each run
//! says which limit (or service, or file) it hit, and the process's peak resident memory
//! (`VmHWM`, reported at exit) stays under [`PEAK_MEMORY_KIB`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

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

/// The time limits a run does not test: ten minutes each, far beyond any run, so none of
/// them can end one.
const FAR_LIMITS: [(&str, &str); 4] = [
    ("GUIDEPOST_STREAM_IDLE_SECS", "600"),
    ("GUIDEPOST_STREAM_TIMEOUT_SECS", "600"),
    ("GUIDEPOST_MODEL_CALL_TIMEOUT_SECS", "600"),
    ("GUIDEPOST_DISCOVERY_TIMEOUT_SECS", "600"),
];

/// What one `guidepost chat` run did.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    peak_kib: u64,
}

impl Run {
    fn of(output: &std::process::Output) -> Self {
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let peak_kib = stderr
            .lines()
            .find_map(|l| l.strip_prefix("peak memory: "))
            .and_then(|v| v.trim_end_matches(" kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no peak memory reported (killed at the timeout?):\n{stderr}"));
        Run { code: output.status.code().unwrap_or(-1), stdout, stderr, peak_kib }
    }

    /// Asserts the run stayed within [`PEAK_MEMORY_KIB`].
    fn assert_bounded(&self) {
        assert!(self.peak_kib < PEAK_MEMORY_KIB, "peak memory {} KiB:\n{}", self.peak_kib, self.stderr);
    }
}

/// Connections open now, and the most that were open at once.
type OpenConnections = Arc<Mutex<(usize, usize)>>;

/// Accepts connections and never answers, reading each until the client hangs up; its base
/// url, and the count of connections open.
fn silent_server(runtime: &tokio::runtime::Runtime) -> (String, OpenConnections) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let open = OpenConnections::default();
    let counter = open.clone();
    runtime.spawn(async move {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        while let Ok((mut connection, _)) = listener.accept().await {
            {
                let mut count = counter.lock().unwrap();
                count.0 += 1;
                count.1 = count.1.max(count.0);
            }
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                while matches!(connection.read(&mut buffer).await, Ok(n) if n > 0) {}
                counter.lock().unwrap().0 -= 1;
            });
        }
        Ok::<_, std::io::Error>(())
    });
    (format!("http://{addr}"), open)
}

/// Runs `guidepost chat` on `agent` with one customer message, the model and embedder at
/// `url`, the [`FAR_LIMITS`] but for the `lowered` ones.
fn chat(url: &str, agent: &str, lowered: &[(&str, &str)]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("otto.yaml");
    std::fs::write(&file, agent).unwrap();
    let output = guidepost()
        .args(["chat"])
        .arg(&file)
        .args(["-m", "How long does shipping take?"])
        .env("GUIDEPOST_MODEL", format!("openai-compatible:{url}/v1#gpt-4.1"))
        .env("GUIDEPOST_EMBEDDER", format!("openai-compatible:{url}/v1#fake-embed"))
        .env("GUIDEPOST_REPORT_PEAK_MEMORY", "1")
        .envs(FAR_LIMITS)
        .envs(lowered.iter().copied())
        // A hang guard only, far beyond what any of these runs takes on a busy machine.
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    Run::of(&output)
}

/// Runs `guidepost chat` against a provider with `fault`, with the `lowered` limits.
fn chat_with_fault(fault: Fault, lowered: &[(&str, &str)]) -> Run {
    let (url, runtime) = serve_router(misbehaving_openai::router(fault));
    let run = chat(&url, AGENT, lowered);
    runtime.shutdown_background();
    run
}

#[test]
fn a_stream_without_its_end_marker_fails_the_turn() {
    let run = chat_with_fault(Fault::StreamWithoutEndMarker, &[]);
    assert_eq!(run.code, 1, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("the stream ended without its end marker"), "{}", run.stderr);
    run.assert_bounded();
}

#[test]
fn a_stalled_stream_ends_at_the_idle_limit() {
    let run = chat_with_fault(Fault::StalledStream, &[("GUIDEPOST_STREAM_IDLE_SECS", "1")]);
    assert_eq!(run.code, 1, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("GUIDEPOST_STREAM_IDLE_SECS"), "{}", run.stderr);
    run.assert_bounded();
}

#[test]
fn an_endless_stream_ends_at_the_stream_time_limit() {
    let run = chat_with_fault(Fault::EndlessStream, &[("GUIDEPOST_STREAM_TIMEOUT_SECS", "3")]);
    assert_eq!(run.code, 1, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("GUIDEPOST_STREAM_TIMEOUT_SECS"), "{}", run.stderr);
    run.assert_bounded();
}

#[test]
fn a_stream_that_never_stops_growing_is_cut_at_the_reply_size_limit() {
    let run = chat_with_fault(Fault::HugeStream, &[]);
    assert_eq!(run.code, 1, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("GUIDEPOST_MAX_REPLY_BYTES"), "{}", run.stderr);
    run.assert_bounded();
}

#[test]
fn answers_of_100_mib_are_refused_at_the_reply_size_limit_without_being_read_whole() {
    let run = chat_with_fault(Fault::HugeAnswer, &[]);
    assert_eq!(run.code, 1, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("GUIDEPOST_MAX_REPLY_BYTES"), "{}", run.stderr);
    run.assert_bounded();
}

#[test]
fn a_model_that_fails_every_call_fails_the_turn() {
    let state = guidepost_testkit::fake_openai::FakeState::new(Duration::ZERO);
    state.reject_keys();
    let (url, runtime) = serve_router(guidepost_testkit::fake_openai::router(state));
    let run = chat(&url, AGENT, &[]);
    runtime.shutdown_background();
    assert_eq!(run.code, 1, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("401"), "{}", run.stderr);
    run.assert_bounded();
}

#[test]
fn tool_services_that_hang_at_discovery_cost_one_discovery_limit_and_the_agent_still_replies() {
    let (url, runtime) = serve_router(guidepost_testkit::fake_openai::router(
        guidepost_testkit::fake_openai::FakeState::new(Duration::ZERO),
    ));
    let (silent, open) = silent_server(&runtime);
    let agent = format!(
        "{AGENT}services:
  - {{name: hung_openapi, kind: openapi, url: '{silent}', spec: '{silent}/openapi.json'}}
  - {{name: hung_mcp_http, kind: mcp, url: '{silent}/mcp'}}
  - {{name: hung_plugin, kind: parlant, url: '{silent}'}}
  - {{name: hung_mcp_stdio, kind: mcp, command: [sleep, '3600']}}
"
    );
    let run = chat(&url, &agent, &[("GUIDEPOST_DISCOVERY_TIMEOUT_SECS", "5")]);
    // One limit for all: the three silent HTTP services held their connections open at the
    // same time (one after the other, each would close at its limit before the next opened).
    let most_open = open.lock().unwrap().1;
    runtime.shutdown_background();
    assert_eq!(most_open, 3, "connections open at once:\n{}", run.stderr);
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
    run.assert_bounded();
}

#[test]
fn a_corrupt_recording_fails_the_run_as_corrupt_not_as_missing() {
    // Every recording of the examples cut in half.
    let recordings = recordings_edited(|_, text| Some(text[..text.len() / 2].to_vec()));
    let run = replayed_taxi_happy_path(recordings.path());
    assert_ne!(run.code, 0, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    let console = format!("{}{}", run.stdout, run.stderr);
    assert!(console.contains("is corrupt"), "the reason is on the console:\n{console}");
    assert!(!console.contains("no recording"), "not reported as missing:\n{console}");
    run.assert_bounded();
}

#[test]
fn a_missing_recording_fails_the_replay_even_where_the_engine_went_on_without_it() {
    // The examples' recordings without the journey checks: the engine keeps each journey
    // where it was when its check fails, so only the ledger of misses tells.
    let recordings = recordings_edited(|task, text| (task != "journey_selection").then_some(text));
    let run = replayed_taxi_happy_path(recordings.path());
    assert_eq!(run.code, 2, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    let line = run
        .stderr
        .lines()
        .find(|l| l.contains("had no recording (replay-or-fail)"))
        .unwrap_or_else(|| panic!("no line names the misses:\n{}", run.stderr));
    assert!(line.contains("no recording for journey_selection request"), "{line}");
    run.assert_bounded();
}

/// The examples' recordings copied into a new folder, each file's bytes passed through `edit`
/// with the name of its task's folder (`None` leaves the file out).
fn recordings_edited(edit: impl Fn(&std::ffi::OsStr, Vec<u8>) -> Option<Vec<u8>>) -> tempfile::TempDir {
    let recordings = tempfile::tempdir().unwrap();
    for task in std::fs::read_dir(crate::repo_root().join("examples/recordings")).unwrap() {
        let task = task.unwrap().path();
        let name = task.file_name().unwrap();
        let copy = recordings.path().join(name);
        std::fs::create_dir_all(&copy).unwrap();
        for file in std::fs::read_dir(&task).unwrap() {
            let file = file.unwrap().path();
            if let Some(text) = edit(name, std::fs::read(&file).unwrap()) {
                std::fs::write(copy.join(file.file_name().unwrap()), text).unwrap();
            }
        }
    }
    recordings
}

/// `simulate` of the taxi's happy path answered from `recordings` only (`replay-or-fail`).
fn replayed_taxi_happy_path(recordings: &std::path::Path) -> Run {
    let output = guidepost()
        .args(["simulate", "examples/scenarios/taxi-happy-path.yaml", "--cache", "replay-or-fail", "--recordings"])
        .arg(recordings)
        .args(["--no-progress", "--no-artifacts"])
        .env("GUIDEPOST_REPORT_PEAK_MEMORY", "1")
        // A hang guard only.
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    Run::of(&output)
}
