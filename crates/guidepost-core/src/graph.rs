//! Journey diagrams: Mermaid (`stateDiagram-v2`, `flowchart` for projections) and
//! Graphviz DOT.

use std::fmt::Write as _;

use crate::journey::{END_STATE, Journey, START_STATE, StateKind};
use crate::projection::ProjectedNode;

/// Diagram syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Mermaid.
    Mermaid,
    /// Graphviz DOT.
    Dot,
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn mermaid_text(text: &str) -> String {
    one_line(text).replace('"', "#quot;").replace(':', "#58;").replace(['<', '>'], " ")
}

fn dot_text(text: &str) -> String {
    one_line(text).replace('\\', "\\\\").replace('"', "\\\"")
}

fn state_label(journey: &Journey, state: &str) -> String {
    match journey.state(state).map(|s| &s.kind) {
        Some(StateKind::Chat { action }) => action.clone(),
        Some(StateKind::Tool { tools, .. }) => {
            format!("tool {}", tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", "))
        }
        Some(StateKind::Fork) => format!("fork {state}"),
        Some(StateKind::Journey { journey }) => format!("journey {journey}"),
        None => state.to_string(),
    }
}

/// Renders a journey's states and transitions.
pub fn journey_diagram(journey: &Journey, format: Format) -> String {
    let node_name = |state: &str| -> String {
        match journey.states.iter().position(|s| s.id == state) {
            Some(i) => format!("s{}", i + 1),
            None => state.to_string(),
        }
    };
    let mut out = String::new();
    match format {
        Format::Mermaid => {
            out.push_str("stateDiagram-v2\n");
            let _ = writeln!(out, "    %% {}", mermaid_text(&journey.title));
            for state in &journey.states {
                let _ = writeln!(
                    out,
                    "    state \"{}\" as {}",
                    mermaid_text(&state_label(journey, &state.id)),
                    node_name(&state.id)
                );
            }
            for t in &journey.transitions {
                let from = if t.from == START_STATE { "[*]".to_string() } else { node_name(&t.from) };
                let to = if t.to == END_STATE { "[*]".to_string() } else { node_name(&t.to) };
                match &t.condition {
                    Some(c) => {
                        let _ = writeln!(out, "    {from} --> {to}: {}", mermaid_text(c));
                    }
                    None => {
                        let _ = writeln!(out, "    {from} --> {to}");
                    }
                }
            }
        }
        Format::Dot => {
            let _ = writeln!(out, "digraph \"{}\" {{", dot_text(&journey.id));
            out.push_str("    rankdir=TB;\n    node [shape=box, style=rounded];\n");
            let _ = writeln!(out, "    \"{START_STATE}\" [shape=circle, label=\"start\"];");
            let _ = writeln!(out, "    \"{END_STATE}\" [shape=doublecircle, label=\"end\"];");
            for state in &journey.states {
                let shape = match state.kind {
                    StateKind::Fork => ", shape=diamond",
                    StateKind::Tool { .. } => ", shape=component",
                    _ => "",
                };
                let _ = writeln!(
                    out,
                    "    \"{}\" [label=\"{}\"{shape}];",
                    dot_text(&state.id),
                    dot_text(&state_label(journey, &state.id))
                );
            }
            for t in &journey.transitions {
                let label = t.condition.as_deref().map(|c| format!(" [label=\"{}\"]", dot_text(c))).unwrap_or_default();
                let _ = writeln!(out, "    \"{}\" -> \"{}\"{label};", dot_text(&t.from), dot_text(&t.to));
            }
            out.push_str("}\n");
        }
    }
    out
}

/// Renders a journey's projection: one node per node guideline, edges along follow-ups.
pub fn projection_diagram(nodes: &[ProjectedNode], format: Format) -> String {
    let index_of = |id: &str| nodes.iter().position(|n| n.guideline_id == id);
    let label = |n: &ProjectedNode| {
        let what = match (&n.action, n.tools.is_empty()) {
            (Some(a), _) => format!(" · {}", one_line(a)),
            (None, false) => format!(" · {}", n.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")),
            (None, true) => String::new(),
        };
        format!("{} {} · {}{what}", n.index, n.kind.as_str(), n.guideline_id)
    };
    let mut out = String::new();
    match format {
        Format::Mermaid => {
            out.push_str("flowchart TD\n");
            for n in nodes {
                let _ = writeln!(out, "    n{}[\"{}\"]", n.index, mermaid_text(&label(n)));
            }
            for n in nodes {
                for f in &n.follow_ups {
                    let Some(target) = index_of(f) else { continue };
                    match nodes.get(target).and_then(|t| t.condition.as_deref()) {
                        Some(c) => {
                            let _ = writeln!(out, "    n{} -->|\"{}\"| n{target}", n.index, mermaid_text(c));
                        }
                        None => {
                            let _ = writeln!(out, "    n{} --> n{target}", n.index);
                        }
                    }
                }
            }
        }
        Format::Dot => {
            out.push_str("digraph projection {\n    node [shape=box];\n");
            for n in nodes {
                let _ = writeln!(out, "    n{} [label=\"{}\"];", n.index, dot_text(&label(n)));
            }
            for n in nodes {
                for f in &n.follow_ups {
                    let Some(target) = index_of(f) else { continue };
                    let cond = nodes
                        .get(target)
                        .and_then(|t| t.condition.as_deref())
                        .map(|c| format!(" [label=\"{}\"]", dot_text(c)))
                        .unwrap_or_default();
                    let _ = writeln!(out, "    n{} -> n{target}{cond};", n.index);
                }
            }
            out.push_str("}\n");
        }
    }
    out
}
