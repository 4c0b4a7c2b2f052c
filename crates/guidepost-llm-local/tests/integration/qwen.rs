//! Opt-in semantic suite on Qwen2.5-Coder-1.5B-Instruct (1.1 GB, ~3 s load, a few seconds per
//! case on one thread). Run with `cargo test -p guidepost-llm-local -- --ignored` after
//! `scripts/fetch-models.sh --with-qwen`.
//!
//! Clear-cut guideline-applicability cases: five customer messages, three guidelines each.
//! The answer is constrained to `{"checks": [{"guideline_id": "g1", "applies": …}, …]}`
//! with the ids fixed in order, so the model only decides the booleans.

use guidepost_llm::{ChatRequest, TaskKind};
use serde_json::{Value, json};

use super::common::qwen;

const SYSTEM: &str = "You check which guidelines apply in a customer-service conversation. \
A guideline applies only when its condition is clearly true for the customer's latest message; \
otherwise it does not apply. Judge each guideline on its own. Answer only with JSON of the form \
{\"checks\":[{\"guideline_id\":\"g1\",\"applies\":false},{\"guideline_id\":\"g2\",\"applies\":true}]} \
with exactly one entry per guideline, in order, and nothing else.";

const REFUND: &str = "the customer asks for a refund; action: explain the refund process";
const DELIVERY: &str = "the customer asks where their order or package is; action: look up the delivery status";
const THANKS: &str = "the customer says thanks or goodbye; action: close the conversation politely";
const LOCKED_OUT: &str = "the customer cannot log in to their account; action: send a password reset link";
const CANCEL: &str = "the customer wants to cancel their subscription; action: confirm and cancel it";
const HOURS: &str = "the customer asks about store opening hours; action: give the opening hours";
const BROKEN: &str = "the customer reports a broken or damaged product; action: offer a replacement";

struct Case {
    message: &'static str,
    guidelines: [&'static str; 3],
    expected: [bool; 3],
}

const CASES: [Case; 5] = [
    Case {
        message: "Hi, I'd like a refund for the blender I bought last week. I want my money back.",
        guidelines: [REFUND, DELIVERY, THANKS],
        expected: [true, false, false],
    },
    Case {
        message: "Where is my package? It was supposed to arrive on Monday and it still isn't here.",
        guidelines: [REFUND, DELIVERY, THANKS],
        expected: [false, true, false],
    },
    Case {
        message: "That solved it, thank you so much for your help. Goodbye!",
        guidelines: [REFUND, DELIVERY, THANKS],
        expected: [false, false, true],
    },
    Case {
        message: "I forgot my password and now I can't log in to my account.",
        guidelines: [LOCKED_OUT, CANCEL, HOURS],
        expected: [true, false, false],
    },
    Case {
        message: "Please cancel my subscription, I don't use the service anymore.",
        guidelines: [LOCKED_OUT, CANCEL, BROKEN],
        expected: [false, true, false],
    },
];

fn schema() -> Value {
    let item = |id: &str| {
        json!({
            "type": "object",
            "properties": {
                "guideline_id": {"const": id},
                "applies": {"type": "boolean"}
            },
            "required": ["guideline_id", "applies"],
            "additionalProperties": false
        })
    };
    json!({
        "type": "object",
        "properties": {
            "checks": {
                "type": "array",
                "prefixItems": [item("g1"), item("g2"), item("g3")],
                "items": false,
                "minItems": 3
            }
        },
        "required": ["checks"],
        "additionalProperties": false
    })
}

fn request(case: &Case) -> ChatRequest {
    let guidelines: Vec<String> =
        case.guidelines.iter().enumerate().map(|(i, g)| format!("g{}: condition: {g}", i + 1)).collect();
    let user = format!(
        "Conversation:\nCustomer: {}\n\nGuidelines:\n{}\n\nReturn the JSON.",
        case.message,
        guidelines.join("\n")
    );
    ChatRequest::new(TaskKind::Matching)
        .system(SYSTEM)
        .user(user)
        .json_output("guideline_checks", schema())
        .max_tokens(80)
}

#[test]
#[ignore = "slow: needs Qwen2.5-Coder-1.5B (scripts/fetch-models.sh --with-qwen)"]
fn qwen_judges_clear_cut_guideline_cases() {
    let model = qwen();
    assert_eq!(model.info().architecture, "qwen2");
    let mut failures = Vec::new();
    for case in &CASES {
        let answer = model.answer_blocking(&request(case)).unwrap();
        let value = answer.output.as_json().unwrap();
        let checks = value["checks"].as_array().unwrap();
        let got: Vec<bool> = checks.iter().map(|c| c["applies"].as_bool().unwrap()).collect();
        if got != case.expected {
            failures.push(format!(
                "{:?}: expected {:?}, got {:?} ({})",
                case.message, case.expected, got, answer.generation.text
            ));
        }
    }
    assert!(failures.is_empty(), "wrong judgments:\n{}", failures.join("\n"));
}

#[test]
#[ignore = "slow: needs Qwen2.5-Coder-1.5B (scripts/fetch-models.sh --with-qwen)"]
fn qwen_loads_from_the_22_parts_and_answers_in_text() {
    let model = qwen();
    let tokenizer = model.tokenizer();
    let ids = tokenizer.encode("<|im_start|>system\nHi<|im_end|>").unwrap();
    let pieces: Vec<&str> = ids.iter().map(|&id| tokenizer.tokens[id as usize].as_str()).collect();
    assert_eq!(pieces, ["<|im_start|>", "system", "Ċ", "Hi", "<|im_end|>"]);
    assert_eq!(model.info().stop_ids, [ids[4], tokenizer.token_id("<|endoftext|>").unwrap()]);
    let req = ChatRequest::new(TaskKind::Generation).user("What is 2 + 3? Answer with the number only.").max_tokens(8);
    let answer = model.answer_blocking(&req).unwrap();
    assert!(answer.generation.text.contains('5'), "{}", answer.generation.text);
}
