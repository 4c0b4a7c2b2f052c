//! `guidepost load --saturation`: the server's saturation point, the highest rate of turns it
//! sustains while their 95th-percentile latency stays within 1.5 times a single session's.
//!
//! Load is offered in steps: during each step new conversations start at a steady pace (an
//! open loop: they do not wait for the server), each holding the workload's conversation
//! turn after turn, so turns arrive at the step's rate whatever the server does. A step
//! passes when every turn was answered and the 95th percentile of its turns' latencies is
//! within the bound; the rate then grows by half, and after the first step that fails, two
//! halvings of the interval between the last pass and the first failure narrow it down. A
//! step that is plainly failing (a tenth of twenty or more turns already over the bound)
//! stops offering early, so an overloaded server drains in seconds. The server's CPU time
//! and where it went are measured over every step.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::load::{LoadOptions, Served, TURN_LIMIT, observed_conversation, percentile, serve, split};
use crate::procstat::{Cpu, Snapshot};

/// The first step's rate, in turns per second.
const FIRST_RATE: f64 = 2.0;
/// Each passing step's rate over the previous one's.
const GROWTH: f64 = 1.5;
/// Steps at most before the narrowing ones (the last reaches 2 × 1.5¹⁴ ≈ 580 turns/s).
const MAX_STEPS: usize = 15;
/// Halvings of the interval between the last pass and the first failure.
const NARROWING: usize = 2;
/// The bound on a step's 95th percentile, over a single session's.
const BOUND: f64 = 1.5;

/// What one step measured.
struct Step {
    rate: f64,
    turns: usize,
    errors: usize,
    first_error: Option<String>,
    p50: f64,
    p95: f64,
    stopped_early: bool,
    cpu: Cpu,
    spent: Vec<(String, Cpu)>,
}

impl Step {
    fn passed(&self, bound: f64) -> bool {
        self.errors == 0 && !self.stopped_early && self.turns > 0 && self.p95 <= bound
    }
}

/// Offers `rate` turns per second for `length`, and waits for every conversation to end.
async fn step(served: &Served, rate: f64, length: Duration, bound: f64) -> Step {
    let per_conversation = served.messages.len().max(1) as f64;
    let pace = Duration::from_secs_f64(per_conversation / rate);
    let latencies: Arc<Mutex<Vec<f64>>> = Arc::default();
    let before = Snapshot::take(served.pid);
    let started = Instant::now();
    let mut tasks = Vec::new();
    let mut stopped_early = false;
    let mut next = started;
    while next.duration_since(started) < length {
        tokio::time::sleep_until(next.into()).await;
        {
            let seen = latencies.lock().unwrap_or_else(PoisonError::into_inner);
            let over = seen.iter().filter(|l| **l > bound).count();
            if seen.len() >= 20 && over * 10 >= seen.len() {
                stopped_early = true;
                break;
            }
        }
        let (http, base, agent, messages, seen) = (
            served.http.clone(),
            served.base.clone(),
            served.agent.clone(),
            served.messages.clone(),
            latencies.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let done = move |took: Duration| {
                seen.lock().unwrap_or_else(PoisonError::into_inner).push(took.as_secs_f64());
            };
            observed_conversation(&http, &base, &agent, &messages, TURN_LIMIT, &done).await
        }));
        next += pace;
    }
    let (mut errors, mut first_error) = (0, None);
    for task in tasks {
        let failed = match task.await {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(format!("{e:#}")),
            Err(e) => Some(e.to_string()),
        };
        if let Some(e) = failed {
            errors += 1;
            first_error.get_or_insert(e);
        }
    }
    let after = Snapshot::take(served.pid);
    let mut sorted = latencies.lock().unwrap_or_else(PoisonError::into_inner).clone();
    sorted.sort_by(f64::total_cmp);
    Step {
        rate,
        turns: sorted.len(),
        errors,
        first_error,
        p50: percentile(&sorted, 0.50),
        p95: percentile(&sorted, 0.95),
        stopped_early,
        cpu: after.total_since(&before),
        spent: after.since(&before),
    }
}

