//! Fuzz targets: recording files and the OpenAI and Anthropic stream parsers. Arbitrary
//! bytes and mutated copies of the seeds in `tests/corpus/<target>` never panic, finish in
//! bounded CPU time and end in a typed error or a well-formed result: a recording decodes or is
//! reported corrupt with the file and where its JSON went wrong; a stream yields deltas and
//! then exactly one end (the reply, or an error) and nothing after. `GUIDEPOST_FUZZ_CASES`
//! sets the inputs per run (see `guidepost_fuzz`); `scripts/fuzz.sh` runs them for a
//! given time.

use std::path::{Path, PathBuf};
use std::time::Instant;

use futures::StreamExt;
use guidepost_fuzz::{self as fuzz, Mutation};
use guidepost_llm::middleware::recording;
use guidepost_llm::providers::anthropic::AnthropicChat;
use guidepost_llm::providers::openai_compat::OpenAiChat;
use guidepost_llm::{ChatRequest, LlmError, StreamEvent, TaskKind, TextStream};
use proptest::prelude::*;

fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus").join(target);
    let seeds = fuzz::corpus(&folder);
    assert!(seeds.len() >= 3, "the corpus is missing: {}", folder.display());
    seeds
}

fn mutation() -> impl Strategy<Value = Mutation> {
    any::<(u8, usize, usize, u8)>().prop_map(Mutation::from)
}

/// Seed `index` of `target`, mutated.
fn mutated(target: &str, index: prop::sample::Index, edits: &[Mutation]) -> Vec<u8> {
    fuzz::mutate_seed(&seeds(target), index.index(usize::MAX), edits)
}

fn check_recording(bytes: Vec<u8>) {
    let path = Path::new("fuzz/matching/0000.json");
    let (result, spent) = fuzz::cpu_time_of(|| recording::decode(path, bytes));
    assert!(spent < fuzz::CASE_TIME, "took {spent:?} of CPU time");
    if let Err(error) = result {
        let LlmError::Storage(message) = &error else { panic!("not a storage error: {error:?}") };
        assert!(message.contains("fuzz/matching/0000.json is corrupt"), "{message}");
        assert!(message.contains("UTF-8") || message.contains("line "), "says where: {message}");
    }
}

/// Decodes `chunks` as the body of a streaming response with `decode`; checks the shape.
fn check_stream(chunks: Vec<Vec<u8>>, decode: impl FnOnce(reqwest::Response) -> TextStream) {
    let body = reqwest::Body::wrap_stream(futures::stream::iter(chunks.into_iter().map(Ok::<_, std::io::Error>)));
    let response = reqwest::Response::from(event_stream(body));
    // Everything runs on this thread, so its CPU time is the decoder's work. The clock is
    // paused: it moves only while every task waits, so the time limit fires for a decoder
    // stuck on a body that has ended, never for one slowed by a busy machine.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
    let (items, spent): (Vec<Result<StreamEvent, LlmError>>, _) = fuzz::cpu_time_of(|| {
        runtime.block_on(async {
            tokio::time::timeout(fuzz::CASE_TIME, decode(response).collect::<Vec<_>>()).await.expect("the stream hung")
        })
    });
    assert!(spent < fuzz::CASE_TIME, "took {spent:?} of CPU time");
    let ends = items.iter().filter(|i| !matches!(i, Ok(StreamEvent::Delta(_)))).count();
    assert_eq!(ends, 1, "one end, reply or error: {items:?}");
    assert!(!matches!(items.last(), Some(Ok(StreamEvent::Delta(_)))), "the end comes last: {items:?}");
    if let Some(Err(error)) = items.last() {
        assert!(!error.to_string().trim().is_empty());
    }
}

/// A `200 text/event-stream` response with this body.
fn event_stream(body: reqwest::Body) -> http::Response<reqwest::Body> {
    let mut response = http::Response::new(body);
    response.headers_mut().insert("content-type", http::HeaderValue::from_static("text/event-stream"));
    response
}

/// `bytes` cut into pieces at `cuts` (positions modulo the length), as a server's chunks.
fn chunked(bytes: Vec<u8>, cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut at: Vec<usize> = cuts.iter().map(|c| if bytes.is_empty() { 0 } else { c % bytes.len() }).collect();
    at.sort_unstable();
    at.dedup();
    let mut out = Vec::new();
    let mut start = 0;
    for cut in at {
        out.push(bytes[start..cut].to_vec());
        start = cut;
    }
    out.push(bytes[start..].to_vec());
    out
}

fn openai(response: reqwest::Response) -> TextStream {
    let model = OpenAiChat::compatible("http://127.0.0.1:9/v1", "fuzz");
    model.decode_stream(ChatRequest::new(TaskKind::Generation).user("hi"), response, Instant::now())
}

fn anthropic(response: reqwest::Response) -> TextStream {
    let model = AnthropicChat::new("claude-fuzz", None, None);
    model.decode_stream(ChatRequest::new(TaskKind::Generation).user("hi"), response, Instant::now())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz::cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn fuzz_recordings_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        check_recording(bytes);
    }

    #[test]
    fn fuzz_recordings_mutated_seeds(seed in any::<prop::sample::Index>(), edits in proptest::collection::vec(mutation(), 1..8)) {
        check_recording(mutated("recordings", seed, &edits));
    }

    #[test]
    fn fuzz_openai_sse_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..2048), cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
        check_stream(chunked(bytes, &cuts), openai);
    }

    #[test]
    fn fuzz_openai_sse_mutated_seeds(seed in any::<prop::sample::Index>(), edits in proptest::collection::vec(mutation(), 1..8), cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
        check_stream(chunked(mutated("openai_sse", seed, &edits), &cuts), openai);
    }

    #[test]
    fn fuzz_anthropic_sse_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..2048), cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
        check_stream(chunked(bytes, &cuts), anthropic);
    }

    #[test]
    fn fuzz_anthropic_sse_mutated_seeds(seed in any::<prop::sample::Index>(), edits in proptest::collection::vec(mutation(), 1..8), cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
        check_stream(chunked(mutated("anthropic_sse", seed, &edits), &cuts), anthropic);
    }
}

#[test]
fn stream_seeds_end_as_their_names_say() {
    for (target, decode) in
        [("openai_sse", openai as fn(reqwest::Response) -> TextStream), ("anthropic_sse", anthropic)]
    {
        for (name, bytes) in seeds(target) {
            let body = reqwest::Body::from(bytes);
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let items: Vec<_> =
                runtime.block_on(decode(reqwest::Response::from(event_stream(body))).collect::<Vec<_>>());
            let failed = matches!(items.last(), Some(Err(_)));
            let should_fail = name.starts_with("error") || name.starts_with("cut") || name.starts_with("no_stop");
            assert_eq!(failed, should_fail, "{target}/{name}: {items:?}");
        }
    }
    for (name, bytes) in seeds("recordings") {
        assert!(recording::decode(Path::new(&name), bytes).is_ok(), "{name}");
    }
}
