//! Resolution of journeys: states, transitions and the checks on the graph.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write as _;

use indexmap::IndexMap;

use super::{Loc, Resolver, find_cycles};
use crate::definition::check::did_you_mean;
use crate::definition::file::{JourneyDecl, StateDecl, TransitionDecl, TransitionsDecl};
use crate::ids::{derive_id, is_valid_id};
use crate::journey::{END_STATE, Journey, JourneyCondition, JourneyState, START_STATE, StateKind, Transition};

/// A transition as written, before ids are assigned.
struct RawTransition {
    from: String,
    to: String,
    when: Option<String>,
    id: Option<String>,
    loc: Loc,
}

impl<'a> Resolver<'a> {
    pub(super) fn journeys(&mut self, journey_ids: &[(usize, usize, String)]) -> Vec<Journey> {
        let mut out = Vec::new();
        let mut state_locs: HashMap<String, Loc> = HashMap::new();
        for (i, k, id) in journey_ids {
            let Some(decl) = self.files.get(*i).and_then(|f| f.file.journeys.get(*k)) else { continue };
            let base = format!("journeys[{k}]");
            if let Some(journey) = self.journey(decl, id, *i, &base) {
                state_locs.insert(id.clone(), Loc { file: *i, path: base });
                out.push(journey);
            }
        }
        self.sub_journey_cycles(&out, &state_locs);
        out
    }

