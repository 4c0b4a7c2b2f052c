//! SmolLM2-135M (requantized to Q8_0): deterministic plumbing tests. Its answers are not
//! meant to be smart, only reproducible.

use futures::StreamExt;
use guidepost_llm::{ChatModel, ChatRequest, Output, StreamEvent, TaskKind};
use guidepost_llm_local::{FinishReason, LocalChatModel, LocalOptions};
use serde_json::{Value, json};

use super::common::{runtime, smollm2, smollm2_without_drafts};

fn capital_question() -> ChatRequest {
    ChatRequest::new(TaskKind::Generation)
        .system("You are a helpful assistant.")
        .user("What is the capital of France?")
        .max_tokens(40)
}

#[test]
fn loads_as_llama_and_requantizes_q4_1_to_q8_0() {
    let info = smollm2().info();
    assert_eq!(info.architecture, "llama");
    assert_eq!(info.vocab_size, 49152);
    assert_eq!(info.context_length, 8192);
    assert_eq!(info.requantized.tensors, 210);
    assert_eq!(info.stop_ids, [2, 0]);
}

#[test]
fn renders_the_gguf_chat_template() {
    let prompt = smollm2().render_prompt(&capital_question()).unwrap();
    assert_eq!(
        prompt,
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn greedy_generation_is_golden_and_stops_at_im_end() {
    let answer = smollm2().answer_blocking(&capital_question()).unwrap();
    let generation = &answer.generation;
    assert_eq!(generation.prompt_tokens, 27);
    assert_eq!(generation.token_ids, [504, 3575, 282, 4649, 314, 7042, 30]);
    assert_eq!(generation.text, "The capital of France is Paris.");
    assert_eq!(generation.finish, FinishReason::Stop);
    assert_eq!(answer.output, Output::Text(generation.text.clone()));
    // Same answer again: greedy decoding and a cleared KV cache.
    let again = smollm2().answer_blocking(&capital_question()).unwrap();
    assert_eq!(again.generation.token_ids, generation.token_ids);
}

#[test]
fn a_measured_call_reports_the_prompt_read_then_each_token_written() {
    use guidepost_llm::progress::{self, ModelProgress, ModelStep, ModelWork};
    use std::sync::{Arc, Mutex};

    let heard = Arc::new(Mutex::new(Vec::<ModelWork>::new()));
    let sink = heard.clone();
    let meter = Arc::new(ModelProgress::with_listener(Arc::new(move |work| sink.lock().unwrap().push(work))));
    let response =
        runtime().block_on(progress::measured(meter.clone(), smollm2().complete(capital_question()))).unwrap();
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard[0].step, ModelStep::Waiting);
    let reading: Vec<&ModelWork> = heard.iter().filter(|w| w.step == ModelStep::Reading).collect();
    let writing: Vec<&ModelWork> = heard.iter().filter(|w| w.step == ModelStep::Writing).collect();
    let read = (response.usage.prompt_tokens - response.usage.cached_tokens) as u32;
    assert!(reading.len() > 1, "the prompt is reported as it is read, layer by layer: {heard:?}");
    assert!(reading.iter().all(|w| w.total == read), "{heard:?}");
    assert!(reading.windows(2).all(|p| p[0].done <= p[1].done), "{heard:?}");
    assert_eq!(reading.last().map(|w| w.done), Some(read), "read to the end");
    let last_read = heard.iter().rposition(|w| w.step == ModelStep::Reading).unwrap();
    assert!(heard[last_read..].iter().skip(1).all(|w| w.step == ModelStep::Writing), "then writing: {heard:?}");
    let written: Vec<u32> = writing.iter().map(|w| w.done).collect();
    let expected: Vec<u32> = (0..=response.usage.completion_tokens as u32).collect();
    assert_eq!(written, expected, "one report per token written");
    assert_eq!(meter.snapshot(), (0, None), "the call ended: no work shown (the stack counts calls)");
}

#[test]
fn token_limit_and_stop_sequences_end_the_answer() {
    let short = smollm2().answer_blocking(&capital_question().max_tokens(3)).unwrap();
    assert_eq!(short.generation.token_ids, [504, 3575, 282]);
    assert_eq!(short.generation.finish, FinishReason::Length);

    let cut = smollm2().answer_blocking(&capital_question().stop(" Paris")).unwrap();
    assert_eq!(cut.generation.text, "The capital of France is");
    assert_eq!(cut.generation.finish, FinishReason::Stop);
}

fn guideline_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "guideline_id": {"type": "string", "enum": ["refund", "shipping"]},
            "applies": {"type": "boolean"}
        },
        "required": ["guideline_id", "applies"],
        "additionalProperties": false
    })
}

