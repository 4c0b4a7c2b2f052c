//! Listing a session's events holds a page at a time, not the session: a session whose
//! events carry 64 MiB is listed whole while the server's peak memory grows by a fraction of
//! that (read from `/proc/<pid>/status`, `VmHWM`).
#![cfg(target_os = "linux")]

use std::time::Duration;

use guidepost_core::{EventKind, EventSource};
use guidepost_store::{NewEventRecord, Store};
use serde_json::json;

use crate::serve::{fake_model, serve};

fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap();
    line.trim().trim_end_matches(" kB").trim().parse().unwrap()
}

#[tokio::test]
async fn listing_a_large_session_holds_a_page_at_a_time() {
    let fake = fake_model();
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_str().unwrap().to_string();
    let server = serve(&fake, &["--data-dir", &data_dir]);
    let http = guidepost_llm::http::client_builder().timeout(Duration::from_secs(120)).build().unwrap();
    let session: serde_json::Value = http
        .post(format!("{}/sessions", server.url))
        .json(&json!({"agent_id": "weather"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = session["id"].as_str().unwrap().to_string();
    // 64 events of 1 MiB each (what tools may return), written beside the server.
    let store = Store::open_sqlite_file(&data.path().join("guidepost.db")).await.unwrap();
    let blob = "x".repeat(1 << 20);
    for _ in 0..8 {
        let events = (0..8)
            .map(|_| NewEventRecord {
                source: EventSource::System,
                kind: EventKind::Custom,
                trace_id: "bulk".into(),
                data: json!({"blob": blob}),
                metadata: Default::default(),
            })
            .collect();
        store.append_events(&id, events, None).await.unwrap();
    }
    store.close().await;
    let before = peak_kib(server.child.id());
    let response = http.get(format!("{}/sessions/{id}/events?wait_for_data=0", server.url)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let (mut bytes, mut events) = (0usize, 0usize);
    use futures::StreamExt;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.unwrap();
        bytes += chunk.len();
        events += chunk.windows(8).filter(|w| w == b"\"offset\"").count();
    }
    assert_eq!(events, 64);
    assert!(bytes > 64 << 20, "{bytes}");
    let grown = peak_kib(server.child.id()).saturating_sub(before);
    eprintln!("listing 64 MiB of events: the server's peak memory grew by {grown} KiB");
    assert!(grown < 32 * 1024, "listing 64 MiB of events raised the server's peak memory by {grown} KiB");
}
