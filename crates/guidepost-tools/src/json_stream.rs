//! An incremental splitter for concatenated JSON objects (`{..}{..}{..}`), the framing of
//! Parlant plugin call responses. Bytes arrive in arbitrary chunks: an object may be split
//! anywhere, several objects may share a chunk, and braces may appear inside strings.
//! Whitespace (including newlines) between objects is skipped, so newline-delimited input
//! works too.

/// Why the stream cannot be split.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// A byte outside any object that is neither whitespace nor `{`.
    #[error("unexpected byte {byte:#04x} between JSON objects at offset {offset}")]
    UnexpectedByte {
        /// The byte.
        byte: u8,
        /// Offset in the whole stream.
        offset: usize,
    },
    /// An object grew beyond the size cap.
    #[error("a JSON object in the stream exceeds the limit of {limit} bytes")]
    TooLarge {
        /// The cap in bytes.
        limit: usize,
    },
    /// The stream ended inside an object.
    #[error("the stream ended inside a JSON object ({pending} bytes pending)")]
    Truncated {
        /// Bytes of the unfinished object.
        pending: usize,
    },
}

/// Splits a byte stream into complete top-level JSON objects.
#[derive(Debug, Clone)]
pub struct JsonObjectSplitter {
    buffer: Vec<u8>,
    depth: usize,
    in_string: bool,
    escaped: bool,
    offset: usize,
    max_object_bytes: usize,
}

impl JsonObjectSplitter {
    /// A splitter that rejects objects larger than `max_object_bytes`.
    pub fn new(max_object_bytes: usize) -> Self {
        Self { buffer: Vec::new(), depth: 0, in_string: false, escaped: false, offset: 0, max_object_bytes }
    }

    /// Feeds a chunk and returns the objects it completed, as raw bytes, in order.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<Vec<u8>>, SplitError> {
        let mut complete = Vec::new();
        for &byte in chunk {
            self.offset += 1;
            if self.depth == 0 {
                if byte.is_ascii_whitespace() {
                    continue;
                }
                if byte != b'{' {
                    return Err(SplitError::UnexpectedByte { byte, offset: self.offset - 1 });
                }
                self.depth = 1;
                self.buffer.push(byte);
                continue;
            }
            self.buffer.push(byte);
            if self.buffer.len() > self.max_object_bytes {
                return Err(SplitError::TooLarge { limit: self.max_object_bytes });
            }
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if byte == b'\\' {
                    self.escaped = true;
                } else if byte == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match byte {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        complete.push(std::mem::take(&mut self.buffer));
                    }
                }
                _ => {}
            }
        }
        Ok(complete)
    }

    /// Checks that the stream ended between objects.
    pub fn finish(&self) -> Result<(), SplitError> {
        if self.depth == 0 { Ok(()) } else { Err(SplitError::Truncated { pending: self.buffer.len() }) }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use proptest::prelude::*;

    const STREAM: &str = r#"{"status": "typing", "data": {"stage": "a } { \" tricky"}}{"message": "brace { in [text"}
{"custom": {"list": [1, {"x": "]"}]}}  {"result":{"data":"北京 \\","metadata":{}}}"#;

    fn split_in_chunks(size: usize) -> Vec<serde_json::Value> {
        let mut splitter = JsonObjectSplitter::new(1 << 20);
        let mut out = Vec::new();
        for chunk in STREAM.as_bytes().chunks(size) {
            for object in splitter.push(chunk).unwrap() {
                out.push(serde_json::from_slice(&object).unwrap());
            }
        }
        splitter.finish().unwrap();
        out
    }

    #[test]
    fn any_chunking_gives_the_same_objects() {
        let whole = split_in_chunks(STREAM.len());
        assert_eq!(whole.len(), 4);
        assert_eq!(whole[0]["data"]["stage"], "a } { \" tricky");
        assert_eq!(whole[3]["result"]["data"], "北京 \\");
        for size in 1..40 {
            assert_eq!(split_in_chunks(size), whole, "chunk size {size}");
        }
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            "[{}\\[\\]\"\\\\ a-zé北\n]{0,12}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::btree_map("[a-z{}\"]{1,4}", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn splits_any_concatenation_at_any_chunking(
            objects in prop::collection::vec(prop::collection::btree_map("[a-z{}\"]{1,4}", json_value(), 0..4), 1..5),
            separators in prop::collection::vec("[ \n\t]{0,2}", 5),
            chunk in 1usize..17,
        ) {
            let objects: Vec<serde_json::Value> =
                objects.into_iter().map(|m| serde_json::Value::Object(m.into_iter().collect())).collect();
            let mut stream = Vec::new();
            for (object, sep) in objects.iter().zip(&separators) {
                stream.extend_from_slice(serde_json::to_string(object).unwrap().as_bytes());
                stream.extend_from_slice(sep.as_bytes());
            }
            let mut splitter = JsonObjectSplitter::new(1 << 20);
            let mut out = Vec::new();
            for piece in stream.chunks(chunk) {
                for raw in splitter.push(piece).unwrap() {
                    out.push(serde_json::from_slice::<serde_json::Value>(&raw).unwrap());
                }
            }
            prop_assert!(splitter.finish().is_ok());
            prop_assert_eq!(out, objects);
        }
    }

    #[test]
    fn rejects_garbage_oversize_and_truncation() {
        let mut s = JsonObjectSplitter::new(100);
        assert!(matches!(s.push(b"{}x"), Err(SplitError::UnexpectedByte { byte: b'x', offset: 2 })));
        let mut s = JsonObjectSplitter::new(8);
        assert_eq!(s.push(b"{\"a\": \"0123456789\"}"), Err(SplitError::TooLarge { limit: 8 }));
        let mut s = JsonObjectSplitter::new(100);
        assert_eq!(s.push(b"{\"a\": [1").unwrap().len(), 0);
        assert_eq!(s.finish(), Err(SplitError::Truncated { pending: 8 }));
    }
}
