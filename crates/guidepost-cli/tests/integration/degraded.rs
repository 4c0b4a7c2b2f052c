//! `guidepost chat -m ...` when the model provider fails some or all of a turn's matching
//! calls (a 401 that echoes the key): a degraded reply is marked on standard error and the
//! exit status is 3; a turn that lost every matching call sends no reply and exits 1. The
//! planted key appears in no output, logs included. The same fake server also shows a
//! configuration file routing each task to its model.

use std::collections::BTreeSet;
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

/// Runs `guidepost` with `args` under the configuration file `config` (no `GUIDEPOST_MODEL`,
/// the fake's key); its output.
fn with_config(args: &[&std::ffi::OsStr], config: &std::path::Path) -> std::process::Output {
    guidepost()
        .args(args)
        .env("GUIDEPOST_CONFIG", config)
        .env("OPENAI_COMPATIBLE_API_KEY", KEY)
        .env_remove("GUIDEPOST_MODEL")
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap()
}

/// The fake's request log, emptied for the next run.
fn take_log(url: &str, runtime: &tokio::runtime::Runtime) -> Vec<serde_json::Value> {
    let http = guidepost_llm::http::client_builder().build().unwrap();
    runtime.block_on(async {
        let log = http.get(format!("{url}/_log")).send().await.unwrap().json().await.unwrap();
        http.delete(format!("{url}/_log")).send().await.unwrap();
        log
    })
}

/// The models the logged requests of `kind` named, those answering `schema` when given.
fn models_of(log: &[serde_json::Value], kind: &str, schema: Option<&str>) -> BTreeSet<String> {
    log.iter()
        .filter(|r| r["kind"] == kind && (schema.is_none() || r["schema"].as_str() == schema))
        .filter_map(|r| r["model"].as_str().map(str::to_string))
        .collect()
}

fn one(model: &str) -> BTreeSet<String> {
    BTreeSet::from([model.to_string()])
}

/// `GUIDEPOST_CONFIG` names a file that gives each task its model: the requests reach the
/// fake under the model names the file gave them, and a variable set in the environment wins
/// over the file. Its engine section chooses how checks are asked.
#[test]
fn a_configuration_file_gives_each_task_its_model_and_the_environment_wins() {
    let (url, runtime) = fake_rejecting(&[]);
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("otto.yaml");
    std::fs::write(&agent, AGENT).unwrap();
    let config = dir.path().join("guidepost.yaml");
    std::fs::write(
        &config,
        format!(
            "models:\n  default: openai-compatible:{url}/v1#model-default\n  matching: openai-compatible:{url}/v1#model-checks\n  generation: openai-compatible:{url}/v1#model-replies\n  embedder: openai-compatible:{url}/v1#model-embed\n"
        ),
    )
    .unwrap();
    let run = |env: &[(&str, String)]| {
        let mut cmd = guidepost();
        cmd.args(["chat"]).arg(&agent).args(["-m", "How long does shipping take?"]);
        cmd.env("GUIDEPOST_CONFIG", &config).env("OPENAI_COMPATIBLE_API_KEY", KEY).env_remove("GUIDEPOST_MODEL");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let output = cmd.timeout(Duration::from_secs(120)).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        take_log(&url, &runtime)
    };
    let log = run(&[]);
    assert_eq!(models_of(&log, "chat", Some("ConditionChecks")), one("model-checks"));
    assert_eq!(models_of(&log, "chat", Some("reply")), one("model-replies"), "{log:?}");
    let log = run(&[("GUIDEPOST_MODEL_MATCHING", format!("openai-compatible:{url}/v1#model-from-env"))]);
    assert_eq!(models_of(&log, "chat", Some("ConditionChecks")), one("model-from-env"));

    // The engine section chooses how checks are asked, whatever the model declares.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{text}engine:\n  verdicts: direct\n")).unwrap();
    let log = run(&[]);
    assert_eq!(models_of(&log, "chat", Some("DirectChecks")), one("model-checks"), "{log:?}");
    assert!(models_of(&log, "chat", Some("ConditionChecks")).is_empty());

    // So does eval: a style is measured on labelled cases before it is deployed.
    let cases = dir.path().join("cases.yaml");
    std::fs::write(
        &cases,
        "agent: otto.yaml\ncases:\n  - id: shipping\n    conversation:\n      - customer: How long does shipping take?\n    expect:\n      guidelines: {shipping: true}\n",
    )
    .unwrap();
    let output = with_config(&["eval".as_ref(), cases.as_os_str()], &config);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let log = take_log(&url, &runtime);
    assert_eq!(models_of(&log, "chat", Some("DirectChecks")), one("model-checks"), "{log:?}");

    std::fs::write(&config, "models:\n  matching: nonsense\n").unwrap();
    let output = guidepost()
        .args(["chat"])
        .arg(&agent)
        .args(["-m", "hi"])
        .env("GUIDEPOST_CONFIG", &config)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("guidepost.yaml: models.matching"), "{stderr}");
    runtime.shutdown_background();
}

