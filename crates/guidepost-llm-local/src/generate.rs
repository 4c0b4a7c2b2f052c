//! The generation loop: prefill (reusing the cached prefix), greedy or sampled decoding, stop
//! tokens, and (optionally) a grammar that masks the logits at every step.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use guidepost_llm::progress::CallProgress;
use llguidance::Matcher;
use llguidance::toktrie::SimpleVob;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::constrained::masked_argmax;
use crate::decoder::{Decoder, Prefill};
use crate::error::LocalError;

/// How to decode.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DecodeParams {
    pub(crate) max_tokens: usize,
    /// `None` or `<= 0`: greedy (deterministic).
    pub(crate) temperature: Option<f64>,
    pub(crate) seed: u64,
    /// Stop sequences in the text.
    pub(crate) stop: Vec<String>,
    /// Most tokens drafted after a pass of a greedy answer (see [`draft_after`]).
    pub(crate) draft_tokens: usize,
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// A stop token, a stop sequence, or the end of the grammar.
    Stop,
    /// The token limit.
    Length,
}

/// The result of one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// The generated token ids, stop token excluded.
    pub token_ids: Vec<u32>,
    /// The decoded text (cut before a stop sequence).
    pub text: String,
    /// Prompt length in tokens.
    pub prompt_tokens: usize,
    /// Prompt tokens whose keys and values came from the cache (a prefix shared with the
    /// previous generation), not evaluated again.
    pub cached_prompt_tokens: usize,
    /// Time spent on the prompt.
    pub prefill: Duration,
    /// Time spent generating.
    pub decode: Duration,
    /// Passes through the model after the prompt's: one per token chosen, less those the
    /// prompt's pass evaluated already (a guessed start) and the end of an answer the grammar
    /// finished.
    pub decode_passes: usize,
    /// Tokens evaluated ahead of the answer: a guessed start, and drafts after each pass (see
    /// [`LocalOptions::draft_tokens`](crate::LocalOptions::draft_tokens)).
    pub drafted: usize,
    /// Of the tokens evaluated ahead, those the answer took without a pass of its own.
    pub accepted: usize,
    /// Why it ended.
    pub finish: FinishReason,
    /// Under a grammar: every step where it allowed more than one token, with the likeliest
    /// allowed tokens and their probabilities among the allowed ones.
    pub decisions: Vec<Decision>,
    /// Whether the prompt was read in a pass shared with other answers' prompts: its own pass,
    /// which read theirs too, or another's (see
    /// [`LocalOptions::share_passes`](crate::LocalOptions::share_passes)).
    pub shared_pass: bool,
}

/// The prompt of an answer: its tokens, and how they get read.
pub(crate) struct Prompt<'a> {
    pub(crate) ids: &'a [u32],
    pub(crate) start: Start,
}

/// How an answer's prompt gets read.
pub(crate) enum Start {
    /// Read now, into the current cache.
    Now,
    /// Read already, with other answers' prompts, into the current cache, the guess after it
    /// (`Decoder::prefill_shared`, first prompt), in this long.
    Read(Prefill, Duration),
    /// Read in another answer's pass, which left its logits but not its keys and values: the
    /// prompt is read again only if the answer needs a pass of its own.
    Elsewhere(Prefill),
}

/// A step where the grammar left the model a choice.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The byte offset in the answer's text where the chosen token starts.
    pub offset: usize,
    /// Up to four (`DECISION_OPTIONS`) allowed tokens, likeliest first: id and probability among
    /// the allowed tokens.
    pub options: Vec<(u32, f32)>,
}

/// How many options a [`Decision`] keeps.
pub const DECISION_OPTIONS: usize = 4;

