//! The server against its own OpenAPI document, as a fuzz target (`scripts/fuzz.sh openapi`):
//! requests generated from `/openapi.json` for every operation (path parameters from real ids
//! and random strings, query parameters and JSON bodies from the declared schemas, valid and
//! mutated) never get a 500, get only statuses the operation declares (a 503 or 504 only where
//! declared), bodies of the declared media type that validate against the declared schema, and
//! a request body the declared schema rejects is never accepted.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};

use guidepost_server::access::{AccessPolicy, Role};

use super::support::TestServer;

mod schema;

use schema::{generate, mutate, validate};

/// A small deterministic generator (SplitMix64) driven by proptest's seed, so that a failing
/// case prints a seed that reproduces it.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }

    fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() { None } else { items.get(self.below(items.len())) }
    }
}

/// Strings that are not ids of anything: empty-ish, long, unicode, path-like, control bytes.
const ODD_STRINGS: [&str; 10] =
    ["x", "no-such-id", " ", "é日本", "../agents", "a/b", "%00", "\u{7f}\t", "DEFAULT", "tag:"];

/// The fixtures the requests refer to: ids by path-parameter name, and every id for bodies.
struct Ids {
    by_param: Vec<(String, Vec<String>)>,
    all: Vec<String>,
}

impl Ids {
    fn for_param(&self, name: &str) -> &[String] {
        self.by_param.iter().find(|(n, _)| n == name).map_or(&[], |(_, ids)| ids.as_slice())
    }

    fn string(&self, rng: &mut Rng) -> String {
        match rng.below(5) {
            0..=2 => rng.pick(&self.all).cloned().unwrap_or_default(),
            3 => rng.pick(&ODD_STRINGS).map(|s| s.to_string()).unwrap_or_default(),
            _ => format!("word{}", rng.below(1000)),
        }
    }
}

fn id_of(value: &Value) -> Vec<String> {
    value["id"].as_str().map(|s| vec![s.to_string()]).unwrap_or_default()
}

fn ids_in(list: &Value) -> Vec<String> {
    let items = list.get("items").unwrap_or(list);
    items.as_array().into_iter().flatten().filter_map(|v| v["id"].as_str().map(str::to_string)).collect()
}

