//! `guidepost import parlant` against the answers a real Parlant 3.3.2 server gave about an
//! agent made with its own SDK and client (`tests/fixtures/parlant-3.3.2`: `capture.py`
//! made them, `parlant_agent.py` is the agent), replayed by a local HTTP server. A request
//! the capture does not hold fails the test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use guidepost_core::definition::{SourceFile, load_agent};
use guidepost_core::guideline::Criticality;
use guidepost_core::journey::StateKind;
use serde_json::Value;

use crate::repo_root;
use crate::serve::{bin, serve_router};

fn fixture() -> PathBuf {
    repo_root().join("crates/guidepost-cli/tests/fixtures/parlant-3.3.2")
}

/// A path with its query decoded and sorted, so encodings of the same request compare equal.
fn key(path_and_query: &str) -> String {
    let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
    let decode = |s: &str| {
        let bytes = s.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%'
                && i + 2 < bytes.len()
                && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
            {
                out.push(b);
                i += 3;
                continue;
            }
            out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
            i += 1;
        }
        String::from_utf8(out).unwrap()
    };
    let mut pairs: Vec<String> = query.split('&').filter(|p| !p.is_empty()).map(decode).collect();
    pairs.sort();
    format!("{}?{}", decode(path), pairs.join("&"))
}

#[derive(Clone)]
struct Replay {
    responses: Arc<Vec<(String, Value)>>,
    missed: Arc<Mutex<Vec<String>>>,
}

