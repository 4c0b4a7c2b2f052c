//! Providers that misbehave on the wire: streams cut before their end marker, stalled and
//! endless streams, huge replies, keys echoed in error bodies, models that hang. Each fake
//! speaks HTTP/1.1 over a real socket (chunked bodies written piece by piece), so the client
//! code under test is the one that talks to real providers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use guidepost_llm::middleware::timeout::Timeout;
use guidepost_llm::providers::anthropic::AnthropicChat;
use guidepost_llm::providers::openai_compat::OpenAiChat;
use guidepost_llm::{ChatModel, ChatRequest, LlmError, StackConfig, StreamEvent, TaskKind, TextStream, layer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::fast_config;

/// What the fake does with each connection after reading the request.
#[derive(Clone)]
enum Behaviour {
    /// Answers with this status, content type and whole body.
    Whole(u16, &'static str, Arc<String>),
    /// Streams these pieces (as chunks, `gap` apart), then ends the body or stalls forever.
    Pieces { pieces: Arc<Vec<String>>, gap: Duration, stall: bool },
    /// Streams the same piece forever, `gap` apart.
    Endless { piece: String, gap: Duration },
    /// Streams a body of `bytes` bytes of `x` inside one JSON string, as fast as it can,
    /// counting in `sent` the bytes the client let it write.
    Huge { prefix: String, bytes: usize, suffix: String, sent: Arc<std::sync::atomic::AtomicUsize> },
    /// Reads the request and never answers.
    Silent,
}

/// Starts the fake; returns its base URL and a log of the request bodies.
async fn fake(behaviour: Behaviour) -> (String, Arc<std::sync::Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = log.clone();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else { return };
            let (behaviour, seen) = (behaviour.clone(), seen.clone());
            tokio::spawn(async move {
                let _ = serve(socket, behaviour, seen).await;
            });
        }
    });
    (base, log)
}

async fn read_request(socket: &mut TcpStream) -> std::io::Result<Value> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(Value::Null);
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return Ok(serde_json::from_slice(&buf[end + 4..end + 4 + length]).unwrap_or(Value::Null));
            }
        }
    }
}

async fn chunk(socket: &mut TcpStream, data: &[u8]) -> std::io::Result<()> {
    socket.write_all(format!("{:x}\r\n", data.len()).as_bytes()).await?;
    socket.write_all(data).await?;
    socket.write_all(b"\r\n").await?;
    socket.flush().await
}

async fn serve(
    mut socket: TcpStream,
    behaviour: Behaviour,
    seen: Arc<std::sync::Mutex<Vec<Value>>>,
) -> std::io::Result<()> {
    let body = read_request(&mut socket).await?;
    seen.lock().unwrap().push(body);
    let head = |status: u16, kind: &str| {
        format!(
            "HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        )
    };
    match behaviour {
        Behaviour::Whole(status, kind, body) => {
            socket.write_all(head(status, kind).as_bytes()).await?;
            chunk(&mut socket, body.as_bytes()).await?;
            socket.write_all(b"0\r\n\r\n").await?;
        }
        Behaviour::Pieces { pieces, gap, stall } => {
            socket.write_all(head(200, "text/event-stream").as_bytes()).await?;
            for piece in pieces.iter() {
                chunk(&mut socket, piece.as_bytes()).await?;
                tokio::time::sleep(gap).await;
            }
            if stall {
                tokio::time::sleep(Duration::from_secs(3_600)).await;
            }
            socket.write_all(b"0\r\n\r\n").await?;
        }
        Behaviour::Endless { piece, gap } => {
            socket.write_all(head(200, "text/event-stream").as_bytes()).await?;
            loop {
                chunk(&mut socket, piece.as_bytes()).await?;
                tokio::time::sleep(gap).await;
            }
        }
        Behaviour::Huge { prefix, bytes, suffix, sent } => {
            socket.write_all(head(200, "application/json").as_bytes()).await?;
            chunk(&mut socket, prefix.as_bytes()).await?;
            let block = vec![b'x'; 64 * 1024];
            while sent.load(std::sync::atomic::Ordering::SeqCst) < bytes {
                chunk(&mut socket, &block).await?;
                sent.fetch_add(block.len(), std::sync::atomic::Ordering::SeqCst);
            }
            chunk(&mut socket, suffix.as_bytes()).await?;
            socket.write_all(b"0\r\n\r\n").await?;
        }
        Behaviour::Silent => tokio::time::sleep(Duration::from_secs(3_600)).await,
    }
    Ok(())
}

fn openai_piece(text: &str) -> String {
    format!("data: {}\n\n", json!({"choices": [{"index": 0, "delta": {"content": text}}]}))
}

fn text_request() -> ChatRequest {
    ChatRequest::new(TaskKind::Generation).user("Hello")
}

async fn drain(stream: TextStream) -> (String, Result<(), LlmError>) {
    let mut stream = stream;
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(StreamEvent::Delta(d)) => text.push_str(&d),
            Ok(StreamEvent::Done(_)) => return (text, Ok(())),
            Err(e) => return (text, Err(e)),
        }
    }
    (text, Err(LlmError::Connection("stream ended without Done".into())))
}

