//! `guidepost chat -m ...` when the model provider fails some or all of a turn's matching
//! calls (a 401 that echoes the key): a degraded reply is marked on standard error and the
//! exit status is 3; a turn that lost every matching call sends no reply and exits 1. The
//! planted key appears in no output, logs included.

use std::time::Duration;

use crate::guidepost;

const KEY: &str = "sk-proj-PLANTEDclikey0123456789abcdef";

const AGENT: &str = "agent: {name: Otto, language: en}
guidelines:
  - {id: shipping, condition: The customer asks about shipping, action: Say that shipping takes 3 days}
  - {id: tone, condition: At any point in the conversation, action: Keep it short and friendly, criticality: low}
";

/// A fake OpenAI-compatible server that rejects these structured outputs with a 401
/// echoing the caller's key; `(url, runtime)`, the runtime serving it.
fn fake_rejecting(schemas: &[&str]) -> (String, tokio::runtime::Runtime) {
    use guidepost_testkit::fake_openai::{FakeState, router};
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = FakeState::new(Duration::ZERO).reject_schemas(schemas);
    runtime.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        axum::serve(listener, router(state)).await
    });
    (format!("http://127.0.0.1:{port}"), runtime)
}

/// Runs `guidepost chat` on the agent with one message; (exit code, stdout, stderr).
fn chat(schemas: &[&str]) -> (i32, String, String) {
    let (url, runtime) = fake_rejecting(schemas);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("otto.yaml");
    std::fs::write(&file, AGENT).unwrap();
    let output = guidepost()
        .args(["chat"])
        .arg(&file)
        .args(["-m", "How long does shipping take?"])
        .env("GUIDEPOST_MODEL", format!("openai-compatible:{url}/v1#gpt-4.1"))
        .env("GUIDEPOST_EMBEDDER", format!("openai-compatible:{url}/v1#fake-embed"))
        .env("OPENAI_COMPATIBLE_API_KEY", KEY)
        .env("GUIDEPOST_LOG", "debug")
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    runtime.shutdown_background();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !stdout.contains("PLANTEDclikey") && !stderr.contains("PLANTEDclikey"),
        "the key leaked:\n{stdout}\n{stderr}"
    );
    (output.status.code().unwrap_or(-1), stdout, stderr)
}

#[test]
fn a_reply_after_a_lost_matching_call_is_marked_degraded_and_exits_3() {
    let (code, stdout, stderr) = chat(&["LowCriticalityChecks"]);
    assert_eq!(code, 3, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("Otto> "), "the reply went out:\n{stdout}");
    let line = stderr.lines().find(|l| l.starts_with("degraded: ")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("matching: 1 of 2 calls failed") && line.contains("401"), "{line}");
}

#[test]
fn a_turn_that_lost_every_matching_call_sends_no_reply_and_exits_1() {
    let (code, stdout, stderr) = chat(&["LowCriticalityChecks", "ConditionChecks", "DirectChecks"]);
    assert_eq!(code, 1, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(!stdout.contains("Otto> "), "no reply:\n{stdout}");
    assert!(stderr.contains("every model call of this matching pass failed"), "{stderr}");
}