/// The likeliest allowed tokens, with probabilities renormalized over the allowed set
/// (`None` when fewer than two are allowed).
fn decision(logits: &[f32], mask: &SimpleVob, offset: usize) -> Option<Decision> {
    // One pass, no allocation: inside a JSON string the grammar allows most of the
    // vocabulary, and this runs at every generated token. The softmax total is kept relative
    // to the running maximum.
    let mut top: Vec<(u32, f32)> = Vec::with_capacity(DECISION_OPTIONS + 1);
    let (mut allowed, mut max, mut total) = (0usize, f32::NEG_INFINITY, 0f32);
    mask.iter_set_entries(|i| {
        let (Some(&logit), Ok(id)) = (logits.get(i), u32::try_from(i)) else { return };
        if !logit.is_finite() {
            return;
        }
        allowed += 1;
        if logit > max {
            total = total * (max - logit).exp() + 1.0;
            max = logit;
        } else {
            total += (logit - max).exp();
        }
        if top.len() < DECISION_OPTIONS || top.last().is_some_and(|(_, l)| logit > *l) {
            let at = top.iter().position(|(_, l)| logit > *l).unwrap_or(top.len());
            top.insert(at, (id, logit));
            top.truncate(DECISION_OPTIONS);
        }
    });
    if allowed < 2 {
        return None;
    }
    let options = top.into_iter().map(|(id, l)| (id, (l - max).exp() / total)).collect();
    Some(Decision { offset, options })
}

/// A loaded model ready to generate.
pub(crate) struct Generator {
    pub(crate) decoder: Decoder,
    pub(crate) stop_ids: Vec<u32>,
}

