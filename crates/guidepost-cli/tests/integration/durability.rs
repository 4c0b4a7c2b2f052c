//! Durable turns, as an operator meets them: a server killed (`kill -9`) in the middle of a
//! turn, restarted, or replaced by a second replica on PostgreSQL; and two replicas taking
//! bursts of messages for the same sessions. The fake model answers every call after 2 s,
//! so the kill lands while the turn is preparing.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serve::{Running, fake_model_with_latency, serve};

pub(crate) async fn post(http: &reqwest::Client, url: String, body: Value) -> Value {
    let resp = http.post(url).json(&body).send().await.unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    resp.json().await.unwrap()
}

async fn events(http: &reqwest::Client, base: &str, session: &str, min: u64, wait: u64) -> Option<Vec<Value>> {
    let resp = http
        .get(format!("{base}/sessions/{session}/events?min_offset={min}&wait_for_data={wait}"))
        .send()
        .await
        .ok()?;
    if resp.status() != 200 {
        return None;
    }
    resp.json().await.ok()
}

/// Long-polls until a status of `trace` satisfies `done`; every event seen, in order.
pub(crate) async fn until(
    http: &reqwest::Client,
    base: &str,
    session: &str,
    trace: &str,
    done: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    // A hang guard, not a measure: far beyond what a turn takes on any busy machine.
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut seen: Vec<Value> = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "waited 600 s; saw {seen:?}");
        let next = seen.last().map_or(0, |e| e["offset"].as_u64().unwrap() + 1);
        let Some(batch) = events(http, base, session, next, 10).await else { continue };
        seen.extend(batch);
        if seen.iter().any(|e| e["trace_id"] == trace && done(e)) {
            return seen;
        }
    }
}

pub(crate) fn is_ready(e: &Value) -> bool {
    e["data"]["status"] == "ready" && e["data"]["data"]["stage"] == "completed"
}

/// Exactly one reply and one `ready{completed}` for the trace, dense offsets, no status
/// repeated.
pub(crate) fn exactly_one_reply(all: &[Value], trace: &str) {
    let offsets: Vec<u64> = all.iter().map(|e| e["offset"].as_u64().unwrap()).collect();
    assert_eq!(offsets, (0..all.len() as u64).collect::<Vec<_>>(), "dense offsets");
    let of_trace: Vec<&Value> = all.iter().filter(|e| e["trace_id"] == trace).collect();
    let replies = of_trace.iter().filter(|e| e["kind"] == "message" && e["source"] == "ai_agent").count();
    let readies = of_trace.iter().filter(|e| is_ready(e)).count();
    assert_eq!((replies, readies), (1, 1), "one reply, one ready: {of_trace:#?}");
    let mut statuses = HashSet::new();
    for e in of_trace.iter().filter(|e| e["kind"] == "status") {
        let key = (e["data"]["status"].to_string(), e["data"]["data"]["stage"].to_string());
        assert!(statuses.insert(key.clone()), "status {key:?} repeated: {of_trace:#?}");
    }
}

