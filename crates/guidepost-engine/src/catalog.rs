//! The definition compiled once for matching: every matchable guideline (global,
//! journey-scoped, journey conditions), journey graphs, and indexes the resolver needs.
//! Built without model calls; journey embeddings are computed lazily, once.

use std::collections::HashMap;
use std::sync::Arc;

use guidepost_core::{AgentDefinition, Criticality, Endpoint, RelationshipKind, TagMode, ToolId};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use tokio::sync::OnceCell;

use crate::journeys::graph::JourneyGraph;

/// Where a matchable guideline comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "journey")]
pub enum GuidelineOrigin {
    /// A guideline or observation of the definition.
    Definition,
    /// An activation condition of a journey (an observation that starts it).
    JourneyCondition(String),
    /// The condition of a journey transition, checked beside the guidelines when the
    /// customer's latest message may already satisfy it (an answer given before it was
    /// asked). Never matched as a guideline: its verdict moves the journey on.
    Transition {
        /// The journey.
        journey: String,
        /// The transition's id.
        edge: String,
    },
    /// Whether the customer's latest message corrects something said earlier: checked when
    /// an active journey would otherwise move on without looking at that message.
    Correction,
}

/// The condition of [`GuidelineOrigin::Correction`].
pub const CORRECTION: &str = "The customer changes or corrects something they said earlier in the conversation";

/// The id of the check item of [`GuidelineOrigin::Correction`].
pub const CORRECTION_ITEM: &str = "~correction";

/// Words with which customers take back what they said ("actually", "I meant", "make that
/// 7 pm instead", "不对", "改成"). A message with one of them goes to the journey selection
/// that sees the whole journey whatever the correction question answered: that selection
/// decides whether and where to go back, so looking once too often costs a call, while a
/// correction missed books the wrong address. Measured on the embedded local model, the question
/// alone answered "Sorry, the pickup address is actually 12 Oak Street, not Main Street 5"
/// with p(yes) 0.39, and "Will the driver help with my luggage?" with 0.70.
const CORRECTION_CUES: &[&str] = &[
    "actually",
    "i meant",
    "i mean,",
    "instead",
    "make that",
    "make it ",
    "change that",
    "change it",
    "change the",
    "change my",
    "correction",
    "not what i said",
    "scratch that",
    "rather than",
    "不对",
    "说错",
    "改成",
    "改为",
    "换成",
    "我是说",
    "应该是",
    "其实",
];

/// Whether `message` carries a word customers take back what they said with
/// ([`CORRECTION_CUES`]).
pub fn has_correction_cue(message: &str) -> bool {
    let lower = message.to_lowercase();
    CORRECTION_CUES.iter().any(|cue| lower.contains(cue))
}

/// The id of the check item of a journey transition.
pub fn transition_item_id(journey: &str, edge: &str) -> String {
    format!("~transition:{journey}:{edge}")
}

/// A guideline as the matcher sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatchableGuideline {
    /// Stable id.
    pub id: String,
    /// Condition text.
    pub condition: String,
    /// Action text; `None` for observations.
    pub action: Option<String>,
    /// Extra context.
    pub description: Option<String>,
    /// Evaluation care.
    pub criticality: Criticality,
    /// Numeric priority.
    pub priority: i32,
    /// Whether the guideline may be treated as previously applied.
    pub track: bool,
    /// Tools attached to the guideline.
    pub tools: Vec<ToolId>,
    /// Labelled customer messages for the condition (the definition's `examples`).
    pub examples: Vec<guidepost_core::GuidelineExample>,
    /// Tag ids.
    pub tags: Vec<String>,
    /// The journey it is scoped to (applies only while that journey is active).
    pub journey: Option<String>,
    /// Where it comes from.
    pub origin: GuidelineOrigin,
    /// Whether completing the action needs the customer's answer.
    pub customer_dependent: bool,
}

impl MatchableGuideline {
    /// Whether this is an observation (no action).
    pub fn is_observation(&self) -> bool {
        self.action.is_none()
    }

