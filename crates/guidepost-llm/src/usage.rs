//! Usage of model calls: per call ([`Usage`]), and summed per turn and session
//! ([`UsageLedger`]) with an estimated cost from a [`PriceTable`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::request::TaskKind;

/// What one answer cost.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// The model that answered (`provider:model`, or the name the provider reported).
    pub model: String,
    /// Prompt tokens, including cached ones.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Prompt tokens served from the provider's prefix cache.
    pub cached_tokens: u64,
    /// Wall-clock time of the call, retries and re-asks included.
    #[serde(rename = "latency_ms", with = "duration_ms")]
    pub latency: Duration,
    /// Provider requests this answer took (1 + retries + re-asks).
    pub calls: u32,
}

impl Usage {
    /// Usage of one call of `model` with no tokens counted yet.
    pub fn new(model: impl Into<String>) -> Self {
        Self { model: model.into(), calls: 1, ..Self::default() }
    }

    /// Adds the tokens, latency and calls of `other` (e.g. an earlier failed attempt).
    pub fn absorb(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_tokens += other.cached_tokens;
        self.latency += other.latency;
        self.calls += other.calls;
    }

    /// Adds `other` to `total`, which starts as `other` when there is none yet (the usage of
    /// several calls, when there may be none).
    pub fn sum_into(total: &mut Option<Usage>, other: &Usage) {
        match total {
            Some(t) => t.absorb(other),
            None => *total = Some(other.clone()),
        }
    }

    /// Prompt plus completion tokens.
    pub fn total_tokens(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

/// Price of one model in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ModelPrice {
    /// Uncached prompt tokens.
    pub input: f64,
    /// Prompt tokens read from the provider's cache.
    pub cached_input: f64,
    /// Completion tokens.
    pub output: f64,
}

/// Prices per model, looked up by the longest known prefix of the model name (so
/// `gpt-4.1-mini-2025-04-14` finds `gpt-4.1-mini`), after removing a `provider:` prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    prices: HashMap<String, ModelPrice>,
}

impl Default for PriceTable {
    /// Public list prices of common OpenAI and Anthropic models (late 2025).
    fn default() -> Self {
        let list: [(&str, f64, f64, f64); 17] = [
            ("gpt-4.1", 2.0, 0.5, 8.0),
            ("gpt-4.1-mini", 0.4, 0.1, 1.6),
            ("gpt-4.1-nano", 0.1, 0.025, 0.4),
            ("gpt-4o", 2.5, 1.25, 10.0),
            ("gpt-4o-mini", 0.15, 0.075, 0.6),
            ("gpt-5", 1.25, 0.125, 10.0),
            ("gpt-5-mini", 0.25, 0.025, 2.0),
            ("gpt-5-nano", 0.05, 0.005, 0.4),
            ("text-embedding-3-small", 0.02, 0.02, 0.0),
            ("text-embedding-3-large", 0.13, 0.13, 0.0),
            ("claude-sonnet-4-5", 3.0, 0.3, 15.0),
            ("claude-sonnet-4", 3.0, 0.3, 15.0),
            ("claude-opus-4-1", 15.0, 1.5, 75.0),
            ("claude-opus-4", 15.0, 1.5, 75.0),
            ("claude-haiku-4-5", 1.0, 0.1, 5.0),
            ("claude-3-5-haiku", 0.8, 0.08, 4.0),
            ("claude-3-7-sonnet", 3.0, 0.3, 15.0),
        ];
        let prices = list
            .into_iter()
            .map(|(name, input, cached_input, output)| (name.to_string(), ModelPrice { input, cached_input, output }))
            .collect();
        Self { prices }
    }
}

impl PriceTable {
    /// A table with no prices (every model unknown, except free local ones).
    pub fn empty() -> Self {
        Self { prices: HashMap::new() }
    }

    /// Sets (or replaces) the price of `model`.
    pub fn with_price(mut self, model: impl Into<String>, price: ModelPrice) -> Self {
        self.prices.insert(model.into(), price);
        self
    }

    /// The price of `model`. Local and scripted models are free; `None` means unknown.
    pub fn price(&self, model: &str) -> Option<ModelPrice> {
        if crate::is_local_model(model) || model.starts_with("scripted") {
            return Some(ModelPrice { input: 0.0, cached_input: 0.0, output: 0.0 });
        }
        let name = model.rsplit_once('#').map_or(model, |(_, name)| name);
        let name = ["openai:", "anthropic:", "openai-compatible:"]
            .iter()
            .find_map(|prefix| name.strip_prefix(prefix))
            .unwrap_or(name);
        self.prices
            .iter()
            .filter(|(key, _)| name.starts_with(key.as_str()))
            .max_by_key(|(key, _)| key.len())
            .map(|(_, price)| *price)
    }

    /// The estimated cost in USD of `usage`, or `None` when the model's price is unknown.
    pub fn cost(&self, usage: &Usage) -> Option<f64> {
        let price = self.price(&usage.model)?;
        let cached = usage.cached_tokens.min(usage.prompt_tokens);
        let uncached = usage.prompt_tokens - cached;
        #[allow(clippy::cast_precision_loss)]
        let cost = uncached as f64 * price.input
            + cached as f64 * price.cached_input
            + usage.completion_tokens as f64 * price.output;
        Some(cost / 1_000_000.0)
    }
}

