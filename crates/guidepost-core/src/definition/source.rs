//! Parsing definition text into a tree of nodes that remember where they came from.
//!
//! Serde's YAML and JSON deserializers stop at the first problem and forget positions.
//! Definitions are checked in two steps instead: the text becomes a [`Node`] tree with a
//! line and column on every value and key, then the tree is checked against the published
//! JSON Schema (every problem at once) and converted into the authoring types.

use std::collections::HashMap;

use crate::limits::{Limit, Limits};

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A position in a source file. Lines and columns start at 1; `len` is the width of the
/// value in characters (at least 1), used to underline it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub col: u32,
    /// Width in characters.
    pub len: u32,
}

/// A parsed value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`, `~` or nothing.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A whole number.
    Int(i64),
    /// A number with a fraction or exponent.
    Float(f64),
    /// Text. `quoted` is false for plain YAML scalars, whose type is inferred.
    Str {
        /// The text.
        text: String,
        /// Whether the scalar was quoted or a block scalar (so certainly a string).
        quoted: bool,
    },
    /// A list.
    Seq(Vec<Node>),
    /// A mapping with string keys, in source order.
    Map(Vec<(Key, Node)>),
}

/// A mapping key.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    /// The key text.
    pub text: String,
    /// Where the key is.
    pub span: Span,
}

/// A value with its position and, for scalars, its source text.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The value.
    pub value: Value,
    /// Where it starts.
    pub span: Span,
    /// The scalar's text as written (for scalars), so `2024` can still be read as a string.
    pub raw: Option<String>,
}

impl Node {
    /// The value as JSON (positions dropped). The tree is as deep as the parse allowed
    /// ([`Limit::NestingDepth`]), so the conversion's recursion is bounded.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as Json;
        match &self.value {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Int(i) => Json::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
            Value::Str { text, .. } => Json::String(text.clone()),
            Value::Seq(items) => Json::Array(items.iter().map(Node::to_json).collect()),
            Value::Map(entries) => Json::Object(entries.iter().map(|(k, v)| (k.text.clone(), v.to_json())).collect()),
        }
    }

    /// A short name of the value's type, for messages.
    pub fn type_name(&self) -> &'static str {
        match &self.value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str { .. } => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

/// A syntax error with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// What is wrong.
    pub message: String,
    /// Where.
    pub span: Span,
}

/// Upper bound on nodes in one document, which also bounds alias expansion by count
/// ("billion laughs"); [`Limit::ExpandedSize`] bounds it in bytes.
pub const MAX_NODES: usize = 200_000;

/// Parses YAML (or JSON, which the YAML parser also reads) into a node tree, within the
/// process's [`Limits::global`].
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    parse_with(text, Limits::global())
}

/// Parses YAML into a node tree within `limits`.
///
/// The text is checked first (no NUL or other control characters; a leading byte-order mark
/// is skipped). Events are pulled from the parser one at a time and the tree is built on an
/// explicit stack, so nothing recurses on the input: a file nested deeper than
/// [`Limit::NestingDepth`] is refused at the first level too many, and parsing stops there.
/// Aliases are expanded by copy, bounded in values ([`MAX_NODES`]) and in bytes
/// ([`Limit::ExpandedSize`]).
pub fn parse_with(text: &str, limits: &Limits) -> Result<Node, SyntaxError> {
    let text = super::text::strip_bom(text);
    super::text::check_characters(text)?;
    let mut builder = TreeBuilder { limits: limits.clone(), ..TreeBuilder::default() };
    let mut parser = Parser::new_from_str(text);
    loop {
        let (event, mark) = match parser.next_token() {
            Ok(next) => next,
            // The scanner counts flow levels (`[`, `{`) in a byte and stops at 255 on its own.
            Err(err) if err.info().contains("recursion limit exceeded") => {
                let error = limits.exceeded(
                    Limit::NestingDepth,
                    "this file",
                    "mappings and lists nested more than 255 levels deep",
                );
                return Err(SyntaxError { message: error.to_string(), span: span_at(*err.marker(), 1) });
            }
            Err(err) => return Err(locate_syntax_error(text, err.info(), *err.marker())),
        };
        if event == Event::StreamEnd {
            break;
        }
        builder.on_event(event, mark);
        if let Some(err) = builder.error.take() {
            return Err(err);
        }
    }
    match builder.documents.len() {
        0 => Ok(Node { value: Value::Null, span: Span { line: 1, col: 1, len: 1 }, raw: None }),
        1 => Ok(builder.documents.swap_remove(0)),
        _ => Err(SyntaxError {
            message: "a definition file holds one YAML document; found several (split them into separate files)".into(),
            span: builder.second_document.unwrap_or_default(),
        }),
    }
}

