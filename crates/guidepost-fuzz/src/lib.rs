//! Structure-aware mutations and run settings for the property-based fuzz targets: test
//! support, a development dependency of the crates whose decoders are fuzzed.
//!
//! `cargo fuzz` needs a nightly toolchain and a libFuzzer build per target; Guidepost's fuzz
//! targets are proptest properties instead, in each crate's integration tests (the
//! definition loader, the scenario loader, recordings, the provider stream parsers, the
//! tool-result decoders). Each feeds its decoder arbitrary bytes and [`mutate`]d copies of
//! the checked-in seeds of its corpus folder, and asserts no panic, a bounded amount of work
//! (the CPU time of the decoding thread, [`cpu_time_of`], which other processes on the
//! machine do not inflate as they do elapsed time) and a typed, positioned error. [`cases`] reads how many inputs a run tries from
//! `GUIDEPOST_FUZZ_CASES` (default [`DEFAULT_CASES`], so the ordinary test suite stays
//! fast); `scripts/fuzz.sh` repeats the runs with fresh seeds for a given time.
//!
//! ```
//! use guidepost_fuzz::{Mutation, mutate};
//!
//! let seed = b"agent: {name: A}\n";
//! let out = mutate(seed, &[Mutation { kind: 0, at: 3, len: 0, token: 2 }]);
//! assert_eq!(out.len(), seed.len() + 1, "one NUL byte inserted");
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

use std::time::Duration;

/// Inputs a fuzz target tries per run unless `GUIDEPOST_FUZZ_CASES` says otherwise.
pub const DEFAULT_CASES: u32 = 48;

/// The most CPU time one input may take before a target reports a hang or a blow-up.
pub const CASE_TIME: Duration = Duration::from_secs(5);

/// Runs `work` and returns its result with the CPU time the calling thread spent on it.
///
/// CPU time counts work done: a decoder that blows up on an input uses more of it, while a
/// busy machine, which makes everything take longer by the clock, leaves it as it is. Read
/// from the kernel's scheduler statistics for the thread (Linux); where the system does not
/// report them, the time is zero and bounds on it hold trivially.
pub fn cpu_time_of<T>(work: impl FnOnce() -> T) -> (T, Duration) {
    let before = thread_cpu_time();
    let out = work();
    let spent = match (before, thread_cpu_time()) {
        (Some(before), Some(after)) => after.saturating_sub(before),
        _ => Duration::ZERO,
    };
    (out, spent)
}

