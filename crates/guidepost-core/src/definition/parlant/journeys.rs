//! Journeys: their conditions (observation guidelines in Parlant) and the states and
//! transitions of their Mermaid chart.

use std::collections::{HashMap, HashSet};

use super::chart::Chart;
use super::wire::GuidelineDto;
use super::{Builder, ImportError};
use crate::definition::file::{JourneyDecl, StateDecl, TransitionDecl, TransitionDetails, TransitionsDecl};

/// The imported journeys.
pub(crate) struct Journeys {
    /// Their declarations, in the server's order.
    pub decls: Vec<JourneyDecl>,
    /// Parlant guideline id of each journey condition → the imported journey's index.
    pub conditions: HashMap<String, usize>,
    /// Parlant journey id → the imported journey's index.
    pub index: HashMap<String, usize>,
}

pub(crate) fn import(b: &mut Builder<'_>) -> Result<Journeys, ImportError> {
    let all =
        b.server.journeys.as_ref().map_err(|e| ImportError::Unreadable { what: "journeys", message: e.clone() })?;
    let guidelines: HashMap<&str, &GuidelineDto> =
        b.server.guidelines.iter().flatten().map(|g| (g.id.as_str(), g)).collect();
    let mut out = Journeys { decls: Vec::new(), conditions: HashMap::new(), index: HashMap::new() };
    let mine: Vec<_> = b.scope.journeys(all).into_iter().cloned().collect();
    for j in mine {
        let id = b.fresh_id(&j.title, &j.id);
        b.journey_ids.insert(j.id.clone(), id.clone());
        let index = out.decls.len();
        out.index.insert(j.id.clone(), index);
        let mut conditions = Vec::new();
        for c in &j.conditions {
            match guidelines.get(c.as_str()) {
                Some(g) => {
                    conditions.push(g.condition.clone());
                    out.conditions.insert(c.clone(), index);
                }
                None => b.lose(
                    format!("a condition of journey `{id}` (guideline {c})"),
                    "the server lists no guideline with that id",
                ),
            }
        }
        let composition_mode = j.composition_mode.as_deref().and_then(|m| b.composition(m, &format!("journey `{id}`")));
        let (start, states) = match b.server.charts.get(&j.id) {
            Some(Ok(text)) => match Chart::parse(text) {
                Ok(chart) => states(b, &id, &chart),
                Err(e) => {
                    b.lose(
                        format!("the states of journey `{id}`"),
                        format!("its Mermaid chart could not be read: {e}"),
                    );
                    (None, Vec::new())
                }
            },
            Some(Err(e)) => {
                b.lose(format!("the states of journey `{id}`"), e.clone());
                (None, Vec::new())
            }
            None => (None, Vec::new()),
        };
        out.decls.push(JourneyDecl {
            id: Some(id),
            title: j.title.clone(),
            description: j.description.clone().filter(|d| !d.trim().is_empty()),
            conditions,
            tags: b.tag_refs(&j.tags),
            labels: j.labels.clone(),
            priority: (j.priority != 0).then_some(j.priority),
            composition_mode,
            start,
            states,
            guidelines: Vec::new(),
        });
    }
    Ok(out)
}

/// Parlant's default instruction of a tool state the SDK made without one.
const USE_THE_TOOL: &str = "Use the tool ";

/// The journey's start and states, from its chart.
fn states(b: &mut Builder<'_>, journey: &str, chart: &Chart) -> (Option<TransitionsDecl>, Vec<StateDecl>) {
    let mut used = HashSet::new();
    let mut fresh = |text: &str, fallback: &str| {
        let base = super::id_words(text).unwrap_or_else(|| fallback.to_string());
        let mut id = base.clone();
        let mut n = 2;
        while id == "end" || !used.insert(id.clone()) {
            id = format!("{base}_{n}");
            n += 1;
        }
        id
    };
    let mut ids = HashMap::new();
    let mut states = Vec::new();
    for s in &chart.states {
        let mut state = StateDecl::default();
        match s.label.as_deref() {
            None => {
                state.id = fresh("fork", "fork");
                state.fork = true;
            }
            Some(label) if s.tool => {
                let named = label.strip_prefix(USE_THE_TOOL).map(str::trim).filter(|n| !n.contains(' '));
                let tool = named.and_then(|name| state_tool(b, journey, name));
                match tool {
                    Some(tool) => {
                        state.id = fresh(named.unwrap_or(label), "tool");
                        state.tool = Some(crate::definition::file::OneOrMany::One(tool));
                        if named.is_none() {
                            state.instruction = Some(label.to_string());
                        }
                    }
                    None => {
                        state.id = fresh(label, "tool");
                        state.chat = Some(label.to_string());
                        state.metadata.insert(
                            "import_note".into(),
                            "a tool state in Parlant, whose tool the API does not name: set `tool:`".into(),
                        );
                        b.lose(
                            format!("the tool of state `{}` of journey `{journey}` (\"{label}\")", state.id),
                            "the API's chart names a tool state's instruction, not its tool; it is written as a chat state, marked `import_note`",
                        );
                    }
                }
            }
            Some(label) => {
                state.id = fresh(label, "state");
                state.chat = Some(label.to_string());
            }
        }
        ids.insert(s.key.clone(), state.id.clone());
        states.push(state);
    }
    let target = |to: &Option<String>| to.as_ref().and_then(|k| ids.get(k).cloned()).unwrap_or_else(|| "end".into());
    let transitions = |from: Option<&String>| -> Option<TransitionsDecl> {
        let list: Vec<TransitionDecl> = chart
            .transitions
            .iter()
            .filter(|t| t.from.as_ref() == from)
            .map(|t| match &t.condition {
                Some(when) => {
                    TransitionDecl::Full(TransitionDetails { to: target(&t.to), when: Some(when.clone()), id: None })
                }
                None => TransitionDecl::To(target(&t.to)),
            })
            .collect();
        match list.as_slice() {
            [] => None,
            [TransitionDecl::To(to)] => Some(TransitionsDecl::To(to.clone())),
            _ => Some(TransitionsDecl::List(list)),
        }
    };
    let start = transitions(None);
    for (s, state) in chart.states.iter().zip(states.iter_mut()) {
        state.next = transitions(Some(&s.key));
    }
    (start, states)
}

/// `service:tool` for the tool of a state the chart names by its name alone.
fn state_tool(b: &mut Builder<'_>, journey: &str, name: &str) -> Option<String> {
    let known = b.tool_services.get(name).is_some_and(|s| !s.is_empty());
    let built_in = b.server.services.iter().flatten().any(|s| s.name == "built-in");
    if !known && built_in {
        b.lose(
            format!("the service of tool `{name}` in journey `{journey}`"),
            "the API lists no tool of that name (Parlant 3.3.2 cannot list the SDK's `built-in` tools when one has a date parameter); taken to be `built-in`, where the SDK's own tools are",
        );
        return Some(format!("built-in:{name}"));
    }
    b.tool_ref(name, None, &format!("the tool of a state of journey `{journey}`"))
}
