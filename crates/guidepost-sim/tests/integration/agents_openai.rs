//! (pending)
