//! Ids the store hands out.

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A new random id: 10 base-62 characters (about 59 bits), the shape of the ids the
/// Parlant API hands out.
pub fn new_id() -> String {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    bytes.iter().take(10).map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()])).collect()
}

/// A new trace id: 32 lowercase hex digits.
pub fn new_trace_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Microseconds since the Unix epoch, now.
pub fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// A timestamp from microseconds since the epoch (the epoch itself for values out of range).
pub fn time_from_us(us: i64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp_micros(us).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_parlant_shape() {
        let a = new_id();
        assert_eq!(a.len(), 10);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a, new_id());
        assert_eq!(new_trace_id().len(), 32);
    }

    #[test]
    fn times_round_trip() {
        let now = now_us();
        assert_eq!(time_from_us(now).timestamp_micros(), now);
    }
}