impl Generator {
    /// Generates after `prompt`. `decode` turns ids into text; `on_text` receives each new
    /// piece of text as soon as it is complete UTF-8; `progress` hears how far the prompt is
    /// read and how many tokens are written.
    pub(crate) fn generate(
        &mut self,
        prompt: Prompt<'_>,
        params: &DecodeParams,
        mut grammar: Option<&mut Matcher>,
        decode: &dyn Fn(&[u32]) -> Result<String, LocalError>,
        on_text: &mut dyn FnMut(&str),
        progress: Option<&CallProgress>,
    ) -> Result<Generation, LocalError> {
        let Prompt { ids: prompt, start } = prompt;
        if prompt.is_empty() {
            return Err(LocalError::Tokenizer("the prompt is empty".into()));
        }
        if prompt.len() + params.max_tokens > self.decoder.positions() {
            return Err(LocalError::ContextOverflow {
                prompt_tokens: prompt.len(),
                max_tokens: params.max_tokens,
                context: self.decoder.positions(),
            });
        }
        let mut sampler = match params.temperature {
            Some(t) if t > 0.0 => Some(Sampler::new(params.seed, t as f32)),
            _ => None,
        };
        let began = Instant::now();
        // Greedy under a grammar, the answer's first tokens are guessed from what the grammar
        // forces and evaluated with the prompt: one pass fewer when the model picks them.
        let guess = guess(grammar.as_deref(), params.temperature);
        let mut on_read = |done: usize, total: usize| {
            if let Some(progress) = progress {
                progress.reading(done, total);
            }
        };
        let shared_pass = !matches!(start, Start::Now);
        // Whether the current cache holds the prompt and the guess (an answer whose prompt
        // was read elsewhere reads it when it needs a pass).
        let (prefill, mut in_cache, read_before) = match start {
            Start::Now => (self.decoder.prefill_guessing(prompt, &guess, &mut on_read)?, true, Duration::ZERO),
            Start::Read(prefill, took) => (prefill, true, took),
            Start::Elsewhere(prefill) => (prefill, false, Duration::ZERO),
        };
        let cached_prompt_tokens = prefill.reused;
        let mut logits = prefill.logits;
        // Tokens evaluated ahead of the answer (the guessed start, then the tokens drafted with
        // each pass), with the logits after each where the pass kept them: the answer takes
        // them without a pass of its own for as long as the model chooses them.
        let mut ahead: VecDeque<(u32, Option<After>)> = match prefill.after_guess {
            Some(after) => {
                let last = guess.len().saturating_sub(1);
                guess.iter().enumerate().map(|(i, &t)| (t, (i == last).then(|| After::Logits(after.clone())))).collect()
            }
            None => VecDeque::new(),
        };
        let (mut drafted, mut accepted) = (ahead.len(), 0usize);
        // How many tokens the next draft may hold: doubled after a draft taken whole, cut to
        // one more than was taken after one that was not (every drafted token adds a row to
        // the pass through the blocks, taken or not).
        let mut draft_len = params.draft_tokens;
        // Of `ahead`, how many tokens the last draft put there, and whether the grammar forced
        // them (such a draft does not change `draft_len`).
        let mut last_draft = 0usize;
        let mut last_draft_forced = false;
        let prefill = began.elapsed() + read_before;
        let start = Instant::now();
        let mut out: Vec<u32> = Vec::new();
        let mut emitted = 0usize; // bytes of text already passed to `on_text`
        let mut text = String::new();
        let mut decisions = Vec::new();
        // The grammar's mask for the next step, when already computed.
        let mut next_mask: Option<SimpleVob> = None;
        let mut decode_passes = 0;
        let finish = loop {
            if let Some(progress) = progress {
                progress.writing(out.len(), params.max_tokens);
            }
            if out.len() >= params.max_tokens {
                break FinishReason::Length;
            }
            let next = match grammar.as_deref_mut() {
                Some(matcher) => {
                    let mask = match next_mask.take() {
                        Some(mask) => mask,
                        None => matcher.compute_mask().map_err(|e| LocalError::Grammar(e.to_string()))?,
                    };
                    decisions.extend(decision(&logits, &mask, text.len()));
                    match &mut sampler {
                        None => masked_argmax(&logits, &mask),
                        Some(sampler) => {
                            let mut masked = vec![f32::NEG_INFINITY; logits.len()];
                            mask.iter_set_entries(|i| {
                                if let (Some(m), Some(l)) = (masked.get_mut(i), logits.get(i)) {
                                    *m = *l;
                                }
                            });
                            sampler.sample(&masked)
                        }
                    }
                    .ok_or_else(|| LocalError::Grammar("no token is allowed here".into()))?
                }
                None => match &mut sampler {
                    None => argmax(&logits),
                    Some(sampler) => sampler.sample(&logits),
                }
                .ok_or_else(|| LocalError::Gguf("the model returned no usable logits".into()))?,
            };
            if self.stop_ids.contains(&next) {
                break FinishReason::Stop;
            }
            let mut feed = vec![next];
            if let Some(matcher) = grammar.as_deref_mut() {
                matcher.consume_token(next).map_err(|e| LocalError::Grammar(e.to_string()))?;
                if !matcher.is_stopped() {
                    feed.extend(matcher.consume_ff_tokens());
                }
            }
            out.extend_from_slice(&feed);
            text = decode(&out)?;
            if let Some(cut) = params.stop.iter().filter_map(|s| text.find(s.as_str())).min() {
                text.truncate(cut);
                emit(&text, &mut emitted, on_text);
                break FinishReason::Stop;
            }
            emit(&text, &mut emitted, on_text);
            if let Some(matcher) = grammar.as_deref_mut() {
                if matcher.is_stopped() {
                    break FinishReason::Stop;
                }
                // A complete answer the grammar lets end only: no pass to find the end token.
                let mask = matcher.compute_mask().map_err(|e| LocalError::Grammar(e.to_string()))?;
                if only_stop_tokens(&mask, &self.stop_ids) {
                    break FinishReason::Stop;
                }
                next_mask = Some(mask);
            }
            // Tokens evaluated ahead stand when the model chose them.
            logits = match take_ahead(&mut ahead, &feed) {
                Some(after) => {
                    accepted += feed.len();
                    match after {
                        After::Logits(logits) => logits,
                        After::Hidden(hidden) => self.decoder.logits_after(&hidden)?,
                    }
                }
                None => {
                    if last_draft > 0 && !last_draft_forced {
                        let taken = last_draft.saturating_sub(ahead.len());
                        draft_len = if taken == last_draft {
                            (draft_len * 2).min(params.draft_tokens)
                        } else {
                            (taken + 1).min(params.draft_tokens)
                        };
                    }
                    if !in_cache {
                        self.decoder.prefill_guessing(prompt, &guess, &mut |_, _| {})?;
                        in_cache = true;
                    }
                    self.decoder.rewind(self.decoder.evaluated() - ahead.len());
                    ahead.clear();
                    decode_passes += 1;
                    // What the grammar forces next (the rest of a JSON layout after a value
                    // closes) is drafted as the model would write it: the mask still leaves
                    // it a choice of spellings, a pass each without the draft. Otherwise
                    // greedy answers often repeat what the prompt or the answer itself says
                    // (names, addresses, a tool's words): what followed the answer's last
                    // words there is evaluated in the same pass, as a draft.
                    let left = params.max_tokens.saturating_sub(out.len());
                    let forced = match (&sampler, grammar.as_deref()) {
                        (None, Some(matcher)) => forced_draft(matcher, left.min(params.draft_tokens)),
                        _ => Vec::new(),
                    };
                    last_draft_forced = !forced.is_empty();
                    let draft = match sampler {
                        None if last_draft_forced => forced,
                        None => draft_after(prompt, &out, left.min(draft_len)),
                        Some(_) => Vec::new(),
                    };
                    let (after_feed, after_draft) = self.decoder.step_drafting(&feed, &draft)?;
                    drafted += after_draft.len();
                    last_draft = after_draft.len();
                    ahead = draft.into_iter().zip(after_draft.into_iter().map(|h| Some(After::Hidden(h)))).collect();
                    after_feed
                }
            };
        };
        // Tokens evaluated ahead that the answer did not take are not part of it.
        if in_cache {
            self.decoder.rewind(self.decoder.evaluated() - ahead.len());
        }
        if finish == FinishReason::Length {
            emit(&text, &mut emitted, on_text);
        }
        Ok(Generation {
            token_ids: out,
            text,
            prompt_tokens: prompt.len(),
            cached_prompt_tokens,
            prefill,
            decode: start.elapsed(),
            decode_passes,
            drafted,
            accepted,
            finish,
            decisions,
            shared_pass,
        })
    }
}

