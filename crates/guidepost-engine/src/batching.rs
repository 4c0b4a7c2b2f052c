//! Splitting the candidates of one category into batches under a token budget: as few
//! model calls as the budget allows, balanced so no call carries a long tail.

use crate::catalog::MatchableGuideline;
use crate::config::MatcherConfig;

/// Estimated prompt tokens one guideline adds to a batch (text / 4, plus list markup).
pub fn guideline_tokens(g: &MatchableGuideline) -> usize {
    let chars =
        g.condition.len() + g.action.as_ref().map_or(0, String::len) + g.description.as_ref().map_or(0, String::len);
    chars.div_ceil(4) + 8
}

/// Splits `items` (in order) into the fewest batches such that none exceeds the token
/// budget or the count limit, with sizes balanced. A guideline larger than the budget gets
/// a batch of its own.
pub fn split<'a>(items: &[&'a MatchableGuideline], config: &MatcherConfig) -> Vec<Vec<&'a MatchableGuideline>> {
    if items.is_empty() {
        return Vec::new();
    }
    let budget = config.batch_token_budget.max(1);
    let max_count = config.max_guidelines_per_batch.max(1);
    let total: usize = items.iter().map(|g| guideline_tokens(g)).sum();
    let mut count = total.div_ceil(budget).max(items.len().div_ceil(max_count)).max(1);
    loop {
        let target_tokens = total.div_ceil(count);
        let target_len = items.len().div_ceil(count);
        let mut batches: Vec<Vec<&MatchableGuideline>> = Vec::new();
        let mut current: Vec<&MatchableGuideline> = Vec::new();
        let mut tokens = 0;
        for g in items {
            let t = guideline_tokens(g);
            if !current.is_empty()
                && (tokens + t > target_tokens.max(t) + target_tokens / 4 || current.len() >= target_len)
            {
                batches.push(std::mem::take(&mut current));
                tokens = 0;
            }
            current.push(g);
            tokens += t;
        }
        if !current.is_empty() {
            batches.push(current);
        }
        let fits = batches.iter().all(|b| {
            b.len() == 1 || (b.len() <= max_count && b.iter().map(|g| guideline_tokens(g)).sum::<usize>() <= budget)
        });
        if fits || count >= items.len() {
            return batches;
        }
        count += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::GuidelineOrigin;
    use guidepost_core::Criticality;

    fn g(i: usize, len: usize) -> MatchableGuideline {
        MatchableGuideline {
            id: format!("g{i}"),
            condition: "x".repeat(len),
            action: None,
            description: None,
            criticality: Criticality::Medium,
            priority: 0,
            track: true,
            tools: vec![],
            examples: vec![],
            tags: vec![],
            journey: None,
            origin: GuidelineOrigin::Definition,
            customer_dependent: false,
        }
    }

    #[test]
    fn fewest_balanced_batches_within_limits() {
        let items: Vec<MatchableGuideline> = (0..50).map(|i| g(i, 120)).collect();
        let refs: Vec<&MatchableGuideline> = items.iter().collect();
        let config =
            MatcherConfig { batch_token_budget: 800, max_guidelines_per_batch: 40, ..MatcherConfig::default() };
        let batches = split(&refs, &config);
        // 50 x 38 tokens = 1900 tokens -> 3 batches of at most 800 tokens
        assert_eq!(batches.len(), 3);
        assert_eq!(batches.iter().map(Vec::len).sum::<usize>(), 50);
        assert!(batches.iter().all(|b| b.iter().map(|g| guideline_tokens(g)).sum::<usize>() <= 800));
        let few = MatcherConfig { max_guidelines_per_batch: 10, batch_token_budget: 100_000, ..config };
        assert_eq!(split(&refs, &few).len(), 5);
        assert!(split(&[], &few).is_empty());
    }

    #[test]
    fn oversized_guideline_gets_its_own_batch() {
        let items = [g(0, 10), g(1, 10_000), g(2, 10)];
        let refs: Vec<&MatchableGuideline> = items.iter().collect();
        let config = MatcherConfig { batch_token_budget: 200, ..MatcherConfig::default() };
        let batches = split(&refs, &config);
        assert!(batches.iter().any(|b| b.len() == 1 && b[0].id == "g1"));
        assert_eq!(batches.iter().map(Vec::len).sum::<usize>(), 3);
    }
}
