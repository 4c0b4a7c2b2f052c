//! A taxi agent built in Rust instead of YAML, with its booking tool as a native async
//! function.
//!
//! ```sh
//! cargo run -p guidepost-example-builder                      # build, check, print as YAML, call the tool
//! GUIDEPOST_MODEL=openai:gpt-4.1 cargo run -p guidepost-example-builder -- "I need a taxi to the airport"
//! ```
//!
//! With a message (and a model configured through `GUIDEPOST_MODEL`, or the local default
//! once `scripts/fetch-models.sh --with-qwen` ran), the agent answers it.

use std::sync::Arc;

use anyhow::{Context, Result};
use guidepost_core::builder::AgentBuilder;
use guidepost_core::definition::to_yaml;
use guidepost_core::tool::ParameterType;
use guidepost_llm::{ModelStackBuilder, TaskKind};
use guidepost_runtime::CustomerRef;
use guidepost_runtime::{AgentRuntime, EmittingLatch, MemorySession, RuntimeConfig, RuntimeModels, TurnInput};
use guidepost_tools::context::ToolContext;
use guidepost_tools::native::{NativeTool, parameter};
use guidepost_tools::registry::ToolRegistry;
use serde_json::json;

/// The booking system: here a function, in real life a call to the dispatch service.
async fn book_taxi(args: serde_json::Map<String, serde_json::Value>) -> Result<serde_json::Value, String> {
    let pickup = args.get("pickup").and_then(|v| v.as_str()).ok_or("no pickup address")?;
    let dropoff = args.get("dropoff").and_then(|v| v.as_str()).ok_or("no destination")?;
    Ok(json!({"booking_id": "TX-2048", "pickup": pickup, "dropoff": dropoff, "eta_minutes": 6}))
}

#[tokio::main]
async fn main() -> Result<()> {
    // 1. The definition, exactly as a YAML file would give it.
    let mut agent = AgentBuilder::new("Rita").id("taxi").description("A taxi dispatcher who books rides quickly.");
    agent
        .guideline("correction")
        .when("The customer corrects a detail they gave earlier")
        .then("Acknowledge it and use the new detail");
    agent
        .tool("book_taxi")
        .describe("Books a taxi ride")
        .param("pickup", ParameterType::String)
        .param("dropoff", ParameterType::String)
        .consequential()
        .native();
    let mut journey = agent.journey("book_taxi", "Book a taxi");
    journey.condition("The customer wants to book a taxi");
    journey
        .start()
        .chat("pickup", "Ask for the pickup address")
        .chat("dropoff", "Ask where they are going")
        .when("The customer gave the pickup address")
        .tool("book", "book_taxi")
        .when("The customer gave the destination")
        .chat("booked", "Tell the customer the booking number and when the driver arrives")
        .end();
    journey.done();
    let definition = agent.build().context("the agent definition has errors")?;
    println!("{}", to_yaml(&definition)?);

    // 2. The tool runtime, with the native function behind the declared tool.
    let mut registry = ToolRegistry::from_definition(&definition)?;
    registry.register_native(
        NativeTool::new("book_taxi", |args, _ctx| book_taxi(args))
            .parameter(parameter("pickup", ParameterType::String))
            .parameter(parameter("dropoff", ParameterType::String))
            .consequential(true),
    );
    let ctx = ToolContext::new("taxi", "example", "guest");
    let args = json!({"pickup": "12 Oak Avenue", "dropoff": "the airport"});
    let call = registry
        .call(
            &guidepost_core::ToolId::new("native", "book_taxi"),
            args.as_object().cloned().unwrap_or_default(),
            &ctx,
            None,
        )
        .await;
    println!("book_taxi -> {:?}", call.outcome);

    // 3. With a message, a turn: matching, the journey, the reply.
    let Some(message) = std::env::args().nth(1) else { return Ok(()) };
    let stack = ModelStackBuilder::from_env()?.build().context("configure a model with GUIDEPOST_MODEL")?;
    let models = RuntimeModels {
        matching: stack.model_for(&TaskKind::Matching),
        journey_selection: stack.model_for(&TaskKind::JourneySelection),
        tool_inference: stack.model_for(&TaskKind::ToolInference),
        generation: stack.model_for(&TaskKind::Generation),
        embedder: Some(stack.embedder()),
    };
    let runtime = AgentRuntime::new(Arc::new(definition), models, Arc::new(registry), RuntimeConfig::default());
    let session = MemorySession::new();
    session.customer_message(&message, "turn-1");
    let input = TurnInput {
        session_id: "example".into(),
        customer: CustomerRef { id: "guest".into(), tags: vec![] },
        events: session.events(),
        trace_id: "turn-1".into(),
        ..TurnInput::default()
    };
    let outcome =
        runtime.process(input, &session, tokio_util::sync::CancellationToken::new(), EmittingLatch::default()).await;
    for m in &outcome.messages {
        println!("Rita> {m}");
    }
    Ok(())
}