    fn journey(&mut self, decl: &JourneyDecl, id: &str, file: usize, base: &str) -> Option<Journey> {
        self.non_empty(&decl.title, &Loc { file, path: format!("{base}.title") }, "journey title");
        let mut conditions: Vec<JourneyCondition> = Vec::new();
        for (c, text) in decl.conditions.iter().enumerate() {
            let loc = Loc { file, path: format!("{base}.conditions[{c}]") };
            self.non_empty(text, &loc, "journey condition");
            if conditions.iter().any(|x| x.condition == *text) {
                self.error("duplicate-condition", &loc, format!("journey `{id}` lists this condition twice"), None);
                continue;
            }
            conditions.push(JourneyCondition {
                id: derive_id(&["journey-condition", &self.agent_id, id, text]),
                condition: text.clone(),
            });
        }
        // A misspelt `conditions:` is already an error of its own (unknown field, with "did you
        // mean"); the journey having none follows from it.
        if decl.conditions.is_empty() && !self.misspelt(file, base, "JourneyDecl", "conditions") {
            self.warning(
                "no-conditions",
                &Loc { file, path: format!("{base}.title") },
                format!("journey `{id}` has no conditions, so it only runs as another journey's sub-journey"),
                Some("add `conditions:` saying when the journey starts".into()),
            );
        }
        let tags = self.tag_refs(&decl.tags, file, &format!("{base}.tags"));

        // States.
        let mut states: Vec<JourneyState> = Vec::new();
        let mut state_index: HashMap<String, usize> = HashMap::new();
        for (s, state) in decl.states.iter().enumerate() {
            let sbase = format!("{base}.states[{s}]");
            let id_loc = Loc { file, path: format!("{sbase}.id") };
            if state.id == START_STATE || state.id == END_STATE {
                let message = if state.id == END_STATE && state.next.is_some() {
                    "transitions out of `end`: `end` finishes the journey and cannot lead anywhere".to_string()
                } else {
                    format!("`{}` is a reserved state id", state.id)
                };
                let code =
                    if state.id == END_STATE && state.next.is_some() { "transition-from-end" } else { "reserved-name" };
                self.error(
                    code,
                    &id_loc,
                    message,
                    Some(format!("`{START_STATE}` and `{END_STATE}` are implicit; name this state differently")),
                );
                continue;
            }
            if !is_valid_id(&state.id) {
                self.error(
                    "invalid-id",
                    &id_loc,
                    format!("`{}` is not a valid state id", state.id.escape_debug()),
                    Some("ids may not be empty or contain whitespace, control characters, `:` or `/`".into()),
                );
                continue;
            }
            if let Some(first) = state_index.get(&state.id) {
                let first_loc = Loc { file, path: format!("{base}.states[{first}].id") };
                let hint = format!("first defined at {}", self.describe_loc(&first_loc));
                self.error(
                    "duplicate-id",
                    &id_loc,
                    format!("duplicate state `{}` in journey `{id}`", state.id),
                    Some(hint),
                );
                continue;
            }
            // Registered before its kind is checked, so transitions to a state with a
            // problem of its own do not also report it as unknown.
            state_index.insert(state.id.clone(), s);
            let Some(kind) = self.state_kind(state, id, file, &sbase) else { continue };
            let canned_responses =
                self.canned_refs(&state.canned_responses, file, &format!("{sbase}.canned_responses"));
            states.push(JourneyState {
                id: state.id.clone(),
                kind,
                description: state.description.clone(),
                canned_responses,
                composition_mode: state.composition_mode,
                labels: state.labels.clone(),
                metadata: state.metadata.clone(),
            });
        }
        if decl.states.is_empty() && !self.misspelt(file, base, "JourneyDecl", "states") {
            self.error(
                "empty-journey",
                &Loc { file, path: format!("{base}.title") },
                format!("journey `{id}` has no states"),
                Some("add `states:` and a `start:` transition into them".into()),
            );
        } else if decl.states.len() == 1 {
            self.warning(
                "single-state-journey",
                &Loc { file, path: format!("{base}.title") },
                format!("journey `{id}` has a single state"),
                Some("a one-step flow is usually clearer as a guideline".into()),
            );
        }

        // Transitions.
        let mut raw: Vec<RawTransition> = Vec::new();
        match &decl.start {
            Some(start) => collect(&mut raw, START_STATE, start, file, &format!("{base}.start")),
            None if !decl.states.is_empty() && !self.misspelt(file, base, "JourneyDecl", "start") => {
                self.error(
                    "missing-start",
                    &Loc { file, path: format!("{base}.title") },
                    format!("journey `{id}` has no `start`"),
                    Some(format!(
                        "add `start: {}` (or a list of transitions with conditions)",
                        decl.states.first().map_or("<state>", |s| s.id.as_str())
                    )),
                );
            }
            None => {}
        }
        for (s, state) in decl.states.iter().enumerate() {
            if let Some(next) = &state.next
                && state.id != END_STATE
            {
                collect(&mut raw, &state.id, next, file, &format!("{base}.states[{s}].next"));
            }
        }
        let mut transitions: Vec<Transition> = Vec::new();
        let mut seen_ids: HashSet<String> = HashSet::new();
        // Transitions to states that do not exist, with the state each most likely meant.
        let mut broken: Vec<Broken> = Vec::new();
        for (n, t) in raw.iter().enumerate() {
            if t.to != END_STATE && !state_index.contains_key(&t.to) {
                let known = decl.states.iter().map(|s| s.id.as_str()).filter(|s| state_index.contains_key(*s));
                let meant = did_you_mean(&t.to, known.chain([END_STATE]));
                broken.push(Broken { transition: n, meant });
                continue;
            }
            if let Some(when) = &t.when {
                self.non_empty(
                    when,
                    &Loc { file: t.loc.file, path: t.loc.path.replace(".to", ".when") },
                    "transition condition",
                );
            }
            if let Some(given) = &t.id
                && !is_valid_id(given)
            {
                self.error(
                    "invalid-id",
                    &t.loc,
                    format!("`{}` is not a valid transition id", given.escape_debug()),
                    Some("ids may not be empty or contain whitespace, control characters, `:` or `/`".into()),
                );
            }
            let edge_id = t.id.clone().unwrap_or_else(|| format!("edge_{:03}", n + 1));
            if !seen_ids.insert(edge_id.clone()) {
                self.error(
                    "duplicate-id",
                    &t.loc,
                    format!("duplicate transition id `{edge_id}` in journey `{id}`"),
                    None,
                );
                continue;
            }
            transitions.push(Transition {
                id: edge_id,
                from: t.from.clone(),
                to: t.to.clone(),
                condition: t.when.clone(),
            });
        }

        for state in &decl.states {
            if matches!(state.id.as_str(), START_STATE | END_STATE) {
                continue;
            }
            let outgoing: Vec<&Transition> = transitions.iter().filter(|t| t.from == state.id).collect();
            let Some(s) = decl.states.iter().position(|x| x.id == state.id) else { continue };
            let loc = Loc { file, path: format!("{base}.states[{s}].id") };
            if state.fork && outgoing.len() == 1 {
                self.warning(
                    "single-branch-fork",
                    &loc,
                    format!("fork `{}` has a single transition", state.id),
                    Some("a fork chooses among several conditional transitions".into()),
                );
            }
            let unconditional = outgoing.iter().filter(|t| t.condition.is_none()).count();
            if unconditional > 1 {
                self.warning(
                    "ambiguous-transitions",
                    &loc,
                    format!("state `{}` has {unconditional} unconditional transitions", state.id),
                    Some("give them `when:` conditions so the engine can choose".into()),
                );
            }
        }

        let journey = Journey {
            id: id.to_string(),
            title: decl.title.clone(),
            description: decl.description.clone(),
            conditions,
            tags,
            labels: decl.labels.clone(),
            priority: decl.priority.unwrap_or(0),
            composition_mode: decl.composition_mode,
            states,
            transitions,
        };
        let folded = self.broken_transitions(&journey, decl, &raw, &broken);
        if decl.start.is_some() {
            self.graph_checks(&journey, decl, file, base, &raw, &broken, &folded);
        }
        Some(journey)
    }