/// Longest and shortest runs of the answer's last tokens looked up in the text before them.
/// A single token (a quote, a comma) is found almost anywhere, and what followed it there
/// seldom follows it again.
const DRAFT_MATCH: (usize, usize) = (3, 2);

/// A draft of what the answer `out` goes on with: the tokens that followed the latest earlier
/// occurrence of its last tokens (three, else two) in the prompt and the answer, at most
/// `limit` of them. Empty when nothing matches.
fn draft_after(prompt: &[u32], out: &[u32], limit: usize) -> Vec<u32> {
    if limit == 0 || out.is_empty() {
        return Vec::new();
    }
    let text: Vec<u32> = prompt.iter().chain(out).copied().collect();
    for n in (DRAFT_MATCH.1..=DRAFT_MATCH.0.min(text.len() - 1)).rev() {
        let tail = &text[text.len() - n..];
        // The latest occurrence that has at least one token after it, the tail itself aside.
        let found = (0..text.len() - n).rev().find(|&start| &text[start..start + n] == tail);
        if let Some(start) = found {
            let from = start + n;
            return text[from..text.len().min(from + limit)].to_vec();
        }
    }
    Vec::new()
}

/// What was kept of a position evaluated ahead of the answer.
enum After {
    /// The logits after it (a guessed start).
    Logits(Vec<f32>),
    /// Its hidden state, which gives the logits (a drafted token).
    Hidden(candle_core::Tensor),
}

/// Takes `feed` off the front of `ahead` when the tokens evaluated ahead begin with it and
/// what gives the logits after its last token was kept; returns that.
fn take_ahead<T>(ahead: &mut VecDeque<(u32, Option<T>)>, feed: &[u32]) -> Option<T> {
    let last = feed.len().checked_sub(1)?;
    let matches = ahead.len() > last
        && ahead.iter().zip(feed).all(|((token, _), fed)| token == fed)
        && ahead.get(last).is_some_and(|(_, logits)| logits.is_some());
    if !matches {
        return None;
    }
    ahead.drain(..=last).next_back().and_then(|(_, logits)| logits)
}

/// The tokens an answer is guessed to start with, read with its prompt: greedy under a
/// grammar, what the grammar forces at the start ([`forced_start`]); otherwise none.
pub(crate) fn guess(grammar: Option<&Matcher>, temperature: Option<f64>) -> Vec<u32> {
    match grammar {
        Some(matcher) if temperature.is_none_or(|t| t <= 0.0) => forced_start(matcher),
        _ => Vec::new(),
    }
}

