//! The weather journey through whole turns: the tool state runs its tool, the journey
//! enters the step that shows the result and rests there (the reply tells the result), and
//! the question whether to go on comes in the next turn.

use std::sync::Arc;

use guidepost_llm::TaskKind;
use guidepost_llm::providers::scripted::ScriptedModel;
use guidepost_runtime::MemorySession;
use serde_json::json;

use crate::support::*;

/// The number of the step whose line in a journey prompt contains `needle`.
fn step(text: &str, needle: &str) -> String {
    let steps = text.split("## Steps").nth(1).unwrap_or("");
    steps
        .lines()
        .find_map(|l| {
            let (id, body) = l.strip_prefix('[')?.split_once(']')?;
            body.contains(needle).then(|| id.to_string())
        })
        .unwrap_or_else(|| panic!("no step `{needle}` in:\n{text}"))
}

/// A model that walks the weather journey: from the start or from the question whether to go
/// on, to the lookup; after the lookup, through the result to the question (the engine stops
/// the move at the result, which is said first).
fn weather_walker() -> ScriptedModel {
    walker_calling(|_| {
        Ok(
            json!({"tools": [{"tool": "get_weather", "rationale": "asked", "decision": "needs_to_run", "calls": [{"arguments": {"location": "上海"}}]}]}),
        )
    })
}

/// [`weather_walker`] whose lookups are decided by `tools`.
fn walker_calling(
    tools: impl Fn(&guidepost_llm::ChatRequest) -> Result<serde_json::Value, guidepost_llm::LlmError>
    + Send
    + Sync
    + 'static,
) -> ScriptedModel {
    let model = ScriptedModel::new()
        .when_task(TaskKind::JourneySelection)
        .reply_with(|r| {
            let text = prompt(r);
            let current = text.lines().find(|l| l.contains("[CURRENT]")).unwrap_or("");
            let steps = if current.contains("start")
                || current.contains("询问用户是否还想查询其他城市")
                || current.contains("询问用户想查询哪个城市")
            {
                vec![step(&text, "get_weather")]
            } else {
                vec![step(&text, "简洁友好地告诉用户天气情况"), step(&text, "询问用户是否还想查询其他城市")]
            };
            Ok(json!({"rationale": "scripted", "decision": "advance", "steps": steps, "backtrack_to": null}))
        })
        .when_task(TaskKind::ToolInference)
        .reply_with(tools);
    let oracle: Oracle = Arc::new(|c: &str, last: &str, _: &str| {
        (c.contains("想知道天气") || c.contains("提到了一个城市") || c.contains("问了某个城市的天气"))
            && (last.contains("天气") || last.contains("北京"))
    });
    with_matching(model, oracle)
}

/// The weather agent with every step composed freely (the example tells the result through
/// a strict template).
fn fluid_weather() -> guidepost_core::AgentDefinition {
    let mut definition = example("weather");
    for journey in &mut definition.journeys {
        for state in &mut journey.states {
            state.composition_mode = None;
        }
    }
    definition
}

#[tokio::test]
async fn the_reply_tells_the_result_and_the_question_after_it_waits_for_the_next_turn() {
    let model = Arc::new(with_reply(weather_walker(), |p| {
        if p.contains("简洁友好地告诉用户天气情况") {
            assert!(!p.contains("询问用户是否还想查询其他城市"), "the question waits for the next turn");
            assert!(p.contains("\"temperature\":20"), "the tool result is a fact");
            assert!(!p.contains("When : "), "journey steps are not rendered as conditionless guidelines");
            "上海今天多云，20°C，湿度60%。".into()
        } else {
            assert!(p.contains("询问用户是否还想查询其他城市"), "{p}");
            "还想查询其他城市的天气吗？".into()
        }
    }));
    let definition = fluid_weather();
    let registry = fixtures(&definition);
    let rt = runtime(definition, model, registry);
    let session = MemorySession::new();
    let outcome = turn(&rt, &session, &Default::default(), "上海天气怎么样？").await;
    assert_eq!(outcome.messages, ["上海今天多云，20°C，湿度60%。"]);
    let path = outcome.state.journey_paths["weather_lookup"].states().to_vec();
    assert_eq!(path, ["initial", "get_weather", "show_result"]);
    assert_eq!(outcome.trace.iterations[0].tool_calls[0].arguments["location"], "上海");

    let next = turn(&rt, &session, &outcome.state, "好的").await;
    assert_eq!(next.messages, ["还想查询其他城市的天气吗？"]);
    assert_eq!(next.state.journey_paths["weather_lookup"].current(), "ask_continue");

    // Another city, asked for at once, goes through the question to a new lookup, whose result
    // the reply tells.
    let again = turn(&rt, &session, &outcome.state, "上海明天天气还好吗？").await;
    assert_eq!(again.messages, ["上海今天多云，20°C，湿度60%。"], "{:?}", again.trace.error);
    assert_eq!(again.state.journey_paths["weather_lookup"].current(), "show_result");
}

