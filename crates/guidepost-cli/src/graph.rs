//! `guidepost graph`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use guidepost_core::graph::{Format, journey_diagram, projection_diagram};
use guidepost_core::projection::project;

use crate::discover::discover;

pub fn run(journey: &str, paths: &[PathBuf], format: Format, projection: bool) -> Result<ExitCode> {
    let (agent_filter, journey_id) = match journey.split_once('/') {
        Some((a, j)) => (Some(a), j),
        None => (None, journey),
    };
    let mut candidates = Vec::new();
    let mut known = Vec::new();
    for found in discover(paths)? {
        let loaded = found.load();
        let Some(definition) = loaded.definition else {
            if agent_filter.is_none() {
                continue;
            }
            bail!("{} does not load; run `guidepost check {}`", found.origin.display(), found.origin.display());
        };
        if agent_filter.is_some_and(|a| a != definition.agent.id) {
            continue;
        }
        for j in &definition.journeys {
            known.push(format!("{}/{}", definition.agent.id, j.id));
        }
        if definition.journey(journey_id).is_some() {
            candidates.push(definition);
        }
    }
    let definition = match candidates.len() {
        1 => candidates.remove(0),
        0 => {
            let list = if known.is_empty() { "none".to_string() } else { known.join(", ") };
            bail!("no journey `{journey}` found; journeys: {list}");
        }
        _ => {
            let list = candidates.iter().map(|d| format!("{}/{journey_id}", d.agent.id)).collect::<Vec<_>>().join(", ");
            bail!("several agents have a journey `{journey_id}`; write one of {list}");
        }
    };
    let diagram = if projection {
        let nodes = project(&definition, journey_id).unwrap_or_default();
        projection_diagram(&nodes, format)
    } else {
        match definition.journey(journey_id) {
            Some(j) => journey_diagram(j, format),
            None => bail!("no journey `{journey_id}`"),
        }
    };
    print!("{diagram}");
    Ok(ExitCode::SUCCESS)
}