/// The tokens `matcher` forces at the start of the answer, as the model would write them: the
/// canonical first token of the forced bytes, then what the grammar forces after it. Empty
/// when nothing is forced.
fn forced_start(matcher: &Matcher) -> Vec<u32> {
    let mut probe = matcher.deep_clone();
    let bytes = probe.compute_ff_bytes();
    if bytes.is_empty() {
        return Vec::new();
    }
    let Some(first) = probe.tok_env().ok().and_then(|env| env.tokenize_bytes(&bytes).first().copied()) else {
        return Vec::new();
    };
    let allowed = probe.compute_mask().is_ok_and(|mask| mask.is_allowed(first));
    if !allowed || probe.consume_token(first).is_err() {
        return Vec::new();
    }
    let mut guess = vec![first];
    if !probe.is_stopped() {
        guess.extend(probe.consume_ff_tokens());
    }
    guess
}

/// The bytes `matcher` forces next, as the model would write them (the canonical tokens of
/// those bytes), at most `limit` tokens; empty when nothing is forced. The grammar consumes
/// the forced bytes' own tokens by itself only where no other spelling is allowed; where the
/// mask allows several spellings of what is forced (`],` or `]` then `,`), the model picks one
/// and, without a draft, a pass is spent on a choice of spelling.
fn forced_draft(matcher: &Matcher, limit: usize) -> Vec<u32> {
    if limit == 0 || matcher.is_stopped() {
        return Vec::new();
    }
    let mut probe = matcher.deep_clone();
    let bytes = probe.compute_ff_bytes();
    if bytes.is_empty() {
        return Vec::new();
    }
    let Ok(env) = probe.tok_env() else {
        return Vec::new();
    };
    let mut tokens = env.tokenize_bytes(&bytes);
    tokens.truncate(limit);
    // Only what the grammar takes: a spelling it refuses ends the draft.
    let taken = probe.try_consume_tokens(&tokens).unwrap_or(0);
    tokens.truncate(taken);
    tokens
}

/// Whether `mask` allows nothing but tokens that end the answer.
fn only_stop_tokens(mask: &SimpleVob, stop_ids: &[u32]) -> bool {
    let mut other = false;
    mask.iter_set_entries(|i| {
        if u32::try_from(i).map_or(true, |id| !stop_ids.contains(&id)) {
            other = true;
        }
    });
    !other
}

/// Passes the part of `text` after `emitted` bytes to `on_text`, unless it ends inside an
/// incomplete UTF-8 sequence (decoded as U+FFFD), which the next token completes.
fn emit(text: &str, emitted: &mut usize, on_text: &mut dyn FnMut(&str)) {
    if text.ends_with('\u{FFFD}') || !text.is_char_boundary(*emitted) {
        return;
    }
    if let Some(piece) = text.get(*emitted..)
        && !piece.is_empty()
    {
        on_text(piece);
        *emitted = text.len();
    }
}

/// Draws tokens in proportion to `exp(logit / temperature)`, from a seeded generator so a
/// seed gives the same answer again.
struct Sampler {
    rng: StdRng,
    temperature: f32,
}

impl Sampler {
    fn new(seed: u64, temperature: f32) -> Self {
        Self { rng: StdRng::seed_from_u64(seed), temperature }
    }

    /// A token, or `None` when no logit is finite (everything masked).
    fn sample(&mut self, logits: &[f32]) -> Option<u32> {
        let max = logits.iter().copied().filter(|l| l.is_finite()).reduce(f32::max)?;
        let weights: Vec<f32> =
            logits.iter().map(|l| if l.is_finite() { ((l - max) / self.temperature).exp() } else { 0.0 }).collect();
        let total: f32 = weights.iter().sum();
        let mut left = self.rng.random::<f32>() * total;
        let mut chosen = None;
        for (i, w) in weights.iter().enumerate().filter(|(_, w)| **w > 0.0) {
            chosen = Some(i);
            if left < *w {
                break;
            }
            left -= w;
        }
        chosen.and_then(|i| u32::try_from(i).ok())
    }
}