/// Sums of many calls.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UsageTotals {
    /// Answers recorded.
    pub answers: u64,
    /// Provider requests (answers + retries + re-asks).
    pub calls: u64,
    /// Prompt tokens, cached ones included.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Cached prompt tokens.
    pub cached_tokens: u64,
    /// Summed latency (calls may overlap, so this can exceed wall-clock time).
    #[serde(rename = "latency_ms", with = "duration_ms")]
    pub latency: Duration,
    /// Estimated cost in USD of the calls whose model price is known.
    pub cost_usd: f64,
    /// Models without a known price (their cost counts as 0).
    pub unpriced_models: BTreeSet<String>,
}

impl UsageTotals {
    fn add(&mut self, usage: &Usage, cost: Option<f64>) {
        self.answers += 1;
        self.calls += u64::from(usage.calls);
        self.prompt_tokens += usage.prompt_tokens;
        self.completion_tokens += usage.completion_tokens;
        self.cached_tokens += usage.cached_tokens;
        self.latency += usage.latency;
        match cost {
            Some(cost) => self.cost_usd += cost,
            None => {
                self.unpriced_models.insert(usage.model.clone());
            }
        }
    }

    /// Whether every recorded model had a known price.
    pub fn cost_is_complete(&self) -> bool {
        self.unpriced_models.is_empty()
    }
}

#[derive(Default)]
struct LedgerState {
    totals: UsageTotals,
    by_task: BTreeMap<String, UsageTotals>,
    by_model: BTreeMap<String, UsageTotals>,
    /// Calls started and not yet answered (or failed), per task kind.
    in_flight: BTreeMap<String, usize>,
}

/// A model call in progress, counted by [`UsageLedger::in_flight`] until it is dropped.
#[must_use = "the call counts as in flight until the guard is dropped"]
pub struct CallInProgress {
    ledgers: Vec<UsageLedger>,
    task: String,
}

impl fmt::Debug for CallInProgress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallInProgress").field("task", &self.task).finish_non_exhaustive()
    }
}

impl Drop for CallInProgress {
    fn drop(&mut self) {
        for ledger in &self.ledgers {
            let mut state = ledger.inner.state.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(n) = state.in_flight.get_mut(&self.task) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    state.in_flight.remove(&self.task);
                }
            }
        }
    }
}

struct LedgerInner {
    name: String,
    parent: Option<UsageLedger>,
    prices: Arc<PriceTable>,
    state: Mutex<LedgerState>,
}

/// A running total of model usage, cheap to clone (an `Arc` inside).
///
/// Make one per session and a [`child`](UsageLedger::child) per turn: what is recorded in a
/// child is also recorded in its parent. Calls are attributed by setting
/// [`ChatRequest::ledger`](crate::ChatRequest::ledger); the accounting middleware does the rest.
///
/// ```
/// use guidepost_llm::{TaskKind, Usage, UsageLedger};
/// let session = UsageLedger::new("session-1");
/// let turn = session.child("turn-1");
/// let mut usage = Usage::new("openai:gpt-4.1");
/// usage.prompt_tokens = 1_000_000;
/// turn.record(&TaskKind::Matching, &usage);
/// assert_eq!(session.totals().prompt_tokens, 1_000_000);
/// assert!((turn.totals().cost_usd - 2.0).abs() < 1e-9);
/// ```
#[derive(Clone)]
pub struct UsageLedger {
    inner: Arc<LedgerInner>,
}

impl Default for UsageLedger {
    fn default() -> Self {
        Self::new("default")
    }
}

impl fmt::Debug for UsageLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UsageLedger").field("name", &self.inner.name).field("totals", &self.totals()).finish()
    }
}

impl UsageLedger {
    /// A root ledger with the default [`PriceTable`].
    pub fn new(name: impl Into<String>) -> Self {
        Self::with_prices(name, PriceTable::default())
    }

    /// A root ledger with the given prices.
    pub fn with_prices(name: impl Into<String>, prices: PriceTable) -> Self {
        Self {
            inner: Arc::new(LedgerInner {
                name: name.into(),
                parent: None,
                prices: Arc::new(prices),
                state: Mutex::new(LedgerState::default()),
            }),
        }
    }

    /// A ledger whose records also go to `self` (a turn inside a session).
    pub fn child(&self, name: impl Into<String>) -> Self {
        Self {
            inner: Arc::new(LedgerInner {
                name: name.into(),
                parent: Some(self.clone()),
                prices: Arc::clone(&self.inner.prices),
                state: Mutex::new(LedgerState::default()),
            }),
        }
    }

