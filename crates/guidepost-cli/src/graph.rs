//! `guidepost graph`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use guidepost_core::graph::{Format, journey_diagram, projection_diagram};
use guidepost_core::model::AgentDefinition;
use guidepost_core::projection::project;

use crate::discover::{FoundAgent, discover, discover_here};

/// What to draw.
pub struct GraphOptions {
    /// Definition files or folders, and journey selectors (`JOURNEY` or `AGENT/JOURNEY`)
    /// for arguments that are not existing paths.
    pub targets: Vec<String>,
    /// Only this journey.
    pub journey: Option<String>,
    /// Only this agent.
    pub agent: Option<String>,
    /// Diagram syntax.
    pub format: Format,
    /// Draw the projected node guidelines instead of the states.
    pub projection: bool,
}

/// One journey to draw.
struct Selected {
    agent: String,
    journey: String,
    title: String,
    diagram: String,
}

pub fn run(options: GraphOptions) -> Result<ExitCode> {
    let mut paths = Vec::new();
    let mut journey = options.journey.clone();
    let mut agent = options.agent.clone();
    for target in &options.targets {
        if std::path::Path::new(target).exists() {
            paths.push(PathBuf::from(target));
            continue;
        }
        if journey.is_some() {
            bail!("{target} is not a file or folder");
        }
        match target.split_once('/') {
            Some((a, j)) if !a.is_empty() && !j.is_empty() && !j.contains('/') => {
                agent.get_or_insert_with(|| a.to_string());
                journey = Some(j.to_string());
            }
            Some(_) => bail!("{target} does not exist"),
            None => journey = Some(target.clone()),
        }
    }
    let found = if paths.is_empty() { discover_here()? } else { discover(&paths)? };
    let explicit = !paths.is_empty();
    let mut selected = Vec::new();
    let mut known = Vec::new();
    let mut broken: Vec<&FoundAgent> = Vec::new();
    for candidate in &found {
        let loaded = candidate.load();
        let Some(definition) = loaded.definition else {
            broken.push(candidate);
            continue;
        };
        if agent.as_deref().is_some_and(|a| a != definition.agent.id) {
            continue;
        }
        for j in &definition.journeys {
            known.push(format!("{}/{}", definition.agent.id, j.id));
            if journey.as_deref().is_none_or(|wanted| wanted == j.id) {
                selected.push(draw(&definition, &j.id, options.format, options.projection)?);
            }
        }
    }
    // Agents that do not load: when nothing else could be drawn, their problems are the
    // answer (shown as `check` shows them); otherwise a warning for the ones named.
    if !broken.is_empty() {
        let names: Vec<String> = broken.iter().map(|b| b.origin.display().to_string()).collect();
        if selected.is_empty() {
            for candidate in &broken {
                for d in &candidate.load().diagnostics {
                    let source = candidate.sources.iter().find(|s| s.name == d.file).map(|s| s.text.as_str());
                    eprintln!("{}", d.render(source));
                }
            }
            bail!("{} does not load (the problems are above)", names.join(", "));
        }
        if explicit {
            eprintln!("warning: {} does not load; run `guidepost check` on it", names.join(", "));
        }
    }
    if selected.is_empty() {
        let list = if known.is_empty() { "none".to_string() } else { known.join(", ") };
        let place = if explicit {
            paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        } else {
            "the current folder".into()
        };
        match (&journey, &agent) {
            (Some(j), _) => bail!("no journey `{j}` in {place}; journeys: {list}"),
            (None, Some(a)) => bail!("no agent `{a}` with journeys in {place}; journeys: {list}"),
            (None, None) if found.is_empty() => {
                bail!(
                    "no agent definitions in {place}; give a definition file or folder, e.g. `guidepost graph examples/agents/taxi.yaml`"
                )
            }
            (None, None) => bail!("the agents in {place} have no journeys"),
        }
    }
    if journey.is_some() && agent.is_none() {
        let agents: Vec<&str> = selected.iter().map(|s| s.agent.as_str()).collect();
        if agents.len() > 1 {
            let list = selected.iter().map(|s| format!("{}/{}", s.agent, s.journey)).collect::<Vec<_>>().join(", ");
            bail!("several agents have this journey; write one of {list} (or --agent)");
        }
    }
    if selected.len() == 1 {
        out!("{}", selected[0].diagram);
        return Ok(ExitCode::SUCCESS);
    }
    // Several journeys: Mermaid as a Markdown document with one diagram per journey (GitHub
    // renders it); DOT as one file of several graphs (`dot -Tsvg -O` writes one per graph).
    for (i, s) in selected.iter().enumerate() {
        match options.format {
            Format::Mermaid => {
                if i > 0 {
                    outln!();
                }
                outln!("## {} ({}/{})\n\n```mermaid\n{}```", s.title, s.agent, s.journey, s.diagram);
            }
            Format::Dot => out!("{}", s.diagram),
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn draw(definition: &AgentDefinition, journey_id: &str, format: Format, projection: bool) -> Result<Selected> {
    let Some(journey) = definition.journey(journey_id) else { bail!("no journey `{journey_id}`") };
    let diagram = if projection {
        let nodes = project(definition, journey_id).unwrap_or_default();
        projection_diagram(&nodes, format)
    } else {
        journey_diagram(journey, format)
    };
    Ok(Selected {
        agent: definition.agent.id.clone(),
        journey: journey_id.to_string(),
        title: journey.title.clone(),
        diagram,
    })
}
