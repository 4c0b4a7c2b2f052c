//! Running calls: fixtures of the example agents, timeouts, panics, parallelism and
//! emissions of native tools.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use guidepost_core::tool::{ParameterType, ToolId};
use guidepost_tools::native::{NativeTool, parameter};
use guidepost_tools::{ToolCallRequest, ToolContext, ToolEmission, ToolErrorKind, ToolOutcome, ToolRegistry};
use serde_json::json;

use super::common::{args, ctx, example_agent};

/// Counts the calls of a tool in flight; each call waits until `n` are in flight at once.
#[derive(Clone)]
struct Overlap(Arc<tokio::sync::watch::Sender<(usize, usize)>>);

impl Overlap {
    fn new() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new((0, 0))))
    }

    /// Joins the calls in flight and waits for `n` of them at once; the most seen at once.
    /// Calls run one after the other never meet: the guard then ends the wait, so the test
    /// fails on the count instead of hanging.
    async fn meet(&self, n: usize) -> usize {
        self.0.send_modify(|(now, most)| {
            *now += 1;
            *most = (*most).max(*now);
        });
        let mut seen = self.0.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(10), seen.wait_for(|(_, most)| *most >= n)).await;
        let most = self.0.borrow().1;
        self.0.send_modify(|(now, _)| *now -= 1);
        most
    }
}

fn slow_registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    let overlap = Overlap::new();
    registry.register_native(NativeTool::new("meet", move |_args, _ctx| {
        let overlap = overlap.clone();
        async move { Ok::<_, String>(json!({"together": overlap.meet(3).await})) }
    }));
    registry.register_native(
        NativeTool::new("nap", |args, _ctx| async move {
            let ms = args["ms"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, String>(json!({"slept_ms": ms}))
        })
        .parameter(parameter("ms", ParameterType::Integer)),
    );
    registry.register_native(NativeTool::new("explode", |_args, _ctx| async move {
        if std::hint::black_box(true) {
            panic!("the flux capacitor broke");
        }
        Ok::<_, String>(json!(null))
    }));
    registry.register_native(NativeTool::new("refuse", |_args, _ctx| async move {
        Err::<serde_json::Value, _>("card declined")
    }));
    registry.register_native(NativeTool::new("chatty", |_args, ctx: ToolContext| async move {
        ctx.emit(ToolEmission::Status { status: "typing".into(), data: json!({"stage": "thinking"}) });
        ctx.emit(ToolEmission::Message("One moment...".into()));
        Ok::<_, String>(json!("done"))
    }));
    registry
}

#[tokio::test]
async fn weather_fixture_answers_beijing_and_fails_for_mars() {
    let registry = ToolRegistry::from_definition(&example_agent("weather")).unwrap();
    let id = ToolId::new("fixtures", "get_weather");
    assert!(registry.tool(&id).is_some());
    let ok = registry.call(&id, args(json!({"location": "Beijing"})), &ctx(), None).await;
    assert_eq!(ok.result().data["city"], json!("北京"));
    assert_eq!(ok.result().data["temperature"], json!(15));
    let mars = registry.call(&id, args(json!({"location": "火星"})), &ctx(), None).await;
    assert_eq!(mars.outcome.error_kind(), Some(&ToolErrorKind::Failed));
    let data = mars.result().data;
    assert!(data.as_str().unwrap().starts_with("Tool call error: 暂时没有该城市的天气数据"), "{data}");
    assert_eq!(mars.result().metadata["error_kind"], json!("failed"));
}

#[tokio::test]
async fn banking_fixture_fills_the_enum_default() {
    let registry = ToolRegistry::from_definition(&example_agent("banking")).unwrap();
    let id = ToolId::new("fixtures", "get_balance");
    let record = registry.call(&id, args(json!({})), &ctx(), None).await;
    assert_eq!(record.result().data["balance"], json!(15000));
    let savings = registry.call(&id, args(json!({"account": "Savings"})), &ctx(), None).await;
    assert_eq!(savings.result().data["balance"], json!(4200));
    let bad = registry.call(&id, args(json!({"account": "crypto"})), &ctx(), None).await;
    assert!(matches!(bad.outcome.error_kind(), Some(ToolErrorKind::InvalidArguments { .. })));
}

#[tokio::test]
async fn a_slow_tool_times_out() {
    let registry = slow_registry();
    // Cut off at the limit: the nap would have answered `slept_ms` after 5 s.
    let record = registry
        .call(&ToolId::new("native", "nap"), args(json!({"ms": 5000})), &ctx(), Some(Duration::from_millis(100)))
        .await;
    assert_eq!(record.outcome.error_kind(), Some(&ToolErrorKind::Timeout { after_ms: 100 }));
    assert!(record.result().data.as_str().unwrap().contains("did not finish within 100 ms"));
    let fast = registry.with_default_timeout(Duration::from_millis(500));
    let record = fast.call(&ToolId::new("native", "nap"), args(json!({"ms": 2000})), &ctx(), None).await;
    assert_eq!(record.outcome.error_kind(), Some(&ToolErrorKind::Timeout { after_ms: 500 }));
}

#[tokio::test]
async fn panics_and_errors_become_error_outcomes() {
    let registry = slow_registry();
    let panicked = registry.call(&ToolId::new("native", "explode"), args(json!({})), &ctx(), None).await;
    assert_eq!(panicked.outcome.error_kind(), Some(&ToolErrorKind::Panicked));
    assert!(panicked.result().data.as_str().unwrap().contains("the flux capacitor broke"));
    let refused = registry.call(&ToolId::new("native", "refuse"), args(json!({})), &ctx(), None).await;
    assert_eq!(refused.outcome, ToolOutcome::failed("card declined"));
    let unknown = registry.call(&ToolId::new("native", "nope"), args(json!({})), &ctx(), None).await;
    assert_eq!(unknown.outcome.error_kind(), Some(&ToolErrorKind::Unavailable));
    // The registry still works after a panic.
    let ok = registry.call(&ToolId::new("native", "nap"), args(json!({"ms": 1})), &ctx(), None).await;
    assert!(ok.outcome.is_ok());
}

#[tokio::test]
async fn calls_run_in_parallel() {
    let registry = slow_registry();
    // Each `meet` answers once all three are in flight together, which calls made one after
    // the other never are; a panicking neighbour changes nothing.
    let calls = (0..3)
        .map(|_| ToolCallRequest::new(ToolId::new("native", "meet"), args(json!({}))))
        .chain([ToolCallRequest::new(ToolId::new("native", "explode"), args(json!({})))])
        .collect();
    let records = registry.call_many(calls, &ctx(), None).await;
    assert_eq!(records.len(), 4);
    for record in &records[..3] {
        assert_eq!(record.result().data, json!({"together": 3}), "{records:?}");
    }
    assert_eq!(records[3].outcome.error_kind(), Some(&ToolErrorKind::Panicked));
}

#[tokio::test]
async fn emissions_are_collected_and_forwarded() {
    let registry = slow_registry();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let ctx = ctx()
        .with_listener(Arc::new(move |tool, emission| sink.lock().unwrap().push((tool.to_string(), emission.clone()))));
    let record = registry.call(&ToolId::new("native", "chatty"), args(json!({})), &ctx, None).await;
    assert_eq!(record.emissions.len(), 2);
    assert_eq!(record.emissions[1], ToolEmission::Message("One moment...".into()));
    assert_eq!(seen.lock().unwrap().len(), 2);
    assert_eq!(seen.lock().unwrap()[0].0, "native:chatty");
    assert_eq!(record.to_event_entry()["tool_id"], json!("native:chatty"));
}