/// Parses JSON, reporting JSON syntax errors with serde_json's precise positions, and then
/// builds the node tree.
pub fn parse_json(text: &str) -> Result<Node, SyntaxError> {
    parse_json_with(text, Limits::global())
}

/// [`parse_json`] within `limits`: the nesting depth is measured on the raw text before any
/// parser recurses.
pub fn parse_json_with(text: &str, limits: &Limits) -> Result<Node, SyntaxError> {
    let text = super::text::strip_bom(text);
    super::text::check_characters(text)?;
    super::text::check_json_depth(text, limits)?;
    if let Err(err) = serde_json::from_str::<serde_json::Value>(text) {
        let line = u32::try_from(err.line()).unwrap_or(u32::MAX).max(1);
        let col = u32::try_from(err.column()).unwrap_or(u32::MAX).max(1);
        let message = err.to_string();
        let message = message.split(" at line ").next().unwrap_or(&message).to_string();
        return Err(SyntaxError { message: format!("invalid JSON: {message}"), span: Span { line, col, len: 1 } });
    }
    parse_with(text, limits)
}

/// Turns the YAML scanner's error into one that points where the author has to look.
///
/// The scanner notices many mistakes only at the next token, often on the following line:
/// a key without its `:` is found when the next key starts, an unclosed `[` when a later
/// line does not fit inside it, a tab when the scanner reaches the value before it. Those
/// cases are moved back to the line that holds the mistake, with a message that says what
/// to change; everything else keeps the scanner's position.
fn locate_syntax_error(text: &str, info: &str, marker: Marker) -> SyntaxError {
    let lines: Vec<&str> = text.lines().collect();
    let at = inside(text, span_at(marker, 1));
    let line_of = |n: u32| lines.get((n as usize).wrapping_sub(1)).copied().unwrap_or("");
    let indent_of = |line: &str| line.chars().take_while(|c| *c == ' ').count();
    let content = |line: &str| {
        let trimmed = line.trim_start();
        !trimmed.is_empty() && !trimmed.starts_with('#')
    };

    if info.contains("found a tab") || info.contains("found character that cannot start any token") {
        let from = at.line.saturating_sub(1).max(1) as usize;
        if let Some((i, line)) = lines.iter().enumerate().skip(from - 1).find(|(_, l)| l.contains('\t')) {
            let col = line.chars().take_while(|c| *c != '\t').count() + 1;
            return SyntaxError {
                message: "invalid YAML: a tab character; YAML is indented with spaces only".into(),
                span: Span { line: (i + 1) as u32, col: col as u32, len: 1 },
            };
        }
    }

    if let Some((line, col, bracket)) = unclosed_flow_bracket(&lines, at) {
        let close = if bracket == '[' { ']' } else { '}' };
        return SyntaxError {
            message: format!(
                "invalid YAML: `{bracket}` is never closed (expected `{close}` before the end of the value)"
            ),
            span: Span { line, col, len: 1 },
        };
    }

    if info.contains("simple key expect ':'") || info.contains("could not find expected ':'") {
        // The previous line with content is the key that lacks its `:` (or a value that
        // wrapped onto the next line).
        let here = line_of(at.line);
        let starts_line = here.chars().take(at.col.saturating_sub(1) as usize).all(|c| c == ' ' || c == '-');
        if starts_line
            && at.line > 1
            && let Some(prev) = (1..at.line).rev().find(|n| content(line_of(*n)))
        {
            let text = line_of(prev);
            let col = indent_of(text) + 1;
            let len = text.trim_end().chars().count().saturating_sub(col - 1).max(1);
            return SyntaxError {
                message: format!("invalid YAML: `{}` is not `key: value` (a `:` missing after the key?)", text.trim()),
                span: Span { line: prev, col: col as u32, len: len as u32 },
            };
        }
    }
    // A line indented differently from every line before it breaks the structure where it
    // starts, whatever token the scanner stumbled on.
    let here = line_of(at.line);
    if content(here) && at.line > 1 {
        let indent = indent_of(here);
        let mut levels: Vec<usize> = (1..at.line).map(line_of).filter(|l| content(l)).map(indent_of).collect();
        // A list item's content sits two columns right of its dash.
        levels.extend((1..at.line).map(line_of).filter(|l| l.trim_start().starts_with("- ")).map(|l| indent_of(l) + 2));
        // The first line of a nested block is deeper than the line that opens it.
        let opener = (1..at.line).rev().map(line_of).find(|l| content(l)).is_some_and(|previous| {
            let code = previous.split(" #").next().unwrap_or(previous).trim_end();
            indent > indent_of(previous) && (code.ends_with(':') || code.ends_with('|') || code.ends_with('>'))
        });
        if !opener && !levels.contains(&indent) {
            return SyntaxError {
                message: format!(
                    "invalid YAML: this line is indented by {indent} spaces, which matches no line above it; \
                     align it with its siblings"
                ),
                span: Span { line: at.line, col: 1, len: indent.max(1) as u32 },
            };
        }
    }
    if info.contains("mapping values are not allowed") {
        return SyntaxError {
            message: format!("invalid YAML: {info} (a value that contains `: ` must be quoted)"),
            span: at,
        };
    }
    SyntaxError { message: format!("invalid YAML: {info}"), span: at }
}