/// The CPU time the calling thread has used, from `/proc/thread-self/schedstat`
/// (nanoseconds on the CPU), or `/proc/thread-self/stat` (user and system clock ticks of
/// 10 ms) when that is missing.
pub fn thread_cpu_time() -> Option<Duration> {
    if let Ok(text) = std::fs::read_to_string("/proc/thread-self/schedstat")
        && let Some(ns) = text.split_whitespace().next().and_then(|f| f.parse::<u64>().ok())
    {
        return Some(Duration::from_nanos(ns));
    }
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the command name (which may hold spaces) close with `)`; utime and stime
    // are the 12th and 13th of them.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Inputs per run: `GUIDEPOST_FUZZ_CASES`, or [`DEFAULT_CASES`] when it is unset or not a
/// positive number.
pub fn cases() -> u32 {
    std::env::var("GUIDEPOST_FUZZ_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_CASES)
}

/// Byte strings that stress text decoders and YAML or JSON parsers: control bytes, a
/// byte-order mark, broken UTF-8, line endings, brackets that open deep nesting, YAML
/// anchors and aliases, quotes and escapes, SSE field names and markers.
pub const TOKENS: [&[u8]; 24] = [
    b"\n",
    b"\r\n",
    b"\0",
    b"\xEF\xBB\xBF",
    b"\xFF\xFE",
    b"\xC3",
    b"[[[[[[[[[[[[[[[[",
    b"{{{{{{{{{{{{{{{{",
    b"]}",
    b"&a ",
    b"*a",
    b"<<: *a\n",
    b"- ",
    b": ",
    b"\"",
    b"\\u0000",
    b"'",
    b"#",
    b"---\n",
    b"data: ",
    b"event: ",
    b"[DONE]",
    b"\t",
    b"\x1B",
];

/// One edit of a seed. Positions and lengths are taken modulo the input's size, so any
/// values are valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mutation {
    /// 0 insert a token, 1 delete a range, 2 duplicate a range, 3 overwrite a byte with
    /// `token`, 4 repeat a token `len` times (deep nesting, long lines), 5 swap a range to
    /// the end.
    pub kind: u8,
    /// Where.
    pub at: usize,
    /// How many bytes (or repetitions).
    pub len: usize,
    /// Which of [`TOKENS`] (or the byte, for an overwrite).
    pub token: u8,
}

impl From<(u8, usize, usize, u8)> for Mutation {
    /// A mutation from arbitrary values (`(kind, at, len, token)`), as a property-test
    /// strategy draws them.
    fn from((kind, at, len, token): (u8, usize, usize, u8)) -> Self {
        Self { kind, at, len, token }
    }
}

/// Seed number `index` (modulo their count) of `seeds`, with `mutations` applied; empty
/// when there are no seeds.
pub fn mutate_seed(seeds: &[(String, Vec<u8>)], index: usize, mutations: &[Mutation]) -> Vec<u8> {
    if seeds.is_empty() {
        return Vec::new();
    }
    mutate(&seeds[index % seeds.len()].1, mutations)
}

/// `seed` with `mutations` applied in order. The result never grows past 4 MiB.
pub fn mutate(seed: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    const MAX: usize = 4 << 20;
    let mut out = seed.to_vec();
    for m in mutations {
        let size = out.len();
        let at = if size == 0 { 0 } else { m.at % (size + 1) };
        let token = TOKENS[usize::from(m.token) % TOKENS.len()];
        let end = at.saturating_add(m.len % 64).min(size);
        match m.kind % 6 {
            0 => {
                out.splice(at..at, token.iter().copied());
            }
            1 => {
                out.drain(at..end);
            }
            2 => {
                let piece = out[at..end].to_vec();
                out.splice(at..at, piece);
            }
            3 => {
                if let Some(b) = out.get_mut(at) {
                    *b = m.token;
                }
            }
            4 => {
                let times = m.len % 2048;
                let piece: Vec<u8> = token.iter().copied().cycle().take(token.len() * times).collect();
                out.splice(at..at, piece);
            }
            _ => {
                let piece: Vec<u8> = out.drain(at..end).collect();
                out.extend(piece);
            }
        }
        out.truncate(MAX);
    }
    out
}

/// The files of a corpus folder, in name order (an unreadable folder gives none).
pub fn corpus(folder: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_file())
        .filter_map(|e| Some((e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).ok()?)))
        .collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_stay_in_bounds() {
        let seed = b"abc";
        for kind in 0..6 {
            for at in [0, 1, 3, 99] {
                let out = mutate(seed, &[Mutation { kind, at, len: 5000, token: 7 }]);
                assert!(out.len() <= 3 + 16 * 2047, "{kind} {at}");
            }
        }
        assert!(mutate(b"", &[Mutation { kind: 1, at: 5, len: 5, token: 0 }]).is_empty());
    }

    #[test]
    fn cpu_time_counts_work_not_waiting() {
        if thread_cpu_time().is_none() {
            return;
        }
        // Waiting costs next to no CPU time, however long it lasts by the clock ...
        let ((), waited) = cpu_time_of(|| std::thread::sleep(Duration::from_millis(300)));
        assert!(waited < Duration::from_millis(150), "{waited:?}");
        // ... while work shows: spin until the thread has used 50 ms more.
        let ((), worked) = cpu_time_of(|| {
            let start = thread_cpu_time().unwrap_or_default();
            while thread_cpu_time().unwrap_or_default() < start + Duration::from_millis(50) {
                std::hint::black_box(0u64);
            }
        });
        assert!(worked >= Duration::from_millis(50), "{worked:?}");
    }
}