async fn kill_mid_turn(first: &mut Running, http: &reqwest::Client, session: &str) -> String {
    let message = post(
        http,
        format!("{}/sessions/{session}/events", first.url),
        json!({"kind": "message", "source": "customer", "message": "I need a taxi from 12 Main Street"}),
    )
    .await;
    let trace = message["trace_id"].as_str().unwrap().to_string();
    until(http, &first.url, session, &trace, |e| e["data"]["status"] == "processing").await;
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    trace
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_turn_answers_once_after_restart() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().to_str().unwrap().to_string();
    let fake = fake_model_with_latency(2000);
    let http = guidepost_llm::http::client_builder().timeout(Duration::from_secs(60)).build().unwrap();
    let mut first = serve(&fake, &["--data-dir", &dir, "--turn-lease-secs", "2"]);
    let session = post(&http, format!("{}/sessions", first.url), json!({"agent_id": "taxi"})).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let trace = kill_mid_turn(&mut first, &http, &session).await;

    let second = serve(&fake, &["--data-dir", &dir, "--turn-lease-secs", "2"]);
    let all = until(&http, &second.url, &session, &trace, is_ready).await;
    exactly_one_reply(&all, &trace);
    let turn: Value = http
        .get(format!("{}/sessions/{session}/turns/{trace}", second.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!((turn["status"].as_str(), turn["attempts"].as_i64()), (Some("completed"), Some(2)), "{turn}");
}

/// A database of its own on the test PostgreSQL server, or `None` (skipped) without one.
pub(crate) async fn postgres_database() -> Option<String> {
    let Some(url) = std::env::var("GUIDEPOST_TEST_DATABASE_URL").ok().filter(|u| !u.is_empty()) else {
        assert!(
            std::env::var("GUIDEPOST_REQUIRE_POSTGRES").as_deref() != Ok("1"),
            "GUIDEPOST_TEST_DATABASE_URL is not set"
        );
        eprintln!("skipped: GUIDEPOST_TEST_DATABASE_URL is not set");
        return None;
    };
    let admin = guidepost_store::Store::open_with(&url, 2).await.unwrap();
    let name = format!("gp_cli_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\""))).execute(admin.pool()).await.unwrap();
    admin.close().await;
    let base = url.rsplit_once('/').map_or(url.as_str(), |(b, _)| b).to_string();
    Some(format!("{base}/{name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_replica_takes_over_the_turn_of_one_killed_mid_turn() {
    let Some(db) = postgres_database().await else { return };
    let fake = fake_model_with_latency(2000);
    let http = guidepost_llm::http::client_builder().timeout(Duration::from_secs(60)).build().unwrap();
    let args = ["--database-url", db.as_str(), "--turn-lease-secs", "2"];
    let mut a = serve(&fake, &args);
    let b = serve(&fake, &args);
    let session = post(&http, format!("{}/sessions", a.url), json!({"agent_id": "taxi"})).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let trace = kill_mid_turn(&mut a, &http, &session).await;
    let all = until(&http, &b.url, &session, &trace, is_ready).await;
    exactly_one_reply(&all, &trace);
    let turn: Value =
        http.get(format!("{}/sessions/{session}/turns/{trace}", b.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!((turn["status"].as_str(), turn["attempts"].as_i64()), (Some("completed"), Some(2)), "{turn}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_answer_each_burst_once_running_one_turn_at_a_time() {
    let Some(db) = postgres_database().await else { return };
    let fake = fake_model_with_latency(300);
    let http = guidepost_llm::http::client_builder().timeout(Duration::from_secs(60)).build().unwrap();
    let args = ["--database-url", db.as_str()];
    let replicas = [serve(&fake, &args), serve(&fake, &args)];
    let mut sessions = Vec::new();
    for i in 0..4 {
        let s = post(&http, format!("{}/sessions", replicas[i % 2].url), json!({"agent_id": "taxi"})).await;
        sessions.push(s["id"].as_str().unwrap().to_string());
    }
    for burst in 0..2 {
        // Three messages per session at once, through both replicas.
        let mut sends = Vec::new();
        for s in &sessions {
            for k in 0..3 {
                let url = format!("{}/sessions/{s}/events", replicas[k % 2].url);
                let text = format!("burst {burst} message {k}: a taxi from 12 Main Street please");
                let http = http.clone();
                sends.push(tokio::spawn(async move {
                    post(&http, url, json!({"kind": "message", "source": "customer", "message": text})).await
                }));
            }
        }
        for s in sends {
            s.await.unwrap();
        }
        for s in &sessions {
            // A hang guard, not a measure.
            let deadline = Instant::now() + Duration::from_secs(600);
            let turns = loop {
                let turns: Vec<Value> = http
                    .get(format!("{}/sessions/{s}/turns", replicas[0].url))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                if turns.iter().all(|t| t["status"] != "pending" && t["status"] != "running") {
                    break turns;
                }
                assert!(Instant::now() < deadline, "turns still unfinished: {turns:#?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            };
            let completed = turns.iter().filter(|t| t["status"] == "completed").count();
            assert_eq!(completed, burst + 1, "one turn answered each burst: {turns:#?}");
            // Turns that ran never overlapped in time.
            let mut spans: Vec<(String, String)> = turns
                .iter()
                .filter_map(|t| Some((t["started_utc"].as_str()?.to_string(), t["finished_utc"].as_str()?.to_string())))
                .collect();
            spans.sort();
            for w in spans.windows(2) {
                assert!(w[0].1 <= w[1].0, "two turns of one session ran at once: {w:?}");
            }
            let all = events(&http, &replicas[1].url, s, 0, 0).await.unwrap();
            let offsets: Vec<u64> = all.iter().map(|e| e["offset"].as_u64().unwrap()).collect();
            assert_eq!(offsets, (0..all.len() as u64).collect::<Vec<_>>());
            let replies = all.iter().filter(|e| e["kind"] == "message" && e["source"] == "ai_agent").count();
            assert_eq!(replies, burst + 1, "one reply per burst");
            let mut by_trace: BTreeMap<String, usize> = BTreeMap::new();
            for e in all.iter().filter(|e| is_ready(e)) {
                *by_trace.entry(e["trace_id"].as_str().unwrap().to_string()).or_default() += 1;
            }
            assert!(by_trace.values().all(|n| *n == 1), "one ready per turn: {by_trace:?}");
        }
    }
}