    /// Reports each transition to a state that does not exist as one error, with the state
    /// it most likely meant and the states that only it would reach (those are not reported
    /// again as unreachable). Returns the states folded into these errors.
    fn broken_transitions(
        &mut self,
        journey: &Journey,
        decl: &JourneyDecl,
        raw: &[RawTransition],
        broken: &[Broken],
    ) -> HashSet<String> {
        let mut folded = HashSet::new();
        if broken.is_empty() {
            return folded;
        }
        let reached = bfs(START_STATE, &edges(journey, raw, &[]));
        // States nothing reaches even with every meant state put right: a transition whose
        // target was not recognized may have meant any of them.
        let repaired = bfs(START_STATE, &edges(journey, raw, broken));
        let stranded: Vec<&str> =
            journey.states.iter().map(|s| s.id.as_str()).filter(|s| !repaired.contains(*s)).collect();
        for b in broken {
            let Some(t) = raw.get(b.transition) else { continue };
            let (hint, cut_off): (String, Vec<&str>) = match &b.meant {
                Some(meant) => {
                    let with = bfs(START_STATE, &edges(journey, raw, std::slice::from_ref(b)));
                    let cut_off: Vec<&str> = journey
                        .states
                        .iter()
                        .map(|s| s.id.as_str())
                        .filter(|s| with.contains(*s) && !reached.contains(*s))
                        .collect();
                    (format!("did you mean `{meant}`?"), cut_off)
                }
                None if t.to == START_STATE => (format!("to finish the journey go to `{END_STATE}`"), Vec::new()),
                None => {
                    let known: Vec<String> =
                        decl.states.iter().map(|s| format!("`{}`", s.id)).chain([format!("`{END_STATE}`")]).collect();
                    let mut hint = format!("states of `{}`: {}", journey.id, known.join(", "));
                    if !stranded.is_empty() {
                        let _ = write!(hint, "; no transition reaches {}: was it one of them?", listed(&stranded));
                    }
                    (hint, Vec::new())
                }
            };
            let message = if cut_off.is_empty() {
                format!("transition to unknown state `{}`", t.to)
            } else {
                format!("transition to unknown state `{}`, so nothing reaches {}", t.to, listed(&cut_off))
            };
            if b.meant.is_none() {
                folded.extend(stranded.iter().map(|s| s.to_string()));
            }
            folded.extend(cut_off.iter().map(|s| s.to_string()));
            self.error("unknown-reference", &t.loc, message, Some(hint));
        }
        folded
    }