#[tokio::test]
async fn an_openai_stream_without_its_end_marker_is_an_error_not_a_short_reply() {
    let pieces = vec![openai_piece("The refund is"), openai_piece(" approv")];
    let (base, _) = fake(Behaviour::Pieces { pieces: Arc::new(pieces), gap: Duration::ZERO, stall: false }).await;
    let model = OpenAiChat::compatible(&format!("{base}/v1"), "m");
    let (text, result) = drain(model.stream(text_request()).await.unwrap()).await;
    assert_eq!(text, "The refund is approv");
    let error = result.unwrap_err().to_string();
    assert!(error.contains("without its end marker"), "{error}");

    // The same pieces with a finish reason, or with `[DONE]`, are complete.
    for end in [
        format!("data: {}\n\n", json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
        "data: [DONE]\n\n".to_string(),
    ] {
        let pieces = vec![openai_piece("Done."), end];
        let (base, _) = fake(Behaviour::Pieces { pieces: Arc::new(pieces), gap: Duration::ZERO, stall: false }).await;
        let model = OpenAiChat::compatible(&format!("{base}/v1"), "m");
        let (text, result) = drain(model.stream(text_request()).await.unwrap()).await;
        assert_eq!((text.as_str(), result), ("Done.", Ok(())));
    }
}

#[tokio::test]
async fn an_anthropic_stream_without_message_stop_is_an_error() {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let pieces = vec![
        event("message_start", json!({"type": "message_start", "message": {"usage": {"input_tokens": 5}}})),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Half a"}}),
        ),
    ];
    let (base, _) = fake(Behaviour::Pieces { pieces: Arc::new(pieces), gap: Duration::ZERO, stall: false }).await;
    let model = AnthropicChat::new("claude", Some("k".into()), Some(base));
    let (text, result) = drain(model.stream(text_request()).await.unwrap()).await;
    assert_eq!(text, "Half a");
    let error = result.unwrap_err().to_string();
    assert!(error.contains("without its end marker (message_stop)"), "{error}");
}

#[tokio::test]
async fn a_stalled_stream_times_out_on_its_idle_budget() {
    let pieces = vec![openai_piece("Let me check")];
    let (base, _) = fake(Behaviour::Pieces { pieces: Arc::new(pieces), gap: Duration::ZERO, stall: true }).await;
    // The idle budget is the only one that can end this stream: the others are far longer
    // than the test, so the error says which limit fired, whatever the machine's load.
    let model = Timeout::new(OpenAiChat::compatible(&format!("{base}/v1"), "m"), Duration::from_secs(600))
        .with_stream_budgets(Duration::from_secs(2), Duration::from_secs(600));
    let (text, result) = drain(model.stream(text_request()).await.unwrap()).await;
    assert_eq!(text, "Let me check");
    let error = result.unwrap_err();
    assert!(matches!(&error, LlmError::Limit(e) if e.limit == guidepost_core::limits::Limit::StreamIdle), "{error}");
    assert!(error.to_string().contains("GUIDEPOST_STREAM_IDLE_SECS"), "{error}");
}