/// Creates one of each kind of item (names numbered by `round`: the fixtures are made again
/// as the requests delete them) and collects their ids.
async fn fixtures(server: &TestServer, round: usize) -> Ids {
    let tag = id_of(&server.ok("post", "/tags", Some(json!({"name": format!("vip{round}")}))).await);
    let customer = id_of(&server.ok("post", "/customers", Some(json!({"name": "Alice", "tags": tag.clone()}))).await);
    let agents = ids_in(&server.ok("get", "/agents", None).await);
    // Random requests may have deleted every agent since the last round: make one again.
    let agent = match agents.first() {
        Some(agent) => agent.clone(),
        None => {
            let created = server.ok("post", "/agents", Some(json!({"name": format!("agent{round}")}))).await;
            id_of(&created).into_iter().next().unwrap_or_default()
        }
    };
    let session = server
        .ok("post", "/sessions", Some(json!({"agent_id": agent, "customer_id": customer.first(), "title": "t"})))
        .await;
    let session_id = session["id"].as_str().unwrap_or_default().to_string();
    let events = server.turn(&session_id, "Hello, what is the weather in Paris?").await;
    let event_ids: Vec<String> = events.iter().filter_map(|e| e["id"].as_str().map(str::to_string)).collect();
    let traces: Vec<String> =
        events.iter().filter_map(|e| e["trace_id"].as_str().map(str::to_string)).take(1).collect();
    let term = id_of(&server.ok("post", "/terms", Some(json!({"name": "ETA", "description": "arrival time"}))).await);
    let guideline = id_of(
        &server
            .ok("post", "/guidelines", Some(json!({"condition": "the customer is upset", "action": "apologise"})))
            .await,
    );
    let journey = server
        .ok(
            "post",
            "/journeys",
            Some(json!({"title": "Booking", "description": "Book a ride", "conditions": ["wants a taxi"]})),
        )
        .await;
    let journey_id = journey["id"].as_str().unwrap_or_default().to_string();
    let states = ids_in(&server.ok("get", &format!("/journeys/{journey_id}/states"), None).await);
    let transitions = ids_in(&server.ok("get", &format!("/journeys/{journey_id}/transitions"), None).await);
    let canned =
        id_of(&server.ok("post", "/canned_responses", Some(json!({"value": "Hello {{name}}", "fields": []}))).await);
    let variable = id_of(&server.ok("post", "/context-variables", Some(json!({"name": "plan"}))).await);
    let capability = id_of(
        &server
            .ok("post", "/capabilities", Some(json!({"title": "Refunds", "description": "d", "signals": ["refund"]})))
            .await,
    );
    let (_, relationship) = server
        .call(
            "post",
            "/relationships",
            Some(json!({"source_guideline": guideline.first(), "target_tag": tag.first(), "kind": "entailment"})),
        )
        .await;
    let services: Vec<String> = server
        .ok("get", "/services", None)
        .await
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str().map(str::to_string))
        .collect();
    let mut keys = customer.clone();
    keys.push("DEFAULT".into());
    keys.extend(tag.iter().map(|t| format!("tag:{t}")));
    let by_param: Vec<(String, Vec<String>)> = vec![
        ("agent_id".into(), agents),
        ("session_id".into(), vec![session_id]),
        ("event_id".into(), event_ids),
        ("trace_id".into(), traces),
        ("customer_id".into(), customer),
        ("tag_id".into(), tag),
        ("term_id".into(), term),
        ("guideline_id".into(), guideline),
        ("journey_id".into(), vec![journey_id]),
        ("state_id".into(), states),
        ("transition_id".into(), transitions),
        ("canned_response_id".into(), canned),
        ("variable_id".into(), variable),
        ("key".into(), keys),
        ("capability_id".into(), capability),
        ("relationship_id".into(), id_of(&relationship)),
        ("name".into(), services),
    ];
    let all = by_param.iter().flat_map(|(_, ids)| ids.iter().cloned()).collect();
    Ids { by_param, all }
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~:".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// One generated request.
#[derive(Debug)]
struct Request {
    method: String,
    path: String,
    query: Vec<(String, String)>,
    body: Option<Value>,
    /// Whether the body is one the declared request schema accepts.
    body_valid: bool,
    /// The API key sent, if any.
    key: Option<&'static str>,
}

impl Request {
    /// The request for a failure message, long texts cut short.
    fn shown(&self) -> String {
        let text = format!("{self:?}");
        if text.chars().count() > 2000 { format!("{}…", text.chars().take(2000).collect::<String>()) } else { text }
    }
}

fn request_for(doc: &Value, path: &str, method: &str, op: &Value, ids: &Ids, rng: &mut Rng, mutated: bool) -> Request {
    let mut concrete = String::new();
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        concrete.push('/');
        match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) => {
                // Deletions mostly miss, so the fixtures last through a long run.
                let real = if method == "delete" { rng.one_in(8) } else { !rng.one_in(4) };
                let value = match rng.pick(ids.for_param(name)) {
                    Some(id) if real => id.clone(),
                    _ => ids.string(rng),
                };
                concrete.push_str(&encode(&value));
            }
            None => concrete.push_str(segment),
        }
    }
    let mut query = Vec::new();
    for p in op["parameters"].as_array().into_iter().flatten().filter(|p| p["in"] == "query") {
        let name = p["name"].as_str().unwrap_or_default().to_string();
        if name.starts_with("wait_for") {
            // Never wait: the checks judge answers, not time.
            let value = if name == "wait_for_completion" && p["schema"]["type"] == "boolean" { "false" } else { "0" };
            query.push((name, value.to_string()));
            continue;
        }
        if !(p["required"] == true || rng.one_in(2)) {
            continue;
        }
        let value = if mutated && rng.one_in(3) {
            ids.string(rng)
        } else {
            match generate(doc, &p["schema"], ids, rng, 0) {
                Value::String(s) => s,
                other => other.to_string(),
            }
        };
        // Long texts belong in bodies: a URL has its own limits, in the client too.
        query.push((name, value.chars().take(500).collect()));
    }
    if op["operationId"] == "import_agent_definition" && !mutated {
        // A definition in the authoring format (JSON), new or the same again.
        let n = rng.below(3);
        let body = json!({"agent": {"id": format!("fuzz-{n}"), "name": format!("Fuzz {n}")}});
        return Request {
            method: method.to_string(),
            path: format!("/agents/fuzz-{n}/definition"),
            query,
            body: Some(body),
            body_valid: true,
            key: None,
        };
    }
    let (body, body_valid) = match op.pointer("/requestBody/content/application~1json/schema") {
        Some(schema) => {
            let mut body = generate(doc, schema, ids, rng, 0);
            if mutated {
                mutate(&mut body, rng);
            }
            let mut problems = Vec::new();
            validate(doc, schema, &body, "body", &mut problems);
            (Some(body), problems.is_empty())
        }
        None => (None, true),
    };
    Request { method: method.to_string(), path: concrete, query, body, body_valid, key: None }
}

