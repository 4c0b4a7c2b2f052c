//! Diagnostics: what is wrong with a definition, where, and how to fix it.

use serde::Serialize;
use std::fmt::Write as _;

use unicode_width::UnicodeWidthChar;

use super::source::Span;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The definition cannot be used.
    Error,
    /// Legal but probably not what the author meant.
    Warning,
}

/// One problem in a definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// Stable machine-readable code, e.g. `unknown-reference`.
    pub code: &'static str,
    /// What is wrong.
    pub message: String,
    /// File name as given to the loader.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
    /// Width of the offending text, for underlining.
    #[serde(skip)]
    pub len: u32,
    /// How to fix it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Diagnostic {
    /// An error at `span` of `file`.
    pub fn error(code: &'static str, file: &str, span: Span, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            code,
            message: message.into(),
            file: file.to_string(),
            line: span.line,
            column: span.col,
            len: span.len,
            hint: None,
        }
    }

    /// A warning at `span` of `file`.
    pub fn warning(code: &'static str, file: &str, span: Span, message: impl Into<String>) -> Self {
        Self { severity: Severity::Warning, ..Self::error(code, file, span, message) }
    }

    /// Adds a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Adds a hint when there is one.
    pub fn with_hint_opt(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }

    /// Renders the diagnostic for a terminal, with the source line and an underline.
    ///
    /// ```text
    /// error[unknown-field]: unknown field `criticalty` in guideline
    ///   --> agents/bank.yaml:12:5
    ///    |
    /// 12 |     criticalty: high
    ///    |     ^^^^^^^^^^
    ///    = hint: did you mean `criticality`?
    /// ```
    pub fn render(&self, source: Option<&str>) -> String {
        let label = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let mut out = format!("{label}[{}]: {}\n", self.code, self.message);
        let number = self.line.to_string();
        let pad = " ".repeat(number.len());
        let _ = writeln!(out, "{pad}--> {}:{}:{}", self.file, self.line, self.column);
        let line_text =
            source.and_then(|s| s.lines().nth(usize::try_from(self.line).unwrap_or(usize::MAX).saturating_sub(1)));
        if let Some(text) = line_text {
            let (text, column) = window(&text.replace('\t', " "), self.column);
            let col = usize::try_from(column).unwrap_or(1).max(1);
            let width = text.chars().count().saturating_sub(col - 1).max(1);
            let len = usize::try_from(self.len).unwrap_or(1).clamp(1, width);
            // Columns count characters; a terminal shows some of them (CJK) two columns wide,
            // so the underline is placed and sized by display width.
            let shown = |chars: &mut dyn Iterator<Item = char>| chars.map(|c| c.width().unwrap_or(0)).sum::<usize>();
            let before = shown(&mut text.chars().take(col - 1));
            let under = shown(&mut text.chars().skip(col - 1).take(len)).max(1);
            let _ = writeln!(out, "{pad} |");
            let _ = writeln!(out, "{number} | {text}");
            let _ = writeln!(out, "{pad} | {}{}", " ".repeat(before), "^".repeat(under));
        }
        if let Some(hint) = &self.hint {
            let _ = writeln!(out, "{pad} = hint: {hint}");
        }
        out
    }
}

/// Characters of a source line shown in a rendered diagnostic.
const SHOWN_LINE: usize = 120;

/// At most [`SHOWN_LINE`] characters of `line` around `column`, with `…` where cut, and
/// the column within what is shown: a 200 KB line is not printed whole.
fn window(line: &str, column: u32) -> (String, u32) {
    let count = line.chars().count();
    if count <= SHOWN_LINE {
        return (line.to_string(), column);
    }
    let col = usize::try_from(column).unwrap_or(1).max(1) - 1;
    let start = col.saturating_sub(SHOWN_LINE / 2).min(count - SHOWN_LINE);
    let mut shown: String = line.chars().skip(start).take(SHOWN_LINE).collect();
    let mut column = col - start + 1;
    if start > 0 {
        shown.insert(0, '…');
        column += 1;
    }
    if start + SHOWN_LINE < count {
        shown.push('…');
    }
    (shown, u32::try_from(column).unwrap_or(1))
}

/// Sorts diagnostics by file, position, then severity, and drops exact duplicates.
pub fn sort(diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.sort_by(|a, b| {
        (a.file.as_str(), a.line, a.column, a.severity, &a.message).cmp(&(
            b.file.as_str(),
            b.line,
            b.column,
            b.severity,
            &b.message,
        ))
    });
    diagnostics.dedup();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The display columns of `text` before byte `at`.
    fn columns_before(text: &str, at: usize) -> usize {
        text[..at].chars().map(|c| c.width().unwrap_or(0)).sum()
    }

    #[test]
    fn carets_stand_under_wide_characters_by_display_width() {
        // `问题` (two characters, four columns) is at character column 15.
        let line = "  - condition: 用户问题 [oops";
        let col = line.chars().position(|c| c == '问').unwrap() + 1;
        let d = Diagnostic::error("syntax", "a.yaml", Span { line: 1, col: col as u32, len: 2 }, "here");
        let text = d.render(Some(line));
        let lines: Vec<&str> = text.lines().collect();
        let shown = lines[3].split_once(" | ").unwrap().1;
        let carets = lines[4].split_once(" | ").unwrap().1;
        assert_eq!(carets.trim_start().len(), 4, "two wide characters take four columns: {text}");
        assert_eq!(
            carets.len() - carets.trim_start().len(),
            columns_before(shown, shown.find('问').unwrap()),
            "{text}"
        );
    }

    #[test]
    fn long_lines_are_shown_around_the_column() {
        let line = format!("{}X{}", "a".repeat(5_000), "b".repeat(5_000));
        let d = Diagnostic::error("syntax", "a.yaml", Span { line: 1, col: 5_001, len: 1 }, "here");
        let text = d.render(Some(&line));
        assert!(text.len() < 400, "{text}");
        let lines: Vec<&str> = text.lines().collect();
        let caret = lines[4].chars().position(|c| c == '^').unwrap();
        assert_eq!(lines[3].chars().nth(caret), Some('X'), "{text}");
    }

    #[test]
    fn renders_excerpt_and_hint() {
        let d = Diagnostic::error(
            "unknown-field",
            "a.yaml",
            Span { line: 2, col: 3, len: 10 },
            "unknown field `criticalty` in guideline",
        )
        .with_hint("did you mean `criticality`?");
        let text = d.render(Some("guidelines:\n  criticalty: high\n"));
        assert_eq!(
            text,
            "error[unknown-field]: unknown field `criticalty` in guideline\n --> a.yaml:2:3\n  |\n2 |   criticalty: high\n  |   ^^^^^^^^^^\n  = hint: did you mean `criticality`?\n"
        );
    }
}
