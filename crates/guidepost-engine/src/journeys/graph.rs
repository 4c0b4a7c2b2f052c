//! A journey as the engine walks it: nodes and edges rebuilt from the core projection, so
//! inlined sub-journeys and plain journeys are handled alike.

use guidepost_core::journey::{END_STATE, START_STATE};
use guidepost_core::projection::{NodeKind, ProjectedNode, project};
use guidepost_core::{AgentDefinition, Journey, ToolId};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// An edge of the journey graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JourneyEdge {
    /// Transition id.
    pub id: String,
    /// Target node.
    pub to: String,
    /// When the edge is taken; `None` means unconditionally.
    pub condition: Option<String>,
    /// The node guideline that entering `to` by this edge matches.
    pub guideline_id: String,
}

/// A node of the journey graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JourneyNode {
    /// Node name, as stored in journey paths.
    pub id: String,
    /// What the node does.
    pub kind: NodeKind,
    /// What the agent does at this node.
    pub action: Option<String>,
    /// Extra context.
    pub description: Option<String>,
    /// Tools of a tool node.
    pub tools: Vec<ToolId>,
    /// Whether one of its tools is consequential (books, pays, sends): such a step is only
    /// entered from the question the customer was asked (see [`super::paths::advance`]).
    #[serde(default)]
    pub consequential: bool,
    /// Outgoing edges in definition order.
    pub edges: Vec<JourneyEdge>,
    /// The node guideline of the node entered by its first incoming edge (or the root).
    pub guideline_id: String,
}

impl JourneyNode {
    /// Whether the agent waits for the customer here: a chat node that asks something.
    pub fn is_customer_dependent(&self) -> bool {
        self.kind == NodeKind::Chat && self.action.as_deref().is_some_and(crate::categorize::asks_customer)
    }
}

/// A journey ready for node selection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JourneyGraph {
    /// Journey id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Description.
    pub description: Option<String>,
    /// Activation conditions (texts).
    pub conditions: Vec<String>,
    /// Tags of the journey.
    pub tags: Vec<String>,
    /// Numeric priority.
    pub priority: i32,
    /// Nodes in breadth-first order, the root (`initial`) first.
    pub nodes: IndexMap<String, JourneyNode>,
}

impl JourneyGraph {
    /// Builds the graph of `journey` from its projection.
    pub fn build(definition: &AgentDefinition, journey: &Journey) -> Self {
        let projected = project(definition, &journey.id).unwrap_or_default();
        let mut nodes: IndexMap<String, JourneyNode> = IndexMap::new();
        let by_id: IndexMap<&str, &ProjectedNode> = projected.iter().map(|p| (p.guideline_id.as_str(), p)).collect();
        for p in &projected {
            if nodes.contains_key(&p.node) {
                continue;
            }
            let edges = p
                .follow_ups
                .iter()
                .filter_map(|f| by_id.get(f.as_str()))
                .map(|t| JourneyEdge {
                    id: t.edge.clone().unwrap_or_default(),
                    to: t.node.clone(),
                    condition: t.condition.clone(),
                    guideline_id: t.guideline_id.clone(),
                })
                .collect();
            nodes.insert(
                p.node.clone(),
                JourneyNode {
                    id: p.node.clone(),
                    kind: p.kind,
                    action: p.action.clone(),
                    description: p.description.clone(),
                    tools: p.tools.clone(),
                    consequential: p.tools.iter().any(|id| definition.tool(id).is_some_and(|t| t.consequential)),
                    edges,
                    guideline_id: p.guideline_id.clone(),
                },
            );
        }
        Self {
            id: journey.id.clone(),
            title: journey.title.clone(),
            description: journey.description.clone(),
            conditions: journey.conditions.iter().map(|c| c.condition.clone()).collect(),
            tags: journey.tags.clone(),
            priority: journey.priority,
            nodes,
        }
    }

    /// The journey's closing question right after the step `tell`, if there is one: `tell`'s
    /// one way on is unconditional and leads to a question ("Ask if there is anything else")
    /// whose one way on is the unconditional one to the end.
    pub fn closing_question_after(&self, tell: &str) -> Option<&str> {
        let [edge] = self.node(tell)?.edges.as_slice() else { return None };
        if edge.condition.is_some() {
            return None;
        }
        let question = self.node(&edge.to)?;
        let [last] = question.edges.as_slice() else { return None };
        (question.is_customer_dependent() && last.condition.is_none() && self.is_end(&last.to))
            .then_some(edge.to.as_str())
    }

    /// The steps the journey most likely enters once the customer answers the question it
    /// rests at, `at`: where the question's first way on (as the journey lists them, the
    /// expected answer first) leads to a step that only talks, that step; where it leads to a
    /// tool step whose one way on is unconditional and leads to a step that talks, the tool
    /// step and that step (the reply then tells what the tool returned); after a step that
    /// tells, the journey's closing question where one follows
    /// ([`Self::closing_question_after`]). `None` where `at` asks nothing or its way on is
    /// unconditional. For reading the next reply's prompt ahead; no decision rests on it.
    pub fn after_answer(&self, at: &str) -> Option<Vec<&str>> {
        let node = self.node(at)?;
        let edge = node.edges.first()?;
        if !node.is_customer_dependent() || edge.condition.is_none() {
            return None;
        }
        let mut steps = Vec::new();
        let mut next_id = edge.to.as_str();
        let mut next = self.node(next_id)?;
        if next.kind == NodeKind::Tool {
            let [after_tool] = next.edges.as_slice() else { return None };
            if after_tool.condition.is_some() {
                return None;
            }
            steps.push(next_id);
            next_id = after_tool.to.as_str();
            next = self.node(next_id)?;
        }
        if next.kind != NodeKind::Chat {
            return None;
        }
        steps.push(next_id);
        if !next.is_customer_dependent()
            && let Some(question) = self.closing_question_after(next_id)
        {
            steps.push(question);
        }
        Some(steps)
    }

    /// The node with this id.
    pub fn node(&self, id: &str) -> Option<&JourneyNode> {
        self.nodes.get(id)
    }

    /// The step transition `edge_id` leaves from.
    pub fn source_of(&self, edge_id: &str) -> Option<&JourneyNode> {
        self.nodes.values().find(|n| n.edges.iter().any(|e| e.id == edge_id))
    }

    /// The root node.
    pub fn root(&self) -> Option<&JourneyNode> {
        self.nodes.get(START_STATE)
    }

    /// Whether `id` ends the journey.
    pub fn is_end(&self, id: &str) -> bool {
        id == END_STATE || self.nodes.get(id).is_some_and(|n| n.kind == NodeKind::End)
    }

    /// The edge from `from` to `to`, if any.
    pub fn edge(&self, from: &str, to: &str) -> Option<&JourneyEdge> {
        self.nodes.get(from)?.edges.iter().find(|e| e.to == to)
    }

    /// All node guideline ids of the journey.
    pub fn guideline_ids(&self) -> impl Iterator<Item = &str> {
        self.nodes.values().flat_map(|n| {
            std::iter::once(n.guideline_id.as_str()).chain(n.edges.iter().map(|e| e.guideline_id.as_str()))
        })
    }

    /// The text used to embed the journey for prediction.
    pub fn embedding_text(&self) -> String {
        let mut text = self.title.clone();
        if let Some(d) = &self.description {
            text.push_str(". ");
            text.push_str(d);
        }
        for c in &self.conditions {
            text.push_str(". ");
            text.push_str(c);
        }
        text
    }
}