fn argmax(logits: &[f32]) -> Option<u32> {
    logits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).and_then(|(i, _)| u32::try_from(i).ok())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn emit_waits_for_complete_characters() {
        let mut seen = String::new();
        let mut emitted = 0;
        emit("ab", &mut emitted, &mut |p| seen.push_str(p));
        emit("ab\u{FFFD}", &mut emitted, &mut |p| seen.push_str(p));
        emit("abé", &mut emitted, &mut |p| seen.push_str(p));
        assert_eq!(seen, "abé");
    }

    #[test]
    fn sampling_follows_the_weights_and_the_seed() {
        let logits = [0.0, 5.0, f32::NEG_INFINITY, 4.0];
        let draws = |seed| {
            let mut sampler = Sampler::new(seed, 1.0);
            (0..200).map(|_| sampler.sample(&logits)).collect::<Vec<_>>()
        };
        let first = draws(7);
        assert_eq!(first, draws(7), "the same seed draws the same tokens");
        assert!(first.iter().all(|t| *t != Some(2)), "a masked token is never drawn");
        let ones = first.iter().filter(|t| **t == Some(1)).count();
        assert!(ones > 100, "the likeliest token dominates: {ones}/200");
        assert!(first.contains(&Some(3)));
        assert_eq!(Sampler::new(1, 1.0).sample(&[f32::NEG_INFINITY; 3]), None);
    }

    #[test]
    fn a_decision_weighs_only_the_allowed_tokens() {
        let mut mask = SimpleVob::alloc(5);
        mask.allow_token(1);
        mask.allow_token(3);
        let d = decision(&[9.0, 1.0, 8.0, 1.0, f32::NEG_INFINITY], &mask, 7).unwrap();
        assert_eq!(d.offset, 7);
        assert_eq!(d.options.len(), 2);
        assert!((d.options[0].1 - 0.5).abs() < 1e-6 && (d.options[1].1 - 0.5).abs() < 1e-6);
        let mut one = SimpleVob::alloc(5);
        one.allow_token(2);
        assert_eq!(decision(&[0.0; 5], &one, 0), None, "a forced token is no decision");
    }

    #[test]
    fn a_draft_is_what_followed_the_answers_last_tokens_most_recently() {
        // The answer ends in 5 6: the prompt had 5 6 7 8 and, later, 5 6 9; the later wins.
        let prompt = [1, 5, 6, 7, 8, 2, 5, 6, 9, 3];
        assert_eq!(draft_after(&prompt, &[4, 5, 6], 8), [9, 3, 4, 5, 6]);
        assert_eq!(draft_after(&prompt, &[4, 5, 6], 2), [9, 3], "at most the limit");
        // Two tokens at least: 5 alone is not looked up.
        assert_eq!(draft_after(&[1, 8, 5, 7], &[8, 5], 3), [7, 8, 5]);
        assert_eq!(draft_after(&[1, 5, 7], &[8, 5], 3), Vec::<u32>::new());
        assert_eq!(draft_after(&[1, 2], &[9], 4), Vec::<u32>::new(), "no match, no draft");
        assert_eq!(draft_after(&[1, 2], &[], 4), Vec::<u32>::new());
        assert_eq!(draft_after(&[1, 2, 1], &[2], 0), Vec::<u32>::new());
    }

    #[test]
    fn tokens_ahead_are_taken_only_when_the_answer_chose_them_and_their_logits_were_kept() {
        let ahead = |tokens: &[(u32, bool)]| -> VecDeque<(u32, Option<Vec<f32>>)> {
            tokens.iter().map(|&(t, kept)| (t, kept.then(|| vec![t as f32]))).collect()
        };
        let mut drafted = ahead(&[(7, true), (8, true), (9, true)]);
        assert_eq!(take_ahead(&mut drafted, &[7]), Some(vec![7.0]));
        assert_eq!(take_ahead(&mut drafted, &[8, 9]), Some(vec![9.0]), "a forced run taken whole");
        assert!(drafted.is_empty());
        let mut drafted = ahead(&[(7, true), (8, true)]);
        assert_eq!(take_ahead(&mut drafted, &[8]), None, "another token: nothing taken");
        assert_eq!(drafted.len(), 2);
        assert_eq!(take_ahead(&mut drafted, &[7, 8, 9]), None, "longer than what is ahead");
        // A guessed start keeps the logits after its last token only.
        let mut guessed = ahead(&[(3, false), (4, true)]);
        assert_eq!(take_ahead(&mut guessed, &[3]), None);
        assert_eq!(take_ahead(&mut guessed, &[3, 4]), Some(vec![4.0]));
        assert_eq!(take_ahead::<Vec<f32>>(&mut VecDeque::new(), &[]), None);
    }

    #[test]
    fn argmax_picks_the_largest_logit() {
        assert_eq!(argmax(&[1.0, 3.0, 2.0]), Some(1));
        assert_eq!(argmax(&[]), None);
    }
}
