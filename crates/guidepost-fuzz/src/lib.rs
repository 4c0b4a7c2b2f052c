//! Structure-aware mutations and run settings for the property-based fuzz targets: test
//! support, a development dependency of the crates whose decoders are fuzzed.
//!
//! `cargo fuzz` needs a nightly toolchain and a libFuzzer build per target; Guidepost's fuzz
//! targets are proptest properties instead, in each crate's integration tests (the
//! definition loader, the scenario loader, recordings, the provider stream parsers, the
//! tool-result decoders). Each feeds its decoder arbitrary bytes and [`mutate`]d copies of
//! the checked-in seeds of its corpus folder, and asserts no panic, a bounded time and a
//! typed, positioned error. [`cases`] reads how many inputs a run tries from
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

/// The longest one input may take before a target reports a hang.
pub const CASE_TIME: Duration = Duration::from_secs(5);

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
}