    /// The ledger's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Records one answer in this ledger and all its ancestors.
    pub fn record(&self, task: &TaskKind, usage: &Usage) {
        let cost = self.inner.prices.cost(usage);
        let mut ledger = Some(self);
        while let Some(current) = ledger {
            {
                let mut state = current.inner.state.lock().unwrap_or_else(PoisonError::into_inner);
                state.totals.add(usage, cost);
                state.by_task.entry(task.as_str().to_string()).or_default().add(usage, cost);
                state.by_model.entry(usage.model.clone()).or_default().add(usage, cost);
            }
            ledger = current.inner.parent.as_ref();
        }
    }

    /// Counts a call of `task` as in flight in this ledger and its ancestors until the
    /// returned guard is dropped (answered, failed or abandoned). Progress displays read
    /// [`in_flight`](Self::in_flight).
    pub fn start_call(&self, task: &TaskKind) -> CallInProgress {
        let mut ledgers = Vec::new();
        let mut ledger = Some(self);
        while let Some(current) = ledger {
            let mut state = current.inner.state.lock().unwrap_or_else(PoisonError::into_inner);
            *state.in_flight.entry(task.as_str().to_string()).or_default() += 1;
            drop(state);
            ledgers.push(current.clone());
            ledger = current.inner.parent.as_ref();
        }
        CallInProgress { ledgers, task: task.as_str().to_string() }
    }

    /// Calls in flight per task kind (tasks with none are left out).
    pub fn in_flight(&self) -> BTreeMap<String, usize> {
        self.read(|s| s.in_flight.clone())
    }

    fn read<R>(&self, f: impl FnOnce(&LedgerState) -> R) -> R {
        let state = self.inner.state.lock().unwrap_or_else(PoisonError::into_inner);
        f(&state)
    }

    /// Everything recorded so far.
    pub fn totals(&self) -> UsageTotals {
        self.read(|s| s.totals.clone())
    }

    /// Totals per task kind.
    pub fn by_task(&self) -> BTreeMap<String, UsageTotals> {
        self.read(|s| s.by_task.clone())
    }

    /// Totals per model.
    pub fn by_model(&self) -> BTreeMap<String, UsageTotals> {
        self.read(|s| s.by_model.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(model: &str, prompt: u64, cached: u64, completion: u64) -> Usage {
        Usage {
            model: model.into(),
            prompt_tokens: prompt,
            completion_tokens: completion,
            cached_tokens: cached,
            latency: Duration::from_millis(10),
            calls: 1,
        }
    }

    #[test]
    fn prices_by_longest_prefix() {
        let table = PriceTable::default();
        let mini = table.price("openai:gpt-4.1-mini-2025-04-14");
        assert_eq!(mini.map(|p| p.input), Some(0.4));
        assert_eq!(table.price("gpt-4.1").map(|p| p.input), Some(2.0));
        assert_eq!(table.price("anthropic:claude-sonnet-4-5").map(|p| p.output), Some(15.0));
        assert_eq!(table.price("openai-compatible:http://x/v1#gpt-4o").map(|p| p.input), Some(2.5));
        assert!(table.price("mystery-model").is_none());
        assert_eq!(table.price("local:smollm2").map(|p| p.input), Some(0.0));
    }

    #[test]
    fn cost_separates_cached_tokens() {
        let table = PriceTable::default();
        // 1M prompt of which 0.5M cached, 1M completion on gpt-4.1: 0.5*2 + 0.5*0.5 + 8
        let cost = table.cost(&usage("gpt-4.1", 1_000_000, 500_000, 1_000_000));
        assert!((cost.unwrap_or_default() - 9.25).abs() < 1e-9);
    }

    #[test]
    fn calls_in_flight_are_counted_until_their_guard_drops() {
        let session = UsageLedger::new("s");
        let turn = session.child("t");
        let first = turn.start_call(&TaskKind::Matching);
        let second = turn.start_call(&TaskKind::Matching);
        let third = turn.start_call(&TaskKind::Generation);
        assert_eq!(turn.in_flight()["matching"], 2);
        assert_eq!(session.in_flight()["generation"], 1);
        drop(first);
        drop(third);
        assert_eq!(session.in_flight().get("matching"), Some(&1));
        assert!(!session.in_flight().contains_key("generation"));
        drop(second);
        assert!(turn.in_flight().is_empty() && session.in_flight().is_empty());
    }

    #[test]
    fn child_ledgers_roll_up_and_flag_unknown_models() {
        let session = UsageLedger::new("s");
        let turn1 = session.child("t1");
        let turn2 = session.child("t2");
        turn1.record(&TaskKind::Matching, &usage("gpt-4.1", 100, 0, 10));
        turn2.record(&TaskKind::Generation, &usage("mystery", 50, 0, 5));
        assert_eq!(turn1.totals().prompt_tokens, 100);
        assert_eq!(turn2.totals().answers, 1);
        let total = session.totals();
        assert_eq!(total.prompt_tokens, 150);
        assert_eq!(total.answers, 2);
        assert!(!total.cost_is_complete());
        assert!(total.unpriced_models.contains("mystery"));
        assert_eq!(session.by_task().len(), 2);
        assert_eq!(session.by_model()["gpt-4.1"].completion_tokens, 10);
    }
}
