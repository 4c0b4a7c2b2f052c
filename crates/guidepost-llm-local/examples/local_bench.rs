//! Speed of Guidepost's local models on this machine.
//!
//! ```text
//! cargo run -p guidepost-llm-local --release --example local_bench [-- --threads N]
//! ```
//!
//! Prints one table: load time, prompt (prefill) and generation tokens per second for
//! SmolLM2 and, when installed, Qwen2.5-Coder-1.5B; MiniLM latency for one sentence and for a
//! batch of eight. Greedy decoding; the median of a few runs. The local model's variables
//! apply as they do to the server (`GUIDEPOST_LOCAL_AMX=1`, `GUIDEPOST_LOCAL_THREADS`).

use std::time::{Duration, Instant};

use guidepost_llm::{ChatRequest, TaskKind};
use guidepost_llm_local::{LocalChatModel, LocalEmbedder, LocalOptions, ModelKind};

const PROMPT: &str = "Here is our returns policy. Items can be returned within 30 days of \
delivery if they are unused and in their original packaging. Refunds go back to the original \
payment method within five business days after the warehouse receives the parcel. Sale items \
can be exchanged but not refunded. Customers who received a damaged or wrong item get a free \
return label and may choose a replacement instead of a refund. Orders shipped outside the \
country are refunded without the shipping cost. Gift cards cannot be refunded. A customer writes: \
\"My order arrived with a cracked screen, I bought it two weeks ago on sale, and I would like my \
money back rather than a replacement. What happens now?\" Write a detailed, friendly answer that \
explains every step of the process to the customer.";

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn per_second(tokens: usize, time: Duration) -> f64 {
    tokens as f64 / time.as_secs_f64().max(1e-9)
}

fn bench_chat(spec: &str, options: &LocalOptions, runs: usize) -> Result<String, String> {
    let start = Instant::now();
    let model = LocalChatModel::load(spec, options).map_err(|e| e.to_string())?;
    let load = start.elapsed();
    let loaded_rss = resident_mib();
    let mut prefill = Vec::new();
    let mut generate = Vec::new();
    let mut prompt_tokens = 0;
    let mut generated = 0;
    for run in 0..runs {
        // A different first line each run: nothing comes from the prefix cache.
        let req = ChatRequest::new(TaskKind::Generation).user(format!("Run {run}.\n{PROMPT}")).max_tokens(64);
        let answer = model.answer_blocking(&req).map_err(|e| e.to_string())?;
        let g = answer.generation;
        prompt_tokens = g.prompt_tokens - g.cached_prompt_tokens;
        generated = g.token_ids.len();
        prefill.push(per_second(prompt_tokens, g.prefill));
        generate.push(per_second(g.token_ids.len(), g.decode));
    }
    // The same instructions, a different question at the end: the shared prefix comes from
    // the cache (as for a task's successive calls in a conversation).
    let shared = ChatRequest::new(TaskKind::Generation)
        .user(format!("Run {}.\n{PROMPT} Keep it under three sentences.", runs.saturating_sub(1)))
        .max_tokens(8);
    let start = Instant::now();
    let answer = model.answer_blocking(&shared).map_err(|e| e.to_string())?;
    let shared_time = start.elapsed().as_secs_f64();
    let reused = answer.generation.cached_prompt_tokens;
    // A structured guideline check; the first call also builds the grammar tables.
    let check = ChatRequest::new(TaskKind::Matching)
        .system("You check whether a guideline applies to the customer's latest message.")
        .user("Customer: my parcel never arrived, I want my money back.\nGuideline refund: the customer asks for a refund.")
        .json_output("check", check_schema());
    let mut json = Vec::new();
    for _ in 0..2 {
        let start = Instant::now();
        model.answer_blocking(&check).map_err(|e| e.to_string())?;
        json.push(start.elapsed().as_secs_f64());
    }
    let rss = resident_mib();
    Ok(format!(
        "| {spec} | {:.2} s | {loaded_rss} / {rss} | {:.0} ({prompt_tokens} tokens) | {:.1} ({generated} tokens) | {:.2} s ({reused} cached) | {:.2} s / {:.2} s |",
        load.as_secs_f64(),
        median(prefill),
        median(generate),
        shared_time,
        json[0],
        json[1],
    ))
}