fn refund_check() -> ChatRequest {
    ChatRequest::new(TaskKind::Matching)
        .system("You check which customer-service guideline applies to the customer's message.")
        .user("Customer: I want my money back for the broken lamp.\nGuidelines: refund, shipping")
        .json_output("guideline_check", guideline_schema())
}

#[test]
fn structured_answers_conform_to_the_schema() {
    let answer = smollm2().answer_blocking(&refund_check()).unwrap();
    // Constrained decoding: fixed layout, enum value, boolean.
    assert_eq!(answer.generation.text, r#"{"guideline_id": "refund", "applies": false}"#);
    let Output::Json(value) = &answer.output else {
        panic!("expected JSON, got {:?}", answer.output);
    };
    let object = value.as_object().unwrap();
    assert_eq!(object.len(), 2);
    assert!(["refund", "shipping"].contains(&object["guideline_id"].as_str().unwrap()));
    assert!(object["applies"].is_boolean());
    assert_eq!(answer.generation.finish, FinishReason::Stop);
}

#[test]
fn a_structured_answer_takes_one_pass_per_choice_and_none_for_what_the_grammar_forces() {
    // `{"guideline_id": "` is forced and guessed with the prompt; the model chooses the id
    // (one pass for the rest of it), then the boolean, after which `}` is forced and the
    // answer complete: no pass looks for the end token.
    let answer = smollm2().answer_blocking(&refund_check()).unwrap();
    assert_eq!(answer.generation.text, r#"{"guideline_id": "refund", "applies": false}"#);
    assert_eq!(answer.generation.decode_passes, 1, "{:?}", answer.generation);
    // A yes-or-no answer is decided by the prompt's own pass once the quote is guessed.
    let verdict = ChatRequest::new(TaskKind::Matching)
        .user("Customer: I want my money back.\nDoes the customer ask for a refund? Answer yes or no.")
        .json_output("verdict", json!({"type": "string", "enum": ["yes", "no"]}));
    let answer = smollm2().answer_blocking(&verdict).unwrap();
    assert!(["\"yes\"", "\"no\""].contains(&answer.generation.text.as_str()), "{}", answer.generation.text);
    assert!(answer.generation.decode_passes <= 1, "{:?}", answer.generation);
    assert!(!answer.generation.decisions.is_empty(), "the choice between yes and no is reported");
}

#[test]
fn drafted_tokens_save_passes_and_leave_the_answer_as_it_was() {
    let without = smollm2_without_drafts();
    let copy = ChatRequest::new(TaskKind::Generation)
        .system("You repeat addresses exactly.")
        .user("Repeat this address: 221 Baker Street, Marylebone, London NW1 6XE, United Kingdom.")
        .max_tokens(40);
    let booking = ChatRequest::new(TaskKind::ToolInference)
        .user("Book a taxi from 221 Baker Street, Marylebone to King's Cross St Pancras station at 7 pm.")
        .json_output(
            "book",
            json!({
                "type": "object",
                "properties": {"pickup": {"type": "string"}, "destination": {"type": "string"}, "time": {"type": "string"}},
                "required": ["pickup", "destination", "time"],
                "additionalProperties": false
            }),
        )
        .max_tokens(80);
    for request in [copy, booking] {
        let plain = without.answer_blocking(&request).unwrap().generation;
        let drafted = smollm2().answer_blocking(&request).unwrap().generation;
        assert_eq!(drafted.text, plain.text, "drafts do not change the answer");
        assert_eq!(drafted.token_ids, plain.token_ids);
        // Without drafts, only a JSON answer's guessed start is evaluated ahead.
        assert_eq!(plain.accepted, plain.drafted);
        assert!(drafted.accepted > plain.accepted, "the answer repeats the prompt: drafts are taken {drafted:?}");
        assert!(drafted.accepted <= drafted.drafted);
        assert!(
            drafted.decode_passes < plain.decode_passes,
            "{} vs {} passes",
            drafted.decode_passes,
            plain.decode_passes
        );
        eprintln!(
            "{} tokens: {} passes without drafts, {} with ({} of {} drafted taken), decode {:?} vs {:?}",
            plain.token_ids.len(),
            plain.decode_passes,
            drafted.decode_passes,
            drafted.accepted,
            drafted.drafted,
            plain.decode,
            drafted.decode
        );
        // Drafts the model did not take are not left in the cache: the same request again
        // reuses the prompt and gives the same answer.
        let again = smollm2().answer_blocking(&request).unwrap().generation;
        assert_eq!(again.token_ids, plain.token_ids);
    }
}

#[test]
fn nested_schemas_are_enforced() {
    let schema = json!({
        "type": "object",
        "properties": {
            "checks": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "guideline_id": {"type": "string", "enum": ["g1", "g2"]},
                        "applies": {"type": "boolean"},
                        "rationale": {"type": "string", "maxLength": 60}
                    },
                    "required": ["guideline_id", "applies", "rationale"],
                    "additionalProperties": false
                },
                "minItems": 2,
                "maxItems": 2
            }
        },
        "required": ["checks"],
        "additionalProperties": false
    });
    let req = ChatRequest::new(TaskKind::Matching)
        .user("Customer: where is my parcel?\ng1: asks about a delivery\ng2: asks for a refund")
        .json_output("checks", schema)
        .max_tokens(200);
    let answer = smollm2().answer_blocking(&req).unwrap();
    let value = answer.output.as_json().unwrap();
    let checks = value["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 2);
    for check in checks {
        assert!(["g1", "g2"].contains(&check["guideline_id"].as_str().unwrap()));
        assert!(check["applies"].is_boolean());
        assert!(check["rationale"].as_str().unwrap().chars().count() <= 60);
    }
}

