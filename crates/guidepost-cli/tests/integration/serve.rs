//! `guidepost serve` as a user runs it: the real binary, a fake OpenAI-compatible model
//! server it reaches over HTTP, and the official Parlant clients (Python and TypeScript)
//! and chat widget (in Debian's headless Chromium) driving it unchanged.
//!
//! The client tests need what `scripts/fetch-clients.sh` installs (`scripts/test.sh` runs
//! it and sets `GUIDEPOST_REQUIRE_CLIENTS=1`, which makes a missing client a failure).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::repo_root;

/// A child process killed when dropped.
pub struct Running {
    pub child: Child,
    pub url: String,
    stderr: mpsc::Receiver<String>,
}

impl Running {
    pub fn stderr_so_far(&self) -> String {
        self.stderr.try_iter().collect::<Vec<_>>().join("\n")
    }

    /// Waits (up to `limit`, a bound on a hang, not a measure) for a standard error line that
    /// contains `needle`; every line read until then.
    pub fn wait_for_stderr(&self, needle: &str, limit: Duration) -> Result<Vec<String>, Vec<String>> {
        let deadline = std::time::Instant::now() + limit;
        let mut lines = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) => {
                    let found = line.contains(needle);
                    lines.push(line);
                    if found {
                        return Ok(lines);
                    }
                }
                Err(_) => return Err(lines),
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("guidepost")
}

/// Starts `command` and waits for a stdout line starting with `marker`; the rest of that
/// line is the process's address.
pub fn start(mut command: Command, marker: &str) -> Running {
    command.current_dir(repo_root()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let (etx, erx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = etx.send(line);
        }
    });
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => {
                if let Some(rest) = line.strip_prefix(marker) {
                    return Running { child, url: rest.trim().to_string(), stderr: erx };
                }
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let err: Vec<String> = erx.try_iter().collect();
                panic!("no `{marker}` line within 60 s; stderr:\n{}", err.join("\n"));
            }
        }
    }
}

/// The fake OpenAI-compatible model server, in this process (on a runtime of its own); the
/// server under test reaches it over HTTP like any provider.
pub struct FakeModel {
    pub url: String,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        // Tests that are async themselves drop it inside their runtime, where a blocking
        // shutdown is not allowed.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

pub fn fake_model() -> FakeModel {
    fake_model_with_latency(0)
}

pub fn fake_model_with_latency(ms: u64) -> FakeModel {
    fake_model_with(ms, false)
}

/// With `reject_keys`, every request gets a 401 that repeats the caller's key.
pub fn fake_model_with(latency_ms: u64, reject_keys: bool) -> FakeModel {
    let state = guidepost_testkit::fake_openai::FakeState::new(Duration::from_millis(latency_ms));
    if reject_keys {
        state.reject_keys();
    }
    fake_model_from(state)
}

/// The fake model server with this state.
pub fn fake_model_from(state: std::sync::Arc<guidepost_testkit::fake_openai::FakeState>) -> FakeModel {
    let (url, runtime) = serve_router(guidepost_testkit::fake_openai::router(state));
    FakeModel { url, runtime: Some(runtime) }
}

/// Serves `router` on a runtime of its own: `(base url, runtime)`. Bound here, served on that
/// runtime: callers may be inside a runtime of their own.
pub fn serve_router(router: axum::Router) -> (String, tokio::runtime::Runtime) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    runtime.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        axum::serve(listener, router).await
    });
    (format!("http://127.0.0.1:{port}"), runtime)
}

pub fn serve(fake: &FakeModel, args: &[&str]) -> Running {
    serve_with_env(fake, args, &[])
}

pub fn serve_with_env(fake: &FakeModel, args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut cmd = Command::new(bin());
    cmd.envs(env.iter().copied());
    cmd.args(["serve", "examples/agents", "--port", "0"])
        .args(args)
        .env("GUIDEPOST_MODEL", format!("openai-compatible:{}/v1#gpt-4.1", fake.url))
        .env("GUIDEPOST_EMBEDDER", format!("openai-compatible:{}/v1#fake-embed", fake.url))
        .env_remove("GUIDEPOST_DATABASE_URL");
    start(cmd, "listening on ")
}

fn client_required() -> bool {
    std::env::var("GUIDEPOST_REQUIRE_CLIENTS").as_deref() == Ok("1")
}

