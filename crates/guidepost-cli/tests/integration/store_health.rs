//! The store's health is real: a SQLite file removed, replaced or made read-only under a
//! running server makes `/healthz` unhealthy and every write fail loudly (503, an error in the
//! log) instead of answering 201 into a file no path leads to; a read-only file at start is
//! refused with a message that says what to do.
#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::serve::{fake_model, serve};

fn client() -> reqwest::Client {
    guidepost_llm::http::client_builder().timeout(Duration::from_secs(60)).build().unwrap()
}

async fn health(base: &str) -> (u16, Value) {
    let response = client().get(format!("{base}/healthz")).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

async fn create_customer(base: &str, name: &str) -> (u16, Value) {
    let response = client().post(format!("{base}/customers")).json(&json!({"name": name})).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Checks the server notices `broken` (a word of its message) and refuses writes meanwhile.
async fn assert_refuses_writes(base: &str, broken: &str) {
    let (status, body) = health(base).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "unhealthy", "{body}");
    let error = body["checks"]["database"]["error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains(broken), "{error}");
    let (status, body) = create_customer(base, "Lost").await;
    assert_eq!(status, 503, "a write answers 503, not 201 into a lost file: {body}");
    assert!(body["detail"].as_str().unwrap_or_default().contains(broken), "{body}");
}

#[tokio::test]
async fn a_database_file_removed_replaced_or_made_read_only_is_detected() {
    let fake = fake_model();
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_str().unwrap().to_string();
    let file = data.path().join("guidepost.db");
    let server = serve(&fake, &["--data-dir", &data_dir]);
    let base = server.url.clone();
    assert_eq!(health(&base).await.0, 200);
    assert_eq!(create_customer(&base, "Ann").await.0, 201);

    // Made read-only, then writable again.
    set_mode(&file, 0o444);
    assert_refuses_writes(&base, "read-only").await;
    set_mode(&file, 0o644);
    assert_eq!(health(&base).await.0, 200);
    assert_eq!(create_customer(&base, "Bea").await.0, 201);

    // Replaced by another file (a copy moved over it).
    let copy = data.path().join("copy.db");
    std::fs::copy(&file, &copy).unwrap();
    std::fs::rename(&copy, &file).unwrap();
    assert_refuses_writes(&base, "replaced").await;

    // Removed.
    std::fs::remove_file(&file).unwrap();
    assert_refuses_writes(&base, "removed").await;
    // The log line travels through a pipe and a reader thread: wait for it (it is written
    // before the answer above, so it comes).
    let mut log = String::new();
    for _ in 0..100 {
        log.push_str(&server.stderr_so_far());
        if log.contains("was removed while the server ran") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for problem in ["is read-only", "was replaced", "was removed while the server ran"] {
        assert!(log.lines().any(|l| l.contains("ERROR") && l.contains(problem)), "{problem}: {log}");
    }
}

#[test]
fn a_read_only_database_file_at_start_is_refused_with_what_to_do() {
    let fake = fake_model();
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_str().unwrap().to_string();
    let first = serve(&fake, &["--data-dir", &data_dir]);
    drop(first);
    let file = data.path().join("guidepost.db");
    set_mode(&file, 0o444);
    // Under a time limit: a server that starts anyway would serve until stopped.
    let out = crate::guidepost()
        .args(["serve", "examples/agents", "--port", "0", "--data-dir", &data_dir])
        .env("GUIDEPOST_MODEL", format!("openai-compatible:{}/v1#gpt-4.1", fake.url))
        .env("GUIDEPOST_EMBEDDER", format!("openai-compatible:{}/v1#fake-embed", fake.url))
        .env_remove("GUIDEPOST_DATABASE_URL")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"), "it never listens");
    assert!(stderr.contains("guidepost.db is read-only") && stderr.contains("chmod u+w"), "{stderr}");
}