    /// The journey this guideline belongs to for pruning: its scope or the journey it
    /// activates.
    pub fn journey_affinity(&self) -> Option<&str> {
        match &self.origin {
            GuidelineOrigin::JourneyCondition(j) | GuidelineOrigin::Transition { journey: j, .. } => Some(j),
            GuidelineOrigin::Definition => self.journey.as_deref(),
            GuidelineOrigin::Correction => None,
        }
    }
}

/// A member of a tag: a guideline or a journey.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "id")]
pub enum Entity {
    /// A guideline (including journey conditions and node guidelines).
    Guideline(String),
    /// A journey.
    Journey(String),
}

/// The definition compiled for matching. Share it (`Arc`) across sessions and turns.
#[derive(Debug)]
pub struct CompiledAgent {
    /// The definition.
    pub definition: Arc<AgentDefinition>,
    guidelines: Vec<MatchableGuideline>,
    index: HashMap<String, usize>,
    journeys: IndexMap<String, JourneyGraph>,
    tag_members: HashMap<String, Vec<Entity>>,
    node_journey: HashMap<String, String>,
    disambiguation_targets: HashMap<String, usize>,
    /// Check items of the journeys' conditional transitions, by item id.
    transitions: HashMap<String, MatchableGuideline>,
    correction: MatchableGuideline,
    pub(crate) journey_embeddings: OnceCell<Vec<Vec<f32>>>,
}

impl CompiledAgent {
    /// Compiles `definition`. Disabled guidelines are left out.
    pub fn new(definition: Arc<AgentDefinition>) -> Self {
        let mut guidelines = Vec::new();
        for g in definition.guidelines.iter().filter(|g| g.enabled) {
            let customer_dependent = g
                .metadata
                .get("customer_dependent")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or_else(|| g.action.as_deref().is_some_and(crate::categorize::asks_customer));
            guidelines.push(MatchableGuideline {
                id: g.id.clone(),
                condition: g.condition.clone(),
                action: g.action.clone(),
                description: g.description.clone(),
                criticality: g.criticality,
                priority: g.priority,
                track: g.track,
                tools: g.tools.clone(),
                examples: g.examples.clone(),
                tags: g.tags.clone(),
                journey: g.journey.clone(),
                origin: GuidelineOrigin::Definition,
                customer_dependent,
            });
        }
        let mut journeys = IndexMap::new();
        let mut node_journey = HashMap::new();
        for j in &definition.journeys {
            for c in &j.conditions {
                guidelines.push(MatchableGuideline {
                    id: c.id.clone(),
                    condition: c.condition.clone(),
                    action: None,
                    description: None,
                    criticality: Criticality::Medium,
                    priority: j.priority,
                    track: false,
                    tools: Vec::new(),
                    examples: Vec::new(),
                    tags: j.tags.clone(),
                    journey: None,
                    origin: GuidelineOrigin::JourneyCondition(j.id.clone()),
                    customer_dependent: false,
                });
            }
            let graph = JourneyGraph::build(&definition, j);
            for id in graph.guideline_ids() {
                node_journey.insert(id.to_string(), j.id.clone());
            }
            journeys.insert(j.id.clone(), graph);
        }
        let index = guidelines.iter().enumerate().map(|(i, g)| (g.id.clone(), i)).collect();
        let mut tag_members: HashMap<String, Vec<Entity>> = HashMap::new();
        for g in &guidelines {
            for t in &g.tags {
                tag_members.entry(t.clone()).or_default().push(Entity::Guideline(g.id.clone()));
            }
        }
        for j in &definition.journeys {
            for t in &j.tags {
                tag_members.entry(t.clone()).or_default().push(Entity::Journey(j.id.clone()));
            }
        }
        let mut disambiguation_targets: HashMap<String, usize> = HashMap::new();
        for r in definition.relationships.iter().filter(|r| r.kind == RelationshipKind::Disambiguation) {
            if let Endpoint::Guideline(g) = &r.source {
                let n = match &r.target {
                    Endpoint::Tag { tag, .. } => tag_members.get(tag).map_or(0, Vec::len),
                    _ => 1,
                };
                *disambiguation_targets.entry(g.clone()).or_insert(0) += n;
            }
        }
        let check_item = |id: String, condition: String, origin: GuidelineOrigin| MatchableGuideline {
            id,
            condition,
            action: None,
            description: None,
            criticality: Criticality::High,
            priority: 0,
            track: false,
            tools: Vec::new(),
            examples: Vec::new(),
            tags: Vec::new(),
            journey: None,
            origin,
            customer_dependent: false,
        };
        let mut transitions = HashMap::new();
        for (journey, graph) in &journeys {
            for edge in graph.nodes.values().flat_map(|n| &n.edges) {
                if let Some(condition) = &edge.condition {
                    let id = transition_item_id(journey, &edge.id);
                    let origin = GuidelineOrigin::Transition { journey: journey.clone(), edge: edge.id.clone() };
                    transitions.insert(id.clone(), check_item(id, condition.clone(), origin));
                }
            }
        }
        let correction = check_item(CORRECTION_ITEM.into(), CORRECTION.into(), GuidelineOrigin::Correction);
        Self {
            definition,
            guidelines,
            index,
            journeys,
            tag_members,
            node_journey,
            disambiguation_targets,
            transitions,
            correction,
            journey_embeddings: OnceCell::new(),
        }
    }

