//! An OpenAI-compatible provider that misbehaves in one chosen way ([`Fault`]), for tests
//! that run the real `guidepost` binary against it and hold the process to its limits.
//!
//! Everything the fault does not touch is answered as [`crate::fake_openai`] answers it
//! (structured calls, embeddings), so a turn gets as far as the faulty call. Endless bodies
//! are produced lazily: they cost the fake no memory, and stop when the client hangs up.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::fake_openai::{self, FakeState};

/// How the provider misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A streamed reply sends a few words, then its body ends without a `finish_reason` or
    /// `[DONE]`.
    StreamWithoutEndMarker,
    /// A streamed reply sends a few words, then nothing, the connection held open.
    StalledStream,
    /// A streamed reply sends a few words every 20 ms, forever.
    EndlessStream,
    /// A streamed reply sends pieces of 64 KiB of text as fast as they are read, forever.
    HugeStream,
    /// Every structured (not streamed) call is answered with one JSON body whose text is
    /// 100 MiB long.
    HugeAnswer,
}

/// Bytes of the text of a [`Fault::HugeAnswer`].
pub const HUGE_ANSWER_BYTES: usize = 100 << 20;

#[derive(Clone)]
struct Shared {
    fault: Fault,
    normal: Arc<FakeState>,
}

/// The router: `/v1/chat/completions` with the fault, everything else as
/// [`fake_openai::router`] serves it.
pub fn router(fault: Fault) -> Router {
    let normal = FakeState::new(Duration::ZERO);
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .with_state(Shared { fault, normal: normal.clone() })
        .fallback_service(fake_openai::router(normal))
}

/// One streamed piece of reply text, as OpenAI writes it (no `finish_reason`).
fn piece(text: &str) -> Bytes {
    let chunk = json!({"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
    Bytes::from(format!("data: {chunk}\n\n"))
}

fn event_stream(body: Body) -> Response {
    ([("content-type", "text/event-stream")], body).into_response()
}

async fn chat(State(shared): State<Shared>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let streamed = body.get("stream").and_then(Value::as_bool) == Some(true);
    let opening =
        || futures::stream::iter(["Thanks for ", "reaching ", "out. "].map(|t| Ok::<_, std::io::Error>(piece(t))));
    match shared.fault {
        Fault::StreamWithoutEndMarker if streamed => event_stream(Body::from_stream(opening())),
        Fault::StalledStream if streamed => {
            event_stream(Body::from_stream(opening().chain(futures::stream::pending())))
        }
        Fault::EndlessStream if streamed => {
            let forever = futures::stream::unfold((), |()| async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Some((Ok::<_, std::io::Error>(piece("la la ")), ()))
            });
            event_stream(Body::from_stream(opening().chain(forever)))
        }
        Fault::HugeStream if streamed => {
            let block = piece(&"y".repeat(64 * 1024));
            let forever = futures::stream::repeat_with(move || Ok::<_, std::io::Error>(block.clone()));
            event_stream(Body::from_stream(forever))
        }
        Fault::HugeAnswer if !streamed => {
            let prefix = r#"{"id": "c", "object": "chat.completion", "model": "m", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": ""#;
            let block = Bytes::from(vec![b'x'; 64 * 1024]);
            let blocks = HUGE_ANSWER_BYTES / block.len();
            let parts = futures::stream::once(async move { Bytes::from_static(prefix.as_bytes()) })
                .chain(futures::stream::repeat(block).take(blocks))
                .chain(futures::stream::once(async { Bytes::from_static(br#""}}]}"#) }))
                .map(Ok::<_, std::io::Error>);
            ([("content-type", "application/json")], Body::from_stream(parts)).into_response()
        }
        _ => fake_openai::chat(State(shared.normal), headers, Json(body)).await,
    }
}
