//! The text of a definition, scenario or recording before it is parsed: size, encoding and
//! characters.
//!
//! A file is read as bytes and decoded here, so that every problem gets a position instead
//! of a generic I/O error or, worse, a silent cut: the YAML scanner takes a NUL byte for the
//! end of the input, so a file with a NUL in the middle would load as its first half. A
//! UTF-8 byte-order mark is harmless and skipped; line endings (LF, CRLF, even mixed) are
//! all read as line breaks by the parsers and need no treatment.

use super::SourceFile;
use super::diagnostic::Diagnostic;
use super::source::{Span, SyntaxError};
use crate::limits::{Limit, Limits};

const BOM: char = '\u{feff}';

/// `text` without a leading UTF-8 byte-order mark.
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix(BOM).unwrap_or(text)
}

/// Whether `c` may not appear in a definition: C0 controls other than tab, line feed and
/// carriage return, DEL, and C1 controls other than NEL (YAML's printable set).
pub fn is_forbidden_control(c: char) -> bool {
    (c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\u{85}')) || c == BOM
}

/// The 1-based line and column (in characters) of byte offset `at` in `text`.
pub fn line_col(text: &[u8], at: usize) -> (u32, u32) {
    let before = text.get(..at).unwrap_or(text);
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let line_start = before.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let col = String::from_utf8_lossy(&before[line_start..]).chars().count() + 1;
    (u32::try_from(line).unwrap_or(u32::MAX), u32::try_from(col).unwrap_or(u32::MAX))
}

/// Refuses a NUL byte or another control character, pointing at the first one.
pub fn check_characters(text: &str) -> Result<(), SyntaxError> {
    let Some((at, c)) = text.char_indices().find(|(_, c)| is_forbidden_control(*c)) else { return Ok(()) };
    let (line, col) = line_col(text.as_bytes(), at);
    let what = match c {
        '\0' => "a NUL byte".to_string(),
        BOM => "a byte-order mark (U+FEFF) after the start of the file".to_string(),
        c => format!("the control character U+{:04X}", u32::from(c)),
    };
    Err(SyntaxError {
        message: format!(
            "{what}; definition files are text without control characters (is this a binary file, or was it saved \
             with a different encoding?)"
        ),
        span: Span { line, col, len: 1 },
    })
}

/// Where a JSON text first nests arrays and objects deeper than `max_depth`: the byte offset
/// of the bracket one level too deep, or `None`. Brackets inside strings do not count; the scan
/// does not recurse, so it is safe on any input.
pub fn first_too_deep(bytes: &[u8], max_depth: usize) -> Option<usize> {
    let mut depth = 0usize;
    let (mut in_string, mut escaped) = (false, false);
    for (at, &b) in bytes.iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max_depth {
                    return Some(at);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Refuses a JSON text nested past [`Limit::NestingDepth`], at the bracket one level too deep.
pub fn check_json_depth(text: &str, limits: &Limits) -> Result<(), SyntaxError> {
    let Some(at) = first_too_deep(text.as_bytes(), limits.nesting_depth) else { return Ok(()) };
    let (line, col) = line_col(text.as_bytes(), at);
    let error = limits.exceeded(
        Limit::NestingDepth,
        "this file",
        format!("objects and arrays nested more than {} levels deep", limits.nesting_depth),
    );
    Err(SyntaxError { message: error.to_string(), span: Span { line, col, len: 1 } })
}

/// Decodes a file's bytes into a [`SourceFile`]: refuses files over [`Limit::FileSize`],
/// UTF-16 and invalid UTF-8 (with the position of the first bad byte) and control
/// characters; skips a UTF-8 byte-order mark.
///
/// ```
/// use guidepost_core::definition::text::decode;
/// use guidepost_core::limits::Limits;
///
/// let file = decode("a.yaml", b"\xEF\xBB\xBFagent: {name: A}\n".to_vec(), &Limits::default()).expect("a BOM is fine");
/// assert_eq!(file.text, "agent: {name: A}\n");
/// let error = decode("b.yaml", b"agent:\n  name: \xFF\n".to_vec(), &Limits::default()).unwrap_err();
/// assert_eq!((error.line, error.column), (2, 9));
/// ```
pub fn decode(name: &str, bytes: Vec<u8>, limits: &Limits) -> Result<SourceFile, Diagnostic> {
    let at = |line, col| Span { line, col, len: 1 };
    let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if let Err(error) = limits.check_count(Limit::FileSize, name, size) {
        return Err(Diagnostic::error("limit", name, at(1, 1), error.to_string()));
    }
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        return Err(Diagnostic::error(
            "encoding",
            name,
            at(1, 1),
            "the file is UTF-16 (it starts with a UTF-16 byte-order mark); save it as UTF-8",
        ));
    }
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => {
            let bytes = error.as_bytes();
            let bad = error.utf8_error().valid_up_to();
            let (line, col) = line_col(bytes, bad);
            let byte = bytes.get(bad).copied().unwrap_or_default();
            return Err(Diagnostic::error(
                "encoding",
                name,
                at(line, col),
                format!("the file is not valid UTF-8: byte 0x{byte:02X} at offset {bad}; save it as UTF-8"),
            ));
        }
    };
    let text = match text.strip_prefix(BOM) {
        Some(rest) => rest.to_string(),
        None => text,
    };
    if let Err(error) = check_characters(&text) {
        return Err(Diagnostic::error("control-character", name, error.span, error.message));
    }
    Ok(SourceFile::new(name, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_characters_not_bytes() {
        assert_eq!(line_col("é\nab".as_bytes(), 4), (2, 2));
        assert_eq!(line_col(b"abc", 0), (1, 1));
    }

    #[test]
    fn a_nul_byte_is_refused_where_it_is() {
        let err = check_characters("agent:\n  name: A\0B\n").unwrap_err();
        assert_eq!((err.span.line, err.span.col), (2, 10));
        assert!(err.message.contains("NUL"), "{}", err.message);
        assert!(check_characters("a:\tb\r\nc: d\n").is_ok());
    }

    #[test]
    fn json_depth_ignores_brackets_in_strings() {
        let limits = Limits { nesting_depth: 3, ..Limits::default() };
        assert!(check_json_depth(r#"{"a": [[ "[[[[[[\"[[" ]]}"#, &limits).is_ok());
        let err = check_json_depth("[[[[1]]]]", &limits).unwrap_err();
        assert_eq!(err.span.col, 4);
        assert!(err.message.contains("nesting depth"), "{}", err.message);
    }

    #[test]
    fn decode_refuses_big_utf16_and_control_characters() {
        let small = Limits { file_size: 4, ..Limits::default() };
        let err = decode("a.yaml", b"12345".to_vec(), &small).unwrap_err();
        assert!(err.message.contains("GUIDEPOST_MAX_FILE_BYTES"), "{}", err.message);
        assert_eq!(decode("a.yaml", vec![0xFF, 0xFE, b'a', 0], &Limits::default()).unwrap_err().code, "encoding");
        let err = decode("a.yaml", b"a: b\x07\n".to_vec(), &Limits::default()).unwrap_err();
        assert_eq!((err.code, err.line, err.column), ("control-character", 1, 5));
    }
}