/// How often each status answered (with whether the body was valid), printed at the end.
static STATUSES: std::sync::Mutex<std::collections::BTreeMap<(u16, bool), usize>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Sends the request and checks the answer against the operation's declared responses.
async fn check(server: &TestServer, doc: &Value, op: &Value, req: &Request) -> Result<(), String> {
    let method = reqwest::Method::from_bytes(req.method.to_uppercase().as_bytes()).map_err(|e| e.to_string())?;
    let query = form_urlencoded::Serializer::new(String::new()).extend_pairs(&req.query).finish();
    let url = if query.is_empty() { server.url(&req.path) } else { server.url(&format!("{}?{query}", req.path)) };
    let mut builder = server.http.request(method, url);
    if let Some(body) = &req.body {
        builder = builder.json(body);
    }
    if let Some(key) = req.key {
        builder = builder.bearer_auth(key);
    }
    let resp = builder.send().await.map_err(|e| format!("no answer: {e}"))?;
    let status = resp.status().as_u16();
    if let Ok(mut seen) = STATUSES.lock() {
        *seen.entry((status, req.body_valid)).or_default() += 1;
    }
    let media = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim().to_string())
        .unwrap_or_default();
    let declared = op["responses"].get(status.to_string()).or_else(|| op["responses"].get("default"));
    let Some(declared) = declared else {
        let text = resp.text().await.unwrap_or_default();
        return Err(format!("status {status} is not declared: {}", cut(&text)));
    };
    if status == 500 {
        return Err(format!("500: {}", cut(&resp.text().await.unwrap_or_default())));
    }
    let content = declared.get("content").and_then(Value::as_object);
    if media == "text/event-stream" {
        // A stream never ends by itself: its headers are the answer.
        return match content {
            Some(c) if c.contains_key("text/event-stream") => Ok(()),
            _ => Err(format!("{status} text/event-stream is not declared")),
        };
    }
    let text = resp.text().await.map_err(|e| format!("body unreadable: {e}"))?;
    if status == 204 && !text.is_empty() {
        return Err(format!("204 with a body: {}", cut(&text)));
    }
    if let Some(content) = content {
        let Some(media_decl) = content.get(&media) else {
            return Err(format!("{status} answered `{media}`, declared {:?}: {}", content.keys(), cut(&text)));
        };
        if let Some(schema) = media_decl.get("schema")
            && media == "application/json"
        {
            let value: Value = serde_json::from_str(&text).map_err(|e| format!("{status} body is not JSON: {e}"))?;
            let mut problems = Vec::new();
            validate(doc, schema, &value, "response", &mut problems);
            if !problems.is_empty() {
                let shown: String = value.to_string().chars().take(600).collect();
                return Err(format!("{status} body does not match its schema: {problems:?}\n{shown}"));
            }
        }
    }
    if (200..300).contains(&status) && !req.body_valid {
        return Err(format!("{status}: accepted a body its declared schema rejects"));
    }
    Ok(())
}

/// A response's text for a failure message, cut short.
fn cut(text: &str) -> String {
    text.chars().take(600).collect()
}

fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    doc["paths"]
        .as_object()
        .into_iter()
        .flatten()
        .flat_map(|(path, ops)| {
            ops.as_object().into_iter().flatten().map(move |(m, op)| (path.clone(), m.clone(), op.clone()))
        })
        .collect()
}

