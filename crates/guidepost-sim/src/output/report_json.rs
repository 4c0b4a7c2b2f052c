//! The JSON report of a suite: [`SuiteReport`] serialized, pretty-printed.

use std::path::Path;

use crate::error::SimError;
use crate::suite::SuiteReport;

/// The report as JSON text.
pub fn to_json(report: &SuiteReport) -> String {
    serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// Writes the report to `path`.
pub fn write_json(report: &SuiteReport, path: &Path) -> Result<(), SimError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| SimError::io(dir, e))?;
    }
    std::fs::write(path, to_json(report)).map_err(|e| SimError::io(path, e))
}
