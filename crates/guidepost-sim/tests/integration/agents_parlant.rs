//! The Parlant REST adapter against the fake Parlant 3.3.2 server of the testkit (its routes,
//! long polls and event sequence), and its cleanup when a run fails.

use std::sync::Arc;
use std::time::Duration;

use guidepost_sim::agents::AgentUnderTest;
use guidepost_sim::agents::parlant_events::JourneyStateIndex;
use guidepost_sim::agents::parlant_rest::{ParlantRestAgent, ParlantRestConfig};
use guidepost_sim::{AgentError, JourneyStateReached, StopReason, TurnItem, UnattributedJourneyNode, run_trajectory};
use guidepost_testkit::fake_parlant::{
    AgentAct, FakeParlant, FakeParlantOptions, FakeTurn, NodeIds, NodeVisit, ScriptedBackend,
};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::*;

fn options(node_ids: NodeIds) -> FakeParlantOptions {
    FakeParlantOptions { agent_id: "taxi".into(), agent_name: "Rita".into(), node_ids }
}

fn booking(edge: &str) -> FakeTurn {
    FakeTurn {
        delay: Duration::from_millis(1200),
        acts: vec![
            AgentAct::Preamble("Let me check".into()),
            AgentAct::ToolCalls(vec![json!({"tool_id": "fixtures:book_taxi", "arguments": {"pickup": "Oak St"},
                "result": {"data": {"booking_id": "TX-1"}, "metadata": {}, "control": {"lifespan": "session"},
                    "canned_responses": [], "canned_response_fields": {}}})]),
            AgentAct::Message("Booked for Oak St".into()),
        ],
        matched_guidelines: vec!["correction".into()],
        journeys: vec!["book_taxi".into()],
        journey_states: vec![NodeVisit {
            journey: "book_taxi".into(),
            state: "dropoff".into(),
            edge: Some(edge.into()),
        }],
        error: None,
    }
}

fn kinds(items: &[TurnItem]) -> Vec<String> {
    items
        .iter()
        .map(|i| match i {
            TurnItem::Preamble { text } => format!("preamble: {text}"),
            TurnItem::Message { text } => format!("message: {text}"),
            TurnItem::ToolCall(call) => format!("tool: {} -> {}", call.tool_id(), call.result),
        })
        .collect()
}

#[tokio::test]
async fn drives_a_session_over_the_parlant_routes_and_deletes_what_it_created() {
    let second = FakeTurn {
        delay: Duration::from_millis(10),
        acts: vec![AgentAct::Message("Booked for the station".into())],
        journeys: vec!["book_taxi".into()],
        ..FakeTurn::default()
    };
    let failing = FakeTurn { error: Some("engine exploded".into()), ..FakeTurn::default() };
    let server =
        FakeParlant::start(ScriptedBackend::new([booking("edge_002"), second, failing]), options(NodeIds::StateIds))
            .await
            .unwrap();
    let mut config = ParlantRestConfig::new(format!("{}/", server.url), "taxi");
    config.wait_for_data = 1;
    let mut index = JourneyStateIndex::default();
    index.add("book_taxi", "dropoff");
    config.journey_states = Arc::new(index);
    let mut agent = ParlantRestAgent::new(config);
    agent.start("conv-1").await.unwrap();
    assert_eq!(server.sessions().len(), 1);

    let turn = agent.reply("Oak St").await.unwrap();
    // The preamble stays a preamble, and everything keeps the order it happened in.
    assert_eq!(
        kinds(&turn.items),
        [
            "preamble: Let me check",
            "tool: fixtures:book_taxi -> {\"booking_id\":\"TX-1\"}",
            "message: Booked for Oak St"
        ]
    );
    let call = turn.tool_calls().next().unwrap();
    assert_eq!((call.name.as_str(), call.service.as_deref()), ("book_taxi", Some("fixtures")));
    assert_eq!(call.arguments, json!({"pickup": "Oak St"}));
    let seen = turn.observations.unwrap();
    assert_eq!(seen.guidelines_matched, ["correction"]);
    assert_eq!(seen.journeys_entered, ["book_taxi"]);
    assert_eq!(
        seen.journey_states,
        [JourneyStateReached { journey: "book_taxi".into(), state: "dropoff".into(), edge: Some("edge_002".into()) }]
    );
    assert!(seen.tool_was_called("book_taxi"));
    // What the fake wrote is Parlant's sequence for such a turn.
    let session = agent.session_id().unwrap().to_string();
    let events: Vec<Value> =
        reqwest::get(format!("{}/sessions/{session}/events?min_offset=0&wait_for_data=0", server.url))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let sequence: Vec<String> = events
        .iter()
        .map(|e| {
            // kind, source, then for a status its name and stage.
            let words = [&e["kind"], &e["source"], &e["data"]["status"], &e["data"]["data"]["stage"]];
            words.iter().filter_map(|w| w.as_str()).collect::<Vec<_>>().join(" ")
        })
        .collect();
    assert_eq!(
        sequence,
        [
            "message customer",
            "status ai_agent acknowledged",
            "status ai_agent typing",
            "message ai_agent",
            "status ai_agent ready",
            "status ai_agent processing Interpreting",
            "status ai_agent processing Considering tools",
            "tool system",
            "status ai_agent typing",
            "message ai_agent",
            "status ai_agent ready completed",
        ]
    );
    assert_eq!(events[3]["data"]["tags"], json!(["__preamble__"]));
    assert_eq!(events[10]["data"]["data"]["matched_guidelines"][1]["id"], "journey_node:dropoff:edge_002");
    assert!(events[1]["trace_id"].as_str().unwrap().len() == 32 && events[0]["trace_id"] == "<main>");
    let requests = server.requests();
    // The first poll waited past the server's 1 s long-poll window: a 504, then polling again.
    let polls = requests.iter().filter(|r| r.method == "GET" && r.uri.ends_with("wait_for_data=1")).count();
    assert!(polls >= 2, "{requests:?}");

    agent.inject_agent_message("By the way, we have a new app.").await.unwrap();
    let second = agent.reply("the station").await.unwrap();
    assert_eq!(second.messages(), ["Booked for the station"], "earlier turns are not repeated");

    // Parlant writes the failed turn's `error` after its completed `ready`.
    let err = agent.reply("explode now").await.unwrap_err();
    assert_eq!(err, AgentError::Reported("engine exploded".into()));

    agent.finish().await.unwrap();
    assert!(server.sessions().is_empty() && server.customers().is_empty());
    let posted: Vec<(String, String, Value)> =
        server.requests().into_iter().filter(|r| r.method != "GET").map(|r| (r.method, r.uri, r.body)).collect();
    assert_eq!(posted[0].2["name"], "Simulated customer conv-1");
    let customer = server.requests()[0].body.clone();
    assert!(customer.is_object());
    assert_eq!(posted[1].2["agent_id"], "taxi");
    assert_eq!(posted[1].2["title"], "conv-1");
    assert_eq!(posted[2].2, json!({"kind": "message", "source": "customer", "message": "Oak St"}));
    assert_eq!(posted[3].2["source"], "human_agent_on_behalf_of_ai_agent");
    let deletes: Vec<&str> = posted.iter().filter(|p| p.0 == "DELETE").map(|p| p.1.as_str()).collect();
    assert_eq!(deletes.len(), 2);
    assert!(deletes[0].starts_with("/sessions/") && deletes[1].starts_with("/customers/"), "{deletes:?}");
}

