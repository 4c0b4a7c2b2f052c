//! Property tests: the journey path algebra as the engine applies it, and the relational
//! resolver (idempotent, independent of input order).

use std::sync::Arc;

use guidepost_core::JourneyPath;
use guidepost_engine::journeys::paths::{advance, backtrack};
use guidepost_engine::record::{GuidelineMatch, JourneyDecision, MatchKind};
use guidepost_engine::{CompiledAgent, NumericPriority, RelationalResolver};
use proptest::prelude::*;

use crate::support::*;

const LINEAR: &str = r#"
agent: { name: Otto }
journeys:
  - id: flow
    title: Flow
    conditions: [The customer wants the flow]
    start: s1
    states:
      - { id: s1, chat: Ask one, next: s2 }
      - { id: s2, chat: Ask two, next: s3 }
      - { id: s3, chat: Ask three, next: s4 }
      - { id: s4, chat: Ask four, next: s5 }
      - { id: s5, chat: Ask five, next: end }
"#;

fn linear() -> Arc<CompiledAgent> {
    Arc::new(CompiledAgent::new(Arc::new(inline(LINEAR))))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Advancing along valid edges appends exactly those states; backtracking to any
    /// visited state truncates right after it; stepping onto `end` completes.
    #[test]
    fn forward_backtrack_complete(forward in 1usize..=5, back in 0usize..5) {
        let agent = linear();
        let graph = agent.journey("flow").unwrap();
        let names = ["s1", "s2", "s3", "s4", "s5"];
        let steps: Vec<String> = names[..forward].iter().map(|s| s.to_string()).collect();
        let change = advance(graph, &JourneyPath::start(), &steps, false, 10);
        let path = change.path.clone().unwrap();
        prop_assert_eq!(path.states().len(), forward + 1);
        prop_assert_eq!(path.current(), names[forward - 1]);
        prop_assert_eq!(change.decision, JourneyDecision::Advanced { steps: steps.clone() });

        let target = names[back.min(forward - 1)];
        let revisited = backtrack(&path, target);
        if target == path.current() {
            prop_assert_eq!(revisited.decision, JourneyDecision::Stayed);
        } else {
            let p = revisited.path.unwrap();
            prop_assert_eq!(p.current(), target);
            prop_assert!(p.states().len() < path.states().len());
            prop_assert!(path.states().starts_with(p.states()));
        }

        if forward == 5 {
            let done = advance(graph, &path, &["end".to_string()], false, 10);
            prop_assert_eq!(done.decision, JourneyDecision::Completed);
            prop_assert!(done.path.is_none());
        }
    }

    /// An advance never leaves the graph: whatever the model asks for, the resulting path
    /// is a chain of existing transitions.
    #[test]
    fn advance_follows_only_existing_edges(picks in proptest::collection::vec(0usize..6, 0..6)) {
        let agent = linear();
        let graph = agent.journey("flow").unwrap();
        let names = ["s1", "s2", "s3", "s4", "s5", "end"];
        let steps: Vec<String> = picks.iter().map(|i| names[*i].to_string()).collect();
        let change = advance(graph, &JourneyPath::start(), &steps, false, 10);
        if let Some(path) = change.path {
            for pair in path.states().windows(2) {
                prop_assert!(graph.edge(&pair[0], &pair[1]).is_some());
            }
        }
    }
}

const RELATIONS: &str = r#"
agent: { name: Otto }
tags: [t]
guidelines:
  - { id: a, condition: A, action: do a, priority_over: [b], entails: [c] }
  - { id: b, condition: B, action: do b, priority_over: [c], depends_on: [e] }
  - { id: c, condition: C, action: do c, entails: [d] }
  - { id: d, condition: D, action: do d, tags: [t], priority: 1 }
  - { id: e, condition: E, tags: [t] }
  - { id: f, condition: F, action: do f, depends_on_any: [a, e] }
  - { id: g, condition: G, action: do g, priority_over: [f], priority: 2 }
  - { id: h, condition: H, action: do h, depends_on: ["journey:j"] }
relationships:
  - { kind: priority, source: "any-tag:t", target: g }
  - { kind: priority, source: a, target: f }
journeys:
  - id: j
    title: J
    conditions: [J]
    start: s
    states:
      - { id: s, chat: say, next: end }
"#;

fn relations() -> Arc<CompiledAgent> {
    Arc::new(CompiledAgent::new(Arc::new(inline(RELATIONS))))
}

fn m(id: &str) -> GuidelineMatch {
    GuidelineMatch {
        guideline_id: id.into(),
        kind: MatchKind::Guideline,
        condition: id.to_uppercase(),
        action: None,
        tools: vec![],
        score: 10,
        rationale: "model".into(),
    }
}

fn ids(matches: &[GuidelineMatch]) -> Vec<String> {
    matches.iter().map(|m| m.guideline_id.clone()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn resolver_is_stable_and_order_independent(
        chosen in proptest::sample::subsequence(vec!["a", "b", "c", "d", "e", "f", "g", "h"], 0..=8),
        journey in any::<bool>(),
        seed in any::<u64>(),
        mode in 0usize..3,
    ) {
        let agent = relations();
        let numeric = [NumericPriority::Ignore, NumericPriority::BreakTies, NumericPriority::HighestWins][mode];
        let resolver = RelationalResolver::new(&agent, numeric);
        let matches: Vec<GuidelineMatch> = chosen.iter().map(|id| m(id)).collect();
        let journeys: Vec<String> = if journey { vec!["j".into()] } else { vec![] };
        let once = resolver.resolve(&matches, &journeys);

        // order independence: a shuffled input gives the same result
        let mut shuffled = matches.clone();
        let n = shuffled.len();
        if n > 1 {
            let mut s = seed;
            for i in (1..n).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                shuffled.swap(i, (s >> 33) as usize % (i + 1));
            }
        }
        let again = resolver.resolve(&shuffled, &journeys);
        prop_assert_eq!(ids(&once.matches), ids(&again.matches));
        prop_assert_eq!(&once.journeys, &again.journeys);
        prop_assert_eq!(&once.records, &again.records);

        // stability: whatever survived survives resolving the result again. (Not a fixpoint:
        // an outranked match still drops what it outranks, and the result no longer holds it.)
        let twice = resolver.resolve(&once.matches, &once.journeys);
        let again_ids = ids(&twice.matches);
        for id in ids(&once.matches) {
            prop_assert!(again_ids.contains(&id), "{} dropped on resolving the result again", id);
        }
        for j in &once.journeys {
            prop_assert!(twice.journeys.contains(j));
        }
    }
}
