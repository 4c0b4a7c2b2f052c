//! Tool calling inside a turn: missing parameters, and tools that fail, hang or panic.

use std::sync::Arc;
use std::time::Duration;

use guidepost_llm::providers::scripted::ScriptedModel;
use guidepost_llm::{OutputFormat, TaskKind};
use guidepost_runtime::events::{message_text, status_of};
use guidepost_runtime::{AgentRuntime, MemorySession, RuntimeConfig, RuntimeModels, ToolDecision, TurnStatus};
use guidepost_testkit::models::{Held, Hold};
use guidepost_tools::native::NativeTool;
use serde_json::json;

use crate::support::*;

const WEATHER: &str = r#"
agent: {name: Sky}
guidelines:
  - id: weather
    condition: The customer asks about the weather
    action: Look up the weather for their city and tell them
    tools: [get_weather]
tools:
  - name: get_weather
    description: Current weather for a city
    parameters:
      city: {type: string, description: The city name, display_name: city}
    fixture:
      cases:
        - {args: {city: Paris}, result: {temperature: 12}}
"#;

fn weather_oracle() -> Oracle {
    Arc::new(|c: &str, last: &str, _: &str| c.contains("weather") && last.to_lowercase().contains("weather"))
}

/// A model that looks the weather up for Paris, and otherwise finds the city missing; its
/// reply asks for the city when the prompt says it is missing, and tells Paris' weather
/// otherwise.
fn asks_for_the_city() -> Arc<ScriptedModel> {
    let model = ScriptedModel::new().when_task(TaskKind::ToolInference).reply_with(|r| {
        let city = if last_customer(&prompt(r)).contains("Paris") { json!("Paris") } else { json!(null) };
        Ok(json!({"tools": [{"tool": "get_weather", "rationale": "the customer wants the weather", "decision": "needs_to_run", "calls": [{"arguments": {"city": city}}]}]}))
    });
    Arc::new(with_reply(with_matching(model, weather_oracle()), |p| {
        if p.contains("## Before acting, ask the customer for\n- city") {
            "Which city should I check?".into()
        } else {
            "It is 12 degrees in Paris.".into()
        }
    }))
}

#[tokio::test]
async fn a_missing_required_parameter_makes_the_agent_ask_for_it() {
    let definition = inline(WEATHER);
    let model = asks_for_the_city();
    let registry = fixtures(&definition);
    let rt = runtime(definition, model.clone(), registry);
    let session = MemorySession::new();
    let outcome = turn(&rt, &session, &Default::default(), "What's the weather like?").await;
    assert_eq!(outcome.messages, ["Which city should I check?"]);
    assert_eq!(outcome.trace.tool_insights.missing.len(), 1);
    assert_eq!(outcome.trace.tool_insights.missing[0].parameter, "city");
    assert_eq!(
        outcome.trace.tool_insights.decisions,
        vec![(guidepost_core::ToolId::new("fixtures", "get_weather"), ToolDecision::CannotRun)]
    );
    assert!(session.events().iter().all(|e| e.kind != guidepost_core::EventKind::Tool), "nothing ran");

    // Given the city, the tool runs and the answer uses its result.
    let outcome = turn(&rt, &session, &outcome.state, "What's the weather in Paris?").await;
    assert_eq!(outcome.messages, ["It is 12 degrees in Paris."]);
    assert_eq!(outcome.trace.iterations[0].tool_calls[0].arguments["city"], "Paris");
}

#[tokio::test]
async fn a_reply_that_asks_nothing_for_a_missing_detail_is_written_again() {
    let definition = inline(WEATHER);
    let model = ScriptedModel::new().when_task(TaskKind::ToolInference).reply_json(json!({"tools": [
        {"tool": "get_weather", "rationale": "the customer wants the weather", "decision": "needs_to_run", "calls": [{"arguments": {"city": null}}]}
    ]}));
    // The first reply greets and asks nothing; told why, the second asks for the city.
    let model = Arc::new(with_reply(with_matching(model, weather_oracle()), |p| {
        if p.contains("it asks the customer nothing, but nothing can be done before they give: city") {
            "Which city should I check?".into()
        } else {
            "Hello! I can tell you the weather anywhere.".into()
        }
    }));
    let registry = fixtures(&definition);
    let rt = runtime(definition, model.clone(), registry);
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "Hi, what's the weather like?").await;
    assert_eq!(outcome.messages, ["Which city should I check?"]);
    let found: Vec<_> = outcome.trace.composition.reply_checks.iter().flatten().map(|p| p.check).collect();
    assert_eq!(found, [guidepost_core::reply_check::ReplyCheck::Unasked]);
    assert!(!outcome.trace.composition.fallback);
}