/// The innermost `[` or `{` opened on a line before `at` and still open at `at`, ignoring
/// quoted text and comments.
fn unclosed_flow_bracket(lines: &[&str], at: Span) -> Option<(u32, u32, char)> {
    let mut open: Vec<(u32, u32, char)> = Vec::new();
    for (i, line) in lines.iter().enumerate().take(at.line as usize) {
        let number = (i + 1) as u32;
        let mut quote: Option<char> = None;
        let mut previous = ' ';
        for (j, c) in line.chars().enumerate() {
            if number == at.line && j + 1 >= at.col as usize {
                break;
            }
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None => match c {
                    '"' | '\'' if previous == ' ' || "[{,:".contains(previous) => quote = Some(c),
                    '#' if previous == ' ' => break,
                    '[' | '{' if open.is_empty() && !(previous == ' ' || previous == '-' || previous == ':') => {}
                    '[' | '{' => open.push((number, (j + 1) as u32, c)),
                    ']' | '}' if !open.is_empty() => {
                        open.pop();
                    }
                    _ => {}
                },
            }
            previous = c;
        }
    }
    open.pop().filter(|(line, _, _)| *line < at.line)
}

/// `at`, or the end of the text when `at` lies past it: the scanner reports an error at the
/// end of a file that does not end with a line break on the line after the last one.
pub(crate) fn inside(text: &str, at: Span) -> Span {
    let bytes = text.as_bytes();
    let breaks = bytes
        .iter()
        .enumerate()
        .filter(|(i, b)| **b == b'\n' || (**b == b'\r' && bytes.get(i + 1) != Some(&b'\n')))
        .count();
    let last = u32::try_from(breaks + 1).unwrap_or(u32::MAX);
    if at.line <= last {
        return at;
    }
    let tail = text.rsplit(['\n', '\r']).next().unwrap_or("");
    Span { line: last, col: u32::try_from(tail.chars().count() + 1).unwrap_or(u32::MAX), len: 1 }
}

fn span_at(marker: Marker, len: usize) -> Span {
    Span {
        line: u32::try_from(marker.line()).unwrap_or(u32::MAX).max(1),
        col: u32::try_from(marker.col() + 1).unwrap_or(u32::MAX).max(1),
        len: u32::try_from(len.max(1)).unwrap_or(u32::MAX),
    }
}

enum Frame {
    Seq { items: Vec<Node>, span: Span, anchor: usize, start: Size, deepest: usize },
    Map { entries: Vec<(Key, Node)>, pending_key: Option<Key>, span: Span, anchor: usize, start: Size, deepest: usize },
}

