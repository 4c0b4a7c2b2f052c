//! Projection of a journey into node guidelines.
//!
//! The engine matches guidelines, so each journey graph is turned into a list of
//! synthetic guidelines, one per (incoming transition, state) pair, in breadth-first order
//! from the start state:
//!
//! - id `journey_node:{node}` for the start and `journey_node:{node}:{edge}` otherwise,
//!   where `{node}` is `{journey}.{state}` (journey-qualified, because state ids such as
//!   `ask` repeat across journeys) and `{edge}` the transition id;
//! - `index`: position in the breadth-first order, 0 for the start;
//! - `kind`: fork, chat, tool or end; `tools` for tool states;
//! - `condition`: the transition's condition (none for the start and unconditional edges);
//! - `follow_ups`: ids of the node guidelines of the state's outgoing transitions.
//!
//! A state appears once per incoming transition, so the same state can be entered "by"
//! different conditions. Each transition is followed once, so cycles terminate.
//! Sub-journeys are inlined: the sub-journey state routes into copies of the child's
//! states (`{state}>{child_state}`), and the child's `end` leads to an exit fork
//! (`{state}>exit`) that continues with the parent state's own transitions.

use std::collections::{HashSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::journey::{END_STATE, START_STATE, StateKind};
use crate::model::AgentDefinition;
use crate::tool::ToolId;

/// Kind of a projected node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// Routing only (the start state, forks, sub-journey entries and exits).
    Fork,
    /// The agent says something.
    Chat,
    /// The agent calls tools.
    Tool,
    /// The journey ends.
    End,
}

impl NodeKind {
    /// Short name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fork => "fork",
            Self::Chat => "chat",
            Self::Tool => "tool",
            Self::End => "end",
        }
    }
}

/// A node guideline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectedNode {
    /// `journey_node:{journey}.{state}[:{edge}]`.
    pub guideline_id: String,
    /// The journey.
    pub journey_id: String,
    /// The node: `{state}` (or `{state}>{child state}` inside an inlined sub-journey).
    pub node: String,
    /// The transition that enters the node (none for the start).
    pub edge: Option<String>,
    /// Breadth-first position, 0 for the start.
    pub index: usize,
    /// What the node does.
    pub kind: NodeKind,
    /// Condition of the entering transition.
    pub condition: Option<String>,
    /// What the agent should do (chat nodes, and tool instructions).
    pub action: Option<String>,
    /// Extra context.
    pub description: Option<String>,
    /// Tools of a tool node.
    pub tools: Vec<ToolId>,
    /// Node guidelines of the outgoing transitions.
    pub follow_ups: Vec<String>,
    /// The inlined sub-journey this node belongs to or enters.
    pub sub_journey: Option<String>,
}

#[derive(Debug, Clone)]
struct GraphNode {
    id: String,
    kind: NodeKind,
    action: Option<String>,
    description: Option<String>,
    tools: Vec<ToolId>,
    sub_journey: Option<String>,
}

#[derive(Debug, Clone)]
struct GraphEdge {
    id: String,
    from: String,
    to: String,
    condition: Option<String>,
}

const MAX_DEPTH: usize = 8;

/// Projects the journey `journey_id` of `definition`; `None` when there is no such journey.
pub fn project(definition: &AgentDefinition, journey_id: &str) -> Option<Vec<ProjectedNode>> {
    definition.journey(journey_id)?;
    let mut nodes = vec![GraphNode {
        id: START_STATE.into(),
        kind: NodeKind::Fork,
        action: None,
        description: None,
        tools: Vec::new(),
        sub_journey: None,
    }];
    let mut edges = Vec::new();
    expand(definition, journey_id, "", END_STATE, 0, &mut nodes, &mut edges);
    nodes.push(GraphNode {
        id: END_STATE.into(),
        kind: NodeKind::End,
        action: None,
        description: None,
        tools: Vec::new(),
        sub_journey: None,
    });
    Some(bfs(journey_id, &nodes, &edges))
}

