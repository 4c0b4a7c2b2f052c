//! The `guidepost` command.
fn main() {}