/// Values and bytes of the tree built so far (aliases counted at their expanded size).
#[derive(Debug, Clone, Copy, Default)]
struct Size {
    nodes: usize,
    bytes: u64,
}

/// Approximate memory of one node besides its text: the node, its span and its place in
/// its parent.
const NODE_OVERHEAD: u64 = std::mem::size_of::<Node>() as u64 + 32;

#[derive(Default)]
struct TreeBuilder {
    limits: Limits,
    stack: Vec<Frame>,
    documents: Vec<Node>,
    /// Anchored nodes with their expanded size and depth.
    anchors: HashMap<usize, (Node, Size, usize)>,
    size: Size,
    error: Option<SyntaxError>,
    second_document: Option<Span>,
}

impl TreeBuilder {
    fn fail(&mut self, message: String, span: Span) {
        if self.error.is_none() {
            self.error = Some(SyntaxError { message, span });
        }
    }

    /// Adds a finished node of nesting `depth` (0 for a scalar) to its parent.
    fn complete(&mut self, node: Node, anchor: usize, start: Size, depth: usize) {
        if anchor > 0 {
            let size = Size { nodes: self.size.nodes - start.nodes, bytes: self.size.bytes - start.bytes };
            self.anchors.insert(anchor, (node.clone(), size, depth));
        }
        self.push(node, depth);
    }

    /// Counts `nodes` values of `bytes` bytes; false (with the error set) past the limits.
    fn grow(&mut self, nodes: usize, bytes: u64, span: Span) -> bool {
        self.size.nodes = self.size.nodes.saturating_add(nodes);
        self.size.bytes = self.size.bytes.saturating_add(bytes);
        if self.size.nodes > MAX_NODES {
            self.fail(format!("document too large: more than {MAX_NODES} values (check for alias loops)"), span);
            return false;
        }
        if self.size.bytes > self.limits.expanded_size {
            let error = self.limits.exceeded(
                Limit::ExpandedSize,
                "this file",
                format!("more than {} bytes once its aliases are expanded", self.limits.expanded_size),
            );
            self.fail(error.to_string(), span);
            return false;
        }
        true
    }

    /// Whether a node `depth` levels deep would nest too far under the open collections (the error is then set).
    fn too_deep(&mut self, depth: usize, span: Span) -> bool {
        if self.stack.len().saturating_add(depth) > self.limits.nesting_depth {
            let error = self.limits.exceeded(
                Limit::NestingDepth,
                "this file",
                format!("mappings and lists nested more than {} levels deep", self.limits.nesting_depth),
            );
            self.fail(error.to_string(), span);
            return true;
        }
        false
    }

    fn open(&mut self, span: Span) -> bool {
        !self.too_deep(1, span) && self.grow(1, NODE_OVERHEAD, span)
    }

    fn push(&mut self, node: Node, depth: usize) {
        match self.stack.last_mut() {
            Some(Frame::Seq { deepest, .. } | Frame::Map { deepest, .. }) => *deepest = (*deepest).max(depth),
            None => {}
        }
        match self.stack.last_mut() {
            None => self.documents.push(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, pending_key, .. }) => match pending_key.take() {
                Some(key) => {
                    if let Some((first, _)) = entries.iter().find(|(k, _)| k.text == key.text) {
                        let message =
                            format!("duplicate key `{}` (first defined at line {})", key.text, first.span.line);
                        let span = key.span;
                        self.fail(message, span);
                        return;
                    }
                    entries.push((key, node));
                }
                None => match node.value {
                    Value::Str { text, .. } => *pending_key = Some(Key { text, span: node.span }),
                    Value::Null | Value::Bool(_) | Value::Int(_) | Value::Float(_) => {
                        let text = node.raw.unwrap_or_default();
                        *pending_key = Some(Key { text, span: node.span });
                    }
                    Value::Seq(_) | Value::Map(_) => {
                        self.fail("mapping keys must be plain strings".into(), node.span);
                    }
                },
            },
        }
    }
}