/// Runs a conformance script; its output is shown when it fails.
fn run_script(mut command: Command, what: &str, server: &Running) {
    command.current_dir(repo_root()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let mut out = String::new();
    let mut err = String::new();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let _ = stderr.read_to_string(&mut err);
        err
    });
    let _ = stdout.read_to_string(&mut out);
    let err = reader.join().unwrap();
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "{what} failed ({status}):\n--- stdout\n{out}\n--- stderr\n{err}\n--- server log\n{}",
        server.stderr_so_far()
    );
}

fn python_client() -> Option<PathBuf> {
    match std::env::var("GUIDEPOST_PYTHON_CLIENT") {
        Ok(dir) if Path::new(&dir).join("parlant").exists() => Some(PathBuf::from(dir)),
        _ => {
            assert!(
                !client_required(),
                "GUIDEPOST_PYTHON_CLIENT is not set: run `eval \"$(scripts/fetch-clients.sh)\"`"
            );
            eprintln!("skipped: the Python client is not installed (scripts/fetch-clients.sh)");
            None
        }
    }
}

fn node_clients() -> Option<PathBuf> {
    let dir = repo_root().join("crates/guidepost-server/tests/clients/node");
    if dir.join("node_modules/parlant-client").exists() && dir.join("widget/dist/index.js").exists() {
        return Some(dir);
    }
    assert!(!client_required(), "the node clients are not installed: run scripts/fetch-clients.sh");
    eprintln!("skipped: the node clients are not installed (scripts/fetch-clients.sh)");
    None
}

fn python_flow(server: &Running, dir: &Path) {
    let mut cmd = Command::new("python3");
    cmd.args(["-s", "crates/guidepost-server/tests/clients/python/flow.py"])
        .env("GUIDEPOST_URL", &server.url)
        .env("PYTHONPATH", dir)
        .env_remove("FLOW_TOLERATE_REFERENCE_QUIRKS");
    run_script(cmd, "the Python client flow", server);
}

#[test]
fn the_python_client_drives_a_full_flow() {
    let Some(dir) = python_client() else { return };
    let fake = fake_model();
    let server = serve(&fake, &["--ephemeral"]);
    python_flow(&server, &dir);
}

#[test]
fn the_python_client_drives_a_full_flow_on_postgres() {
    let Some(dir) = python_client() else { return };
    let Some(url) = std::env::var("GUIDEPOST_TEST_DATABASE_URL").ok().filter(|u| !u.is_empty()) else {
        assert!(
            std::env::var("GUIDEPOST_REQUIRE_POSTGRES").as_deref() != Ok("1"),
            "GUIDEPOST_TEST_DATABASE_URL is not set"
        );
        eprintln!("skipped: GUIDEPOST_TEST_DATABASE_URL is not set");
        return;
    };
    let fake = fake_model();
    let server = serve(&fake, &["--database-url", &url]);
    python_flow(&server, &dir);
}

#[test]
fn the_typescript_client_holds_a_conversation() {
    let Some(dir) = node_clients() else { return };
    let fake = fake_model();
    let server = serve(&fake, &["--ephemeral"]);
    let mut cmd = Command::new("node");
    cmd.arg(dir.join("conversation.mjs")).env("GUIDEPOST_URL", &server.url);
    run_script(cmd, "the TypeScript client conversation", &server);
}

#[test]
fn the_chat_widget_works_in_headless_chromium() {
    let Some(dir) = node_clients() else { return };
    let fake = fake_model();
    let server = serve(&fake, &["--ephemeral"]);
    let shots = tempfile::tempdir().unwrap();
    let shot = shots.path().join("widget.png");
    let mut cmd = Command::new("node");
    cmd.arg(dir.join("widget.mjs")).env("GUIDEPOST_URL", &server.url).env("SCREENSHOT", &shot);
    run_script(cmd, "the chat widget in Chromium", &server);
    assert!(std::fs::metadata(&shot).map(|m| m.len() > 10_000).unwrap_or(false), "a screenshot was taken");
}

