//! Figures of a run: accuracy per kind of decision, precision and recall of the yes-or-no
//! kinds, pass^k over repeated runs, the decisions that went wrong with the engine's
//! rationale, and latency and tokens per model call; as text, JSON or JUnit XML.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use crate::run::{Decided, Kind, Outcome};

/// The figures of one kind of decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KindFigures {
    /// The kind.
    pub kind: Kind,
    /// Decisions made (every run counts).
    pub decisions: usize,
    /// Decisions made right.
    pub correct: usize,
    /// `correct / decisions`.
    pub accuracy: f64,
    /// Of the decisions that said yes (applies, called), the share that should have; only
    /// for the yes-or-no kinds, and only when one said yes.
    pub precision: Option<f64>,
    /// Of the decisions that should have said yes, the share that did.
    pub recall: Option<f64>,
}

/// Latency and tokens of the model requests of one task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallFigures {
    /// `matching`, `journey` or `tool`.
    pub task: String,
    /// Requests made (a batch of single questions counts each question).
    pub calls: usize,
    /// Requests per case run that made any.
    pub calls_per_case: f64,
    /// Mean latency, in milliseconds.
    pub mean_latency_ms: f64,
    /// The latency half the requests stayed within, in milliseconds.
    pub median_latency_ms: f64,
    /// Mean prompt tokens.
    pub mean_prompt_tokens: f64,
    /// Mean prompt tokens the model reused from an earlier request.
    pub mean_cached_tokens: f64,
    /// Mean completion tokens.
    pub mean_completion_tokens: f64,
}

/// A run's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Runs of each case.
    pub repeat: usize,
    /// Cases run.
    pub cases: usize,
    /// Decisions made right over all, in every run.
    pub accuracy: f64,
    /// Cases whose decisions were all right in every run.
    pub pass_k: f64,
    /// Per kind, in [`Kind::ALL`] order; kinds no case labels are left out.
    pub kinds: Vec<KindFigures>,
    /// Per task of model call.
    pub calls: Vec<CallFigures>,
    /// The decisions that went wrong.
    pub failures: Vec<Decided>,
    /// Model calls that failed, by case: the run is broken, whatever its accuracy.
    pub errors: Vec<(String, String)>,
    /// Wall time, in seconds.
    pub seconds: f64,
}

impl Report {
    /// The figures of `outcome`.
    pub fn of(outcome: &Outcome) -> Self {
        let decisions = &outcome.decisions;
        let share = |part: usize, whole: usize| if whole == 0 { 0.0 } else { part as f64 / whole as f64 };
        let mut kinds = Vec::new();
        for kind in Kind::ALL {
            let of_kind: Vec<&Decided> = decisions.iter().filter(|d| d.kind == kind).collect();
            if of_kind.is_empty() {
                continue;
            }
            let correct = of_kind.iter().filter(|d| d.correct).count();
            let (mut said_yes, mut right_yes, mut should_yes) = (0, 0, 0);
            if matches!(kind, Kind::Guideline | Kind::Relationship | Kind::Tool) {
                for d in &of_kind {
                    let expected = yes(&d.expected);
                    let actual = yes(&d.actual);
                    said_yes += usize::from(actual);
                    should_yes += usize::from(expected);
                    right_yes += usize::from(actual && expected && d.correct);
                }
            }
            let binary = matches!(kind, Kind::Guideline | Kind::Relationship | Kind::Tool);
            kinds.push(KindFigures {
                kind,
                decisions: of_kind.len(),
                correct,
                accuracy: share(correct, of_kind.len()),
                precision: (binary && said_yes > 0).then(|| share(right_yes, said_yes)),
                recall: (binary && should_yes > 0).then(|| share(right_yes, should_yes)),
            });
        }
        // A case passes a run when every decision of that run is right; pass^k needs all k.
        let mut failed_cases: BTreeSet<&str> = BTreeSet::new();
        for d in decisions.iter().filter(|d| !d.correct) {
            failed_cases.insert(&d.case);
        }
        let mut by_task: BTreeMap<&str, Vec<&crate::run::Call>> = BTreeMap::new();
        for call in &outcome.calls {
            by_task.entry(call.task.as_str()).or_default().push(call);
        }
        let mean =
            |values: &mut dyn Iterator<Item = f64>, n: usize| if n == 0 { 0.0 } else { values.sum::<f64>() / n as f64 };
        let runs = outcome.done.len().max(1);
        let calls = by_task
            .into_iter()
            .map(|(task, calls)| {
                let mut latencies: Vec<f64> = calls.iter().map(|c| c.latency_ms).collect();
                latencies.sort_by(f64::total_cmp);
                let cases: BTreeSet<&str> = calls.iter().map(|c| c.case.as_str()).collect();
                CallFigures {
                    task: task.to_string(),
                    calls: calls.len(),
                    calls_per_case: calls.len() as f64 / (cases.len() * outcome.repeat.max(1)).clamp(1, runs) as f64,
                    mean_latency_ms: mean(&mut latencies.iter().copied(), calls.len()),
                    median_latency_ms: latencies.get(latencies.len() / 2).copied().unwrap_or(0.0),
                    mean_prompt_tokens: mean(&mut calls.iter().map(|c| c.prompt_tokens as f64), calls.len()),
                    mean_cached_tokens: mean(&mut calls.iter().map(|c| c.cached_tokens as f64), calls.len()),
                    mean_completion_tokens: mean(&mut calls.iter().map(|c| c.completion_tokens as f64), calls.len()),
                }
            })
            .collect();
        Self {
            repeat: outcome.repeat,
            cases: outcome.cases.len(),
            accuracy: share(decisions.iter().filter(|d| d.correct).count(), decisions.len()),
            pass_k: share(outcome.cases.len() - failed_cases.len(), outcome.cases.len()),
            kinds,
            calls,
            failures: decisions.iter().filter(|d| !d.correct).cloned().collect(),
            errors: outcome.errors.clone(),
            seconds: outcome.seconds,
        }
    }

