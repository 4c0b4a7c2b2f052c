//! Journey coverage: which journey states and transitions, and which guidelines, the runs
//! exercised, according to the engine observations the agent reported, measured against the
//! agent definition; with the gaps listed.

use std::collections::BTreeMap;

use guidepost_core::AgentDefinition;
use guidepost_core::journey::{END_STATE, START_STATE};
use guidepost_core::projection::project;
use serde::{Deserialize, Serialize};

use crate::runner::RunResult;

/// Coverage of one state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateCoverage {
    /// The state (`{state}` or `{state}>{child}` inside an inlined sub-journey).
    pub state: String,
    /// Times reached over all runs.
    pub visits: usize,
}

/// Coverage of one transition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransitionCoverage {
    /// The transition id.
    pub id: String,
    /// Source state.
    pub from: String,
    /// Target state.
    pub to: String,
    /// Its condition.
    pub condition: Option<String>,
    /// Times taken over all runs.
    pub visits: usize,
}

/// Coverage of one journey.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JourneyCoverage {
    /// The journey id.
    pub journey: String,
    /// Its title.
    pub title: String,
    /// Runs in which it was entered.
    pub runs_entered: usize,
    /// Runs in which it completed.
    pub runs_completed: usize,
    /// Every state with its visits.
    pub states: Vec<StateCoverage>,
    /// Every transition with its visits.
    pub transitions: Vec<TransitionCoverage>,
    /// States never reached.
    pub missed_states: Vec<String>,
    /// Transitions never taken (ids).
    pub missed_transitions: Vec<String>,
}

/// Coverage of an agent definition by a set of runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoverageReport {
    /// The agent.
    pub agent: String,
    /// Runs considered.
    pub runs: usize,
    /// Runs whose agent reported engine observations.
    pub runs_with_engine_observations: usize,
    /// Per journey.
    pub journeys: Vec<JourneyCoverage>,
    /// Guidelines matched, with counts.
    pub guidelines_matched: BTreeMap<String, usize>,
    /// Guidelines never matched.
    pub guidelines_missed: Vec<String>,
    /// Journey nodes the agent reported that could not be attributed to a journey (opaque
    /// Parlant node ids), with counts: they may hide visits the states above do not show.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unattributed_journey_nodes: BTreeMap<String, usize>,
}