#[tokio::test]
async fn a_strict_step_sends_its_template_filled_from_the_tool() {
    // The example's result step is `canned_strict` with one template: the step decides the
    // mode, and its only template, filled from the tool's result, goes out without a
    // composition call.
    let model = Arc::new(with_reply(weather_walker(), |p| panic!("no composition call expected:\n{p}")));
    let rt = example_runtime("weather", model);
    let session = MemorySession::new();
    let outcome = turn(&rt, &session, &Default::default(), "上海天气怎么样？").await;
    assert_eq!(outcome.messages, ["上海现在多云，气温 20°C，湿度 60%。还想查查其他城市吗？"]);
    assert_eq!(outcome.trace.composition.template_id.as_deref(), Some("weather_report"));
    assert_eq!(outcome.state.journey_paths["weather_lookup"].current(), "show_result");
    // The next lookup goes through the question whether to go on and reports the new result
    // the same way.
    let again = turn(&rt, &session, &outcome.state, "上海明天天气还好吗？").await;
    assert_eq!(again.messages, ["上海现在多云，气温 20°C，湿度 60%。还想查查其他城市吗？"]);
}

#[tokio::test]
async fn the_reply_knows_when_a_journey_just_ended() {
    let model = ScriptedModel::new().when_task(TaskKind::JourneySelection).reply_json(
        json!({"rationale": "the customer is done", "decision": "exit", "steps": [], "backtrack_to": null}),
    );
    let oracle: Oracle = Arc::new(|_: &str, _: &str, _: &str| false);
    let model = Arc::new(with_reply(with_matching(model, oracle), |p| {
        assert!(p.contains("## Flows that ended with the customer's last message\n- 查询天气"), "{p}");
        "好的，有需要随时找我！".into()
    }));
    let rt = example_runtime("weather", model);
    let mut previous = guidepost_core::AgentState::default();
    previous.journey_paths.insert(
        "weather_lookup".into(),
        guidepost_core::JourneyPath::from_states(vec![
            "initial".into(),
            "get_weather".into(),
            "show_result".into(),
            "ask_continue".into(),
        ])
        .unwrap(),
    );
    let outcome = turn(&rt, &MemorySession::new(), &previous, "不用了，谢谢").await;
    assert_eq!(outcome.messages, ["好的，有需要随时找我！"]);
    assert!(outcome.state.journey_paths.is_empty());
}