    fn state_kind(&mut self, state: &StateDecl, journey: &str, file: usize, sbase: &str) -> Option<StateKind> {
        let loc = Loc { file, path: format!("{sbase}.id") };
        let given: Vec<&str> = [
            state.chat.is_some().then_some("chat"),
            state.tool.is_some().then_some("tool"),
            state.fork.then_some("fork"),
            state.journey.is_some().then_some("journey"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if given.len() != 1 {
            let message = if given.is_empty() {
                format!("state `{}` does not say what it does", state.id)
            } else {
                format!("state `{}` is several kinds at once ({})", state.id, given.join(", "))
            };
            self.error("state-kind", &loc, message, Some("give exactly one of `chat: <what to say>`, `tool: <tool>`, `fork: true` or `journey: <journey id>`".into()));
            return None;
        }
        if state.instruction.is_some() && state.tool.is_none() {
            self.warning(
                "unused-setting",
                &Loc { file, path: format!("{sbase}.instruction") },
                "`instruction` only applies to tool states",
                None,
            );
        }
        if let Some(chat) = &state.chat {
            self.non_empty(chat, &Loc { file, path: format!("{sbase}.chat") }, "chat action");
            return Some(StateKind::Chat { action: chat.clone() });
        }
        if let Some(tool) = &state.tool {
            let names = tool.to_vec();
            if names.is_empty() {
                self.error(
                    "tool-state-without-tool",
                    &Loc { file, path: format!("{sbase}.tool") },
                    format!("tool state `{}` names no tool", state.id),
                    Some("write `tool: <tool name>`".into()),
                );
                return None;
            }
            let single = matches!(tool, crate::definition::file::OneOrMany::One(_));
            let tools: Vec<_> = names
                .iter()
                .enumerate()
                .filter_map(|(t, name)| {
                    let path = if single { format!("{sbase}.tool") } else { format!("{sbase}.tool[{t}]") };
                    self.tool_ref(name, &Loc { file, path })
                })
                .collect();
            if tools.len() != names.len() {
                return None;
            }
            return Some(StateKind::Tool { tools, instruction: state.instruction.clone() });
        }
        if let Some(sub) = &state.journey {
            let sub_loc = Loc { file, path: format!("{sbase}.journey") };
            if sub == journey {
                self.error("cycle", &sub_loc, format!("journey `{journey}` runs itself as a sub-journey"), None);
                return None;
            }
            if !self.journey_ids.contains_key(sub) {
                let known: Vec<String> = self.journey_ids.keys().cloned().collect();
                let hint = did_you_mean(sub, known.iter().map(String::as_str)).map(|s| format!("did you mean `{s}`?"));
                self.error("unknown-reference", &sub_loc, format!("unknown journey `{sub}`"), hint);
                return None;
            }
            return Some(StateKind::Journey { journey: sub.clone() });
        }
        Some(StateKind::Fork)
    }

    /// Unreachable states, and states from which `end` cannot be reached, on the graph as it
    /// was most likely meant: transitions to misspelt states lead to the states they meant,
    /// and states `folded` into the errors of broken transitions are not reported again.
    /// Without a likely meaning for every broken transition, ways to `end` are not checked
    /// (any state might lose its way out through one).
    #[allow(clippy::too_many_arguments)]
    fn graph_checks(
        &mut self,
        journey: &Journey,
        decl: &JourneyDecl,
        file: usize,
        base: &str,
        raw: &[RawTransition],
        broken: &[Broken],
        folded: &HashSet<String>,
    ) {
        let forward = edges(journey, raw, broken);
        let mut backward: IndexMap<&str, Vec<&str>> = IndexMap::new();
        for (from, tos) in &forward {
            for to in tos {
                backward.entry(to).or_default().push(from);
            }
        }
        let check_exits = broken.iter().all(|b| b.meant.is_some());
        let reachable = bfs(START_STATE, &forward);
        let finishing = bfs(END_STATE, &backward);
        for state in &journey.states {
            let Some(s) = decl.states.iter().position(|x| x.id == state.id) else { continue };
            let loc = Loc { file, path: format!("{base}.states[{s}].id") };
            if folded.contains(&state.id) {
                continue;
            }
            if !reachable.contains(state.id.as_str()) {
                self.error(
                    "unreachable-state",
                    &loc,
                    format!("state `{}` of journey `{}` can never be reached", state.id, journey.id),
                    Some("add a transition to it from `start` or from another state, or remove it".into()),
                );
            } else if check_exits && !finishing.contains(state.id.as_str()) {
                let hint = if forward.get(state.id.as_str()).is_none_or(Vec::is_empty) {
                    format!("it has no transitions; add `next: {END_STATE}` or a transition onwards")
                } else {
                    format!("every path from it loops without reaching `{END_STATE}`; add a way out")
                };
                self.error(
                    "no-path-to-end",
                    &loc,
                    format!("state `{}` of journey `{}` has no path to `{END_STATE}`", state.id, journey.id),
                    Some(hint),
                );
            }
        }
    }

    fn sub_journey_cycles(&mut self, journeys: &[Journey], locs: &HashMap<String, Loc>) {
        let edges: IndexMap<String, Vec<String>> =
            journeys.iter().map(|j| (j.id.clone(), j.sub_journeys().map(str::to_string).collect())).collect();
        for cycle in find_cycles(&edges) {
            let Some(loc) = cycle.first().and_then(|first| locs.get(first)).cloned() else { continue };
            let loc = Loc { file: loc.file, path: format!("{}.title", loc.path) };
            self.error(
                "cycle",
                &loc,
                format!("sub-journeys form a cycle: {}", cycle.join(" -> ")),
                Some("a journey cannot (directly or indirectly) run itself".into()),
            );
        }
    }
}

/// `a`, `b` and `c`, quoted.
fn listed(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => quoted.concat(),
    }
}

/// A transition to a state the journey does not have.
struct Broken {
    /// Its index among the raw transitions.
    transition: usize,
    /// The state it most likely meant (a close spelling), if any.
    meant: Option<String>,
}

/// The journey's transitions as edges, with each of `repaired` leading to the state it meant.
fn edges<'j>(
    journey: &'j Journey,
    raw: &'j [RawTransition],
    repaired: &'j [Broken],
) -> IndexMap<&'j str, Vec<&'j str>> {
    let mut forward: IndexMap<&str, Vec<&str>> = IndexMap::new();
    for t in &journey.transitions {
        forward.entry(t.from.as_str()).or_default().push(t.to.as_str());
    }
    for b in repaired {
        if let (Some(t), Some(meant)) = (raw.get(b.transition), &b.meant) {
            forward.entry(t.from.as_str()).or_default().push(meant.as_str());
        }
    }
    forward
}

