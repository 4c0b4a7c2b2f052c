//! Reading the Mermaid chart Parlant's API gives of a journey (`GET
//! /journeys/{id}/mermaid`): the only place its REST API shows a journey's states.
//!
//! Parlant writes `stateDiagram-v2`, then `state "ACTION" as N<k>` for each state with an
//! action (HTML-escaped, numeric references written `#NN;`), `A --> B` or `A --> B: CONDITION`
//! for each transition (`[*]` is the start and the end), `style N<k> fill:#ffeeaa,...` for
//! tool states, and `%%` comments listing unreachable states. A state without an action
//! (a fork) has no `state` line.

/// A state of the chart.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartState {
    /// Its name in the chart (`N3`).
    pub key: String,
    /// Its action (a chat state's message, a tool state's instruction); none for a fork.
    pub label: Option<String>,
    /// Whether Parlant drew it as a tool state.
    pub tool: bool,
}

/// A transition of the chart.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartTransition {
    /// Where it starts; none for the journey's start.
    pub from: Option<String>,
    /// Where it goes; none for the journey's end.
    pub to: Option<String>,
    /// Its condition, if any.
    pub condition: Option<String>,
}

/// A journey's chart.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chart {
    /// The states, in the order the chart names them.
    pub states: Vec<ChartState>,
    /// The transitions, in the chart's order.
    pub transitions: Vec<ChartTransition>,
}

/// Parlant's style for tool states.
const TOOL_FILL: &str = "fill:#ffeeaa";

impl Chart {
    /// Reads a chart; an error names the line it could not read.
    pub fn parse(text: &str) -> Result<Chart, String> {
        let mut chart = Chart::default();
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
        match lines.next() {
            Some((_, first)) if first.trim().starts_with("stateDiagram") => {}
            _ => return Err("it does not start with `stateDiagram`".into()),
        }
        for (index, raw) in lines {
            let line = raw.trim();
            let at = || format!("line {}: cannot read `{}`", index + 1, shorten(line));
            if line.starts_with("%%") {
                continue;
            }
            if let Some(rest) = line.strip_prefix("state \"") {
                let (label, key) = rest.rsplit_once("\" as ").ok_or_else(at)?;
                let key = key.trim();
                if key.is_empty() || key.contains(char::is_whitespace) {
                    return Err(at());
                }
                let state = chart.state_mut(key);
                state.label = Some(unescape(label));
            } else if let Some(rest) = line.strip_prefix("style ") {
                let (key, style) = rest.split_once(' ').ok_or_else(at)?;
                if style.contains(TOOL_FILL) {
                    chart.state_mut(key).tool = true;
                }
            } else if let Some((from, rest)) = line.split_once("-->") {
                let (to, condition) = match rest.split_once(':') {
                    Some((to, condition)) => (to.trim(), Some(condition.trim().to_string())),
                    None => (rest.trim(), None),
                };
                let from = from.trim();
                if from.is_empty() || to.is_empty() {
                    return Err(at());
                }
                let end = |key: &str, chart: &mut Chart| {
                    (key != "[*]").then(|| {
                        chart.state_mut(key);
                        key.to_string()
                    })
                };
                let from = end(from, &mut chart);
                let to = end(to, &mut chart);
                chart.transitions.push(ChartTransition { from, to, condition: condition.filter(|c| !c.is_empty()) });
            } else {
                return Err(at());
            }
        }
        // The order a reader meets the states in: as the transitions (which Parlant writes
        // walking the graph from the start) first lead to them, then the unreachable ones.
        let met: Vec<&String> = chart.transitions.iter().filter_map(|t| t.to.as_ref()).collect();
        let rank = |key: &String| met.iter().position(|m| *m == key).unwrap_or(usize::MAX);
        chart.states.sort_by_key(|s| rank(&s.key));
        Ok(chart)
    }

    fn state_mut(&mut self, key: &str) -> &mut ChartState {
        let index = match self.states.iter().position(|s| s.key == key) {
            Some(index) => index,
            None => {
                self.states.push(ChartState { key: key.to_string(), label: None, tool: false });
                self.states.len() - 1
            }
        };
        &mut self.states[index]
    }
}

fn shorten(line: &str) -> String {
    match line.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}

/// Undoes Parlant's escaping of labels: HTML entities, and numeric references as `#NN;`.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(['&', '#']) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let entity = tail.find(';').map(|end| &tail[..=end]).filter(|e| e.len() <= 10);
        let decoded = entity.and_then(|e| match e {
            "&amp;" => Some('&'),
            "&lt;" => Some('<'),
            "&gt;" => Some('>'),
            "&quot;" => Some('"'),
            _ => e
                .strip_prefix("&#")
                .or_else(|| e.strip_prefix('#'))
                .and_then(|n| n.strip_suffix(';'))
                .and_then(|n| n.parse::<u32>().ok())
                .and_then(char::from_u32),
        });
        match (entity, decoded) {
            (Some(e), Some(c)) => {
                out.push(c);
                rest = &tail[e.len()..];
            }
            _ => {
                out.push_str(&tail[..1]);
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    const CHART: &str = "stateDiagram-v2
    state \"Ask which flavor they would like\" as N0
    state \"Use the tool check_availability\" as N2
    state \"Say &quot;hi&quot; &amp; it#39;s #60;3\" as N4
    [*] --> N0
    N0 --> N2: The customer named a flavor
    N2 --> N3
    N3 --> N4: The cake can be ready: that day
    N3 --> N0: The cake cannot be ready
    N4 --> [*]
style N0 fill:#006e53,stroke:#ffffff,stroke-width:2px,color:#ffffff
style N2 fill:#ffeeaa,stroke:#ffeeaa,stroke-width:2px,color:#dd6600
";

    #[test]
    fn reads_states_forks_tools_and_transitions() {
        let chart = Chart::parse(CHART).unwrap();
        let states: Vec<(&str, Option<&str>, bool)> =
            chart.states.iter().map(|s| (s.key.as_str(), s.label.as_deref(), s.tool)).collect();
        assert_eq!(
            states,
            [
                ("N0", Some("Ask which flavor they would like"), false),
                ("N2", Some("Use the tool check_availability"), true),
                ("N3", None, false),
                ("N4", Some("Say \"hi\" & it's <3"), false),
            ]
        );
        assert_eq!(chart.transitions.len(), 6);
        assert_eq!(chart.transitions[0], ChartTransition { from: None, to: Some("N0".into()), condition: None });
        assert_eq!(chart.transitions[3].condition.as_deref(), Some("The cake can be ready: that day"));
        assert_eq!(chart.transitions[5].to, None);
    }

    #[test]
    fn refuses_what_it_cannot_read_naming_the_line() {
        assert!(Chart::parse("graph TD\nA-->B").unwrap_err().contains("stateDiagram"));
        let err = Chart::parse("stateDiagram-v2\n  [*] --> N0\n  N0 ~~ N1\n").unwrap_err();
        assert!(err.starts_with("line 3:"), "{err}");
        assert!(Chart::parse("stateDiagram-v2\n  state \"x\" as \n").is_err());
    }

    #[test]
    fn unescaping_leaves_plain_text_alone() {
        assert_eq!(unescape("Order #12 & more"), "Order #12 & more");
        assert_eq!(unescape("a#39;b&#39;c"), "a'b'c");
    }
}