#[tokio::test]
async fn each_task_goes_to_its_own_model() {
    // Checks on a capable model; journey steps on a small one (one question per transition);
    // tool calls and the reply on two more. Paris is not supported: the tool fails and the
    // journey moves to the step that suggests other cities.
    let oracle: Oracle = Arc::new(|c: &str, last: &str, _: &str| {
        (c.contains("想知道天气") || c.contains("提到了一个城市")) && last.contains("Paris")
    });
    let matching = Arc::new(with_matching(ScriptedModel::new(), oracle));
    let journeys = Arc::new(
        ScriptedModel::new()
            .with_capabilities(guidepost_llm::ModelCapabilities::SMALL)
            .when_task(TaskKind::JourneySelection)
            .reply_with(|req| {
                let text = prompt(req);
                let failed = text.contains("暂时没有该城市的天气数据");
                let holds = |statement: &str| match statement {
                    "用户说了要查哪个城市" => true,
                    "天气工具查询失败（不支持该城市）" => failed,
                    _ => false,
                };
                // A comparison of a step's exits names the one that holds, else "none" (last).
                if let Some(listed) = guidepost_engine::batches::single::choices_of(&text) {
                    let pick = listed.iter().position(|s| holds(s)).unwrap_or(listed.len() - 1);
                    return Ok(json!((pick + 1).to_string()));
                }
                let statement = guidepost_engine::batches::single::statement_of(&text).unwrap_or("");
                Ok(json!(if holds(statement) { "yes" } else { "no" }))
            }),
    );
    let tools = Arc::new(ScriptedModel::new().when_task(TaskKind::ToolInference).reply_json(json!({"tools": [
        {"tool": "get_weather", "rationale": "asked", "decision": "needs_to_run", "calls": [{"arguments": {"location": "Paris"}}]}
    ]})));
    let generation = Arc::new(with_reply(ScriptedModel::new(), |_| {
        "抱歉，暂时没有巴黎的天气数据。可以查询：北京、上海、广州、成都、深圳、杭州。".into()
    }));
    let definition = example("weather");
    let registry = fixtures(&definition);
    let models = guidepost_runtime::RuntimeModels {
        matching: matching.clone(),
        journey_selection: journeys.clone(),
        tool_inference: tools.clone(),
        generation: generation.clone(),
        embedder: None,
    };
    let rt = guidepost_runtime::AgentRuntime::new(
        Arc::new(definition),
        models,
        Arc::new(registry),
        guidepost_runtime::RuntimeConfig::default(),
    );
    let outcome = turn(&rt, &MemorySession::new(), &Default::default(), "What's the weather in Paris?").await;
    assert_eq!(outcome.messages, ["抱歉，暂时没有巴黎的天气数据。可以查询：北京、上海、广州、成都、深圳、杭州。"]);
    let path = outcome.state.journey_paths.get("weather_lookup").map(|p| p.states().to_vec());
    assert_eq!(path, Some(vec!["initial".into(), "get_weather".into(), "suggest_cities".into()]));
    for (name, model, task) in [
        ("matching", &matching, TaskKind::Matching),
        ("journey", &journeys, TaskKind::JourneySelection),
        ("tools", &tools, TaskKind::ToolInference),
        ("generation", &generation, TaskKind::Generation),
    ] {
        let tasks: Vec<TaskKind> = model.requests().iter().map(|r| r.task.clone()).collect();
        assert!(!tasks.is_empty(), "{name} was not asked");
        assert!(tasks.iter().all(|t| *t == task), "{name} got {tasks:?}");
    }
}

#[tokio::test]
async fn a_reply_that_asks_nothing_where_the_journey_waits_on_a_question_is_written_again() {
    // The result was told; the journey goes on to the question whether to go on, and the
    // first reply only acknowledges. Told that the step's question is due, the second asks it.
    let model = Arc::new(with_reply(weather_walker(), |p| {
        if p.contains("it asks the customer nothing, but nothing can be done before they give: the answer to \"询问用户是否还想查询其他城市\"") {
            "好的！还想查其他城市吗？".into()
        } else {
            "好的！".into()
        }
    }));
    let definition = fluid_weather();
    let registry = fixtures(&definition);
    let rt = runtime(definition, model, registry);
    let mut previous = guidepost_core::AgentState::default();
    previous.journey_paths.insert(
        "weather_lookup".into(),
        guidepost_core::JourneyPath::from_states(vec!["initial".into(), "get_weather".into(), "show_result".into()])
            .unwrap(),
    );
    let outcome = turn(&rt, &MemorySession::new(), &previous, "好的，谢谢").await;
    assert_eq!(outcome.state.journey_paths["weather_lookup"].current(), "ask_continue");
    assert_eq!(outcome.messages, ["好的！还想查其他城市吗？"]);
    let found: Vec<_> = outcome.trace.composition.reply_checks.iter().flatten().map(|p| p.check).collect();
    assert_eq!(found, [guidepost_core::reply_check::ReplyCheck::Unasked]);
}