    /// The check item of the conditional transition `edge` of `journey`.
    pub fn transition_item(&self, journey: &str, edge: &str) -> Option<&MatchableGuideline> {
        self.transitions.get(&transition_item_id(journey, edge))
    }

    /// The check item asking whether the customer corrects something said earlier.
    pub fn correction_item(&self) -> &MatchableGuideline {
        &self.correction
    }

    /// The conditions the checks may ask about: the guidelines' and journeys' conditions and
    /// the journeys' conditional transitions.
    pub fn check_conditions(&self) -> impl Iterator<Item = &str> {
        self.guidelines.iter().chain(self.transitions.values()).map(|g| g.condition.as_str())
    }

    /// Every matchable guideline, definition guidelines first, then journey conditions.
    pub fn guidelines(&self) -> &[MatchableGuideline] {
        &self.guidelines
    }

    /// The matchable guideline with this id.
    pub fn guideline(&self, id: &str) -> Option<&MatchableGuideline> {
        self.index.get(id).and_then(|&i| self.guidelines.get(i))
    }

    /// Position of a guideline in definition order (node guidelines sort last).
    pub fn order_of(&self, id: &str) -> usize {
        self.index.get(id).copied().unwrap_or(usize::MAX)
    }

    /// Journey graphs in definition order.
    pub fn journeys(&self) -> &IndexMap<String, JourneyGraph> {
        &self.journeys
    }

    /// The journey graph with this id.
    pub fn journey(&self, id: &str) -> Option<&JourneyGraph> {
        self.journeys.get(id)
    }

    /// The journey a node guideline id belongs to.
    pub fn journey_of_node(&self, guideline_id: &str) -> Option<&str> {
        self.node_journey.get(guideline_id).map(String::as_str)
    }

    /// How many disambiguation targets the observation `head` has.
    pub fn disambiguation_targets(&self, head: &str) -> usize {
        self.disambiguation_targets.get(head).copied().unwrap_or(0)
    }

    /// Members (guidelines and journeys) carrying `tag`.
    pub fn tag_members(&self, tag: &str) -> &[Entity] {
        self.tag_members.get(tag).map_or(&[], Vec::as_slice)
    }