#[tokio::test]
async fn failing_slow_and_panicking_tools_never_fail_the_turn() {
    let yaml = r#"
agent: {name: Fragile}
guidelines:
  - id: all
    condition: The customer asks for a status check
    action: Report what each check said
    tools: [fails, hangs, panics]
tools:
  - {name: fails, service: native}
  - {name: hangs, service: native}
  - {name: panics, service: native}
"#;
    let definition = inline(yaml);
    let mut registry = fixtures(&definition).with_default_timeout(Duration::from_millis(200));
    registry
        .register_native(NativeTool::new("fails", |_, _| async { Err::<serde_json::Value, _>("the backend is down") }));
    registry.register_native(NativeTool::new("hangs", |_, _| async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok::<_, String>(json!("late"))
    }));
    #[allow(unreachable_code)]
    registry.register_native(NativeTool::new("panics", |_, _| async {
        panic!("bug in the tool");
        Ok::<_, String>(json!(null))
    }));
    let oracle: Oracle = Arc::new(|c: &str, last: &str, _: &str| c.contains("status check") && last.contains("status"));
    let model = Arc::new(with_reply(with_matching(ScriptedModel::new(), oracle), |p| {
        assert!(p.contains("): failed: \""), "the failures are facts the reply can use");
        assert!(!p.contains("Tool call error"), "shown without the wire prefix");
        "Sorry, none of the checks worked right now.".into()
    }));
    let rt = runtime(definition, model, registry);
    let session = MemorySession::new();
    let outcome = turn(&rt, &session, &Default::default(), "Can you run a status check?").await;
    // The reply goes out, marked degraded: two calls were lost (the hanging one cut off at
    // its 200 ms limit rather than answering "late" after 30 s, and the panic); the tool
    // that answered with a failure of its own gave the reply a fact, not a loss.
    assert_eq!(outcome.status, TurnStatus::Degraded);
    assert_eq!(outcome.trace.degraded.len(), 1, "{:?}", outcome.trace.degraded);
    let lost = &outcome.trace.degraded[0];
    assert_eq!((lost.stage, lost.failed, lost.attempted), (guidepost_runtime::Stage::ToolCalls, 2, 3));
    assert!(lost.error.contains("native:hangs"), "{}", lost.error);
    assert_eq!(outcome.messages, ["Sorry, none of the checks worked right now."]);
    let calls = &outcome.trace.iterations[0].tool_calls;
    assert_eq!(calls.len(), 3);
    assert!(calls.iter().all(|c| !c.ok));
    let kinds: Vec<&str> = calls.iter().map(|c| c.result["metadata"]["error_kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["failed", "timeout", "panicked"]);
    let tool_event = session.events().into_iter().find(|e| e.kind == guidepost_core::EventKind::Tool).unwrap();
    assert_eq!(tool_event.data["tool_calls"].as_array().unwrap().len(), 3);
    assert_eq!(tool_event.data["tool_calls"][0]["tool_id"], "native:fails");
    let events = session.events();
    assert!(events.iter().any(|e| status_of(e) == Some(("processing".into(), Some("Considering tools".into())))));
    assert_eq!(events.iter().filter(|e| message_text(e).is_some()).count(), 2);
}

#[tokio::test]
async fn a_customer_only_value_the_customer_did_not_write_is_asked_for_again() {
    // The model translates the city, and asked again with the reason, would translate it
    // again: the second time the city can only be a passage of the customer's messages (as
    // constrained decoding enforces), so the call runs with the customer's own word.
    let yaml = WEATHER.replace(
        "city: {type: string, description: The city name, display_name: city}",
        "city: {type: string, description: The city name, display_name: city, source: customer}",
    );
    let definition = inline(&yaml);
    let model = ScriptedModel::new().when_task(TaskKind::ToolInference).reply_with(|r| {
        let p = prompt(r);
        let OutputFormat::Json { schema, .. } = &r.output else { panic!("a structured answer") };
        let city = &schema["properties"]["tools"]["items"]["properties"]["calls"]["items"]["properties"]["arguments"]
            ["properties"]["city"];
        let city = if p.contains("which the customer did not write") {
            assert!(p.contains("city = \"巴黎\""), "{p}");
            let allowed = city["enum"].as_array().expect("the city is restricted to the customer's words");
            for passage in ["Paris", "the weather in Paris", "What's"] {
                assert!(allowed.contains(&json!(passage)), "{passage} in {allowed:?}");
            }
            assert!(!allowed.contains(&json!("巴黎")) && allowed.contains(&json!(null)), "{allowed:?}");
            "Paris"
        } else {
            assert_eq!(city["type"], json!(["string", "null"]), "free the first time");
            "巴黎"
        };
        Ok(json!({"tools": [{"tool": "get_weather", "rationale": "asked", "decision": "needs_to_run", "calls": [{"arguments": {"city": city}}]}]}))
    });
    let model = Arc::new(with_reply(with_matching(model, weather_oracle()), |_| "It is 12 degrees in Paris.".into()));
    let rt = runtime(definition.clone(), model.clone(), fixtures(&definition));
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "What's the weather in Paris?").await;
    assert_eq!(outcome.trace.iterations[0].tool_calls[0].arguments["city"], "Paris");
    assert_eq!(model.calls(&TaskKind::ToolInference), 2);
    assert_eq!(outcome.messages, ["It is 12 degrees in Paris."]);
}