/// Adds the states and transitions of journey `id` under `prefix`; its `end` becomes
/// `exit`.
fn expand(
    definition: &AgentDefinition,
    id: &str,
    prefix: &str,
    exit: &str,
    depth: usize,
    nodes: &mut Vec<GraphNode>,
    edges: &mut Vec<GraphEdge>,
) {
    let Some(journey) = definition.journey(id) else { return };
    let local =
        |state: &str| -> String { if state == END_STATE { exit.to_string() } else { format!("{prefix}{state}") } };
    let sub_marker = (!prefix.is_empty()).then(|| id.to_string());
    let mut exits_of_sub: Vec<(String, String)> = Vec::new();
    for state in &journey.states {
        let node_id = local(&state.id);
        let (kind, action, tools, sub) = match &state.kind {
            StateKind::Chat { action } => (NodeKind::Chat, Some(action.clone()), Vec::new(), sub_marker.clone()),
            StateKind::Tool { tools, instruction } => {
                (NodeKind::Tool, instruction.clone(), tools.clone(), sub_marker.clone())
            }
            StateKind::Fork => (NodeKind::Fork, None, Vec::new(), sub_marker.clone()),
            StateKind::Journey { journey: child } => (NodeKind::Fork, None, Vec::new(), Some(child.clone())),
        };
        nodes.push(GraphNode {
            id: node_id.clone(),
            kind,
            action,
            description: state.description.clone(),
            tools,
            sub_journey: sub,
        });
        if let StateKind::Journey { journey: child } = &state.kind
            && depth < MAX_DEPTH
        {
            let child_prefix = format!("{node_id}>");
            let child_exit = format!("{node_id}>exit");
            exits_of_sub.push((state.id.clone(), child_exit.clone()));
            nodes.push(GraphNode {
                id: child_exit.clone(),
                kind: NodeKind::Fork,
                action: None,
                description: None,
                tools: Vec::new(),
                sub_journey: Some(child.clone()),
            });
            let before = edges.len();
            expand(definition, child, &child_prefix, &child_exit, depth + 1, nodes, edges);
            // The child's transitions out of its start leave the sub-journey state.
            let child_start = format!("{child_prefix}{START_STATE}");
            for edge in edges.iter_mut().skip(before) {
                if edge.from == child_start {
                    edge.from = node_id.clone();
                }
            }
        }
    }
    for t in &journey.transitions {
        let from =
            exits_of_sub.iter().find(|(s, _)| *s == t.from).map_or_else(|| local(&t.from), |(_, exit)| exit.clone());
        let id = if prefix.is_empty() { t.id.clone() } else { format!("{prefix}{}", t.id) };
        edges.push(GraphEdge { id, from, to: local(&t.to), condition: t.condition.clone() });
    }
}

fn bfs(journey_id: &str, nodes: &[GraphNode], edges: &[GraphEdge]) -> Vec<ProjectedNode> {
    let guideline_id = |node: &str, edge: Option<&str>| match edge {
        Some(e) => format!("journey_node:{journey_id}.{node}:{e}"),
        None => format!("journey_node:{journey_id}.{node}"),
    };
    let mut out = Vec::new();
    let mut visited: HashSet<&str> = HashSet::new();
    let mut queue: VecDeque<(Option<&GraphEdge>, &str)> = VecDeque::from([(None, START_STATE)]);
    while let Some((edge, node_id)) = queue.pop_front() {
        let Some(node) = nodes.iter().find(|n| n.id == node_id) else { continue };
        let mut follow_ups = Vec::new();
        for next in edges.iter().filter(|e| e.from == node_id) {
            follow_ups.push(guideline_id(&next.to, Some(&next.id)));
            if visited.insert(next.id.as_str()) {
                queue.push_back((Some(next), next.to.as_str()));
            }
        }
        out.push(ProjectedNode {
            guideline_id: guideline_id(node_id, edge.map(|e| e.id.as_str())),
            journey_id: journey_id.to_string(),
            node: node_id.to_string(),
            edge: edge.map(|e| e.id.clone()),
            index: out.len(),
            kind: node.kind,
            condition: edge.and_then(|e| e.condition.clone()),
            action: node.action.clone(),
            description: node.description.clone(),
            tools: node.tools.clone(),
            follow_ups,
            sub_journey: node.sub_journey.clone(),
        });
    }
    out
}
