//! The configuration file: the models of each task, kept in one file instead of the
//! environment. `GUIDEPOST_CONFIG` (or `--config`) names it; an environment variable set for
//! the same setting wins over the file.
//!
//! ```yaml
//! models:
//!   default: openai:gpt-4.1                 # GUIDEPOST_MODEL
//!   matching: openai:gpt-4.1-mini           # GUIDEPOST_MODEL_MATCHING
//!   journey_selection: anthropic:claude-sonnet-4-5
//!   tool_inference: openai:gpt-4.1
//!   generation: openai:gpt-4.1
//!   simulation: openai:gpt-4.1-mini         # the simulator's customer
//!   judge: openai:gpt-4.1                   # the simulator's judge
//!   embedder: openai:text-embedding-3-small # GUIDEPOST_EMBEDDER
//! engine:
//!   verdicts: single              # how checks ask: auto (by the model's capabilities),
//!                                 # reasoned, direct or single
//!   max_guidelines_per_batch: 20  # conditions one check call judges at most
//!   batch_token_budget: 2000      # estimated prompt tokens of one call's list
//!   journey_top_k: 3              # inactive journeys considered per turn
//!   history_turns: 8              # GUIDEPOST_HISTORY_TURNS
//!   recheck_after_tools: related  # after tools ran, check again: related (conditions
//!                                 # the results speak of), unmatched (all) or declared
//!                                 # (only `reevaluate_after` links)
//!   verdict_threshold: 0.7        # the probability of yes from which a one-question check
//!                                 # holds, for models that report it (default: the model's)
//!   ask_both_ways: false          # ask each one-question check and its negation, and weigh
//!                                 # the two answers together
//!   compare_exits: false          # where several conditional ways lead on from a journey
//!                                 # step, ask which one holds, or none, in one comparison
//!   second_look: true             # where the questions about a journey step's exits were
//!                                 # unsure or contested, compare the exits before moving
//!   tasks:                        # per-task overrides of the settings above
//!     matching: { verdicts: direct }
//!     journey_selection: { verdicts: single }   # walk transitions one question at a time
//!                                 # (also `verdict_threshold`: the transitions' own)
//! ```

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Result, bail};
use guidepost_llm::{ModelSettings, ModelStackBuilder, ProviderKeys, StackConfig};
use serde::Deserialize;

/// The variable naming the configuration file.
pub const CONFIG_VAR: &str = "GUIDEPOST_CONFIG";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    models: Models,
    #[serde(default)]
    engine: Engine,
}

/// Engine settings a deployment tunes for its models.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Engine {
    verdicts: Option<guidepost_engine::VerdictStyle>,
    max_guidelines_per_batch: Option<usize>,
    batch_token_budget: Option<usize>,
    journey_top_k: Option<usize>,
    history_turns: Option<usize>,
    recheck_after_tools: Option<guidepost_engine::RecheckAfterTools>,
    verdict_threshold: Option<f32>,
    ask_both_ways: Option<bool>,
    compare_exits: Option<bool>,
    second_look: Option<bool>,
    #[serde(default)]
    tasks: Tasks,
}

/// Engine settings that differ per task (they override the section's own).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Tasks {
    matching: Option<TaskEngine>,
    journey_selection: Option<TaskEngine>,
}

/// The settings one task can override.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskEngine {
    verdicts: Option<guidepost_engine::VerdictStyle>,
    /// The probability of yes from which this task's one-question checks hold.
    verdict_threshold: Option<f32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Models {
    default: Option<String>,
    matching: Option<String>,
    journey_selection: Option<String>,
    tool_inference: Option<String>,
    generation: Option<String>,
    simulation: Option<String>,
    judge: Option<String>,
    embedder: Option<String>,
}