#[tokio::test]
async fn a_lookup_that_cannot_run_without_the_city_gives_way_to_the_question_for_it() {
    // The start's checks take a greeting that names no city as naming one; the lookup finds no
    // city to look up. The journey rests at the question for the city (the reply asks it, as
    // that step says), and the city that comes next is its answer: looked up and reported.
    let asked = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = asked.clone();
    let walker = walker_calling(move |_| {
        let location = if seen.swap(true, std::sync::atomic::Ordering::SeqCst) { json!("北京") } else { json!(null) };
        Ok(
            json!({"tools": [{"tool": "get_weather", "rationale": "asked", "decision": "needs_to_run", "calls": [{"arguments": {"location": location}}]}]}),
        )
    });
    let model = Arc::new(with_reply(walker, |p| {
        assert!(p.contains("友好地询问用户想查询哪个城市的天气"), "the question's step is followed:\n{p}");
        "你好！想查哪个城市的天气呢？".into()
    }));
    let rt = example_runtime("weather", model);
    let session = MemorySession::new();
    let first = turn(&rt, &session, &Default::default(), "你好！能帮我查一下天气吗？").await;
    assert_eq!(first.messages, ["你好！想查哪个城市的天气呢？"]);
    assert_eq!(first.state.journey_paths["weather_lookup"].states(), ["initial", "ask_city"]);
    assert!(
        first.trace.matched.iter().any(|m| m.starts_with("journey_node:weather_lookup.ask_city")),
        "{:?}",
        first.trace.matched
    );
    assert!(!first.trace.matched.iter().any(|m| m.contains(".get_weather")), "{:?}", first.trace.matched);
    let mut corrected = first.trace.iterations.iter().filter_map(|it| it.matching.as_ref()).flat_map(|m| &m.journeys);
    let record =
        corrected.find(|r| r.correction.as_deref().is_some_and(|c| c.contains("rested at `ask_city`"))).unwrap();
    assert_eq!(record.decision, guidepost_engine::record::JourneyDecision::Started { steps: vec!["ask_city".into()] });

    let next = turn(&rt, &session, &first.state, "北京").await;
    assert_eq!(next.messages, ["北京现在晴朗，气温 15°C，湿度 45%。还想查查其他城市吗？"]);
    assert_eq!(
        next.state.journey_paths["weather_lookup"].states(),
        ["initial", "ask_city", "get_weather", "show_result"]
    );
}

#[tokio::test]
async fn the_result_is_told_with_the_closing_question_and_no_more_ends_the_journey() {
    // The store agent's order status: the lookup's one way on tells the result, whose one way
    // on is the closing question ("anything else?"), whose one way on is the end. The result
    // and the question go out in one reply, so "No, that's all" answers the question.
    let model = ScriptedModel::new()
        .when_task(TaskKind::JourneySelection)
        .reply_with(|r| {
            let text = prompt(r);
            Ok(json!({"rationale": "scripted", "decision": "advance", "steps": [step(&text, "check_order_status")], "backtrack_to": null}))
        })
        .when_task(TaskKind::ToolInference)
        .reply_with(|_| {
            Ok(json!({"tools": [{"tool": "check_order_status", "rationale": "given", "decision": "needs_to_run", "calls": [{"arguments": {"order_number": "48213"}}]}]}))
        });
    let oracle: Oracle = Arc::new(|_: &str, _: &str, _: &str| false);
    let model = Arc::new(with_reply(with_matching(model, oracle), |p| {
        if p.contains("Tell the customer the result of the order status lookup") {
            assert!(p.contains("Ask the customer if there is anything else you can help with"), "{p}");
            assert!(p.contains("shipped"), "the tool result is a fact: {p}");
            "Order 48213 has shipped. Is there anything else I can help you with?".into()
        } else {
            assert!(p.contains("## Flows that ended with the customer's last message\n- Order Status"), "{p}");
            "You're welcome, have a nice day!".into()
        }
    }));
    let rt = example_runtime("otto", model);
    let session = MemorySession::new();
    let mut previous = guidepost_core::AgentState::default();
    previous.journey_paths.insert(
        "order_status".into(),
        guidepost_core::JourneyPath::from_states(vec!["initial".into(), "ask".into()]).unwrap(),
    );
    let told = turn(&rt, &session, &previous, "My order number is 48213.").await;
    assert_eq!(told.messages, ["Order 48213 has shipped. Is there anything else I can help you with?"]);
    assert_eq!(told.state.journey_paths["order_status"].states(), ["initial", "ask", "lookup", "report", "wrap"]);
    let done = turn(&rt, &session, &told.state, "No, that's all I needed, thanks.").await;
    assert_eq!(done.messages, ["You're welcome, have a nice day!"]);
    assert!(done.state.journey_paths.is_empty(), "{:?}", done.state.journey_paths);
}

/// A conversation state with the taxi's booking journey walked through `steps`.
fn taxi_at(steps: &[&str]) -> guidepost_core::AgentState {
    let states = std::iter::once("initial").chain(steps.iter().copied()).map(str::to_string).collect();
    let mut state = guidepost_core::AgentState::default();
    state.journey_paths.insert("book_taxi".into(), guidepost_core::JourneyPath::from_states(states).unwrap());
    state
}

/// A runtime for the example agent `name` on `model`, its tools answered by their fixtures.
fn example_runtime(name: &str, model: Arc<dyn guidepost_llm::ChatModel>) -> Arc<guidepost_runtime::AgentRuntime> {
    let definition = example(name);
    let registry = fixtures(&definition);
    runtime(definition, model, registry)
}