#[test]
fn fuzz_openapi_conformance_on_a_database_file() {
    let folder = tempfile::tempdir().unwrap();
    fuzz_against(&format!("sqlite://{}", folder.path().join("guidepost.db").display()), false);
}

#[test]
fn fuzz_openapi_conformance_in_memory() {
    fuzz_against("sqlite::memory:", false);
}

/// In production with API keys: requests without a key, with a client's, an admin's or one
/// that matches none.
#[test]
fn fuzz_openapi_conformance_in_production() {
    fuzz_against("sqlite::memory:", true);
}

const ADMIN: &str = "admin-key-0123456789abcdef";
const KEYS: [Option<&str>; 4] = [None, Some("client-key-0123456789abcdef"), Some(ADMIN), Some("no-such-key")];

fn fuzz_against(url: &str, production: bool) {
    if let Ok(mut seen) = STATUSES.lock() {
        seen.clear();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (server, doc, ids) = runtime.block_on(async {
        let store = guidepost_store::Store::open(url).await.unwrap();
        let mut options = guidepost_server::ServerOptions::default();
        if production {
            let keys = KEYS.iter().flatten().take(2).map(|k| k.to_string()).zip([Role::Client, Role::Admin]);
            options.access = AccessPolicy::with_keys(keys, true);
            // Budgets refill with the clock: without them every answer depends on the
            // request alone (429 is declared everywhere and checked by the access tests).
            options.access.requests_per_minute = None;
            options.access.failed_authentications_per_minute = None;
            options.access.messages_per_session_per_minute = None;
        }
        let mut server = TestServer::start_with_options(store, std::time::Duration::ZERO, options).await;
        server.key = production.then(|| ADMIN.to_string());
        // A connection per request: an answer given before a large body was read (413)
        // closes its connection, and a reused one would fail the next request on the client.
        server.http = guidepost_llm::http::client_builder()
            .pool_max_idle_per_host(0)
            .timeout(std::time::Duration::from_secs(120))
            .build()
            .unwrap();
        let doc = server.ok("get", "/openapi.json", None).await;
        let ids = fixtures(&server, 0).await;
        (server, doc, ids)
    });
    let ids = std::cell::RefCell::new(ids);
    let round = std::cell::Cell::new(0usize);
    let ops = operations(&doc);
    assert!(ops.len() > 80, "{} operations", ops.len());
    let run = |index: usize, seed: u64| -> Result<(), TestCaseError> {
        round.set(round.get() + 1);
        if round.get().is_multiple_of(64) {
            *ids.borrow_mut() = runtime.block_on(fixtures(&server, round.get()));
        }
        let (path, method, op) = &ops[index % ops.len()];
        let mut rng = Rng(seed);
        let mutated = rng.one_in(2);
        let mut req = request_for(&doc, path, method, op, &ids.borrow(), &mut rng, mutated);
        if production {
            req.key = rng.pick(&KEYS).copied().flatten();
        }
        runtime.block_on(check(&server, &doc, op, &req)).map_err(|problem| {
            TestCaseError::fail(format!(
                "{} {path} ({}): {problem}\nrequest: {}",
                method.to_uppercase(),
                op["operationId"],
                req.shown()
            ))
        })
    };
    // Every operation once with a valid request, then random operations, valid and mutated.
    for (index, (path, method, op)) in ops.iter().enumerate() {
        let mut rng = Rng(index as u64);
        let mut req = request_for(&doc, path, method, op, &ids.borrow(), &mut rng, false);
        req.key = production.then_some(ADMIN);
        if let Err(problem) = runtime.block_on(check(&server, &doc, op, &req)) {
            panic!("{} {path}: {problem}\nrequest: {}", method.to_uppercase(), req.shown());
        }
    }
    let mut runner = TestRunner::new(Config {
        cases: guidepost_fuzz::cases(),
        failure_persistence: None,
        max_shrink_iters: 256,
        ..Config::default()
    });
    let result =
        runner.run(&(any::<prop::sample::Index>(), any::<u64>()), |(index, seed)| run(index.index(ops.len()), seed));
    runtime.block_on(server.stop());
    if let Ok(seen) = STATUSES.lock() {
        eprintln!("statuses (status, body valid) -> requests: {seen:?}");
    }
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
