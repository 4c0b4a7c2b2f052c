//! The text of one string field of a JSON object, as the object is streamed.
//!
//! A structured reply arrives as pieces of JSON (`{"draft": "...", "problems": [...],
//! "reply": "Hel`, `lo!"}`). [`FieldStream`] reads the pieces and gives back the decoded text
//! of the chosen top-level field as soon as it arrives, so the reply can be shown while it is
//! written. It follows the JSON grammar far enough to tell keys from values at the top level:
//! a field of the same name nested deeper, or the name inside another string, is not it.

/// Where the scanner stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// Outside strings.
    Structure,
    /// Inside a string that is not the field's value (a key, or another value).
    OtherString { escaped: bool },
    /// Inside the field's value.
    Field { escaped: bool },
    /// The field's value ended; nothing more to give.
    Done,
}

/// Reads a streamed JSON object and yields the text of one of its top-level string fields.
#[derive(Debug)]
pub struct FieldStream {
    field: String,
    scan: Scan,
    depth: usize,
    /// The string being read, when it may be a top-level key.
    key: Option<String>,
    /// The last top-level key read, until its value starts.
    last_key: Option<String>,
    /// An escape sequence of the field's value cut between two pieces (`\u00e`).
    pending: String,
    /// A high surrogate waiting for its low half.
    high_surrogate: Option<u16>,
}

impl FieldStream {
    /// A reader of the top-level field `field`.
    pub fn new(field: &str) -> Self {
        Self {
            field: field.to_string(),
            scan: Scan::Structure,
            depth: 0,
            key: None,
            last_key: None,
            pending: String::new(),
            high_surrogate: None,
        }
    }

    /// Reads the next piece of the JSON text; returns the field's text it completed (empty when
    /// the piece held none of it).
    pub fn push(&mut self, piece: &str) -> String {
        let mut out = String::new();
        for c in piece.chars() {
            match self.scan {
                Scan::Done => break,
                Scan::Structure => match c {
                    '{' | '[' => self.depth += 1,
                    '}' | ']' => self.depth = self.depth.saturating_sub(1),
                    ',' => self.last_key = None,
                    '"' => {
                        let value_of_field = self.depth == 1 && self.last_key.as_deref() == Some(self.field.as_str());
                        if value_of_field {
                            self.scan = Scan::Field { escaped: false };
                            self.last_key = None;
                        } else {
                            // At the top level, a string not after `key:` is a key.
                            self.key = (self.depth == 1 && self.last_key.is_none()).then(String::new);
                            self.scan = Scan::OtherString { escaped: false };
                        }
                    }
                    _ => {}
                },
                Scan::OtherString { escaped } => {
                    if escaped {
                        self.scan = Scan::OtherString { escaped: false };
                        if let Some(key) = &mut self.key {
                            key.push(c);
                        }
                    } else if c == '\\' {
                        self.scan = Scan::OtherString { escaped: true };
                    } else if c == '"' {
                        self.scan = Scan::Structure;
                        match self.key.take() {
                            Some(key) => self.last_key = Some(key),
                            // A value's end: the key it belonged to is done with.
                            None if self.depth == 1 => self.last_key = None,
                            None => {}
                        }
                    } else if let Some(key) = &mut self.key {
                        key.push(c);
                    }
                }
                Scan::Field { escaped } => {
                    if escaped || !self.pending.is_empty() {
                        self.pending.push(c);
                        if let Some(text) = self.decode_pending() {
                            out.push_str(&text);
                        }
                        if self.pending.is_empty() {
                            self.scan = Scan::Field { escaped: false };
                        }
                    } else if c == '\\' {
                        self.scan = Scan::Field { escaped: true };
                    } else if c == '"' {
                        self.scan = Scan::Done;
                    } else {
                        out.push(c);
                    }
                }
            }
        }
        out
    }

    /// Decodes the escape sequence in `pending` once it is whole; `None` while it is not.
    fn decode_pending(&mut self) -> Option<String> {
        let first = self.pending.chars().next()?;
        let simple = match first {
            '"' => Some('"'),
            '\\' => Some('\\'),
            '/' => Some('/'),
            'b' => Some('\u{8}'),
            'f' => Some('\u{c}'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'u' => None,
            // Not JSON; shown as written.
            other => Some(other),
        };
        if let Some(c) = simple {
            self.pending.clear();
            return Some(c.to_string());
        }
        if self.pending.len() < 5 {
            return None;
        }
        let code = u16::from_str_radix(&self.pending[1..5], 16).unwrap_or(0xFFFD);
        self.pending.clear();
        let text = match (self.high_surrogate.take(), code) {
            (None, 0xD800..=0xDBFF) => {
                self.high_surrogate = Some(code);
                String::new()
            }
            (Some(high), 0xDC00..=0xDFFF) => {
                char::decode_utf16([high, code]).map(|c| c.unwrap_or('\u{FFFD}')).collect()
            }
            (Some(_), other) => {
                let mut s = String::from('\u{FFFD}');
                s.extend(char::decode_utf16([other]).map(|c| c.unwrap_or('\u{FFFD}')));
                s
            }
            (None, other) => char::decode_utf16([other]).map(|c| c.unwrap_or('\u{FFFD}')).collect(),
        };
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::FieldStream;

    /// The field's text, fed `json` in pieces of `size` characters.
    fn read(json: &str, size: usize) -> String {
        let mut reader = FieldStream::new("reply");
        let chars: Vec<char> = json.chars().collect();
        chars.chunks(size).map(|piece| reader.push(&piece.iter().collect::<String>())).collect()
    }

    #[test]
    fn the_field_is_read_whatever_the_pieces() {
        let value = serde_json::json!({
            "draft": "He said \"reply\": no",
            "problems": ["the \"reply\" key", {"reply": "nested"}],
            "reply": "Bonjour ! 天气 \"quoted\" \\ back\nline \u{1F600} tab\t",
            "after": "x"
        });
        let json = value.to_string();
        for size in [1, 2, 3, 5, 7, 64, json.len()] {
            assert_eq!(read(&json, size), value["reply"].as_str().unwrap(), "pieces of {size}");
        }
    }

    #[test]
    fn escaped_unicode_split_between_pieces_is_decoded() {
        let json = r#"{"reply": "caf\u00e9 \ud83d\ude00!"}"#;
        for size in 1..8 {
            assert_eq!(read(json, size), "café 😀!", "pieces of {size}");
        }
    }

    #[test]
    fn no_field_no_text() {
        assert_eq!(read(r#"{"draft": "reply", "problems": []}"#, 3), "");
        assert_eq!(read(r#"{"reply": null, "x": "reply"}"#, 2), "");
        assert_eq!(read(r#"{"outer": {"reply": "deep"}}"#, 4), "");
    }
}