/// The process's resident memory, from /proc (Linux), as text.
fn resident_mib() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<f64>().ok()))
        })
        .map_or_else(|| "?".into(), |kb| format!("{:.0} MiB", kb / 1024.0))
}

fn check_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "guideline_id": {"type": "string", "enum": ["refund", "shipping"]},
            "applies": {"type": "boolean"}
        },
        "required": ["guideline_id", "applies"],
        "additionalProperties": false
    })
}

fn bench_embed(options: &LocalOptions) -> Result<String, String> {
    let start = Instant::now();
    let embedder = LocalEmbedder::load("local:all-minilm-l6-v2", options).map_err(|e| e.to_string())?;
    let load = start.elapsed();
    let sentences: Vec<String> = [
        "How do I reset my password?",
        "What are your opening hours on Sunday?",
        "I want to cancel my subscription.",
        "Where is my package?",
        "The parcel arrived damaged, can I get a replacement?",
        "Do you ship to Canada?",
        "Can I change the delivery address of my order?",
        "Thanks for your help, goodbye!",
    ]
    .iter()
    .map(|s| (*s).to_string())
    .collect();
    embedder.embed_blocking(&sentences).map_err(|e| e.to_string())?; // warm-up
    let mut single = Vec::new();
    for sentence in &sentences {
        let start = Instant::now();
        embedder.embed_blocking(std::slice::from_ref(sentence)).map_err(|e| e.to_string())?;
        single.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    let mut batch = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        embedder.embed_blocking(&sentences).map_err(|e| e.to_string())?;
        batch.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(format!(
        "| local:all-minilm-l6-v2 | load {:.2} s | single {:.1} ms | batch of 8: {:.1} ms |",
        load.as_secs_f64(),
        median(single),
        median(batch)
    ))
}

fn main() {
    // The environment's settings, as the server takes them (`GUIDEPOST_LOCAL_AMX=1` for the
    // AMX tiles).
    let mut options = LocalOptions::from_env();
    let args: Vec<String> = std::env::args().collect();
    if let Some(n) =
        args.iter().position(|a| a == "--threads").and_then(|i| args.get(i + 1)).and_then(|n| n.parse().ok())
    {
        options = options.with_threads(n);
    }
    let threads = match options.threads {
        Some(n) => n.to_string(),
        None => std::env::var("CANDLE_NUM_THREADS")
            .or_else(|_| std::env::var("RAYON_NUM_THREADS"))
            .unwrap_or_else(|_| "default (physical cores)".into()),
    };
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("threads: {threads}; load average before: {}", load.trim());
    println!();
    println!(
        "| chat model | load | RSS loaded / after | prompt tok/s | generation tok/s | shared-prefix call | JSON check first / next |"
    );
    println!("|---|---|---|---|---|---|---|");
    let dir = options.models_dir();
    for (spec, kind, runs) in
        [("local:smollm2", ModelKind::SmolLm2, 3), ("local:qwen2.5-coder-1.5b", ModelKind::Qwen, 2)]
    {
        if kind.ensure_installed(&dir).is_err() {
            println!("| {spec} | not installed | | |");
            continue;
        }
        match bench_chat(spec, &options, runs) {
            Ok(row) => println!("{row}"),
            Err(e) => println!("| {spec} | error: {e} | | |"),
        }
    }
    println!();
    println!("| embedder | load | latency | |");
    println!("|---|---|---|---|");
    match bench_embed(&options) {
        Ok(row) => println!("{row}"),
        Err(e) => println!("| local:all-minilm-l6-v2 | error: {e} | | |"),
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!();
    println!("load average after: {}", load.trim());
}