/// Computes the coverage of `definition` by `runs`.
pub fn compute_coverage<'a>(
    definition: &AgentDefinition,
    runs: impl IntoIterator<Item = &'a RunResult>,
) -> CoverageReport {
    let runs: Vec<&RunResult> = runs.into_iter().collect();
    let mut journeys = Vec::new();
    for journey in &definition.journeys {
        let mut states: Vec<String> = match project(definition, &journey.id) {
            Some(nodes) => nodes.iter().map(|n| n.node.clone()).filter(|n| n != START_STATE).collect(),
            None => journey.states.iter().map(|s| s.id.clone()).collect(),
        };
        states.dedup();
        let mut unique = Vec::new();
        for s in states {
            if !unique.contains(&s) {
                unique.push(s);
            }
        }
        let mut state_visits: BTreeMap<String, usize> = unique.iter().map(|s| (s.clone(), 0)).collect();
        let mut transition_visits: BTreeMap<String, usize> =
            journey.transitions.iter().map(|t| (t.id.clone(), 0)).collect();
        let (mut entered, mut completed) = (0, 0);
        for run in &runs {
            let seen = &run.observations;
            let reached: Vec<_> = seen.journey_states.iter().filter(|s| s.journey == journey.id).collect();
            if seen.journeys_entered.contains(&journey.id) || !reached.is_empty() {
                entered += 1;
            }
            if seen.journeys_completed.contains(&journey.id) || reached.iter().any(|s| s.state == END_STATE) {
                completed += 1;
            }
            let mut previous = START_STATE.to_string();
            for state in reached {
                if let Some(v) = state_visits.get_mut(&state.state) {
                    *v += 1;
                }
                let taken = state.edge.as_ref().filter(|e| transition_visits.contains_key(*e)).cloned().or_else(|| {
                    journey.transitions.iter().find(|t| t.from == previous && t.to == state.state).map(|t| t.id.clone())
                });
                if let Some(id) = taken
                    && let Some(v) = transition_visits.get_mut(&id)
                {
                    *v += 1;
                }
                previous = if state.state == END_STATE { START_STATE.to_string() } else { state.state.clone() };
            }
        }
        let states: Vec<StateCoverage> = unique
            .iter()
            .map(|s| StateCoverage { state: s.clone(), visits: state_visits.get(s).copied().unwrap_or(0) })
            .collect();
        let transitions: Vec<TransitionCoverage> = journey
            .transitions
            .iter()
            .map(|t| TransitionCoverage {
                id: t.id.clone(),
                from: t.from.clone(),
                to: t.to.clone(),
                condition: t.condition.clone(),
                visits: transition_visits.get(&t.id).copied().unwrap_or(0),
            })
            .collect();
        journeys.push(JourneyCoverage {
            journey: journey.id.clone(),
            title: journey.title.clone(),
            runs_entered: entered,
            runs_completed: completed,
            missed_states: states.iter().filter(|s| s.visits == 0).map(|s| s.state.clone()).collect(),
            missed_transitions: transitions.iter().filter(|t| t.visits == 0).map(|t| t.id.clone()).collect(),
            states,
            transitions,
        });
    }
    let mut matched: BTreeMap<String, usize> = BTreeMap::new();
    for run in &runs {
        for g in &run.observations.guidelines_matched {
            if definition.guideline(g).is_some() {
                *matched.entry(g.clone()).or_default() += 1;
            }
        }
    }
    let missed = definition.guidelines.iter().filter(|g| !matched.contains_key(&g.id)).map(|g| g.id.clone()).collect();
    let mut unattributed: BTreeMap<String, usize> = BTreeMap::new();
    for node in runs.iter().flat_map(|r| &r.observations.unattributed_journey_nodes) {
        *unattributed.entry(node.node.clone()).or_default() += 1;
    }
    CoverageReport {
        agent: definition.agent.name.clone(),
        runs: runs.len(),
        runs_with_engine_observations: runs.iter().filter(|r| r.reports_engine).count(),
        journeys,
        guidelines_matched: matched,
        guidelines_missed: missed,
        unattributed_journey_nodes: unattributed,
    }
}

impl CoverageReport {
    /// The report as text, gaps listed.
    pub fn to_text(&self) -> String {
        let mut out = vec![format!(
            "Coverage of {} by {} run(s) ({} with engine observations)",
            self.agent, self.runs, self.runs_with_engine_observations
        )];
        for j in &self.journeys {
            let covered_states = j.states.len() - j.missed_states.len();
            let covered_transitions = j.transitions.len() - j.missed_transitions.len();
            out.push(format!(
                "  journey {} \"{}\": entered in {} run(s), completed in {}; states {covered_states}/{}; transitions {covered_transitions}/{}",
                j.journey,
                j.title,
                j.runs_entered,
                j.runs_completed,
                j.states.len(),
                j.transitions.len()
            ));
            if !j.missed_states.is_empty() {
                out.push(format!("    states never reached: {}", j.missed_states.join(", ")));
            }
            for t in j.transitions.iter().filter(|t| t.visits == 0) {
                let when = t.condition.as_deref().map(|c| format!(" (when: {c})")).unwrap_or_default();
                out.push(format!("    transition never taken: {} {} -> {}{when}", t.id, t.from, t.to));
            }
        }
        let total = self.guidelines_matched.len() + self.guidelines_missed.len();
        out.push(format!("  guidelines matched {}/{total}", self.guidelines_matched.len()));
        if !self.guidelines_missed.is_empty() {
            out.push(format!("    never matched: {}", self.guidelines_missed.join(", ")));
        }
        if !self.unattributed_journey_nodes.is_empty() {
            let nodes: Vec<String> =
                self.unattributed_journey_nodes.iter().map(|(n, c)| format!("{n} ({c})")).collect();
            out.push(format!("  journey nodes of no known journey: {}", nodes.join(", ")));
        }
        out.join("\n")
    }
}