    /// The report for people: the figures, then each wrong decision with the rationale.
    pub fn text(&self, outcome: &Outcome) -> String {
        let mut out = String::new();
        let _ =
            writeln!(out, "| kind | decisions | right | accuracy | precision | recall |\n|---|---|---|---|---|---|");
        let percent = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.1} %", v * 100.0));
        for k in &self.kinds {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                k.kind.name(),
                k.decisions,
                k.correct,
                percent(Some(k.accuracy)),
                percent(k.precision),
                percent(k.recall)
            );
        }
        let total: usize = self.kinds.iter().map(|k| k.decisions).sum();
        let right: usize = self.kinds.iter().map(|k| k.correct).sum();
        let _ = writeln!(out, "| all | {total} | {right} | {} | | |", percent(Some(self.accuracy)));
        let _ = writeln!(
            out,
            "\n{} cases, {} run(s) each: pass^{} {}. {:.1} s.",
            self.cases,
            self.repeat,
            self.repeat,
            percent(Some(self.pass_k)),
            self.seconds
        );
        if !self.calls.is_empty() {
            let _ = writeln!(
                out,
                "\n| model requests | count | per case | mean latency | median latency | mean prompt tokens (cached) | mean completion tokens |\n|---|---|---|---|---|---|---|"
            );
            for c in &self.calls {
                let _ = writeln!(
                    out,
                    "| {} | {} | {:.1} | {:.0} ms | {:.0} ms | {:.0} ({:.0}) | {:.0} |",
                    c.task,
                    c.calls,
                    c.calls_per_case,
                    c.mean_latency_ms,
                    c.median_latency_ms,
                    c.mean_prompt_tokens,
                    c.mean_cached_tokens,
                    c.mean_completion_tokens
                );
            }
        }
        if !self.errors.is_empty() {
            let _ = writeln!(out, "\nFailed model calls ({}):", self.errors.len());
            for (case, error) in &self.errors {
                let _ = writeln!(out, "- {case}: {}", guidepost_llm::excerpt(error, 300));
            }
        }
        if !self.failures.is_empty() {
            let place: BTreeMap<&str, &str> = outcome.cases.iter().map(|(id, at)| (id.as_str(), at.as_str())).collect();
            let _ = writeln!(out, "\nWrong decisions:");
            for f in &self.failures {
                let _ = writeln!(
                    out,
                    "- {} ({}), run {}: {} `{}`: expected {}, decided {}",
                    f.case,
                    place.get(f.case.as_str()).copied().unwrap_or("?"),
                    f.run + 1,
                    f.kind.name(),
                    f.subject,
                    f.expected,
                    f.actual
                );
                if let Some(why) = &f.rationale {
                    let _ = writeln!(out, "    because: {}", guidepost_llm::excerpt(why, 300));
                }
            }
        }
        out
    }

    /// The report and the whole outcome (every decision, request and failed call, and the
    /// case runs done), as JSON: what `--json` writes as the run goes, and what a resumed run
    /// reads back ([`Outcome`] deserializes from it).
    pub fn json(&self, outcome: &Outcome) -> Value {
        let mut value = serde_json::to_value(outcome).unwrap_or_else(|_| serde_json::json!({}));
        if let Some(object) = value.as_object_mut() {
            object.insert("report".into(), serde_json::to_value(self).unwrap_or(Value::Null));
        }
        value
    }

    /// One JUnit test case per case and run, failed with its wrong decisions.
    pub fn junit(&self, outcome: &Outcome) -> String {
        let escape = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
        let mut cases = String::new();
        let mut failures = 0;
        for run in 0..self.repeat {
            for (id, place) in &outcome.cases {
                let wrong: Vec<&Decided> =
                    outcome.decisions.iter().filter(|d| &d.case == id && d.run == run && !d.correct).collect();
                let name = if self.repeat > 1 { format!("{id} (run {})", run + 1) } else { id.clone() };
                let _ = write!(cases, "    <testcase classname=\"{}\" name=\"{}\"", escape(place), escape(&name));
                if wrong.is_empty() {
                    cases.push_str("/>\n");
                } else {
                    failures += 1;
                    let detail: Vec<String> = wrong
                        .iter()
                        .map(|d| {
                            format!("{} `{}`: expected {}, decided {}", d.kind.name(), d.subject, d.expected, d.actual)
                        })
                        .collect();
                    let _ = write!(
                        cases,
                        ">\n      <failure message=\"{} wrong decision(s)\">{}</failure>\n    </testcase>\n",
                        wrong.len(),
                        escape(&detail.join("\n"))
                    );
                }
            }
        }
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"guidepost eval\" tests=\"{}\" failures=\"{failures}\" time=\"{:.3}\">\n{cases}  </testsuite>\n</testsuites>\n",
            outcome.cases.len() * self.repeat,
            self.seconds
        )
    }
}