#[test]
fn the_chat_port_completes_and_streams() {
    let rt = runtime();
    let model = smollm2().clone();
    assert_eq!(model.model_id(), "local:smollm2");

    let response = rt.block_on(model.complete(capital_question())).unwrap();
    assert_eq!(response.output.as_text(), Some("The capital of France is Paris."));
    assert_eq!(response.usage.model, "local:smollm2");
    assert_eq!(response.usage.prompt_tokens, 27);
    assert_eq!(response.usage.completion_tokens, 7);
    assert_eq!(response.usage.calls, 1);

    let events: Vec<StreamEvent> = rt.block_on(async {
        let stream = model.stream(capital_question()).await.unwrap();
        stream.map(Result::unwrap).collect().await
    });
    let (last, deltas) = events.split_last().unwrap();
    let text: String = deltas
        .iter()
        .map(|e| match e {
            StreamEvent::Delta(piece) => piece.as_str(),
            StreamEvent::Done(_) => panic!("Done before the end"),
        })
        .collect();
    assert!(deltas.len() > 1, "answer should arrive in pieces");
    assert_eq!(text, "The capital of France is Paris.");
    let StreamEvent::Done(done) = last else {
        panic!("stream must end with Done");
    };
    assert_eq!(done.output.as_text(), Some(text.as_str()));

    let json = rt.block_on(model.complete(refund_check())).unwrap();
    assert!(json.output.as_json().is_some());
}

#[test]
fn missing_model_files_name_the_fetch_command() {
    let empty = tempfile::tempdir().unwrap();
    let err =
        LocalChatModel::load("local:smollm2", &LocalOptions::default().with_models_dir(empty.path())).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("scripts/fetch-models.sh"), "{message}");
    assert!(message.contains("guidepost models fetch"), "{message}");
}

