//! The journey path algebra: where a session stands in a journey.
//!
//! A path is the list of visited states, starting at the journey's start state. Moving to
//! a new state appends it (forward progress, possibly several states at once when the
//! customer already answered later questions); moving to a state already on the path
//! truncates the path right after it (backtracking); reaching `end`, or returning to the
//! start after visiting other states, completes the journey.

use serde::{Deserialize, Serialize};

use crate::journey::{END_STATE, START_STATE};

/// Visited states of one journey, oldest first. Never empty: the first element is the
/// start state.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JourneyPath(Vec<String>);

/// What a step did to a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathStep {
    /// Now at a state not visited before.
    Advanced(JourneyPath),
    /// Now at a state visited before; later states were dropped.
    Backtracked(JourneyPath),
    /// The path is unchanged: the session stays at its current state.
    Stayed,
    /// The journey finished (reached `end` or returned to the start).
    Completed,
}

impl Default for JourneyPath {
    fn default() -> Self {
        Self::start()
    }
}

impl JourneyPath {
    /// A path that just entered the journey.
    pub fn start() -> Self {
        Self(vec![START_STATE.to_string()])
    }

    /// Builds a path from visited states; `None` when empty or not starting at the start
    /// state.
    pub fn from_states(states: Vec<String>) -> Option<Self> {
        (states.first().map(String::as_str) == Some(START_STATE)).then_some(Self(states))
    }

    /// Visited states, oldest first.
    pub fn states(&self) -> &[String] {
        &self.0
    }

    /// The current state.
    pub fn current(&self) -> &str {
        self.0.last().map_or(START_STATE, String::as_str)
    }

    /// Whether `state` was visited.
    pub fn visited(&self, state: &str) -> bool {
        self.0.iter().any(|s| s == state)
    }

    /// Moves along `states` (one step, or several for a fast-forward), returning the new
    /// path or completion. A state already on the path backtracks to it; `end` or the
    /// start completes the journey.
    pub fn step<I, S>(&self, states: I) -> PathStep
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut path = self.0.clone();
        let mut backtracked = false;
        for state in states {
            let state = state.as_ref();
            if state == END_STATE || (state == START_STATE && path.len() > 1) {
                return PathStep::Completed;
            }
            if let Some(at) = path.iter().position(|s| s == state) {
                backtracked |= at + 1 < path.len();
                path.truncate(at + 1);
            } else {
                path.push(state.to_string());
            }
        }
        let path = Self(path);
        if path == *self {
            PathStep::Stayed
        } else if backtracked {
            PathStep::Backtracked(path)
        } else {
            PathStep::Advanced(path)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(states: &[&str]) -> JourneyPath {
        JourneyPath(states.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn forward_backtrack_complete() {
        let p = JourneyPath::start();
        let PathStep::Advanced(p) = p.step(["pickup"]) else { unreachable!() };
        let PathStep::Advanced(p) = p.step(["dropoff", "time"]) else { unreachable!() };
        assert_eq!(p, path(&["initial", "pickup", "dropoff", "time"]));
        assert_eq!(p.step(["pickup"]), PathStep::Backtracked(path(&["initial", "pickup"])));
        assert_eq!(p.step(["end"]), PathStep::Completed);
        assert_eq!(p.step(["initial"]), PathStep::Completed);
        assert_eq!(p.current(), "time");
        assert_eq!(p.step(["time"]), PathStep::Stayed);
        assert_eq!(p.step(Vec::<String>::new()), PathStep::Stayed);
    }
}
