//! Answers saved chat requests with a local model: the quickest way to see how a prompt
//! change plays out on the model before a whole conversation is re-run.
//!
//! ```text
//! cargo run -p guidepost-llm-local --release --example ask -- [--model qwen2.5-coder-1.5b] [--threads N] FILE...
//! ```
//!
//! Each FILE holds a chat request as JSON, or a recording of the model layer's cache (its
//! `request` field). The model loads once; each answer is printed with its time, and below it
//! what it read and wrote (new prompt tokens, passes, drafted tokens taken) and every point where
//! the answer's grammar left the model a choice, with the likeliest options.

use std::time::Instant;

use guidepost_llm::ChatRequest;
use guidepost_llm_local::{LocalChatModel, LocalOptions};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut model, mut options, mut files) = ("qwen2.5-coder-1.5b".to_string(), LocalOptions::default(), Vec::new());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--model" => model = args.next().ok_or_else(|| anyhow::anyhow!("--model needs a value"))?,
            "--threads" => {
                let n = args.next().ok_or_else(|| anyhow::anyhow!("--threads needs a value"))?;
                options.threads = Some(n.parse()?);
            }
            _ => files.push(arg),
        }
    }
    let model = LocalChatModel::load(&model, &options)?;
    for file in files {
        let mut value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file)?)?;
        if let Some(mut request) = value.get("request").cloned() {
            // A recording keeps the task beside the request.
            if let (Some(task), Some(fields)) = (value.get("task"), request.as_object_mut()) {
                fields.entry("task").or_insert_with(|| task.clone());
            }
            value = request;
        }
        let req: ChatRequest = serde_json::from_value(value)?;
        let start = Instant::now();
        let answer = model.answer_blocking(&req)?;
        let g = &answer.generation;
        println!("== {file} ({:.1} s)\n{}", start.elapsed().as_secs_f64(), answer.output.to_text());
        println!(
            "   read {} new of {} prompt tokens in {:.2} s; wrote {} tokens in {} passes ({} drafted, {} taken) in {:.2} s",
            g.prompt_tokens - g.cached_prompt_tokens,
            g.prompt_tokens,
            g.prefill.as_secs_f64(),
            g.token_ids.len(),
            g.decode_passes,
            g.drafted,
            g.accepted,
            g.decode.as_secs_f64()
        );
        for decision in &g.decisions {
            let options: Vec<String> = decision
                .options
                .iter()
                .map(|(token, p)| format!("{:?} {p:.3}", model.tokenizer().decode(&[*token]).unwrap_or_default()))
                .collect();
            println!("   at {}: {}", decision.offset, options.join(", "));
        }
    }
    Ok(())
}