/// An agent whose first turn needs every engine task: checks, a journey step chosen by the
/// model (two ways in), a tool call to infer, the reply, and journey prediction's embedding.
const ORDERS: &str = "agent: {name: Otto, language: en}
guidelines:
  - {id: thanks, condition: The customer thanks the agent, action: Say you are glad to help}
journeys:
  - id: order_status
    title: Order status
    conditions: [The customer wants to know where their order is]
    start:
      - {to: lookup, when: The customer gave the order number}
      - {to: ask, when: The customer has not given the order number}
    states:
      - {id: ask, chat: Ask for the order number, next: lookup}
      - {id: lookup, tool: get_order, next: report}
      - {id: report, chat: Tell the customer where the order is, next: end}
  # More journeys than are considered per turn: prediction embeds the conversation.
  - {id: returns, title: Returns, conditions: [The customer wants to return an item], start: [{to: r1}], states: [{id: r1, chat: Explain returns, next: end}]}
  - {id: gifts, title: Gift cards, conditions: [The customer asks about gift cards], start: [{to: g1}], states: [{id: g1, chat: Explain gift cards, next: end}]}
tools:
  - name: get_order
    description: Where an order is
    parameters:
      order_number: {type: string, description: The order number, source: customer}
    fixture:
      otherwise: {result: {status: shipped}}
";

/// A configuration file giving each of `tasks` (`(key, model name)`) a model on the fake at `url`.
fn config_file(dir: &std::path::Path, url: &str, tasks: &[(&str, &str)]) -> std::path::PathBuf {
    let config = dir.join("guidepost.yaml");
    let models: String =
        tasks.iter().map(|(task, name)| format!("  {task}: openai-compatible:{url}/v1#{name}\n")).collect();
    std::fs::write(&config, format!("models:\n{models}")).unwrap();
    config
}

#[test]
fn every_engine_task_reaches_the_model_the_configuration_file_gives_it() {
    let (url, runtime) = fake_rejecting(&[]);
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("orders.yaml");
    std::fs::write(&agent, ORDERS).unwrap();
    let config = config_file(
        dir.path(),
        &url,
        &[
            ("default", "model-default"),
            ("matching", "model-checks"),
            ("journey_selection", "model-journeys"),
            ("tool_inference", "model-tools"),
            ("generation", "model-replies"),
            ("embedder", "model-embed"),
        ],
    );
    let message = "Where is my order 12345? I want to know where my order is.";
    let output = with_config(&["chat".as_ref(), agent.as_os_str(), "-m".as_ref(), message.as_ref()], &config);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let log = take_log(&url, &runtime);
    runtime.shutdown_background();
    assert_eq!(models_of(&log, "chat", Some("ConditionChecks")), one("model-checks"), "{log:#?}");
    assert_eq!(models_of(&log, "chat", Some("JourneySelectionAnswer")), one("model-journeys"), "{log:#?}");
    assert_eq!(models_of(&log, "chat", Some("tool_calls")), one("model-tools"), "{log:#?}");
    assert_eq!(models_of(&log, "chat", Some("reply")), one("model-replies"), "{log:#?}");
    assert_eq!(models_of(&log, "embeddings", None), one("model-embed"), "{log:#?}");
    assert!(models_of(&log, "chat", None).iter().all(|m| m != "model-default"), "every task has its own: {log:#?}");
}

