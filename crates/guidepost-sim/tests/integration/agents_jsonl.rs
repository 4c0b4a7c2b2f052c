//! The JSON-lines command adapter against a small child process.

use guidepost_sim::agents::AgentUnderTest;
use guidepost_sim::agents::jsonl_command::JsonlCommandAgent;
use guidepost_sim::{AgentError, EngineExpectation};

/// A shell agent: prints a banner, then answers every customer message; "fail" gets an error.
const AGENT: &str = r#"echo 'starting agent (not JSON)'
n=0
while IFS= read -r line; do
  case "$line" in
    *'"type":"customer_message"'*fail*) echo '{"type":"error","message":"cannot help"}' ;;
    *'"type":"customer_message"'*)
      n=$((n+1))
      echo "{\"type\":\"reply\",\"messages\":[\"answer $n\"],\"tool_calls\":[{\"name\":\"book_taxi\",\"arguments\":{\"pickup\":\"Oak St\"},\"result\":{\"id\":\"TX-$n\"}}],\"observations\":{\"journeys_entered\":[\"book_taxi\"],\"tools_called\":[{\"tool\":\"book_taxi\",\"arguments\":{\"pickup\":\"Oak St\"}}]},\"usage\":{\"model\":\"m\",\"prompt_tokens\":3,\"completion_tokens\":2}}" ;;
    *'"type":"end"'*) exit 0 ;;
  esac
done"#;

#[tokio::test]
async fn speaks_the_line_protocol_with_a_child_process() {
    let mut agent = JsonlCommandAgent::new(AGENT);
    agent.start("conv").await.unwrap();
    let turn = agent.reply("hello").await.unwrap();
    assert_eq!(turn.messages(), ["answer 1"]);
    let call = turn.tool_calls().next().unwrap();
    assert_eq!((call.name.as_str(), &call.result), ("book_taxi", &serde_json::json!({"id": "TX-1"})));
    // Without `items`, the tool calls are taken as made before the messages.
    assert!(matches!(turn.items[0], guidepost_sim::TurnItem::ToolCall(_)));
    assert!(EngineExpectation::JourneyEntered("book_taxi".into()).holds(turn.observations.as_ref().unwrap()));
    assert_eq!(turn.usage.unwrap().prompt_tokens, 3);
    agent.inject_agent_message("scripted").await.unwrap();
    assert_eq!(agent.reply("again").await.unwrap().messages(), ["answer 2"]);
    assert_eq!(agent.reply("please fail").await.unwrap_err(), AgentError::Reported("cannot help".into()));
    agent.finish().await.unwrap();

    let mut dead = JsonlCommandAgent::new("exit 0");
    // The process is gone: starting or the first reply fails, depending on timing.
    let err = match dead.start("c").await {
        Err(e) => e,
        Ok(()) => dead.reply("hi").await.unwrap_err(),
    };
    assert!(matches!(err, AgentError::Transport(_)), "{err}");
}
