//! Matching benchmark (placeholder).
fn main() {}