#[test]
fn fetching_installed_models_only_verifies_their_checksums() {
    let dir = guidepost_llm_local::default_models_dir();
    let report = guidepost_llm_local::fetch_models(&dir, &guidepost_llm_local::ModelKind::DEFAULT)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.already_present, guidepost_llm_local::ModelKind::DEFAULT);
    assert!(report.installed.is_empty());
}

#[test]
fn unsupported_schemas_are_reported_as_such() {
    let req = ChatRequest::new(TaskKind::Matching)
        .user("hi")
        .json_output("bad", json!({"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}, "required": ["a"]}));
    let err = smollm2().answer_blocking(&req).unwrap_err();
    assert!(matches!(err, guidepost_llm_local::LocalError::Schema(_)), "{err}");
    assert!(matches!(guidepost_llm::LlmError::from(err), guidepost_llm::LlmError::Unsupported(_)));
}

#[test]
fn the_provider_factory_builds_shared_lazy_models() {
    use guidepost_llm::{Embedder, ModelSpec, ProviderFactory};
    use guidepost_llm_local::LocalProviderFactory;

    let factory = LocalProviderFactory::new(super::common::options());
    assert_eq!(factory.scheme(), "local");
    let spec = ModelSpec::Local { model: "smollm2".into() };
    let model = factory.chat_model(&spec).unwrap();
    let again = factory.chat_model(&spec).unwrap();
    assert!(std::sync::Arc::ptr_eq(&model, &again), "one loaded copy per model");
    assert_eq!(model.model_id(), "local:smollm2");
    let response = runtime().block_on(model.complete(capital_question())).unwrap();
    assert_eq!(response.output.as_text(), Some("The capital of France is Paris."));

    let embedder = factory.embedder(&ModelSpec::Local { model: "all-minilm-l6-v2".into() }).unwrap();
    assert_eq!(embedder.dimensions(), 384);

    let empty = tempfile::tempdir().unwrap();
    let missing = LocalProviderFactory::new(LocalOptions::default().with_models_dir(empty.path()));
    let err = missing.chat_model(&spec).err().unwrap();
    assert!(err.to_string().contains("scripts/fetch-models.sh"), "{err}");
    assert!(matches!(err, guidepost_llm::LlmError::Config(_)));

    // Replay-only stacks skip the check: the model builds, and only a call that reaches it
    // fails, with the same message.
    let mut options = LocalOptions::default().with_models_dir(empty.path());
    options.check_files_at_build = false;
    let deferred = LocalProviderFactory::new(options);
    let model = deferred.chat_model(&spec).unwrap();
    let err = runtime().block_on(model.complete(capital_question())).err().unwrap();
    assert!(err.to_string().contains("scripts/fetch-models.sh"), "{err}");
    assert!(deferred.embedder(&ModelSpec::Local { model: "all-minilm-l6-v2".into() }).is_ok());
}

#[test]
fn concurrent_requests_are_served_one_at_a_time_with_identical_answers() {
    let model = smollm2().clone();
    let (a, b) = runtime()
        .block_on(async { futures::join!(model.complete(capital_question()), model.complete(capital_question())) });
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.output, b.output);
    assert_eq!(a.output.as_text(), Some("The capital of France is Paris."));
}

#[test]
fn a_prompt_prefix_shared_with_the_previous_call_is_reported_as_cached() {
    // A model of its own: the shared one's cache holds whatever another test asked last.
    let model = LocalChatModel::load("local:smollm2", &super::common::options()).unwrap();
    let rt = runtime();
    let first = rt.block_on(model.complete(capital_question())).unwrap();
    assert_eq!(first.usage.cached_tokens, 0, "nothing evaluated before");
    let again = rt.block_on(model.complete(capital_question())).unwrap();
    // Everything but the last prompt token (whose logits give the answer) comes from the cache.
    assert_eq!(again.usage.cached_tokens, again.usage.prompt_tokens - 1);
    assert_eq!(again.output.as_text(), first.output.as_text());
}

#[test]
fn a_prompt_of_a_kind_left_for_another_continues_from_its_cache() {
    // The checks, then the reply, then the checks again: the second check continues from the
    // cache of the first, kept aside while the reply was written, and answers as before.
    let model = LocalChatModel::load("local:smollm2", &super::common::options()).unwrap();
    let rt = runtime();
    let first = rt.block_on(model.complete(refund_check())).unwrap();
    let other = rt.block_on(model.complete(capital_question())).unwrap();
    assert!(other.usage.cached_tokens < other.usage.prompt_tokens / 2, "another kind of prompt");
    let again = rt.block_on(model.complete(refund_check())).unwrap();
    assert_eq!(again.usage.cached_tokens, again.usage.prompt_tokens - 1, "continued from the cache kept aside");
    assert_eq!(again.output, first.output);
    // The reply's cache was kept aside in turn.
    let other_again = rt.block_on(model.complete(capital_question())).unwrap();
    assert_eq!(other_again.usage.cached_tokens, other_again.usage.prompt_tokens - 1);
    assert_eq!(other_again.output, other.output);
}

#[test]
fn a_prompt_read_ahead_is_not_read_again_and_changes_no_answer() {
    // Models of their own: the shared one's cache holds whatever another test asked last.
    let fresh = || LocalChatModel::load("local:smollm2", &super::common::options()).unwrap();
    let rt = runtime();
    let cold = rt.block_on(fresh().complete(refund_check())).unwrap();
    assert_eq!(cold.usage.cached_tokens, 0);

    // What a conversation's first check begins with: the same instructions, no message yet.
    let model = fresh();
    let mut opening = refund_check();
    opening.messages.truncate(1);
    opening = opening.user("");
    let tokens = |req: &ChatRequest| model.tokenizer().encode(&model.render_prompt(req).unwrap()).unwrap();
    let (read, asked) = (tokens(&opening), tokens(&refund_check()));
    let shared = read.iter().zip(&asked).take_while(|(a, b)| a == b).count();
    assert!(shared > asked.len() / 2, "the instructions and the schema are most of the prompt");
    assert!(rt.block_on(model.read_ahead(opening)).unwrap(), "an idle model reads ahead");
    let warm = rt.block_on(model.complete(refund_check())).unwrap();
    assert_eq!(warm.usage.cached_tokens as usize, shared, "what was read ahead is not read again");
    assert_eq!(warm.output, cold.output, "the same answer, read ahead or not");
}

fn weather_call() -> ChatRequest {
    ChatRequest::new(TaskKind::ToolInference)
        .system("You decide which tools to call for the customer's message.")
        .user("Customer: What is the weather in Paris tomorrow?\nTool: get_weather(location)")
        .json_output(
            "tool_calls",
            json!({
                "type": "object",
                "properties": {
                    "tools": {
                        "type": "array",
                        "maxItems": 1,
                        "items": {
                            "type": "object",
                            "properties": {
                                "tool": {"type": "string", "enum": ["get_weather"]},
                                "calls": {
                                    "type": "array",
                                    "maxItems": 2,
                                    "items": {
                                        "type": "object",
                                        "properties": {
                                            "arguments": {
                                                "type": "object",
                                                "properties": {"location": {"type": "string", "maxLength": 40}},
                                                "required": ["location"],
                                                "additionalProperties": false
                                            }
                                        },
                                        "required": ["arguments"],
                                        "additionalProperties": false
                                    }
                                },
                                "decision": {"type": "string", "enum": ["needs_to_run", "already_done", "cannot_run"]}
                            },
                            "required": ["tool", "calls", "decision"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["tools"],
                "additionalProperties": false
            }),
        )
        .max_tokens(80)
}

#[test]
fn the_layout_a_grammar_forces_after_a_value_is_drafted_as_the_model_would_write_it() {
    // After a value closes, the grammar forces the rest of the JSON layout (`}], "decision":
    // "`) but its mask still allows several spellings of it (`],` or `]` then `,`): without a
    // draft of the forced bytes each spelling costs a pass. Measured: 10 passes without
    // drafts, 9 with drafts of what the prompt and the answer said only, 7 with the forced
    // layout drafted as well.
    let without = smollm2_without_drafts();
    let plain = without.answer_blocking(&weather_call()).unwrap().generation;
    let drafted = smollm2().answer_blocking(&weather_call()).unwrap().generation;
    assert_eq!(
        plain.text,
        r#"{"tools": [{"tool": "get_weather", "calls": [{"arguments": {"location": "Paris"}}, {"arguments": {"location": "Paris"}}], "decision": "needs_to_run"}]}"#
    );
    assert_eq!(drafted.token_ids, plain.token_ids, "drafts do not change the answer");
    assert_eq!(plain.decode_passes, 10, "{plain:?}");
    assert!(drafted.decode_passes <= 7, "{} passes with drafts", drafted.decode_passes);
    // The choices the model made are reported as they were without drafts.
    let offsets = |g: &guidepost_llm_local::Generation| g.decisions.iter().map(|d| d.offset).collect::<Vec<_>>();
    assert_eq!(offsets(&drafted), offsets(&plain));
}

fn verdict_on(statement: &str) -> ChatRequest {
    ChatRequest::new(TaskKind::Matching)
        .system("You check one statement about a customer-service conversation.")
        .user(format!("Customer: I want my money back for the broken lamp.\nStatement: {statement}\nDoes it hold?"))
        .json_output("verdict", json!({"type": "string", "enum": ["yes", "no"]}))
}

#[test]
fn prompts_queued_together_are_read_in_shared_passes_and_answered_as_alone() {
    // Models of their own: what a cache holds decides what is read where.
    let fresh = || LocalChatModel::load("local:smollm2", &super::common::options()).unwrap();
    let requests = vec![
        verdict_on("The customer asks for a refund."),
        verdict_on("The customer is angry."),
        verdict_on("The customer names a product."),
        // Answers that need passes of their own after a shared read: a structured one and
        // free text.
        refund_check(),
        capital_question(),
    ];
    let model = fresh();
    let alone: Vec<_> = requests.iter().map(|r| model.answer_blocking(r).unwrap().generation).collect();
    let together = fresh().answer_all_blocking(&requests);
    let together: Vec<_> = together.into_iter().map(|a| a.unwrap().generation).collect();
    for (i, (one, shared)) in alone.iter().zip(&together).enumerate() {
        assert_eq!(shared.text, one.text, "request {i}");
        assert_eq!(shared.token_ids, one.token_ids, "request {i}");
        assert!(shared.shared_pass, "request {i} was read in the first one's pass");
        assert_eq!(shared.decisions.len(), one.decisions.len(), "request {i}");
        for (a, b) in shared.decisions.iter().zip(&one.decisions) {
            assert_eq!(a.offset, b.offset);
            for ((ta, pa), (tb, pb)) in a.options.iter().zip(&b.options) {
                assert_eq!(ta, tb, "request {i}");
                assert!((pa - pb).abs() < 1e-3, "request {i}: {pa} against {pb}");
            }
        }
    }
    assert_eq!(alone[4].text, "The capital of France is Paris.");
    // The first prompt read every token; each other one only what no earlier one had.
    let tokens = |req: &ChatRequest| model.tokenizer().encode(&model.render_prompt(req).unwrap()).unwrap();
    let (first, second) = (tokens(&requests[0]), tokens(&requests[1]));
    let common = first.iter().zip(&second).take_while(|(a, b)| a == b).count();
    assert!(common > 20, "the checks share their instructions and the message");
    assert_eq!(together[0].cached_prompt_tokens, 0);
    assert_eq!(together[1].cached_prompt_tokens, common);
    // A yes-or-no check read with the first needs no pass of its own.
    assert_eq!(together[1].decode_passes, 0, "{:?}", together[1]);
}
