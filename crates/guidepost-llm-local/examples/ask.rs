//! Answers saved chat requests with a local model: the quickest way to see how a prompt
//! change plays out on the model before a whole conversation is re-run.
//!
//! ```text
//! cargo run -p guidepost-llm-local --release --example ask -- [--model qwen2.5-coder-1.5b] [--threads N] [--together] FILE...
//! ```
//!
//! Each FILE holds a chat request as JSON, or a recording of the model layer's cache (its
//! `request` field). The model loads once; with `--together` every request is queued before
//! the first is read, as requests that arrive at once are (their prompts read in shared
//! passes where they continue the same cache), and the time of all is printed at the end.
//! Each answer is printed with its time, and below it
//! what it read and wrote (new prompt tokens, passes, drafted tokens taken) and every point where
//! the answer's grammar left the model a choice, with the likeliest options.

use std::time::Instant;

use guidepost_llm::ChatRequest;
use guidepost_llm_local::{LocalChatModel, LocalOptions};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut model, mut options, mut files) = ("qwen2.5-coder-1.5b".to_string(), LocalOptions::from_env(), Vec::new());
    let mut together = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--model" => model = args.next().ok_or_else(|| anyhow::anyhow!("--model needs a value"))?,
            "--threads" => {
                let n = args.next().ok_or_else(|| anyhow::anyhow!("--threads needs a value"))?;
                options.threads = Some(n.parse()?);
            }
            "--together" => together = true,
            _ => files.push(arg),
        }
    }
    let model = LocalChatModel::load(&model, &options)?;
    let mut requests = Vec::with_capacity(files.len());
    for file in &files {
        let mut value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file)?)?;
        if let Some(mut request) = value.get("request").cloned() {
            // A recording keeps the task beside the request.
            if let (Some(task), Some(fields)) = (value.get("task"), request.as_object_mut()) {
                fields.entry("task").or_insert_with(|| task.clone());
            }
            value = request;
        }
        requests.push(serde_json::from_value::<ChatRequest>(value)?);
    }
    let all = Instant::now();
    let answers: Vec<_> = if together {
        model.answer_all_blocking(&requests).into_iter().map(|a| (a, None)).collect()
    } else {
        requests
            .iter()
            .map(|req| {
                let start = Instant::now();
                (model.answer_blocking(req), Some(start.elapsed()))
            })
            .collect()
    };
    let all = all.elapsed();
    for (file, (answer, took)) in files.iter().zip(answers) {
        let answer = answer?;
        let g = &answer.generation;
        let took = took.map_or_else(String::new, |t| format!(" ({:.1} s)", t.as_secs_f64()));
        println!("== {file}{took}\n{}", answer.output.to_text());
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
    println!("{} answers in {:.2} s", files.len(), all.as_secs_f64());
    Ok(())
}
