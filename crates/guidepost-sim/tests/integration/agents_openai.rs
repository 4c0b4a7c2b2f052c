//! The chat-model agent against a fake OpenAI-compatible endpoint (wiremock).

use guidepost_sim::agents::AgentFactory;
use guidepost_sim::agents::openai_chat::ChatModelAgentFactory;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn keeps_the_conversation_and_reports_usage() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "c1", "object": "chat.completion", "created": 1, "model": "agent-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Where should I pick you up?"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27}
        })))
        .mount(&server)
        .await;
    let factory = ChatModelAgentFactory::openai_compatible(
        &format!("{}/v1", server.uri()),
        "agent-model",
        None,
        "You book taxis.",
    );
    assert_eq!(factory.provider_key(), format!("{}/v1", server.uri()));
    let mut agent = factory.create().await.unwrap();
    agent.start("c").await.unwrap();
    let first = agent.reply("I need a taxi").await.unwrap();
    assert_eq!(first.messages(), ["Where should I pick you up?"]);
    assert_eq!(first.usage.as_ref().map(|u| (u.prompt_tokens, u.completion_tokens)), Some((20, 7)));
    assert!(first.observations.is_none());
    agent.inject_agent_message("Also, prices rise at 18:00.").await.unwrap();
    agent.reply("Oak Street").await.unwrap();

    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    let body: Value = serde_json::from_slice(&requests[1].body).unwrap();
    assert_eq!(body["model"], "agent-model");
    let messages: Vec<(String, String)> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap().to_string(), m["content"].as_str().unwrap().to_string()))
        .collect();
    let expected = [
        ("system", "You book taxis."),
        ("user", "I need a taxi"),
        ("assistant", "Where should I pick you up?"),
        ("assistant", "Also, prices rise at 18:00."),
        ("user", "Oak Street"),
    ];
    assert_eq!(messages, expected.map(|(r, c)| (r.to_string(), c.to_string())));
}
