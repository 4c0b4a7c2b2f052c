//! `guidepost eval`: labelled decision cases run against the configured models.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use guidepost_eval::{Models, Options, Outcome, Report};
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
    pub resume: bool,
    pub calibrate: bool,
    pub junit: Option<PathBuf>,
    pub min_accuracy: Option<f64>,
}

/// Exit status when the accuracy is below `--min-accuracy`.
const BELOW_THRESHOLD: u8 = 1;
/// Exit status when the cases cannot be read.
const BAD_CASES: u8 = 2;
/// Exit status when model calls failed (a provider down, a recording missing).
const CALLS_FAILED: u8 = 3;

/// Writes `text` to `path`, creating its folder. The text goes to a file beside it first and
/// then takes its place, so a run stopped while writing leaves the previous report whole.
fn write(path: &std::path::Path, text: &str) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, text).with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("writing {}", path.display()))
}

/// The outcome a resumed run starts from: the report at `path`, if there is one, made with
/// `models`.
fn resumed(path: &std::path::Path, models: &[(String, String)]) -> Result<Outcome> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Outcome::default()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let outcome: Outcome = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a report of guidepost eval --json, cannot resume from it", path.display()))?;
    if !outcome.models.is_empty() && outcome.models != models {
        let named = |m: &[(String, String)]| m.iter().map(|(t, id)| format!("{t}={id}")).collect::<Vec<_>>().join(", ");
        anyhow::bail!(
            "{} was made with other models ({}), not {}: run without --resume, or with those models",
            path.display(),
            named(&outcome.models),
            named(models)
        );
    }
    Ok(outcome)
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
        suite.needs_models(),
    )?;
    // Cases decided by relational resolution alone ask no model: none is loaded for them.
    let to_load = if suite.needs_models() { stack.models_to_warm_up() } else { Vec::new() };
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
    let model_ids: Vec<(String, String)> =
        [("matching", &models.matching), ("journey", &models.journey_selection), ("tool", &models.tool_inference)]
            .iter()
            .map(|(task, model)| (task.to_string(), model.model_id().to_string()))
            .collect();
    let previous = match (options.resume, &options.json) {
        (false, _) => Outcome::default(),
        (true, Some(path)) => resumed(path, &model_ids)?,
        (true, None) => anyhow::bail!("--resume continues the report that --json names: give --json too"),
    };
    eprintln!("{} cases about {} agent(s), {} run(s) each", suite.cases.len(), suite.agents.len(), options.repeat);
    // The configuration file's engine section (verdict style, batch sizes) applies here as it
    // does in chat and serve: a change to it is measured on the cases before it is deployed.
    let matcher = guidepost_cli::config_file::runtime_config()?.matcher;
    let run = Options { repeat: options.repeat.max(1), concurrency: options.concurrency.max(1), matcher };
    // Each case as it finishes, on standard error (a suite on a local model takes minutes),
    // and the JSON report so far, so a run that dies can be resumed.
    let json_path = options.json.clone();
    let failed_write: std::sync::Mutex<Option<anyhow::Error>> = std::sync::Mutex::new(None);
    let progress = |done: &guidepost_eval::CaseDone<'_>, so_far: &Outcome| {
        let run = if done.run > 0 { format!(" (run {})", done.run + 1) } else { String::new() };
        eprintln!(
            "[{}/{}] {}{run}: {}/{} right ({:.1} s)",
            done.finished, done.total, done.case, done.right, done.decisions, done.seconds
        );
        if let Some(path) = &json_path {
            let mut so_far = so_far.clone();
            so_far.models = model_ids.clone();
            let written = serde_json::to_string_pretty(&Report::of(&so_far).json(&so_far))
                .map_err(anyhow::Error::from)
                .and_then(|text| write(path, &text));
            if let Err(e) = written {
                *failed_write.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e);
            }
        }
    };
    let mut outcome = guidepost_eval::evaluate_with(&suite, &models, &run, previous, &progress).await;
    outcome.models = model_ids.clone();
    if let Some(e) = failed_write.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner) {
        return Err(e.context("writing the report as the run went"));
    }
    let report = Report::of(&outcome);
    outln!("{}", report.text(&outcome));
    if options.calibrate {
        outln!("{}", guidepost_eval::report::calibration_text(&guidepost_eval::report::calibration(&outcome)));
    }
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
    // A call without its recording that the engine degraded around is no decision of the model.
    if crate::models::report_replay_misses() {
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