#[test]
fn the_simulators_customer_and_judge_reach_their_own_models() {
    let (url, runtime) = fake_rejecting(&[]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("otto.yaml"), AGENT).unwrap();
    let scenario = dir.path().join("shipping.yaml");
    std::fs::write(
        &scenario,
        "id: shipping\nagent: otto.yaml\ngoal: Find out how long shipping takes.\npersona: {description: A busy customer.}\nmax_turns: 2\nstep_graph:\n  start: ask\n  terminals: [ask]\n  steps:\n    - {id: ask, instruction: Ask how long shipping takes}\n",
    )
    .unwrap();
    let config = config_file(
        dir.path(),
        &url,
        &[("default", "model-agent"), ("simulation", "model-customer"), ("judge", "model-judge")],
    );
    let args = ["simulate".as_ref(), scenario.as_os_str(), "--no-progress".as_ref(), "--no-artifacts".as_ref()];
    let output = with_config(&args, &config);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let log = take_log(&url, &runtime);
    runtime.shutdown_background();
    assert_eq!(models_of(&log, "chat", Some("CustomerReply")), one("model-customer"), "{stderr}\n{log:#?}");
    assert_eq!(models_of(&log, "chat", Some("StepJudgement")), one("model-judge"), "{stderr}\n{log:#?}");
    assert_eq!(
        models_of(&log, "chat", Some("reply")),
        one("model-agent"),
        "the agent's tasks take the default: {log:#?}"
    );
}

/// An order service whose lookups answer with the HTTP status the order number names.
fn failing_orders() -> (String, tokio::runtime::Runtime) {
    use axum::routing::get;
    let doc = serde_json::json!({
        "openapi": "3.0.3",
        "info": {"title": "Orders", "version": "1"},
        "paths": {"/orders/{id}": {"get": {"operationId": "track_order",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}]}}}
    });
    let router =
        axum::Router::new().route("/openapi.json", get(move || std::future::ready(axum::Json(doc.clone())))).route(
            "/orders/{id}",
            get(|axum::extract::Path(id): axum::extract::Path<u16>| async move {
                (axum::http::StatusCode::from_u16(id).unwrap(), "the order backend is down")
            }),
        );
    crate::serve::serve_router(router)
}

#[test]
fn a_tool_service_that_fails_makes_chat_exit_3_and_the_reply_admit_it() {
    let (orders, _orders_runtime) = failing_orders();
    let (url, runtime) = fake_rejecting(&[]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shop.yaml");
    std::fs::write(
        &file,
        format!(
            "agent: {{name: Otto, language: en}}\nguidelines:\n  - id: track\n    condition: The customer asks where their order is\n    action: Look the order up and tell them where it is\n    tools: [orders:track_order]\nservices:\n  - {{name: orders, kind: openapi, spec: {orders}/openapi.json, url: {orders}}}\n"
        ),
    )
    .unwrap();
    for status in ["500", "503", "401"] {
        let output = guidepost()
            .args(["chat"])
            .arg(&file)
            .args(["-m", &format!("Where is my order {status}?")])
            .env("GUIDEPOST_MODEL", format!("openai-compatible:{url}/v1#gpt-4.1"))
            .env("GUIDEPOST_EMBEDDER", format!("openai-compatible:{url}/v1#fake-embed"))
            .timeout(Duration::from_secs(120))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(3), "HTTP {status}:\n{stdout}\n{stderr}");
        assert!(stderr.contains("degraded: tool_calls") && stderr.contains(&format!("HTTP {status}")), "{stderr}");
        // The fake model's reply ("I checked this for you: everything looks fine") is refused.
        assert!(!stdout.contains("everything looks fine"), "HTTP {status}: {stdout}");
    }
    runtime.shutdown_background();
}
