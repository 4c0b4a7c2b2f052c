//! What `/proc` says about a process's CPU time: in all, and per kind of thread (user and
//! kernel time), so `guidepost load` can say where a server's time goes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Clock ticks per second of `/proc`'s times (`USER_HZ`, 100 on Linux).
const TICKS: f64 = 100.0;

/// CPU seconds a process, or one of its threads, spent in user and in kernel mode.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cpu {
    /// In user mode.
    pub user: f64,
    /// In the kernel, on the process's behalf.
    pub system: f64,
}

impl Cpu {
    /// Both.
    pub fn total(self) -> f64 {
        self.user + self.system
    }

    fn minus(self, earlier: Self) -> Self {
        Self { user: (self.user - earlier.user).max(0.0), system: (self.system - earlier.system).max(0.0) }
    }
}

/// The times of a `stat` file's text, and the command name between its parentheses.
fn parse_stat(text: &str) -> Option<(String, Cpu)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0) / TICKS;
    Some((name, Cpu { user: ticks(11), system: ticks(12) }))
}

/// The process's CPU time in all (threads that ended included); zero when `/proc` cannot
/// say.
pub fn process(pid: u32) -> Cpu {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| parse_stat(&t))
        .map_or(Cpu::default(), |s| s.1)
}

/// A picture of a process's CPU time, per thread, at one moment.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    total: Cpu,
    /// Thread id to (kind of thread, time).
    threads: BTreeMap<u32, (String, Cpu)>,
}

/// The kind of a thread, from its name: the async runtime's workers, the SQLite
/// connection's worker, the main thread; others by name.
fn kind(name: &str, main: &str) -> String {
    if name.starts_with("tokio-runtime") || name.starts_with("tokio-rt") {
        "async runtime workers".into()
    } else if name.starts_with("sqlx-sqlite") {
        "SQLite connection".into()
    } else if name == main {
        "main thread".into()
    } else {
        name.to_string()
    }
}

impl Snapshot {
    /// The process's threads now.
    pub fn take(pid: u32) -> Self {
        let total = process(pid);
        let main =
            std::fs::read_to_string(format!("/proc/{pid}/comm")).map(|n| n.trim().to_string()).unwrap_or_default();
        let mut threads = BTreeMap::new();
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for task in tasks.flatten() {
                let Some(tid) = task.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else { continue };
                if let Some((name, cpu)) =
                    std::fs::read_to_string(task.path().join("stat")).ok().and_then(|t| parse_stat(&t))
                {
                    threads.insert(tid, (kind(&name, &main), cpu));
                }
            }
        }
        Self { total, threads }
    }

    /// What the process spent since `earlier`, per kind of thread (largest first); time of
    /// threads that ended in between is `threads that ended`.
    pub fn since(&self, earlier: &Self) -> Vec<(String, Cpu)> {
        let mut kinds: BTreeMap<String, Cpu> = BTreeMap::new();
        let mut counted = Cpu::default();
        for (tid, (kind, now)) in &self.threads {
            let before = earlier.threads.get(tid).map_or(Cpu::default(), |t| t.1);
            let spent = now.minus(before);
            let entry = kinds.entry(kind.clone()).or_default();
            entry.user += spent.user;
            entry.system += spent.system;
            counted.user += spent.user;
            counted.system += spent.system;
        }
        let rest = self.total.minus(earlier.total).minus(counted);
        if rest.total() > 0.0 {
            kinds.insert("threads that ended".into(), rest);
        }
        let mut out: Vec<(String, Cpu)> = kinds.into_iter().filter(|(_, c)| c.total() > 0.0).collect();
        out.sort_by(|a, b| b.1.total().total_cmp(&a.1.total()));
        out
    }

    /// The process's whole CPU time since `earlier`.
    pub fn total_since(&self, earlier: &Self) -> Cpu {
        self.total.minus(earlier.total)
    }
}

/// `where` as a Markdown table: per kind of thread, user and kernel milliseconds per turn
/// and the share of the whole.
pub fn table(spent: &[(String, Cpu)], turns: usize) -> String {
    let whole: f64 = spent.iter().map(|(_, c)| c.total()).sum();
    let per = |s: f64| s * 1000.0 / turns.max(1) as f64;
    let mut out = String::from("| thread | user ms/turn | kernel ms/turn | share |\n|---|---|---|---|\n");
    for (kind, cpu) in spent {
        let share = if whole > 0.0 { cpu.total() / whole * 100.0 } else { 0.0 };
        let _ = writeln!(out, "| {kind} | {:.2} | {:.2} | {share:.0} % |", per(cpu.user), per(cpu.system));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_give_their_name_and_times_even_with_parentheses_in_the_name() -> Result<(), String> {
        let line = "42 (tokio-runtime-w) S 1 42 42 0 -1 4194368 100 0 0 0 250 75 0 0 20 0 9 0 100 0 0";
        let Some((name, cpu)) = parse_stat(line) else { return Err("the line did not parse".into()) };
        assert_eq!(name, "tokio-runtime-w");
        assert!((cpu.user - 2.5).abs() < 1e-9 && (cpu.system - 0.75).abs() < 1e-9, "{cpu:?}");
        let odd = "7 (a) b) R 1 7 7 0 -1 0 0 0 0 0 10 20 0";
        assert_eq!(parse_stat(odd).map(|s| s.0).as_deref(), Some("a) b"));
        Ok(())
    }

    #[test]
    fn this_process_has_a_main_thread_and_spends_time() {
        let pid = std::process::id();
        let before = Snapshot::take(pid);
        let mut x = 0u64;
        for i in 0..3_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let after = Snapshot::take(pid);
        assert!(after.total_since(&before).total() >= 0.0);
        assert!(!after.threads.is_empty());
        let spent = after.since(&before);
        assert!(table(&spent, 1).starts_with("| thread |"));
    }
}