#[tokio::test]
async fn opaque_node_ids_are_named_through_the_active_journey_or_kept_unattributed() {
    let mut two_journeys = booking("edge_002");
    two_journeys.delay = Duration::ZERO;
    two_journeys.journeys.push("billing".into());
    let mut one_journey = two_journeys.clone();
    one_journey.journeys.truncate(1);
    let server =
        FakeParlant::start(ScriptedBackend::new([one_journey, two_journeys]), options(NodeIds::Opaque)).await.unwrap();
    let mut agent = ParlantRestAgent::new(ParlantRestConfig::new(&server.url, "taxi"));
    agent.start("conv-2").await.unwrap();
    let one = agent.reply("Oak St").await.unwrap().observations.unwrap();
    let node = &one.journey_states[0];
    assert_eq!(node.journey, "book_taxi");
    assert!(node.state.len() == 10 && node.state != "dropoff", "the node id is opaque: {node:?}");
    assert!(one.unattributed_journey_nodes.is_empty());
    let two = agent.reply("again").await.unwrap().observations.unwrap();
    assert!(two.journey_states.is_empty());
    assert_eq!(
        two.unattributed_journey_nodes,
        [UnattributedJourneyNode {
            node: node.state.clone(),
            edge: node.edge.clone(),
            candidates: vec!["book_taxi".into(), "billing".into()]
        }]
    );
    agent.finish().await.unwrap();
}

#[tokio::test]
async fn a_run_that_fails_to_start_removes_its_customer_or_says_why_not() {
    for (status, left) in [(204, false), (500, true)] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/customers"))
            .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": "c1", "name": "x"})))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/sessions"))
            .respond_with(ResponseTemplate::new(404).set_body_json(json!({"detail": "Item 'nope' not found"})))
            .mount(&server)
            .await;
        Mock::given(method("DELETE"))
            .and(path("/customers/c1"))
            .respond_with(ResponseTemplate::new(status).set_body_string(if left {
                "Internal Server Error"
            } else {
                ""
            }))
            .expect(1)
            .mount(&server)
            .await;
        let model = Models::new().customer(vec![say("hello")]).build();
        let mut agent = ParlantRestAgent::new(ParlantRestConfig::new(server.uri(), "nope"));
        let result = run_trajectory(&setup(trajectory(None, Some(3))), &mut agent, &env(&model, None)).await;
        assert_eq!(result.reason, StopReason::Error);
        assert!(result.error.as_deref().unwrap_or_default().contains("failed to start"), "{:?}", result.error);
        match &result.cleanup_error {
            Some(why) => assert!(left && why.contains("customer c1 was left on the server"), "{why}"),
            None => assert!(!left),
        }
        assert_eq!(result.summary_record().cleanup_error, result.cleanup_error);
    }
}
