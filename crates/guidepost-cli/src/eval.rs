//! `guidepost eval`: labelled decision cases run against the configured models.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use guidepost_eval::{Models, Options, Report};
use guidepost_llm::TaskKind;

/// Options of `guidepost eval`.
pub struct EvalOptions {
    pub paths: Vec<PathBuf>,
    pub model: Option<String>,
    pub embedder: Option<String>,
    pub threads: Option<usize>,
    pub cache: Option<guidepost_llm::CacheMode>,
    pub recordings: Option<PathBuf>,
    pub repeat: usize,
    pub concurrency: usize,
    pub json: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    pub min_accuracy: Option<f64>,
}

/// Exit status when the accuracy is below `--min-accuracy`.
const BELOW_THRESHOLD: u8 = 1;
/// Exit status when the cases cannot be read.
const BAD_CASES: u8 = 2;
/// Exit status when model calls failed (a provider down, a recording missing).
const CALLS_FAILED: u8 = 3;

/// Writes `text` to `path`, creating its folder.
fn write(path: &std::path::Path, text: &str) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

pub async fn run(options: EvalOptions) -> Result<ExitCode> {
    let suite = match guidepost_eval::load(&options.paths) {
        Ok(suite) => suite,
        Err(errors) => {
            for error in errors {
                eprintln!("error: {error}");
            }
            return Ok(ExitCode::from(BAD_CASES));
        }
    };
    let cache = options.cache.map(|mode| (mode, options.recordings.clone().unwrap_or_else(|| "recordings".into())));
    let stack = crate::models::stack_observed(
        options.model.as_deref(),
        options.embedder.as_deref(),
        options.threads,
        None,
        None,
        cache,
    )?;
    let to_load = stack.models_to_warm_up();
    if !to_load.is_empty() {
        eprintln!("loading {} ...", to_load.join(", "));
        stack.warm_up().await.map_err(|e| anyhow::anyhow!("loading the models: {e}"))?;
    }
    let models = Models {
        matching: stack.model_for(&TaskKind::Matching),
        journey_selection: stack.model_for(&TaskKind::JourneySelection),
        tool_inference: stack.model_for(&TaskKind::ToolInference),
        embedder: Some(stack.embedder()),
    };
    eprintln!("{} cases about {} agent(s), {} run(s) each", suite.cases.len(), suite.agents.len(), options.repeat);
    // The configuration file's engine section (verdict style, batch sizes) applies here as it
    // does in chat and serve: a change to it is measured on the cases before it is deployed.
    let matcher = guidepost_cli::config_file::runtime_config()?.matcher;
    let run = Options { repeat: options.repeat.max(1), concurrency: options.concurrency.max(1), matcher };
    // Each case as it finishes, on standard error: a suite on a local model takes minutes.
    let progress = |done: &guidepost_eval::CaseDone<'_>| {
        let run = if done.run > 0 { format!(" (run {})", done.run + 1) } else { String::new() };
        eprintln!(
            "[{}/{}] {}{run}: {}/{} right ({:.1} s)",
            done.finished, done.total, done.case, done.right, done.decisions, done.seconds
        );
    };
    let outcome = guidepost_eval::evaluate_with(&suite, &models, &run, &progress).await;
    let report = Report::of(&outcome);
    outln!("{}", report.text(&outcome));
    if let Some(path) = &options.json {
        write(path, &serde_json::to_string_pretty(&report.json(&outcome))?)?;
    }
    if let Some(path) = &options.junit {
        write(path, &report.junit(&outcome))?;
    }
    if !report.errors.is_empty() {
        eprintln!("error: {} model call(s) failed; the figures above are not the model's", report.errors.len());
        return Ok(ExitCode::from(CALLS_FAILED));
    }
    Ok(match options.min_accuracy {
        Some(min) if report.accuracy < min => {
            eprintln!("accuracy {:.1} % is below --min-accuracy {:.1} %", report.accuracy * 100.0, min * 100.0);
            ExitCode::from(BELOW_THRESHOLD)
        }
        _ => ExitCode::SUCCESS,
    })
}