#[tokio::test]
async fn a_customer_only_value_reworded_is_asked_for_again_among_the_passages_that_keep_its_words() {
    // The model writes the pickup time as "9 PM tonight" for the customer's "At nine
    // tonight"; asked again, the time can only be a passage of the customer's messages that
    // keeps a word of it ("nine" counts as "9"), and the booking runs with the customer's own
    // words. A value that
    // keeps none of them (a made-up one) is asked for again freely.
    let yaml = r#"
agent: {name: Rita}
guidelines:
  - id: book
    condition: The customer wants a taxi
    action: Book it
    tools: [book_taxi]
tools:
  - name: book_taxi
    consequential: true
    parameters:
      pickup: {type: string, description: Pickup address, source: customer}
      time: {type: string, description: Pickup time, source: customer}
    fixture:
      cases:
        - args: {}
          result: {booking_id: TX-1}
"#;
    let definition = inline(yaml);
    let model = ScriptedModel::new().when_task(TaskKind::ToolInference).reply_with(|r| {
        let p = prompt(r);
        let OutputFormat::Json { schema, .. } = &r.output else { panic!("a structured answer") };
        let arguments = &schema["properties"]["tools"]["items"]["properties"]["calls"]["items"]["properties"]["arguments"]
            ["properties"];
        let (pickup, time) = if p.contains("which the customer did not write") {
            assert!(p.contains("time = \"9 PM tonight\"") && p.contains("pickup = \"12 Oak Avenue\""), "{p}");
            let allowed = arguments["time"]["enum"].as_array().expect("the time is restricted to the customer's words");
            let offered = ["At nine", "At nine tonight", "nine", "nine tonight", "tonight"];
            assert_eq!(allowed, &offered.iter().map(|p| json!(p)).chain([json!(null)]).collect::<Vec<_>>());
            assert_eq!(arguments["pickup"]["type"], json!(["string", "null"]), "a made-up value is asked for freely");
            ("221 Baker Street", "At nine tonight")
        } else {
            ("12 Oak Avenue", "9 PM tonight")
        };
        Ok(json!({"tools": [{"tool": "book_taxi", "rationale": "asked", "decision": "needs_to_run", "calls": [{"arguments": {"pickup": pickup, "time": time}}]}]}))
    });
    let oracle: Oracle =
        Arc::new(|c: &str, last: &str, _: &str| c.contains("wants a taxi") && last.contains("tonight"));
    let model = Arc::new(with_reply(with_matching(model, oracle), |_| "Booked: TX-1.".into()));
    let rt = runtime(definition.clone(), model.clone(), fixtures(&definition));
    let session = MemorySession::new();
    turn(&rt, &session, &Default::default(), "I need a taxi from 221 Baker Street.").await;
    let outcome = turn(&rt, &session, &Default::default(), "At nine tonight.").await;
    let call = &outcome.trace.iterations[0].tool_calls[0];
    assert_eq!(
        (call.arguments["pickup"].as_str(), call.arguments["time"].as_str()),
        (Some("221 Baker Street"), Some("At nine tonight"))
    );
    assert_eq!(outcome.messages, ["Booked: TX-1."]);
}

