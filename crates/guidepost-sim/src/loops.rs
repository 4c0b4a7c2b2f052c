//! Loop detection over the sequence of selected steps: the same step too many times in a row,
//! or the same cycle of steps repeated. Stateless: recomputed from the step ids each turn.
//! Turns without a step are ignored, so `A, -, A, -, A` is three selections of `A` in a row.

use crate::trajectory::LoopDetection;

/// A loop that stops the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoopFinding {
    /// The same step was selected `count` times in a row.
    SameStep {
        /// The step.
        step: String,
        /// How many times.
        count: usize,
    },
    /// A cycle of steps repeated `repetitions` times in a row.
    Cycle {
        /// The cycle.
        pattern: Vec<String>,
        /// How many occurrences in a row.
        repetitions: usize,
    },
}

impl LoopFinding {
    /// A sentence for the end marker.
    pub fn summary(&self) -> String {
        match self {
            Self::SameStep { step, count } => {
                format!("Loop detected: step \"{step}\" selected {count} times in a row")
            }
            Self::Cycle { pattern, repetitions } => {
                format!("Cycle detected: pattern [{}] repeated {repetitions} times", pattern.join(" -> "))
            }
        }
    }
}

/// Looks for a loop at the end of `step_ids` (the selections so far, including the one about
/// to be made).
///
/// - Same step: stops when the trailing run of one id reaches `max_consecutive_same_step`
///   (so with the default 3 the third selection in a row stops the run).
/// - Cycles: for lengths 2 ..= `max_cycle_length`, stops when the last
///   `length * (max_cycle_repetitions + 1)` ids are one pattern (of at least two distinct ids)
///   repeated.
///
/// ```
/// use guidepost_sim::loops::{detect_loop, LoopFinding};
/// use guidepost_sim::trajectory::LoopDetection;
/// let ids = |v: &[&str]| v.iter().map(|s| Some(s.to_string())).collect::<Vec<_>>();
/// let cfg = LoopDetection::default();
/// assert!(matches!(detect_loop(&ids(&["a", "a", "a"]), &cfg), Some(LoopFinding::SameStep { .. })));
/// assert!(matches!(detect_loop(&ids(&["a", "b", "a", "b", "a", "b"]), &cfg), Some(LoopFinding::Cycle { .. })));
/// assert_eq!(detect_loop(&ids(&["a", "b", "a", "b"]), &cfg), None);
/// ```
pub fn detect_loop(step_ids: &[Option<String>], config: &LoopDetection) -> Option<LoopFinding> {
    let ids: Vec<&str> = step_ids.iter().filter_map(|s| s.as_deref()).collect();
    let last = *ids.last()?;
    let run = ids.iter().rev().take_while(|id| **id == last).count();
    let limit = usize::try_from(config.max_consecutive_same_step).unwrap_or(usize::MAX);
    if limit > 0 && run >= limit {
        return Some(LoopFinding::SameStep { step: last.to_string(), count: run });
    }
    let occurrences = usize::try_from(config.max_cycle_repetitions).unwrap_or(usize::MAX).saturating_add(1);
    if occurrences < 2 {
        return None;
    }
    for length in 2..=usize::try_from(config.max_cycle_length).unwrap_or(0) {
        let window = length.saturating_mul(occurrences);
        if window > ids.len() {
            break;
        }
        let tail = &ids[ids.len() - window..];
        let pattern = &tail[..length];
        let distinct = pattern.iter().any(|id| *id != pattern[0]);
        if distinct && tail.chunks(length).all(|chunk| chunk == pattern) {
            return Some(LoopFinding::Cycle {
                pattern: pattern.iter().map(|s| (*s).to_string()).collect(),
                repetitions: occurrences,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[Option<&str>]) -> Vec<Option<String>> {
        v.iter().map(|s| s.map(String::from)).collect()
    }

    proptest::proptest! {
        #[test]
        fn a_reported_loop_is_really_at_the_end(ids in proptest::collection::vec(proptest::option::of(0u8..3), 0..30)) {
            let ids: Vec<Option<String>> = ids.into_iter().map(|i| i.map(|i| format!("s{i}"))).collect();
            let cfg = LoopDetection::default();
            let steps: Vec<&String> = ids.iter().flatten().collect();
            match detect_loop(&ids, &cfg) {
                Some(LoopFinding::SameStep { step, count }) => {
                    proptest::prop_assert!(count >= 3);
                    proptest::prop_assert!(steps.iter().rev().take(count).all(|s| **s == step));
                }
                Some(LoopFinding::Cycle { pattern, repetitions }) => {
                    let tail: Vec<&String> = steps.iter().rev().take(pattern.len() * repetitions).rev().copied().collect();
                    for (i, s) in tail.iter().enumerate() {
                        proptest::prop_assert_eq!(*s, &pattern[i % pattern.len()]);
                    }
                }
                None => {}
            }
        }
    }

    #[test]
    fn turns_without_steps_do_not_break_a_run() {
        let cfg = LoopDetection::default();
        let found = detect_loop(&ids(&[Some("a"), None, Some("a"), None, Some("a")]), &cfg);
        assert_eq!(found, Some(LoopFinding::SameStep { step: "a".into(), count: 3 }));
        assert_eq!(detect_loop(&ids(&[Some("a"), Some("a"), Some("b")]), &cfg), None);
    }

    #[test]
    fn cycles_of_three_and_limits() {
        let cfg = LoopDetection { max_consecutive_same_step: 5, max_cycle_length: 3, max_cycle_repetitions: 1 };
        let seq = ids(&[Some("x"), Some("a"), Some("b"), Some("c"), Some("a"), Some("b"), Some("c")]);
        let found = detect_loop(&seq, &cfg).map(|f| f.summary());
        assert_eq!(found.as_deref(), Some("Cycle detected: pattern [a -> b -> c] repeated 2 times"));
        let off = LoopDetection { max_cycle_length: 0, ..cfg };
        assert_eq!(detect_loop(&seq, &off), None);
    }
}