#[tokio::test]
async fn the_next_reply_is_read_ahead_as_the_answer_to_the_question_lays_it_out() {
    // The taxi journey asks for the time; its one way on is the read-back. After the turn the
    // reply's prompt is read ahead with the journey there, so the next reply's prompt, once
    // the time is given, begins with everything read ahead: the same system message, the
    // same conversation up to the customer's new message.
    let model = ScriptedModel::new()
        .when_task(TaskKind::JourneySelection)
        .reply_with(|r| {
            let text = prompt(r);
            let to = if last_customer(&text).contains("7 pm") { "Repeat the pickup address" } else { "Ask when" };
            Ok(json!({"rationale": "scripted", "decision": "advance", "steps": [step(&text, to)], "backtrack_to": null}))
        })
        .when_task(TaskKind::ToolInference)
        .reply_with(|_| Ok(json!({"tools": []})));
    let oracle: Oracle = Arc::new(|_: &str, _: &str, _: &str| false);
    let model = Arc::new(with_reply(with_matching(model, oracle), |p| {
        if p.contains("Repeat the pickup address") {
            "To the central station at 7 pm: shall I book it?".into()
        } else {
            "When should the taxi come?".into()
        }
    }));
    let rt = example_runtime("taxi", model.clone());
    let session = MemorySession::new();
    let previous = taxi_at(&["pickup", "dropoff"]);
    let first = turn(&rt, &session, &previous, "To the central station.").await;
    assert_eq!(first.messages, ["When should the taxi come?"]);
    assert_eq!(first.state.journey_paths["book_taxi"].current(), "time");
    read_ahead_after(&rt, &session, &first.state).await;
    let read =
        model.read_ahead_requests().into_iter().rfind(|r| r.task == TaskKind::Generation).expect("the reply read");

    let second = turn(&rt, &session, &first.state, "At 7 pm.").await;
    assert_eq!(second.messages, ["To the central station at 7 pm: shall I book it?"]);
    let asked = model.requests_for(&TaskKind::Generation).pop().unwrap();
    assert!(read.system_text().contains("## Instructions\n1. When the flow \"Book a taxi\" is at this step: Repeat"));
    let last = asked_as_read_ahead(&read, &asked);
    assert!(last.starts_with("At 7 pm."), "{last}");
}

/// The last message of `asked`, once checked that the request `read` ahead is `asked` but for
/// it: the same system message, the same conversation up to the customer's new message (the
/// read-ahead's last message says the customer has not written since).
fn asked_as_read_ahead(read: &guidepost_llm::ChatRequest, asked: &guidepost_llm::ChatRequest) -> String {
    assert_eq!(read.system_text(), asked.system_text());
    let (ahead, now) = (&read.messages, &asked.messages);
    assert_eq!(ahead.len(), now.len(), "{ahead:#?}\n{now:#?}");
    assert_eq!(ahead[..ahead.len() - 1], now[..now.len() - 1]);
    now.last().map(|m| m.content.clone()).unwrap_or_default()
}

#[tokio::test]
async fn the_reply_after_a_booking_is_read_ahead_but_for_what_the_booking_returned() {
    // At the read-back the journey's first way on is the booking, then the step that tells
    // it. The reply's prompt is read ahead with the journey there; once the customer confirms
    // and the booking runs, the reply's prompt begins with everything read ahead, and what
    // the booking returned comes in the note on the new message.
    let model = ScriptedModel::new()
        .when_task(TaskKind::JourneySelection)
        .reply_with(|r| {
            let text = prompt(r);
            let last = last_customer(&text);
            let to = if last.contains("right") {
                "book_taxi"
            } else if last.contains("7 pm") {
                "Repeat the pickup address"
            } else {
                "Ask when"
            };
            Ok(json!({"rationale": "scripted", "decision": "advance", "steps": [step(&text, to)], "backtrack_to": null}))
        })
        .when_task(TaskKind::ToolInference)
        .reply_with(|_| {
            Ok(json!({"tools": [{"tool": "book_taxi", "rationale": "confirmed", "decision": "needs_to_run", "calls": [{"arguments": {"pickup": "221 Baker Street", "dropoff": "the central station", "time": "7 pm"}}]}]}))
        });
    let oracle: Oracle = Arc::new(|_: &str, _: &str, _: &str| false);
    let model = Arc::new(with_reply(with_matching(model, oracle), |p| {
        if p.contains("TX-1042") {
            "Booked: TX-1042, the driver comes in 7 minutes.".into()
        } else if p.contains("Repeat the pickup address") {
            "From 221 Baker Street to the central station at 7 pm: shall I book it?".into()
        } else {
            "When should the taxi come?".into()
        }
    }));
    let rt = example_runtime("taxi", model.clone());
    let session = MemorySession::new();
    let previous = taxi_at(&["pickup", "dropoff"]);
    let asked_time = turn(&rt, &session, &previous, "From 221 Baker Street to the central station.").await;
    assert_eq!(asked_time.state.journey_paths["book_taxi"].current(), "time", "{:?}", asked_time.messages);
    let first = turn(&rt, &session, &asked_time.state, "At 7 pm.").await;
    assert_eq!(first.state.journey_paths["book_taxi"].current(), "confirm", "{:?}", first.messages);
    read_ahead_after(&rt, &session, &first.state).await;
    let read =
        model.read_ahead_requests().into_iter().rfind(|r| r.task == TaskKind::Generation).expect("the reply read");

    let second = turn(&rt, &session, &first.state, "Yes, that's right.").await;
    assert_eq!(second.messages, ["Booked: TX-1042, the driver comes in 7 minutes."]);
    let asked = model.requests_for(&TaskKind::Generation).pop().unwrap();
    assert!(
        read.system_text().contains("is at this step: Tell the customer the ride is booked"),
        "{}",
        read.system_text()
    );
    let last = asked_as_read_ahead(&read, &asked);
    assert!(last.starts_with("Yes, that's right."), "{last}");
    assert!(last.contains("book_taxi(") && last.contains("TX-1042"), "{last}");
}