impl TreeBuilder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.error.is_some() {
            return;
        }
        match ev {
            Event::DocumentStart => {
                if !self.documents.is_empty() && self.second_document.is_none() {
                    self.second_document = Some(span_at(mark, 3));
                }
            }
            Event::Scalar(text, style, anchor, _tag) => {
                let len = text.chars().count()
                    + usize::from(matches!(style, TScalarStyle::SingleQuoted | TScalarStyle::DoubleQuoted)) * 2;
                let span = span_at(mark, len);
                let start = self.size;
                // The text is held twice: as the value and as the raw scalar.
                if !self.grow(1, NODE_OVERHEAD + 2 * text.len() as u64, span) {
                    return;
                }
                let value = if style == TScalarStyle::Plain {
                    resolve_plain(&text)
                } else {
                    Value::Str { text: text.clone(), quoted: true }
                };
                self.complete(Node { value, span, raw: Some(text) }, anchor, start, 0);
            }
            Event::SequenceStart(anchor, _) => {
                let (span, start) = (span_at(mark, 1), self.size);
                if self.open(span) {
                    self.stack.push(Frame::Seq { items: Vec::new(), span, anchor, start, deepest: 0 });
                }
            }
            Event::MappingStart(anchor, _) => {
                let (span, start) = (span_at(mark, 1), self.size);
                if self.open(span) {
                    let entries = Vec::new();
                    self.stack.push(Frame::Map { entries, pending_key: None, span, anchor, start, deepest: 0 });
                }
            }
            Event::SequenceEnd | Event::MappingEnd => match self.stack.pop() {
                Some(Frame::Seq { items, span, anchor, start, deepest }) => {
                    self.complete(Node { value: Value::Seq(items), span, raw: None }, anchor, start, deepest + 1)
                }
                Some(Frame::Map { entries, span, anchor, start, deepest, .. }) => {
                    self.complete(Node { value: Value::Map(entries), span, raw: None }, anchor, start, deepest + 1)
                }
                None => self.fail("unbalanced YAML structure".into(), span_at(mark, 1)),
            },
            Event::Alias(id) => {
                let span = span_at(mark, 1);
                let Some((size, depth)) = self.anchors.get(&id).map(|(_, size, depth)| (*size, *depth)) else {
                    self.fail("alias refers to an unknown anchor".into(), span);
                    return;
                };
                // Counted before the copy is made, so an alias bomb stops before it costs memory.
                if !self.too_deep(depth, span)
                    && self.grow(size.nodes, size.bytes, span)
                    && let Some((node, _, _)) = self.anchors.get(&id)
                {
                    let node = node.clone();
                    self.push(node, depth);
                }
            }
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
        }
    }
}