/// Finds the saturation point on each store and reports the steps.
pub(crate) async fn run(options: &LoadOptions, stores: &[Option<String>], engine: f64) -> Result<String> {
    let mut text = format!(
        "## Saturation point: {} workload, {} ms per model call, steps of {} s\n\n",
        options.size,
        options.latency_ms,
        options.step.as_secs_f64()
    );
    for store in stores {
        let served = serve(options, store.as_deref()).await?;
        let single = served.baseline(3, &indicatif::ProgressBar::hidden()).await?;
        let bound = BOUND * percentile(&single, 0.95);
        let mut steps: Vec<Step> = Vec::new();
        let (mut passed, mut failed): (Option<f64>, Option<f64>) = (None, None);
        let mut rate = FIRST_RATE;
        for _ in 0..MAX_STEPS {
            let s = step(&served, rate, options.step, bound).await;
            let ok = s.passed(bound);
            steps.push(s);
            if ok {
                passed = Some(rate);
                rate *= GROWTH;
            } else {
                failed = Some(rate);
                break;
            }
        }
        if let (Some(low), Some(high)) = (passed, failed) {
            let (mut low, mut high) = (low, high);
            for _ in 0..NARROWING {
                let middle = (low + high) / 2.0;
                let s = step(&served, middle, options.step, bound).await;
                if s.passed(bound) {
                    low = middle;
                    passed = Some(middle);
                } else {
                    high = middle;
                }
                steps.push(s);
            }
        }
        let _ = write!(
            text,
            "### {}\n\nA single session: p50 {:.2} s, p95 {:.2} s over {} turns; the bound on p95 is {:.2} s.\n\n",
            served.store,
            percentile(&single, 0.50),
            percentile(&single, 0.95),
            single.len(),
            bound
        );
        text.push_str(
            "| offered turns/s | turns | errors | p50 s | p95 s | within bound | server CPU ms/turn |\n|---|---|---|---|---|---|---|\n",
        );
        for s in &steps {
            let verdict = if s.passed(bound) {
                "yes"
            } else if s.stopped_early {
                "no (stopped early)"
            } else {
                "no"
            };
            let _ = writeln!(
                text,
                "| {:.1} | {} | {} | {:.2} | {:.2} | {verdict} | {:.2} |",
                s.rate,
                s.turns,
                s.errors,
                s.p50,
                s.p95,
                s.cpu.total() * 1000.0 / s.turns.max(1) as f64
            );
        }
        match passed {
            Some(rate) => {
                let _ = writeln!(text, "\nSaturation point: **{rate:.1} turns/s**.");
            }
            None => text.push_str("\nNo step kept within the bound.\n"),
        }
        if let Some(e) = steps.iter().find_map(|s| s.first_error.as_ref()) {
            let _ = writeln!(text, "\nFirst error: {e}");
        }
        // Where the time went over the steps that passed (the server working within bound).
        let kept: Vec<&Step> = steps.iter().filter(|s| s.passed(bound)).collect();
        let turns: usize = kept.iter().map(|s| s.turns).sum();
        if turns > 0 {
            let mut spent: Vec<(String, Cpu)> = Vec::new();
            for s in &kept {
                for (kind, cpu) in &s.spent {
                    match spent.iter_mut().find(|(k, _)| k == kind) {
                        Some((_, c)) => {
                            c.user += cpu.user;
                            c.system += cpu.system;
                        }
                        None => spent.push((kind.clone(), *cpu)),
                    }
                }
            }
            spent.sort_by(|a, b| b.1.total().total_cmp(&a.1.total()));
            let whole: f64 = kept.iter().map(|s| s.cpu.total()).sum();
            let _ = write!(
                text,
                "\nWhere the server's CPU went over the steps within bound ({turns} turns):\n\n{}\n{}",
                split(engine, whole * 1000.0 / turns as f64),
                crate::procstat::table(&spent, turns)
            );
        }
        text.push('\n');
    }
    Ok(text)
}
