//! Guidepost's domain types and agent definition format.
