//! Stable identifiers.
//!
//! Every entity of a definition has an id that survives restarts: either the author's own
//! (`id:` in the file) or one derived from the entity's content, so loading the same
//! definition twice yields the same ids and persisted sessions keep pointing at the right
//! guidelines and journey states.

use sha2::{Digest, Sha256};

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Length of a derived id: 10 base-62 characters (about 59 bits), like the ids the
/// Parlant API hands out.
pub const DERIVED_ID_LEN: usize = 10;

/// Derives a stable id from the parts that identify an entity.
///
/// Parts are joined with a separator that cannot occur in YAML scalars by accident, so
/// `("ab", "c")` and `("a", "bc")` give different ids.
///
/// ```
/// let a = guidepost_core::ids::derive_id(&["guideline", "agent", "greets"]);
/// assert_eq!(a, guidepost_core::ids::derive_id(&["guideline", "agent", "greets"]));
/// assert_eq!(a.len(), 10);
/// ```
pub fn derive_id(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0x1f]);
    }
    let digest = hasher.finalize();
    let mut out = String::with_capacity(DERIVED_ID_LEN);
    for byte in digest.iter().take(DERIVED_ID_LEN) {
        out.push(char::from(ALPHABET[usize::from(*byte) % ALPHABET.len()]));
    }
    out
}

/// Turns a human title into an id-friendly slug (`"Order Status"` -> `"order_status"`).
///
/// Returns `None` when nothing ASCII-alphanumeric is left (e.g. a title in Chinese), in which
/// case callers fall back to [`derive_id`].
pub fn slug(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut pending_sep = false;
    for ch in text.chars() {
        if ch.is_ascii_alphanumeric() {
            if pending_sep && !out.is_empty() {
                out.push('_');
            }
            out.push(ch.to_ascii_lowercase());
            pending_sep = false;
        } else {
            pending_sep = true;
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Whether `id` is usable as an author-given id: non-empty, no whitespace, no control
/// characters (a NUL, written `"\0"` in YAML, cannot be stored in PostgreSQL; the REST API
/// refuses them too), no `:` (which separates the parts of projected journey-node ids and tool
/// ids) and no `/`.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty() && !id.chars().any(|c| c.is_whitespace() || c.is_control() || c == ':' || c == '/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_are_stable_and_distinct() {
        let a = derive_id(&["g", "x"]);
        assert_eq!(a, derive_id(&["g", "x"]));
        assert_ne!(derive_id(&["ab", "c"]), derive_id(&["a", "bc"]));
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
    }

    #[test]
    fn slugs() {
        assert_eq!(slug("Order Status").as_deref(), Some("order_status"));
        assert_eq!(slug("  Hi -- there!").as_deref(), Some("hi_there"));
        assert_eq!(slug("查询天气"), None);
    }

    #[test]
    fn id_validity() {
        assert!(is_valid_id("ask_city"));
        assert!(is_valid_id("询问城市"));
        assert!(!is_valid_id("a b"));
        assert!(!is_valid_id("a:b"));
        assert!(!is_valid_id("a\0b"));
        assert!(!is_valid_id("a\u{7f}b"));
        assert!(!is_valid_id(""));
    }
}