#[tokio::test]
async fn an_endless_stream_stops_at_its_total_budget() {
    let (base, _) = fake(Behaviour::Endless { piece: openai_piece("la "), gap: Duration::from_millis(20) }).await;
    // Pieces 20 ms apart never reach the idle budget of a minute: only the total can end it.
    let model = Timeout::new(OpenAiChat::compatible(&format!("{base}/v1"), "m"), Duration::from_secs(600))
        .with_stream_budgets(Duration::from_secs(60), Duration::from_secs(2));
    let (text, result) = drain(model.stream(text_request()).await.unwrap()).await;
    assert!(text.starts_with("la la"), "{text}");
    let error = result.unwrap_err();
    assert!(error.to_string().contains("streamed reply duration limit"), "{error}");
    assert!(error.to_string().contains("GUIDEPOST_STREAM_TIMEOUT_SECS"), "{error}");
}

#[tokio::test]
async fn a_100_mb_reply_is_refused_at_the_size_cap_without_reading_it_whole() {
    // Not streamed: the body is one JSON answer whose content is 100 MB.
    let prefix = r#"{"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": ""#
        .to_string();
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let huge = Behaviour::Huge { prefix, bytes: 100 << 20, suffix: "\"}}]}".into(), sent: sent.clone() };
    let (base, _) = fake(huge).await;
    let model = OpenAiChat::compatible(&format!("{base}/v1"), "m");
    let error = model.complete(text_request()).await.unwrap_err();
    assert!(matches!(&error, LlmError::Limit(e) if e.limit == guidepost_core::limits::Limit::ReplySize), "{error}");
    assert!(error.to_string().contains("GUIDEPOST_MAX_REPLY_BYTES"), "{error}");
    // The client hung up past the cap: the server could write the cap and what the sockets
    // buffer, far from the 100 MiB it had to send.
    let written = sent.load(std::sync::atomic::Ordering::SeqCst);
    assert!(written < 32 << 20, "the server wrote {written} bytes: the reply was read whole");

    // Streamed: pieces of 64 KiB of text each, refused once the text passes the cap.
    let piece = openai_piece(&"y".repeat(64 * 1024));
    let (base, _) = fake(Behaviour::Endless { piece, gap: Duration::ZERO }).await;
    let model = OpenAiChat::compatible(&format!("{base}/v1"), "m");
    let (text, result) = drain(model.stream(text_request()).await.unwrap()).await;
    assert!(text.len() <= 1 << 20, "{}", text.len());
    assert!(result.unwrap_err().to_string().contains("model reply size limit"));

    // One endless event without a line break is cut at the wire allowance too.
    let huge = Behaviour::Huge {
        prefix: "data: {\"a\": \"".into(),
        bytes: 100 << 20,
        suffix: "\"}\n\n".into(),
        sent: Arc::default(),
    };
    let (base, _) = fake(huge).await;
    let model = OpenAiChat::compatible(&format!("{base}/v1"), "m");
    let (_, result) = drain(model.stream(text_request()).await.unwrap()).await;
    assert!(result.unwrap_err().to_string().contains("model reply size limit"));
}

#[tokio::test]
async fn max_tokens_is_always_sent() {
    let answer =
        json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}]});
    let (base, log) = fake(Behaviour::Whole(200, "application/json", Arc::new(answer.to_string()))).await;
    OpenAiChat::compatible(&format!("{base}/v1"), "m").complete(text_request()).await.unwrap();
    OpenAiChat::openai("gpt-4.1", Some("k".into()), Some(format!("{base}/v1"))).complete(text_request()).await.unwrap();
    let bodies = log.lock().unwrap().clone();
    assert_eq!(bodies[0]["max_tokens"], json!(4096), "{}", bodies[0]);
    assert_eq!(bodies[1]["max_completion_tokens"], json!(4096), "{}", bodies[1]);
    assert_eq!(AnthropicChat::new("c", None, None).body(&text_request(), false)["max_tokens"], json!(4096));
}