async fn get(url: &str) -> serde_json::Value {
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

async fn wait_for_reply(base: &str, session: &str) -> serde_json::Value {
    for _ in 0..30 {
        let events =
            get(&format!("{base}/sessions/{session}/events?kinds=message&source=ai_agent&wait_for_data=5")).await;
        if events.as_array().is_some_and(|e| !e.is_empty()) {
            return events;
        }
    }
    panic!("no reply in session {session}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_keeps_its_sessions_and_imports_idempotently() {
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_str().unwrap().to_string();
    let fake = fake_model();
    let mut first = serve(&fake, &["--data-dir", &data_dir]);
    let base = first.url.clone();
    let http = guidepost_llm::http::client_builder().build().unwrap();
    let agents = get(&format!("{base}/agents")).await;
    assert_eq!(agents.as_array().unwrap().len(), 4, "{agents}");
    let session: serde_json::Value = http
        .post(format!("{base}/sessions"))
        .json(&serde_json::json!({"agent_id": "taxi"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sid = session["id"].as_str().unwrap().to_string();
    http.post(format!("{base}/sessions/{sid}/events"))
        .json(&serde_json::json!({"kind": "message", "source": "customer", "message": "I need a taxi"}))
        .send()
        .await
        .unwrap();
    wait_for_reply(&base, &sid).await;

    // SIGTERM: a graceful stop.
    let pid = first.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let mut stopped = None;
    for _ in 0..150 {
        if let Some(status) = first.child.try_wait().unwrap() {
            stopped = Some(status);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = stopped.expect("the server stopped within 15 s of SIGTERM");
    assert!(status.success(), "{status}");
    assert!(first.stderr_so_far().contains("shutting down"));

    let second = serve(&fake, &["--data-dir", &data_dir]);
    let log = second.stderr_so_far();
    assert!(log.contains("4 agent(s) unchanged since the last start"), "{log}");
    let events = get(&format!("{}/sessions/{sid}/events?wait_for_data=0", second.url)).await;
    assert!(events.as_array().unwrap().len() >= 5, "the session survived the restart: {events}");
    drop(second);

    let out = Command::new(bin()).args(["export", "taxi", "--data-dir", &data_dir]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let exported = data.path().join("taxi.yaml");
    std::fs::write(&exported, &out.stdout).unwrap();
    let check = Command::new(bin()).args(["check", exported.to_str().unwrap()]).output().unwrap();
    assert!(
        check.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let missing = Command::new(bin()).args(["export", "nobody", "--data-dir", &data_dir]).output().unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("agents: banking, otto, taxi, weather"));
}

/// An agent whose one guideline runs a tool; its fixture knows no parcel.
const PARCELS_AGENT: &str = "agent: {id: parcels, name: Pia}
guidelines:
  - id: locate
    condition: The customer asks where their parcel is
    action: Look the parcel up and tell the customer where it is
    tools: [locate_parcel]
tools:
  - name: locate_parcel
    description: Find a parcel by its code
    parameters:
      code: string
    fixture:
      cases:
        - args: {code: 1Z999}
          result: {status: in transit}
      otherwise:
        error: No parcel with that code
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_secrets_never_reach_logs_or_responses() {
    const PROVIDER_KEY: &str = "sk-planted-provider-7f3a9c2e5b";
    const ADMIN_KEY: &str = "gp-planted-admin-4d8e1b6a0c";
    // The provider refuses the reply calls with a 401 that echoes the key, and its tool-call
    // inference copies the key into every argument of a tool it runs.
    let fake = fake_model_from(
        guidepost_testkit::fake_openai::FakeState::new(Duration::ZERO)
            .reject_schemas(&["reply", "template_choice"])
            .keys_in_tool_arguments(),
    );
    let agents = tempfile::tempdir().unwrap();
    let parcels = agents.path().join("parcels.yaml");
    std::fs::write(&parcels, PARCELS_AGENT).unwrap();
    let server = serve_with_env(
        &fake,
        &["--ephemeral", parcels.to_str().unwrap()],
        &[
            ("OPENAI_COMPATIBLE_API_KEY", PROVIDER_KEY),
            ("GUIDEPOST_API_KEYS", &format!("admin:{ADMIN_KEY}")),
            ("GUIDEPOST_LOG", "debug"),
        ],
    );
    let http = guidepost_llm::http::client_builder().build().unwrap();
    let base = server.url.clone();
    let mut seen = String::new();
    let session: serde_json::Value = http
        .post(format!("{base}/sessions"))
        .bearer_auth(ADMIN_KEY)
        .json(&serde_json::json!({"agent_id": "taxi"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sid = session["id"].as_str().unwrap().to_string();
    let parcel_session: serde_json::Value = http
        .post(format!("{base}/sessions"))
        .bearer_auth(ADMIN_KEY)
        .json(&serde_json::json!({"agent_id": "parcels"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let parcel_sid = parcel_session["id"].as_str().unwrap().to_string();
    for (sid, message) in [(&sid, "I need a taxi"), (&parcel_sid, "Where is my parcel?")] {
        http.post(format!("{base}/sessions/{sid}/events"))
            .bearer_auth(ADMIN_KEY)
            .json(&serde_json::json!({"kind": "message", "source": "customer", "message": message}))
            .send()
            .await
            .unwrap();
        // The provider refuses the key (echoing it); the turn fails with an error status.
        let mut failed = false;
        let mut last = String::new();
        for _ in 0..150 {
            let events = http
                .get(format!("{base}/sessions/{sid}/events?min_offset=0&wait_for_data=2"))
                .bearer_auth(ADMIN_KEY)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            if events.contains("\"error\"") && events.contains("completed") {
                seen.push_str(&events);
                failed = true;
                break;
            }
            last = events;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(failed, "the turn ended with an error status: {last}");
        for path in [format!("/sessions/{sid}/turns"), format!("/sessions/{sid}/usage")] {
            seen.push_str(
                &http.get(format!("{base}{path}")).bearer_auth(ADMIN_KEY).send().await.unwrap().text().await.unwrap(),
            );
        }
    }
    // The parcel lookup ran once, with the key as its argument, shown redacted in its tool
    // event and in the turn's trace.
    assert!(
        seen.matches("\"code\":\"[redacted]\"").count() >= 2,
        "the tool call shows with its argument redacted: {seen}"
    );
    for path in ["/metrics", "/agents"] {
        seen.push_str(
            &http.get(format!("{base}{path}")).bearer_auth(ADMIN_KEY).send().await.unwrap().text().await.unwrap(),
        );
    }
    for key in [ADMIN_KEY, "gp-planted-wrong-key-123456"] {
        let resp = http.get(format!("{base}/guidelines")).bearer_auth(format!("{key}x")).send().await.unwrap();
        assert_eq!(resp.status(), 401);
        seen.push_str(&resp.text().await.unwrap());
    }
    assert!(seen.contains("***") || seen.contains("401"), "the provider's refusal shows, redacted: {seen}");
    std::thread::sleep(Duration::from_millis(300));
    let log = server.stderr_so_far();
    assert!(log.contains("401") || log.contains("Incorrect API key"), "the log shows the refusal: {log}");
    for secret in [PROVIDER_KEY, ADMIN_KEY] {
        assert!(!seen.contains(secret), "a response repeated a secret: {seen}");
        assert!(!log.contains(secret), "the log shows a secret: {log}");
    }
}

#[test]
fn the_web_page_chats_inspects_and_shows_simulations_in_headless_chromium() {
    let Some(dir) = node_clients() else { return };
    // A simulation run to show: the taxi scenario, replayed from its recordings.
    let runs = tempfile::tempdir().unwrap();
    let tally = runs.path().join(".tally");
    let simulated = Command::new(bin())
        .current_dir(repo_root())
        .args([
            "simulate",
            "examples/scenarios/taxi-happy-path.yaml",
            "--agent",
            "in-process",
            "--cache",
            "replay-or-fail",
        ])
        .args(["--recordings", "examples/recordings", "--no-progress", "--out"])
        .arg(&tally)
        .output()
        .unwrap();
    assert!(simulated.status.success(), "{}", String::from_utf8_lossy(&simulated.stderr));
    let fake = fake_model();
    let server = serve(&fake, &["--ephemeral", "--simulations", tally.to_str().unwrap()]);
    // Screenshots are kept as artifacts of the run.
    let shots = repo_root().join("target").join("web-screenshots");
    let mut cmd = Command::new("node");
    cmd.arg(dir.join("web.mjs"))
        .env("GUIDEPOST_URL", &server.url)
        .env("SIMULATION", "taxi-happy-path-trial0")
        .env("SCREENSHOTS", &shots);
    run_script(cmd, "the web page in Chromium", &server);
    for shot in ["chat.png", "inspector.png", "journey.png", "simulation.png", "phone.png"] {
        let size = std::fs::metadata(shots.join(shot)).map(|m| m.len()).unwrap_or(0);
        assert!(size > 10_000, "{shot} was taken ({size} bytes)");
    }
}