async fn answer(State(replay): State<Replay>, request: Request) -> Response {
    let asked = request.uri().path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default();
    let wanted = key(&asked);
    let Some((_, captured)) = replay.responses.iter().find(|(k, _)| *k == wanted) else {
        replay.missed.lock().unwrap().push(asked);
        return (StatusCode::NOT_FOUND, "not captured").into_response();
    };
    let status = StatusCode::from_u16(captured["status"].as_u64().unwrap() as u16).unwrap();
    let body = match &captured["body"] {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let content_type = captured["content_type"].as_str().unwrap().to_string();
    (status, [(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// The captured server, replayed: its URL, the requests it could not answer, its runtime.
pub fn replayed() -> (String, Arc<Mutex<Vec<String>>>, tokio::runtime::Runtime) {
    let text = std::fs::read_to_string(fixture().join("responses.json")).unwrap();
    let capture: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(capture["parlant"], "3.3.2");
    let responses: Vec<(String, Value)> =
        capture["responses"].as_object().unwrap().iter().map(|(path, r)| (key(path), r.clone())).collect();
    let replay = Replay { responses: Arc::new(responses), missed: Arc::default() };
    let missed = replay.missed.clone();
    let router = axum::Router::new().fallback(answer).with_state(replay);
    let (url, runtime) = serve_router(router);
    (url, missed, runtime)
}

fn import(url: &str, args: &[&str]) -> Output {
    Command::new(bin()).current_dir(repo_root()).args(["import", "parlant", url]).args(args).output().unwrap()
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn the_captured_parlant_agent_becomes_a_folder_that_check_accepts() {
    let (url, missed, _runtime) = replayed();
    let out = tempfile::tempdir().unwrap();
    let folder = out.path().join("bakery");
    let run = import(&url, &["--agent", "bakery", "--out", folder.to_str().unwrap()]);
    let console = text(&run);
    assert!(run.status.success(), "{console}");
    assert!(missed.lock().unwrap().is_empty(), "requests the capture does not hold: {:?}", missed.lock().unwrap());

    let check = Command::new(bin()).arg("check").arg(&folder).output().unwrap();
    let checked = text(&check);
    assert!(check.status.success(), "{checked}");
    assert!(checked.contains("checked 1 agent(s): 0 error(s), 0 warning(s)"), "{checked}");

    let yaml = std::fs::read_to_string(folder.join("agent.yaml")).unwrap();
    insta::assert_snapshot!("imported_bakery_agent", yaml.replace(&url, "http://PARLANT"));
    let definition = load_agent(&[SourceFile::new("agent.yaml", yaml.clone())]).definition.unwrap();
    let guideline = |id: &str| definition.guidelines.iter().find(|g| g.id == id).unwrap();
    assert_eq!(guideline("asks_refund").criticality, Criticality::High);
    assert_eq!(guideline("asks_refund").metadata.get("team"), Some(&serde_json::json!("support")));
    assert_eq!(guideline("asks_refund").tags, ["vip"]);
    assert!(!guideline("asks_recipe").enabled, "the guideline the client disabled");
    assert_eq!(guideline("wants_cancel_order").tools[0].to_string(), "orders:cancel_order");
    assert_eq!(guideline("greets").canned_responses, ["welcome_pine_street_bakery"]);
    assert!(guideline("asks_how_long_cake_keeps").journey.is_some(), "a journey's own guideline stays in it");
    let journey = &definition.journeys[0];
    assert_eq!(journey.conditions.len(), 2);
    let kinds: Vec<(&str, &StateKind)> = journey.states.iter().map(|s| (s.id.as_str(), &s.kind)).collect();
    assert_eq!(kinds.len(), 7, "the seven states of the chart: {kinds:?}");
    assert!(
        kinds.iter().any(|(id, k)| *id == "check_availability" && matches!(k, StateKind::Tool { .. })),
        "{kinds:?}"
    );
    assert!(kinds.iter().any(|(_, k)| matches!(k, StateKind::Fork)), "{kinds:?}");
    let relationships: Vec<String> =
        definition.relationships.iter().map(|r| format!("{} {} {}", r.kind.as_str(), r.source, r.target)).collect();
    assert_eq!(
        relationships,
        [
            "entailment guideline:greets guideline:orders_large_cake",
            "priority guideline:asks_refund guideline:greets",
            "priority journey:order_cake guideline:asks_refund",
            "disambiguation guideline:mentions_allergy guideline:asks_whether_cake_gluten_free",
            "disambiguation guideline:mentions_allergy guideline:asks_nuts",
            "reevaluation guideline:asks_loyalty_points tool:built-in:loyalty_points",
            "dependency guideline:more_than_100_loyalty_points guideline:asks_loyalty_points",
            "overlap tool:orders:track_order tool:orders:cancel_order",
        ],
        "the journey's own guideline's dependency on it is its place in the journey; depend_on_any cannot be read"
    );

    let report = std::fs::read_to_string(folder.join("IMPORT.md")).unwrap();
    for expected in [
        "the tool of state `place_order_confirmed`",
        "the service of tool `check_availability`",
        "whether guideline `asks_loyalty_points`",
        "the relationships of guideline `orders_large_cake`",
        "the metadata of canned response `welcome_pine_street_bakery` (tone)",
        "the code of the tools of the `built-in` service",
        "custom matchers",
    ] {
        assert!(report.contains(expected), "IMPORT.md says nothing of {expected:?}:\n{report}");
    }
    assert!(console.contains("not carried over (15;"), "{console}");
}

#[test]
fn the_agent_must_be_named_when_the_server_has_several() {
    let (url, _missed, _runtime) = replayed();
    let out = tempfile::tempdir().unwrap();
    let run = import(&url, &["--out", out.path().join("x").to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(2), "{}", text(&run));
    assert!(text(&run).contains("choose one with --agent: bakery (Crumb), night (Night Shift)"), "{}", text(&run));
    let run = import(&url, &["--agent", "nobody"]);
    assert!(text(&run).contains("the server has no agent `nobody`"), "{}", text(&run));
}

#[test]
fn another_agent_of_the_server_gets_only_what_is_its_own() {
    let (url, missed, _runtime) = replayed();
    let out = tempfile::tempdir().unwrap();
    let folder = out.path().join("night");
    let run = import(&url, &["--agent", "Night Shift", "--out", folder.to_str().unwrap()]);
    assert!(run.status.success(), "{}", text(&run));
    assert!(missed.lock().unwrap().is_empty(), "{:?}", missed.lock().unwrap());
    let yaml = std::fs::read_to_string(folder.join("agent.yaml")).unwrap();
    let definition = load_agent(&[SourceFile::new("agent.yaml", yaml.clone())]).definition.unwrap();
    let conditions: Vec<&str> = definition.guidelines.iter().map(|g| g.condition.as_str()).collect();
    assert_eq!(conditions, ["The customer asks when the shop opens"], "{yaml}");
    assert!(definition.journeys.is_empty() && definition.terms.is_empty() && definition.canned_responses.is_empty());

    // An import never writes over a folder that holds files, unless told to.
    let again = import(&url, &["--agent", "night", "--out", folder.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again).contains("already holds files"), "{}", text(&again));
    assert!(import(&url, &["--agent", "night", "--out", folder.to_str().unwrap(), "--force"]).status.success());
}

#[test]
fn a_server_that_is_not_parlant_is_refused_clearly() {
    let (url, runtime) = serve_router(axum::Router::new());
    let run = import(&url, &["--out", Path::new("/nonexistent/never").to_str().unwrap()]);
    runtime.shutdown_background();
    assert_eq!(run.status.code(), Some(2));
    assert!(text(&run).contains("does not answer like a Parlant server"), "{}", text(&run));
}