/// Reads a configuration file; an unknown key or a bad value is an error at its line.
fn read(path: &Path) -> Result<ConfigFile> {
    let limits = guidepost_core::limits::Limits::global();
    let text = guidepost_core::files::read_text(path, limits)?;
    if text.trim().is_empty() {
        return Ok(ConfigFile::default());
    }
    // The bounded reader first: deep nesting and alias bombs are refused at their line before
    // the typed parser recurses.
    if let Err(e) = guidepost_core::definition::source::parse_with(&text, limits) {
        bail!("{}:{}:{}: {}", path.display(), e.span.line, e.span.col, e.message);
    }
    yaml_serde::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The settings of a configuration file as the environment variables they stand for, each
/// checked (a bad spec is an error naming the file and its key).
fn variables(path: &Path) -> Result<HashMap<String, String>> {
    let m = read(path)?.models;
    let entries = [
        ("default", "GUIDEPOST_MODEL", m.default),
        ("matching", "GUIDEPOST_MODEL_MATCHING", m.matching),
        ("journey_selection", "GUIDEPOST_MODEL_JOURNEY_SELECTION", m.journey_selection),
        ("tool_inference", "GUIDEPOST_MODEL_TOOL_INFERENCE", m.tool_inference),
        ("generation", "GUIDEPOST_MODEL_GENERATION", m.generation),
        ("simulation", "GUIDEPOST_MODEL_SIMULATION", m.simulation),
        ("judge", "GUIDEPOST_MODEL_JUDGE", m.judge),
        ("embedder", "GUIDEPOST_EMBEDDER", m.embedder),
    ];
    let mut variables = HashMap::new();
    for (key, var, value) in entries {
        let Some(value) = value else { continue };
        value
            .parse::<guidepost_llm::ModelSpec>()
            .map_err(|e| anyhow::anyhow!("{}: models.{key}: {e}", path.display()))?;
        variables.insert(var.to_string(), value);
    }
    Ok(variables)
}

/// The model settings of the environment over those of `file` (when given), read through
/// `env`.
pub fn model_settings_from(file: Option<&Path>, env: impl Fn(&str) -> Option<String>) -> Result<ModelSettings> {
    let from_file = match file {
        Some(path) => variables(path)?,
        None => HashMap::new(),
    };
    let lookup = |var: &str| env(var).filter(|v| !v.trim().is_empty()).or_else(|| from_file.get(var).cloned());
    Ok(ModelSettings::from_lookup(lookup)?)
}

/// The runtime settings of the environment and of `file`'s `engine` section (a value the
/// environment sets wins).
pub fn runtime_config_from(
    file: Option<&Path>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<guidepost_runtime::RuntimeConfig> {
    let engine = match file {
        Some(path) => read(path)?.engine,
        None => Engine::default(),
    };
    let thresholds = [
        ("engine.verdict_threshold", engine.verdict_threshold),
        (
            "engine.tasks.journey_selection.verdict_threshold",
            engine.tasks.journey_selection.as_ref().and_then(|t| t.verdict_threshold),
        ),
        ("engine.tasks.matching.verdict_threshold", engine.tasks.matching.as_ref().and_then(|t| t.verdict_threshold)),
    ];
    for (key, t) in thresholds {
        if let Some(t) = t
            && !(0.0..=1.0).contains(&t)
        {
            let file = file.map(|p| p.display().to_string()).unwrap_or_default();
            anyhow::bail!("{file}: {key}: {t} is not a probability between 0 and 1");
        }
    }
    let mut config = guidepost_runtime::RuntimeConfig::from_vars(&env)?;
    let m = &mut config.matcher;
    if let Some(v) = engine.verdicts {
        m.verdicts = v;
    }
    if let Some(n) = engine.max_guidelines_per_batch {
        m.max_guidelines_per_batch = n.max(1);
    }
    if let Some(n) = engine.batch_token_budget {
        m.batch_token_budget = n.max(1);
    }
    if let Some(n) = engine.journey_top_k {
        m.journey_top_k = n;
    }
    if let Some(r) = engine.recheck_after_tools {
        m.recheck_after_tools = r;
    }
    if let Some(t) = engine.verdict_threshold {
        m.verdict_threshold = Some(t);
    }
    if let Some(both) = engine.ask_both_ways {
        m.ask_both_ways = both;
    }
    if let Some(compare) = engine.compare_exits {
        m.compare_exits = compare;
    }
    if let Some(second) = engine.second_look {
        m.second_look = second;
    }
    if let Some(task) = &engine.tasks.matching {
        if let Some(v) = task.verdicts {
            m.verdicts = v;
        }
        if let Some(t) = task.verdict_threshold {
            m.verdict_threshold = Some(t);
        }
    }
    if let Some(task) = &engine.tasks.journey_selection {
        if let Some(v) = task.verdicts {
            m.journey_verdicts = Some(v);
        }
        if let Some(t) = task.verdict_threshold {
            m.journey_verdict_threshold = Some(t);
        }
    }
    if config.history_turns.is_none() {
        config.history_turns = engine.history_turns.filter(|n| *n > 0);
    }
    Ok(config)
}

/// The runtime settings of the process environment and the configuration file.
pub fn runtime_config() -> Result<guidepost_runtime::RuntimeConfig> {
    runtime_config_from(config_path().as_deref(), |var| std::env::var(var).ok())
}

/// The configuration file named by `GUIDEPOST_CONFIG`, if any.
pub fn config_path() -> Option<std::path::PathBuf> {
    std::env::var_os(CONFIG_VAR).filter(|v| !v.is_empty()).map(std::path::PathBuf::from)
}

/// A model stack builder from the environment and the configuration file.
pub fn stack_builder() -> Result<ModelStackBuilder> {
    let path = config_path();
    let settings = model_settings_from(path.as_deref(), |var| std::env::var(var).ok())?;
    Ok(ModelStackBuilder::new(settings).keys(ProviderKeys::from_env()).config(StackConfig::from_env()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use guidepost_llm::{ModelSpec, TaskKind};

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn every_task_takes_its_model_from_the_file_and_the_environment_wins() {
        let f = file(
            "models:\n  default: openai:gpt-4.1\n  matching: openai:gpt-4.1-mini\n  journey_selection: anthropic:claude-sonnet-4-5\n  tool_inference: openai:o4-mini\n  generation: local:qwen2.5-coder-1.5b\n  simulation: openai:gpt-4.1-nano\n  judge: openai:gpt-5\n  embedder: local:all-minilm-l6-v2\n",
        );
        let s = model_settings_from(Some(f.path()), |_| None).unwrap();
        let spec = |task: TaskKind| s.spec_for(&task).to_string();
        assert_eq!(spec(TaskKind::Matching), "openai:gpt-4.1-mini");
        assert_eq!(spec(TaskKind::JourneySelection), "anthropic:claude-sonnet-4-5");
        assert_eq!(spec(TaskKind::ToolInference), "openai:o4-mini");
        assert_eq!(spec(TaskKind::Generation), "local:qwen2.5-coder-1.5b");
        assert_eq!(spec(TaskKind::Simulation), "openai:gpt-4.1-nano");
        assert_eq!(spec(TaskKind::Judge), "openai:gpt-5");
        assert_eq!(spec(TaskKind::Embedding), "local:all-minilm-l6-v2");
        assert_eq!(s.default, "openai:gpt-4.1".parse::<ModelSpec>().unwrap());

        let env = |var: &str| (var == "GUIDEPOST_MODEL_MATCHING").then(|| "openai:gpt-5-mini".to_string());
        let s = model_settings_from(Some(f.path()), env).unwrap();
        assert_eq!(s.spec_for(&TaskKind::Matching).to_string(), "openai:gpt-5-mini", "the environment wins");
        assert_eq!(s.spec_for(&TaskKind::Generation).to_string(), "local:qwen2.5-coder-1.5b");
    }

    #[test]
    fn the_engine_section_sets_how_checks_are_asked() {
        use guidepost_engine::VerdictStyle;
        let f = file(
            "engine:\n  verdicts: single\n  max_guidelines_per_batch: 20\n  batch_token_budget: 2000\n  journey_top_k: 3\n  history_turns: 8\n  recheck_after_tools: declared\n  verdict_threshold: 0.7\n  ask_both_ways: true\n",
        );
        let c = runtime_config_from(Some(f.path()), |_| None).unwrap();
        assert_eq!(c.matcher.verdicts, VerdictStyle::Single);
        assert_eq!(c.matcher.recheck_after_tools, guidepost_engine::RecheckAfterTools::Declared);
        assert_eq!(c.matcher.verdict_threshold, Some(0.7));
        assert!(c.matcher.ask_both_ways);
        assert_eq!(c.matcher.journey_verdicts, None, "journeys follow the checks unless told");

        assert_eq!((c.matcher.max_guidelines_per_batch, c.matcher.batch_token_budget), (20, 2000));
        assert_eq!((c.matcher.journey_top_k, c.history_turns), (3, Some(8)));
        let env = |var: &str| (var == "GUIDEPOST_HISTORY_TURNS").then(|| "4".to_string());
        assert_eq!(runtime_config_from(Some(f.path()), env).unwrap().history_turns, Some(4), "the environment wins");
        let defaults = runtime_config_from(None, |_| None).unwrap();
        assert_eq!(defaults.matcher.verdicts, VerdictStyle::Auto);

        let f = file("engine:\n  verdicts: sometimes\n");
        let e = runtime_config_from(Some(f.path()), |_| None).unwrap_err().to_string();
        assert!(e.contains("sometimes") && e.contains("line 2"), "{e}");
        let f = file("engine:\n  verdict_threshold: 1.5\n");
        let e = runtime_config_from(Some(f.path()), |_| None).unwrap_err().to_string();
        assert!(e.contains("engine.verdict_threshold") && e.contains("1.5"), "{e}");
        let f = file("engine:\n  tasks:\n    journey_selection: {verdict_threshold: -0.1}\n");
        let e = runtime_config_from(Some(f.path()), |_| None).unwrap_err().to_string();
        assert!(e.contains("engine.tasks.journey_selection.verdict_threshold"), "{e}");

        // A threshold of the journeys' own, the checks' left alone.
        let f = file("engine:\n  verdict_threshold: 0.7\n  tasks:\n    journey_selection: {verdict_threshold: 0.6}\n");
        let c = runtime_config_from(Some(f.path()), |_| None).unwrap();
        assert_eq!((c.matcher.verdict_threshold, c.matcher.journey_verdict_threshold), (Some(0.7), Some(0.6)));

        // Per task: the journey steps or the checks alone.
        let f = file("engine:\n  verdicts: reasoned\n  tasks:\n    journey_selection: {verdicts: single}\n");
        let c = runtime_config_from(Some(f.path()), |_| None).unwrap();
        assert_eq!(
            (c.matcher.verdicts, c.matcher.journey_verdicts),
            (VerdictStyle::Reasoned, Some(VerdictStyle::Single))
        );
        let f = file("engine:\n  verdicts: reasoned\n  tasks:\n    matching: {verdicts: direct}\n");
        let c = runtime_config_from(Some(f.path()), |_| None).unwrap();
        assert_eq!((c.matcher.verdicts, c.matcher.journey_verdicts), (VerdictStyle::Direct, None));
        let f = file("engine:\n  tasks:\n    generation: {verdicts: single}\n");
        let e = runtime_config_from(Some(f.path()), |_| None).unwrap_err().to_string();
        assert!(e.contains("generation") && e.contains("line 3"), "{e}");
    }

    #[test]
    fn a_bad_file_is_an_error_that_says_where() {
        let f = file("models:\n  matching: openai:gpt-4.1\n  generaton: openai:gpt-4.1\n");
        let e = model_settings_from(Some(f.path()), |_| None).unwrap_err().to_string();
        assert!(e.contains(&f.path().display().to_string()) && e.contains("generaton") && e.contains("line 3"), "{e}");
        let f = file("models:\n  matching: nonsense\n");
        let e = model_settings_from(Some(f.path()), |_| None).unwrap_err().to_string();
        assert!(e.contains(&f.path().display().to_string()) && e.contains("models.matching"), "{e}");
        let e = model_settings_from(Some(Path::new("/nonexistent/guidepost.yaml")), |_| None).unwrap_err();
        assert!(format!("{e:#}").contains("/nonexistent/guidepost.yaml"), "{e:#}");
    }
}
