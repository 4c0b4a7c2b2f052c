//! What a run writes: JSONL lines, Tally conversations and trajectory snapshots, the artifact
//! folder Tally's viewers read, suite reports (JSON, JUnit) and human summaries.

pub mod artifacts;
pub mod jsonl;
pub mod junit;
pub mod report_json;
pub mod summary;
pub mod tally;