#[tokio::test]
async fn secrets_in_tool_arguments_and_results_stay_out_of_events_traces_and_prompts() {
    // The model copies a key the customer pasted into a tool call; the tool echoes it and
    // adds a credential URL of its own. The tool gets the argument as written; the tool
    // event, the trace and the reply's prompt get neither secret.
    const KEY: &str = "sk-live-PLANTEDtoolarg0123456789";
    let yaml = r#"
agent: {name: Vault}
guidelines:
  - id: check
    condition: The customer asks to check their key
    action: Check the key with the tool and say what it returned
    tools: [check_key]
tools:
  - name: check_key
    service: native
    parameters:
      key: {type: string, description: The key to check}
"#;
    let definition = inline(yaml);
    let mut registry = fixtures(&definition);
    let received = Arc::new(std::sync::Mutex::new(Vec::<serde_json::Value>::new()));
    let seen = received.clone();
    registry.register_native(NativeTool::new("check_key", move |args, _| {
        seen.lock().unwrap().push(serde_json::Value::Object(args.clone()));
        async move {
            Ok::<_, String>(
                json!({"checked": args["key"].clone(), "via": "https://admin:hunter2secret@keys.example.com/v1"}),
            )
        }
    }));
    let oracle: Oracle = Arc::new(|c: &str, last: &str, _: &str| c.contains("check their key") && last.contains("key"));
    let model = ScriptedModel::new().when_task(TaskKind::ToolInference).reply_with(|_| {
        Ok(json!({"tools": [{"tool": "check_key", "rationale": "asked", "decision": "needs_to_run", "calls": [{"arguments": {"key": KEY}}]}]}))
    });
    let model = Arc::new(with_reply(with_matching(model, oracle), |p| {
        assert!(!p.contains("PLANTEDtoolarg") && !p.contains("hunter2secret"), "the prompt holds a secret:\n{p}");
        assert!(p.contains("[redacted]"), "the result shows, redacted:\n{p}");
        "Your key was checked.".into()
    }));
    let rt = runtime(definition, model.clone(), registry);
    let session = MemorySession::new();
    let outcome = turn(&rt, &session, &Default::default(), "Please check my key").await;
    assert_eq!(outcome.messages, ["Your key was checked."]);
    assert_eq!(received.lock().unwrap()[0]["key"], KEY, "the tool ran with the argument as written");
    assert_eq!(received.lock().unwrap().len(), 1, "the same call, scrubbed, is not run again");
    let call = &outcome.trace.iterations[0].tool_calls[0];
    assert_eq!(call.arguments["key"], "sk-[redacted]");
    let trace = serde_json::to_string(&outcome.trace).unwrap();
    let events = serde_json::to_string(&session.events().iter().map(|e| &e.data).collect::<Vec<_>>()).unwrap();
    for text in [&trace, &events] {
        assert!(!text.contains("PLANTEDtoolarg") && !text.contains("hunter2secret"), "a secret leaked: {text}");
    }
    assert!(events.contains("admin:[redacted]@keys.example.com"), "{events}");
}