fn collect(out: &mut Vec<RawTransition>, from: &str, decl: &TransitionsDecl, file: usize, path: &str) {
    match decl {
        TransitionsDecl::To(to) => out.push(RawTransition {
            from: from.into(),
            to: to.clone(),
            when: None,
            id: None,
            loc: Loc { file, path: path.into() },
        }),
        TransitionsDecl::List(list) => {
            for (n, t) in list.iter().enumerate() {
                match t {
                    TransitionDecl::To(to) => out.push(RawTransition {
                        from: from.into(),
                        to: to.clone(),
                        when: None,
                        id: None,
                        loc: Loc { file, path: format!("{path}[{n}]") },
                    }),
                    TransitionDecl::Full(d) => out.push(RawTransition {
                        from: from.into(),
                        to: d.to.clone(),
                        when: d.when.clone(),
                        id: d.id.clone(),
                        loc: Loc { file, path: format!("{path}[{n}].to") },
                    }),
                }
            }
        }
    }
}

fn bfs<'x>(from: &'x str, edges: &IndexMap<&'x str, Vec<&'x str>>) -> HashSet<&'x str> {
    let mut seen: HashSet<&str> = HashSet::from([from]);
    let mut queue = VecDeque::from([from]);
    while let Some(node) = queue.pop_front() {
        for next in edges.get(node).into_iter().flatten() {
            if seen.insert(next) {
                queue.push_back(next);
            }
        }
    }
    seen
}