/// The guideline decisions of a run at one verdict threshold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThresholdFigures {
    /// "yes" from this probability.
    pub threshold: f32,
    /// Guideline decisions whose check reported how likely "yes" was.
    pub decisions: usize,
    /// Of them, those right at this threshold.
    pub correct: usize,
    /// `correct / decisions`.
    pub accuracy: f64,
}

/// What each verdict threshold from 0.30 to 0.90 would have made of the guideline decisions of
/// `outcome` whose check reported how likely "yes" was (`--calibrate`): run on a calibration
/// split, it picks `engine.verdict_threshold` without looking at the cases it is judged on.
/// Journey transitions are held to the same threshold but are not reweighed here (a
/// transition's verdict moves the journey, and the moves after it depend on it).
pub fn calibration(outcome: &Outcome) -> Vec<ThresholdFigures> {
    let weighed: Vec<(f32, bool)> = outcome
        .decisions
        .iter()
        .filter(|d| d.kind == Kind::Guideline)
        .filter_map(|d| Some((d.probability?, d.expected.as_bool()?)))
        .collect();
    (30..=90)
        .step_by(5)
        .map(|percent| {
            let threshold = percent as f32 / 100.0;
            let correct = weighed.iter().filter(|(p, expected)| (*p >= threshold) == *expected).count();
            let accuracy = if weighed.is_empty() { 0.0 } else { correct as f64 / weighed.len() as f64 };
            ThresholdFigures { threshold, decisions: weighed.len(), correct, accuracy }
        })
        .collect()
}

/// The thresholds of `figures` as a table, with the best one (the lowest of those tied).
pub fn calibration_text(figures: &[ThresholdFigures]) -> String {
    let mut out = String::from("| yes from | right | accuracy |\n|---|---|---|\n");
    for f in figures {
        let _ = writeln!(out, "| {:.2} | {}/{} | {:.1} % |", f.threshold, f.correct, f.decisions, f.accuracy * 100.0);
    }
    let best = figures.iter().fold(None::<&ThresholdFigures>, |best, f| match best {
        Some(b) if b.correct >= f.correct => Some(b),
        _ => Some(f),
    });
    match best {
        Some(b) if b.decisions > 0 => {
            let _ = writeln!(out, "\nBest on these cases: engine.verdict_threshold: {:.2}", b.threshold);
        }
        _ => out.push_str(
            "\nNo guideline decision reported how likely \"yes\" was (a model that reports odds is needed).\n",
        ),
    }
    out
}

/// Whether a decision value says yes: `true`, or arguments a tool was called with.
fn yes(value: &Value) -> bool {
    match value {
        Value::Bool(b) => *b,
        Value::Object(_) => true,
        _ => false,
    }
}