#[tokio::test]
async fn a_turn_cancelled_at_any_stage_ends_cancelled_with_no_reply_and_its_state_unchanged() {
    // Matching, tool inference, the tool call itself, composition: the turn is cancelled while
    // each one waits.
    for stage in ["matching", "tool inference", "tool call", "composition"] {
        // At the tool-call stage the tool itself waits: a native one instead of the fixture.
        let native = WEATHER.replace(
            "    fixture:\n      cases:\n        - {args: {city: Paris}, result: {temperature: 12}}\n",
            "    service: native\n",
        );
        let definition = inline(if stage == "tool call" { &native } else { WEATHER });
        let scripted = ScriptedModel::new().when_task(TaskKind::ToolInference).reply_json(json!({"tools": [{"tool": "get_weather", "rationale": "asked", "decision": "needs_to_run", "calls": [{"arguments": {"city": "Paris"}}]}]}));
        let scripted = Arc::new(with_reply(with_matching(scripted, weather_oracle()), |_| "It is 12 degrees.".into()));
        let task = match stage {
            "matching" => TaskKind::Matching,
            "tool inference" => TaskKind::ToolInference,
            "composition" => TaskKind::Generation,
            // No model call waits: the tool does.
            _ => TaskKind::Judge,
        };
        let model = Arc::new(Held::new(scripted, move |req| if req.task == task { Hold::Forever } else { Hold::Pass }));
        let entered = model.entered.clone();
        let mut registry = fixtures(&definition);
        if stage == "tool call" {
            let called = entered.clone();
            registry.register_native(NativeTool::new("get_weather", move |_, _| {
                let called = called.clone();
                async move {
                    called.notify_one();
                    std::future::pending::<()>().await;
                    Ok::<_, String>(json!(null))
                }
            }));
        }
        let rt = runtime(definition, model, registry);
        let session = MemorySession::new();
        let previous = guidepost_core::AgentState { trace_id: "earlier".into(), ..Default::default() };
        let input = session.customer_turn(
            "s1",
            guidepost_runtime::CustomerRef { id: "guest".into(), tags: vec![] },
            "What's the weather in Paris?",
            &previous,
        );
        let cancel = tokio_util::sync::CancellationToken::new();
        let running = rt.process(input, &session, cancel.clone(), guidepost_runtime::EmittingLatch::default());
        let canceller = async {
            entered.notified().await;
            cancel.cancel();
        };
        // A hang guard only: a cancelled turn ends at once, and the wait is far longer than
        // any busy machine needs.
        let (outcome, ()) =
            tokio::time::timeout(Duration::from_secs(120), async { futures::join!(running, canceller) })
                .await
                .unwrap_or_else(|_| panic!("{stage}: the turn did not end when cancelled"));
        assert_eq!(outcome.status, TurnStatus::Cancelled, "{stage}");
        assert!(outcome.messages.is_empty(), "{stage}");
        assert_eq!(outcome.state, previous, "{stage}: the next turn starts from the same state");
        let events = session.events();
        assert!(events.iter().skip(1).all(|e| message_text(e).is_none()), "{stage}: no reply was sent");
        let statuses: Vec<String> = events.iter().filter_map(|e| status_of(e).map(|s| s.0)).collect();
        assert_eq!(statuses[statuses.len() - 2..], ["cancelled".to_string(), "ready".to_string()], "{stage}");
        let tool_events = events.iter().filter(|e| e.kind == guidepost_core::EventKind::Tool).count();
        // Results of tools that ran before the cancellation stay in the session.
        let ran = usize::from(stage == "composition");
        assert_eq!(tool_events, ran, "{stage}: tool results emitted");
    }
}

#[tokio::test]
async fn the_tool_decision_read_ahead_is_how_the_first_one_begins() {
    let definition = inline(WEATHER);
    let model = ScriptedModel::new().when_task(TaskKind::ToolInference).reply_json(json!({"tools": [{"tool": "get_weather", "rationale": "the weather in Paris", "decision": "needs_to_run", "calls": [{"arguments": {"city": "Paris"}}]}]}));
    let model = Arc::new(with_reply(with_matching(model, weather_oracle()), |_| "It is 12 degrees in Paris.".into()));
    let registry = fixtures(&definition);
    let rt = runtime(definition, model.clone(), registry);
    // The reply's prompt and the tool decision's: the capable model's checks begin with the turn.
    assert_eq!(rt.read_ahead().await, 2);
    let read: Vec<_> = model.read_ahead_requests().into_iter().filter(|r| r.task == TaskKind::ToolInference).collect();
    assert_eq!(read.len(), 1);
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "What's the weather in Paris?").await;
    assert_eq!(outcome.messages, ["It is 12 degrees in Paris."]);
    let asked = model.requests_for(&TaskKind::ToolInference).remove(0);
    // The same answer format, and the same rules, agent and tools up to the conversation.
    assert_eq!(read[0].output, asked.output);
    let (ahead, now) = (prompt(&read[0]), prompt(&asked));
    let head = now.find("## Conversation").expect("the conversation section");
    assert_eq!(ahead[..head], now[..head]);
    assert!(now[..head].contains("## Tools\n- get_weather: Current weather for a city"), "{now}");
}

#[tokio::test]
async fn a_small_model_reads_the_first_prompts_ahead_in_the_order_the_turn_asks_them() {
    // The customer's first message may come before every prompt is read: the checks' go
    // first (the turn's first call is one of them), then the tool decision's, the reply's
    // last.
    let definition = inline(WEATHER);
    let model = Arc::new(
        with_reply(with_matching(ScriptedModel::new(), weather_oracle()), |_| "It is 12 degrees in Paris.".into())
            .with_capabilities(guidepost_llm::ModelCapabilities::SMALL),
    );
    let registry = fixtures(&definition);
    let rt = runtime(definition, model.clone(), registry);
    assert!(rt.read_ahead().await >= 3);
    let tasks: Vec<TaskKind> = model.read_ahead_requests().into_iter().map(|r| r.task).collect();
    let first = |task: TaskKind| tasks.iter().position(|t| *t == task).unwrap_or_else(|| panic!("{task:?}: {tasks:?}"));
    assert_eq!(tasks[0], TaskKind::Matching, "{tasks:?}");
    assert!(first(TaskKind::ToolInference) < first(TaskKind::Generation), "{tasks:?}");
}