#[tokio::test]
async fn an_api_key_echoed_in_a_401_body_never_reaches_an_error() {
    let key = "sk-proj-PLANTEDsecret0123456789abcdefABCDEF";
    let body = format!(
        r#"{{"error": {{"message": "Incorrect API key provided: {key}. You can find your API key at https://example.invalid.", "header": "Authorization: Bearer {key}"}}}}"#
    );
    let (base, _) = fake(Behaviour::Whole(401, "application/json", Arc::new(body))).await;
    let openai = OpenAiChat::openai("gpt-4.1", Some(key.into()), Some(format!("{base}/v1")));
    let anthropic = AnthropicChat::new("claude", Some(key.into()), Some(base.clone()));
    let stacked =
        layer(Arc::new(OpenAiChat::openai("gpt-4.1", Some(key.into()), Some(format!("{base}/v1")))), &fast_config());
    let mut texts = Vec::new();
    for model in [&openai as &dyn ChatModel, &anthropic, stacked.as_ref()] {
        let error = model.complete(text_request()).await.unwrap_err();
        texts.push(format!("{error} {error:?}"));
        let error = match model.stream(text_request()).await {
            Ok(stream) => drain(stream).await.1.unwrap_err(),
            Err(error) => error,
        };
        texts.push(format!("{error} {error:?}"));
    }
    for text in &texts {
        assert!(text.contains("401"), "{text}");
        assert!(!text.contains("PLANTEDsecret"), "the key leaked: {text}");
        assert!(text.contains("[redacted]"), "{text}");
    }
}

#[tokio::test]
async fn a_model_that_hangs_costs_one_call_budget_not_attempts_times_timeout() {
    let (base, log) = fake(Behaviour::Silent).await;
    // 100 attempts of 400 ms would take 40 s; the call's budget is 3 s.
    let config = StackConfig {
        timeout: Some(Duration::from_millis(400)),
        call_deadline: Duration::from_secs(3),
        ..fast_config()
    };
    let model = layer(
        Arc::new(OpenAiChat::compatible(&format!("{base}/v1"), "m")),
        &StackConfig { retry: guidepost_llm::RetryPolicy { max_attempts: 100, ..config.retry.clone() }, ..config },
    );
    let started = Instant::now();
    let error = model.complete(text_request()).await.unwrap_err();
    // Never cut short of the budget (a lower bound holds on any machine) ...
    assert!(started.elapsed() >= Duration::from_secs(3), "{:?}", started.elapsed());
    // ... and ended by it: the error is the call's limit, not the last attempt's timeout, and
    // the attempts stopped far short of the 100 allowed.
    assert!(error.to_string().contains("model call time limit"), "{error}");
    assert!(error.to_string().contains("GUIDEPOST_MODEL_CALL_TIMEOUT_SECS"), "{error}");
    let attempts = log.lock().unwrap().len();
    assert!((2..100).contains(&attempts), "attempts retried within the budget: {attempts}");
}

#[tokio::test]
async fn a_stream_whose_headers_never_come_ends_at_the_stream_budget_not_attempts_times_timeout() {
    // Each attempt to open the stream waits on headers that never come; the attempts are
    // retried. The whole stream, its opening attempts included, has one budget.
    let (base, log) = fake(Behaviour::Silent).await;
    let config = StackConfig {
        timeout: Some(Duration::from_millis(400)),
        stream_total: Duration::from_secs(1),
        call_deadline: Duration::from_secs(600),
        ..fast_config()
    };
    let model = layer(
        Arc::new(OpenAiChat::compatible(&format!("{base}/v1"), "m")),
        &StackConfig { retry: guidepost_llm::RetryPolicy { max_attempts: 50, ..config.retry.clone() }, ..config },
    );
    let error = match model.stream(text_request()).await {
        Ok(stream) => drain(stream).await.1.unwrap_err(),
        Err(error) => error,
    };
    assert!(
        matches!(&error, LlmError::Limit(e) if e.limit == guidepost_core::limits::Limit::StreamDuration),
        "the stream budget ends it, not the attempts running out: {error}"
    );
    assert!(error.to_string().contains("GUIDEPOST_STREAM_TIMEOUT_SECS"), "{error}");
    assert!(error.to_string().contains("headers"), "{error}");
    assert!(!log.lock().unwrap().is_empty());
}