#[tokio::test]
async fn an_agent_that_books_only_after_a_question_reads_no_tool_decision_ahead_at_the_opening() {
    // The taxi's one tool books (consequential) and only the read-back question leads to it:
    // the first turn cannot call it, so the opening's read-ahead leaves its prompt out.
    let model = Arc::new(
        with_reply(with_matching(ScriptedModel::new(), Arc::new(|_: &str, _: &str, _: &str| false)), |_| {
            "Where should I pick you up?".into()
        })
        .with_capabilities(guidepost_llm::ModelCapabilities::SMALL),
    );
    let taxi = example_runtime("taxi", model.clone());
    taxi.read_ahead().await;
    let tasks: Vec<TaskKind> = model.read_ahead_requests().into_iter().map(|r| r.task).collect();
    assert!(tasks.contains(&TaskKind::Matching) && tasks.contains(&TaskKind::Generation), "{tasks:?}");
    assert!(!tasks.contains(&TaskKind::ToolInference), "{tasks:?}");
    // The weather agent looks the weather up in the turn that asks for it.
    let model = Arc::new(
        with_reply(with_matching(ScriptedModel::new(), Arc::new(|_: &str, _: &str, _: &str| false)), |_| {
            "Which city?".into()
        })
        .with_capabilities(guidepost_llm::ModelCapabilities::SMALL),
    );
    example_runtime("weather", model.clone()).read_ahead().await;
    let tasks: Vec<TaskKind> = model.read_ahead_requests().into_iter().map(|r| r.task).collect();
    assert!(tasks.contains(&TaskKind::ToolInference), "{tasks:?}");
}

#[tokio::test]
async fn a_journey_stays_where_it_was_when_the_reply_falls_back() {
    // The journey moves on to the read-back, but every reply written states a booking number
    // nobody gave, so the fallback reply goes out: the read-back was never asked, and the
    // journey stays at the time question (a booking must not follow a question never seen).
    let model = ScriptedModel::new()
        .when_task(TaskKind::JourneySelection)
        .reply_with(|r| {
            let text = prompt(r);
            Ok(json!({"rationale": "scripted", "decision": "advance", "steps": [step(&text, "Repeat the pickup address")], "backtrack_to": null}))
        })
        .when_task(TaskKind::ToolInference)
        .reply_with(|_| Ok(json!({"tools": []})));
    let oracle: Oracle = Arc::new(|_: &str, _: &str, _: &str| false);
    let model = Arc::new(with_reply(with_matching(model, oracle), |_| "Your booking TX-4471 is confirmed.".into()));
    let rt = example_runtime("taxi", model);
    let previous = taxi_at(&["pickup", "dropoff", "time"]);
    let at_time = previous.journey_paths["book_taxi"].clone();
    let outcome = turn(&rt, &MemorySession::new(), &previous, "At 7 pm.").await;
    assert!(outcome.trace.composition.fallback, "{:?}", outcome.messages);
    assert_eq!(outcome.state.journey_paths["book_taxi"], at_time);
}