#[tokio::test]
async fn after_a_turn_the_next_tool_decision_begins_with_the_reply_read_ahead() {
    let definition = inline(WEATHER);
    let model = asks_for_the_city();
    let rt = runtime(definition.clone(), model.clone(), fixtures(&definition));
    let session = MemorySession::new();
    let first = turn(&rt, &session, &Default::default(), "What's the weather like?").await;
    assert_eq!(first.messages, ["Which city should I check?"]);
    let asked_before = model.requests().len();
    // The tool decision's prompt (the capable model's checks begin with the turn).
    assert_eq!(read_ahead_after(&rt, &session, &first.state).await, 1);
    assert_eq!(model.requests().len(), asked_before, "reading ahead asks nothing");
    let read = model.read_ahead_requests().pop().unwrap();
    assert_eq!(read.task, TaskKind::ToolInference);

    let second = turn(&rt, &session, &first.state, "What's the weather in Paris?").await;
    assert_eq!(second.messages, ["It is 12 degrees in Paris."]);
    let asked = model.requests_for(&TaskKind::ToolInference).pop().unwrap();
    assert_eq!(read.output, asked.output);
    let (ahead, now) = (prompt(&read), prompt(&asked));
    let new_message = now.find("customer: What's the weather in Paris?").expect("the new message");
    assert_eq!(ahead[..new_message], now[..new_message]);
    assert!(now[..new_message].ends_with("agent: Which city should I check?\n"), "{now}");
}

/// What a small model is asked for when it decides the weather lookup (consequential or
/// not): the schema of one tool's decision, and the prompt.
async fn small_model_asked_for(consequential: bool) -> (serde_json::Value, String) {
    let source = if consequential {
        WEATHER.replace(
            "    description: Current weather for a city",
            "    description: Current weather for a city\n    consequential: true",
        )
    } else {
        WEATHER.to_string()
    };
    let definition = inline(&source);
    let answer = json!({"tools": [{"tool": "get_weather", "decision": "needs_to_run", "calls": [{"arguments": {"city": "Paris"}}]}]});
    // The checks and the reply on a capable model; the tool decision on a small one.
    let capable: Arc<dyn guidepost_llm::ChatModel> =
        Arc::new(with_reply(with_matching(ScriptedModel::new(), weather_oracle()), |_| {
            "It is 12 degrees in Paris.".into()
        }));
    let small = Arc::new(
        ScriptedModel::new()
            .with_capabilities(guidepost_llm::ModelCapabilities::SMALL)
            .when_task(TaskKind::ToolInference)
            .reply_json(answer),
    );
    let models = RuntimeModels { tool_inference: small.clone(), ..RuntimeModels::single(capable, None) };
    let registry = fixtures(&definition);
    let rt = Arc::new(AgentRuntime::new(Arc::new(definition), models, Arc::new(registry), RuntimeConfig::default()));
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "What's the weather in Paris?").await;
    assert_eq!(outcome.messages, ["It is 12 degrees in Paris."], "consequential: {consequential}");
    let asked = small.requests_for(&TaskKind::ToolInference).remove(0);
    let OutputFormat::Json { schema, .. } = &asked.output else { panic!("a JSON answer is asked for") };
    (schema["properties"]["tools"]["items"].clone(), prompt(&asked))
}

#[tokio::test]
async fn a_small_model_writes_a_rationale_only_before_a_consequential_call() {
    // A lookup: its arguments say what it is for.
    let (item, text) = small_model_asked_for(false).await;
    assert!(item["properties"].get("rationale").is_none(), "{item}");
    assert_eq!(item["required"], json!(["tool", "decision", "calls"]));
    assert!(!text.contains("rationale"), "{text}");
    // A consequential tool: the rationale is the model's look at whether the customer asked.
    let (item, text) = small_model_asked_for(true).await;
    assert_eq!(item["required"], json!(["tool", "rationale", "decision", "calls"]));
    assert!(text.contains("Give a short rationale before each decision."), "{text}");
}