    /// Guidelines (by id) re-evaluated when `tool` runs: sources of `reevaluation`
    /// relationships targeting the tool, tags expanded.
    pub fn reevaluated_by(&self, tool: &ToolId) -> Vec<String> {
        let mut out = Vec::new();
        for r in &self.definition.relationships {
            if r.kind != RelationshipKind::Reevaluation || r.target != Endpoint::Tool(tool.clone()) {
                continue;
            }
            match &r.source {
                Endpoint::Guideline(g) => out.push(g.clone()),
                Endpoint::Tag { tag, .. } => out.extend(self.tag_members(tag).iter().filter_map(|m| match m {
                    Entity::Guideline(g) => Some(g.clone()),
                    Entity::Journey(_) => None,
                })),
                Endpoint::Journey(j) => {
                    out.extend(self.journey(j).into_iter().flat_map(|g| g.guideline_ids().map(String::from)));
                }
                Endpoint::Tool(_) => {}
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// Groups of tools that must be decided together (`overlap` relationships, connected
    /// components), for the tool-calling stage.
    pub fn overlap_groups(&self) -> Vec<Vec<ToolId>> {
        let mut groups: Vec<Vec<ToolId>> = Vec::new();
        for r in self.definition.relationships.iter().filter(|r| r.kind == RelationshipKind::Overlap) {
            let (Endpoint::Tool(a), Endpoint::Tool(b)) = (&r.source, &r.target) else { continue };
            let ia = groups.iter().position(|g| g.contains(a));
            let ib = groups.iter().position(|g| g.contains(b));
            match (ia, ib) {
                (Some(x), Some(y)) if x != y => {
                    let merged = groups.remove(x.max(y));
                    if let Some(g) = groups.get_mut(x.min(y)) {
                        g.extend(merged);
                    }
                }
                (Some(_), Some(_)) => {}
                (Some(x), None) => groups[x].push(b.clone()),
                (None, Some(y)) => groups[y].push(a.clone()),
                (None, None) => groups.push(vec![a.clone(), b.clone()]),
            }
        }
        for g in &mut groups {
            g.sort();
        }
        groups
    }

    /// Whether a tag endpoint with `mode` counts as active given which members are active.
    pub(crate) fn tag_active(&self, tag: &str, mode: TagMode, active: impl Fn(&Entity) -> bool) -> bool {
        let members = self.tag_members(tag);
        match mode {
            TagMode::All => !members.is_empty() && members.iter().all(&active),
            TagMode::Any => members.iter().any(&active),
        }
    }
}

#[cfg(test)]
mod tests {
    use guidepost_core::definition::{SourceFile, load_agent};

    use super::*;

    #[test]
    fn words_that_take_an_answer_back_are_found_in_english_and_chinese() {
        assert!(has_correction_cue("Sorry, the pickup is ACTUALLY 5 Oak Street"));
        assert!(has_correction_cue("Oh wait, make that 7 pm instead."));
        assert!(has_correction_cue("不对，改成上海"));
        assert!(!has_correction_cue("Will the driver help with my luggage?"));
        assert!(!has_correction_cue("Yes, that's right."));
        assert!(!has_correction_cue("那深圳呢？"));
    }

    const DEF: &str = r#"
agent: { name: Otto }
tags: [billing]
guidelines:
  - { id: balance, condition: The customer asks for the balance, action: Tell the balance, tools: [get_balance], reevaluate_after: [get_balance] }
  - { id: premium, condition: The balance is high, action: Offer premium, tags: [billing] }
  - { id: disabled, condition: Never, action: Nothing, enabled: false }
relationships:
  - { kind: reevaluation, source: "tag:billing", target: "tool:get_balance" }
  - { kind: overlap, source: "tool:get_balance", target: "tool:get_card" }
  - { kind: overlap, source: "tool:get_card", target: "tool:block_card" }
tools:
  - { name: get_balance, description: Balance }
  - { name: get_card, description: Card }
  - { name: block_card, description: Block }
  - { name: other, description: Other }
"#;

    fn agent() -> CompiledAgent {
        CompiledAgent::new(Arc::new(load_agent(&[SourceFile::new("a.yaml", DEF)]).definition.unwrap()))
    }

    #[test]
    fn reevaluation_and_overlap_bookkeeping() {
        let agent = agent();
        let balance = agent.definition.tools.iter().find(|t| t.id.name == "get_balance").unwrap().id.clone();
        assert_eq!(agent.reevaluated_by(&balance), vec!["balance".to_string(), "premium".to_string()]);
        let groups = agent.overlap_groups();
        assert_eq!(groups.len(), 1);
        let names: Vec<&str> = groups[0].iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["block_card", "get_balance", "get_card"]);
    }

    #[test]
    fn disabled_guidelines_are_left_out_and_tags_are_indexed() {
        let agent = agent();
        assert!(agent.guideline("disabled").is_none());
        assert_eq!(agent.tag_members("billing"), &[Entity::Guideline("premium".into())]);
        assert!(agent.guideline("balance").unwrap().tools.iter().any(|t| t.name == "get_balance"));
    }
}