/// Resolves a plain scalar with the YAML 1.2 core schema.
fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" => return Value::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return Value::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Value::Float(f64::NAN),
        _ => {}
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
        && let Ok(n) = text.parse::<i64>()
    {
        return Value::Int(n);
    }
    if let Some(hex) = text.strip_prefix("0x")
        && let Ok(n) = i64::from_str_radix(hex, 16)
    {
        return Value::Int(n);
    }
    if let Some(oct) = text.strip_prefix("0o")
        && let Ok(n) = i64::from_str_radix(oct, 8)
    {
        return Value::Int(n);
    }
    let looks_numeric = digits.chars().next().is_some_and(|c| c.is_ascii_digit() || c == '.')
        && digits.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+'));
    if looks_numeric && let Ok(f) = text.parse::<f64>() {
        return Value::Float(f);
    }
    Value::Str { text: text.to_string(), quoted: false }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syntax_error(text: &str) -> SyntaxError {
        match parse(text) {
            Err(e) => e,
            Ok(node) => panic!("parsed: {node:?}"),
        }
    }

    #[test]
    fn a_key_without_colon_is_reported_on_its_own_line() {
        let e = syntax_error("agent:\n  id: x\nguidelines:\n  - id: a\n    condition c\n    action: b\n");
        assert_eq!((e.span.line, e.span.col), (5, 5), "{e:?}");
        assert!(e.message.contains("`condition c`"), "{}", e.message);
    }

    #[test]
    fn an_unclosed_bracket_is_reported_where_it_opens() {
        let e = syntax_error("a:\n  b: [c, d\n  e: f\n\ng: []\n");
        assert_eq!((e.span.line, e.span.col), (2, 6), "{e:?}");
        assert!(e.message.contains("never closed"), "{}", e.message);
        let e = syntax_error("a:\n  b: {c: 1\n  e: f\n");
        assert_eq!((e.span.line, e.span.col), (2, 6), "{e:?}");
        // Brackets inside quotes or plain text do not count.
        let e = syntax_error("a: 'x [y'\nb: c: d\n");
        assert_eq!(e.span.line, 2, "{e:?}");
    }

    #[test]
    fn a_tab_is_reported_where_it_is() {
        let e = syntax_error("agent:\n  id: x\n  name: X\n\tguidelines: []\n");
        assert_eq!((e.span.line, e.span.col), (4, 1), "{e:?}");
        assert!(e.message.contains("tab"), "{}", e.message);
    }

    #[test]
    fn a_misindented_line_is_named() {
        let e = syntax_error("agent:\n  id: x\n  name: X\n   bad: 1\nguidelines: []\n");
        assert_eq!((e.span.line, e.span.col), (4, 1), "{e:?}");
        assert!(e.message.contains("indented by 3 spaces"), "{}", e.message);
        let e = syntax_error("guidelines:\n  - id: a\n   condition: c\n    action: b\n");
        assert_eq!((e.span.line, e.span.col), (3, 1), "{e:?}");
    }

    #[test]
    fn other_errors_keep_the_scanner_position() {
        let e = syntax_error("a:\n  b: foo: bar\n");
        assert_eq!((e.span.line, e.span.col), (2, 9), "{e:?}");
        assert!(e.message.contains("must be quoted"), "{}", e.message);
    }

    #[test]
    fn positions_are_one_based() {
        let node = parse("a: 1\nlist:\n  - x\n  - 'y'\n").unwrap_or_else(|e| panic!("{e:?}"));
        let Value::Map(entries) = &node.value else { panic!("map") };
        assert_eq!(entries[0].0.span, Span { line: 1, col: 1, len: 1 });
        assert_eq!(entries[0].1.value, Value::Int(1));
        assert_eq!(entries[0].1.span.col, 4);
        let Value::Seq(items) = &entries[1].1.value else { panic!("seq") };
        assert_eq!(items[1].span, Span { line: 4, col: 5, len: 3 });
        assert_eq!(items[1].value, Value::Str { text: "y".into(), quoted: true });
    }

    #[test]
    fn duplicate_keys_and_multiple_documents_are_errors() {
        let err = parse("a: 1\nb: 2\na: 3\n").err();
        assert_eq!(
            err.map(|e| (e.message, e.span.line)),
            Some(("duplicate key `a` (first defined at line 1)".into(), 3))
        );
        assert!(parse("a: 1\n---\nb: 2\n").is_err());
    }

    #[test]
    fn aliases_expand_and_are_bounded() {
        let node = parse("a: &x [1, 2]\nb: *x\n").unwrap_or_else(|e| panic!("{e:?}"));
        let Value::Map(entries) = node.value else { panic!("map") };
        assert_eq!(entries[0].1.value, entries[1].1.value);
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..8 {
            let prev = if i == 0 { "a".to_string() } else { format!("l{}", i - 1) };
            bomb.push_str(&format!("l{i}: &l{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
        }
        assert!(parse(&bomb).is_err());
    }

    #[test]
    fn json_syntax_errors_have_positions() {
        let err = parse_json("{\n  \"a\": [1, 2,]\n}").err();
        assert_eq!(err.map(|e| e.span.line), Some(2));
        assert!(parse_json("{\"a\": \"b\"}").is_ok());
    }

    #[test]
    fn plain_scalars_resolve_like_yaml_1_2() {
        assert_eq!(resolve_plain("12"), Value::Int(12));
        assert_eq!(resolve_plain("-1.5"), Value::Float(-1.5));
        assert_eq!(resolve_plain("yes"), Value::Str { text: "yes".into(), quoted: false });
        assert_eq!(resolve_plain("~"), Value::Null);
        assert_eq!(resolve_plain("1.2.3"), Value::Str { text: "1.2.3".into(), quoted: false });
    }
}
