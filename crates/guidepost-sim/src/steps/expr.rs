//! A small expression language for custom preconditions and satisfaction checks, evaluated over
//! the run so far.
//!
//! ```text
//! satisfied("pickup") && attempts("confirm") < 2
//! turns >= 3 || agent_said("booking number")
//! tool_called("book_taxi") && !guideline_matched("price_question")
//! ```
//!
//! Values are booleans, numbers and strings. Functions:
//!
//! | function | value |
//! |---|---|
//! | `satisfied(step)` | the step is satisfied |
//! | `status(step)` | `"idle"`, `"in_progress"`, `"satisfied"`, `"blocked"`, `"failed"`, `"skipped"` |
//! | `attempts(step)` | turns spent on the step |
//! | `agent_said(text)` / `customer_said(text)` | some message so far contains the text (case-insensitive) |
//! | `last_agent_said(text)` | the agent's latest turn contains the text |
//! | `tool_called(name)` | the agent called the tool |
//! | `journey_entered(id)`, `journey_completed(id)`, `journey_state(journey, state)`, `guideline_matched(id)` | engine observations so far |
//!
//! and the variable `turns` (customer turns so far). Operators: `!`, `&&`, `||`, `==`, `!=`,
//! `<`, `<=`, `>`, `>=`, parentheses.

use std::fmt;

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    source: String,
    root: Node,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Bool(bool),
    Num(f64),
    Str(String),
    Turns,
    Call(Function, Vec<Node>),
    Not(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Cmp(CmpOp, Box<Node>, Box<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// The functions of the language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    /// `satisfied(step)`.
    Satisfied,
    /// `status(step)`.
    Status,
    /// `attempts(step)`.
    Attempts,
    /// `agent_said(text)`.
    AgentSaid,
    /// `customer_said(text)`.
    CustomerSaid,
    /// `last_agent_said(text)`.
    LastAgentSaid,
    /// `tool_called(name)`.
    ToolCalled,
    /// `journey_entered(id)`.
    JourneyEntered,
    /// `journey_completed(id)`.
    JourneyCompleted,
    /// `journey_state(journey, state)`.
    JourneyState,
    /// `guideline_matched(id)`.
    GuidelineMatched,
}

impl Function {
    fn parse(name: &str) -> Option<(Self, usize)> {
        Some(match name {
            "satisfied" => (Self::Satisfied, 1),
            "status" => (Self::Status, 1),
            "attempts" => (Self::Attempts, 1),
            "agent_said" => (Self::AgentSaid, 1),
            "customer_said" => (Self::CustomerSaid, 1),
            "last_agent_said" => (Self::LastAgentSaid, 1),
            "tool_called" => (Self::ToolCalled, 1),
            "journey_entered" => (Self::JourneyEntered, 1),
            "journey_completed" => (Self::JourneyCompleted, 1),
            "journey_state" => (Self::JourneyState, 2),
            "guideline_matched" => (Self::GuidelineMatched, 1),
            _ => return None,
        })
    }

    fn takes_step(self) -> bool {
        matches!(self, Self::Satisfied | Self::Status | Self::Attempts)
    }
}

/// A value of the language.
#[derive(Debug, Clone, PartialEq)]
pub enum ExprValue {
    /// A boolean.
    Bool(bool),
    /// A number.
    Num(f64),
    /// A string.
    Str(String),
}

/// What an expression can ask about the run.
pub trait ExprEnv {
    /// Answers a function call with string arguments.
    fn call(&self, function: Function, args: &[String]) -> ExprValue;
    /// Customer turns so far.
    fn turns(&self) -> u32;
}

/// A syntax error, with the byte offset where it was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid expression `{source_text}` at offset {offset}: {message}")]
pub struct ExprError {
    /// The expression.
    pub source_text: String,
    /// Where.
    pub offset: usize,
    /// What.
    pub message: String,
}

impl Expr {
    /// Parses `source`.
    ///
    /// ```
    /// use guidepost_sim::steps::expr::Expr;
    /// let e = Expr::parse(r#"satisfied("a") && turns >= 2"#).unwrap();
    /// assert_eq!(e.step_references(), vec!["a".to_string()]);
    /// assert!(Expr::parse("unknown(1)").is_err());
    /// ```
    pub fn parse(source: &str) -> Result<Self, ExprError> {
        let mut parser = Parser { src: source, pos: 0, depth: 0, operators: 0 };
        let root = parser.or()?;
        parser.skip_ws();
        if parser.pos < source.len() {
            return Err(parser.error("unexpected trailing input"));
        }
        Ok(Self { source: source.to_string(), root })
    }

    /// The expression text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Step ids named by `satisfied`, `status` and `attempts`, for reference checks.
    pub fn step_references(&self) -> Vec<String> {
        let mut out = Vec::new();
        collect_steps(&self.root, &mut out);
        out
    }

    /// Evaluates the expression as a condition; a non-boolean result is false.
    pub fn holds(&self, env: &dyn ExprEnv) -> bool {
        matches!(eval(&self.root, env), ExprValue::Bool(true))
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

fn collect_steps(node: &Node, out: &mut Vec<String>) {
    match node {
        Node::Call(f, args) if f.takes_step() => {
            if let Some(Node::Str(s)) = args.first() {
                out.push(s.clone());
            }
        }
        Node::Not(a) => collect_steps(a, out),
        Node::And(a, b) | Node::Or(a, b) | Node::Cmp(_, a, b) => {
            collect_steps(a, out);
            collect_steps(b, out);
        }
        _ => {}
    }
}

fn eval(node: &Node, env: &dyn ExprEnv) -> ExprValue {
    match node {
        Node::Bool(b) => ExprValue::Bool(*b),
        Node::Num(n) => ExprValue::Num(*n),
        Node::Str(s) => ExprValue::Str(s.clone()),
        Node::Turns => ExprValue::Num(f64::from(env.turns())),
        Node::Call(f, args) => {
            let args: Vec<String> = args
                .iter()
                .map(|a| match eval(a, env) {
                    ExprValue::Str(s) => s,
                    ExprValue::Num(n) => n.to_string(),
                    ExprValue::Bool(b) => b.to_string(),
                })
                .collect();
            env.call(*f, &args)
        }
        Node::Not(a) => ExprValue::Bool(!truthy(&eval(a, env))),
        Node::And(a, b) => ExprValue::Bool(truthy(&eval(a, env)) && truthy(&eval(b, env))),
        Node::Or(a, b) => ExprValue::Bool(truthy(&eval(a, env)) || truthy(&eval(b, env))),
        Node::Cmp(op, a, b) => {
            let (a, b) = (eval(a, env), eval(b, env));
            let ordering = match (&a, &b) {
                (ExprValue::Num(x), ExprValue::Num(y)) => x.partial_cmp(y),
                (ExprValue::Str(x), ExprValue::Str(y)) => Some(x.cmp(y)),
                (ExprValue::Bool(x), ExprValue::Bool(y)) => Some(x.cmp(y)),
                _ => None,
            };
            let Some(ord) = ordering else {
                return ExprValue::Bool(matches!(op, CmpOp::Ne));
            };
            use std::cmp::Ordering::{Equal, Greater, Less};
            ExprValue::Bool(match op {
                CmpOp::Eq => ord == Equal,
                CmpOp::Ne => ord != Equal,
                CmpOp::Lt => ord == Less,
                CmpOp::Le => ord != Greater,
                CmpOp::Gt => ord == Greater,
                CmpOp::Ge => ord != Less,
            })
        }
    }
}

fn truthy(value: &ExprValue) -> bool {
    match value {
        ExprValue::Bool(b) => *b,
        ExprValue::Num(n) => *n != 0.0,
        ExprValue::Str(s) => !s.is_empty(),
    }
}

/// How deep parentheses and `!` may nest in an expression: the parser and the evaluator
/// recurse once per level.
pub const MAX_DEPTH: usize = 64;

/// How many operators (`&&`, `||`, comparisons, `!`) one expression may hold: the evaluator
/// recurses once per operator of a chain.
pub const MAX_OPERATORS: usize = 1_000;

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    depth: usize,
    operators: usize,
}

impl Parser<'_> {
    fn error(&self, message: impl Into<String>) -> ExprError {
        ExprError { source_text: self.src.to_string(), offset: self.pos, message: message.into() }
    }

    fn rest(&self) -> &str {
        &self.src[self.pos..]
    }

    fn skip_ws(&mut self) {
        let trimmed = self.rest().trim_start();
        self.pos = self.src.len() - trimmed.len();
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_ws();
        if self.rest().starts_with(token) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }

    /// One level deeper (a parenthesis or a `!`), refused past [`MAX_DEPTH`].
    fn descend(&mut self) -> Result<(), ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(format!("nested more than {MAX_DEPTH} levels deep")));
        }
        Ok(())
    }

    /// One more operator, refused past [`MAX_OPERATORS`].
    fn operator(&mut self) -> Result<(), ExprError> {
        self.operators += 1;
        if self.operators > MAX_OPERATORS {
            return Err(self.error(format!("more than {MAX_OPERATORS} operators")));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Node, ExprError> {
        let mut left = self.and()?;
        while self.eat("||") {
            self.operator()?;
            left = Node::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Node, ExprError> {
        let mut left = self.not()?;
        while self.eat("&&") {
            self.operator()?;
            left = Node::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Node, ExprError> {
        self.skip_ws();
        if self.rest().starts_with('!') && !self.rest().starts_with("!=") {
            self.pos += 1;
            self.operator()?;
            self.descend()?;
            let inner = self.not()?;
            self.depth -= 1;
            return Ok(Node::Not(Box::new(inner)));
        }
        self.cmp()
    }

    fn cmp(&mut self) -> Result<Node, ExprError> {
        let left = self.primary()?;
        for (token, op) in [
            ("==", CmpOp::Eq),
            ("!=", CmpOp::Ne),
            ("<=", CmpOp::Le),
            (">=", CmpOp::Ge),
            ("<", CmpOp::Lt),
            (">", CmpOp::Gt),
        ] {
            if self.eat(token) {
                self.operator()?;
                return Ok(Node::Cmp(op, Box::new(left), Box::new(self.primary()?)));
            }
        }
        Ok(left)
    }

    fn primary(&mut self) -> Result<Node, ExprError> {
        self.skip_ws();
        let rest = self.rest();
        let Some(first) = rest.chars().next() else {
            return Err(self.error("unexpected end of expression"));
        };
        if first == '(' {
            self.pos += 1;
            self.descend()?;
            let inner = self.or()?;
            if !self.eat(")") {
                return Err(self.error("expected `)`"));
            }
            self.depth -= 1;
            return Ok(inner);
        }
        if first == '"' || first == '\'' {
            let body = &rest[1..];
            let Some(end) = body.find(first) else {
                return Err(self.error("unterminated string"));
            };
            let text = body[..end].to_string();
            self.pos += end + 2;
            return Ok(Node::Str(text));
        }
        if first.is_ascii_digit() {
            let len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
            let number = rest[..len].parse::<f64>().map_err(|_| self.error("invalid number"))?;
            self.pos += len;
            return Ok(Node::Num(number));
        }
        if first.is_alphabetic() || first == '_' {
            let len = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
            let name = rest[..len].to_string();
            let start = self.pos;
            self.pos += len;
            match name.as_str() {
                "true" => return Ok(Node::Bool(true)),
                "false" => return Ok(Node::Bool(false)),
                "turns" => return Ok(Node::Turns),
                _ => {}
            }
            let Some((function, arity)) = Function::parse(&name) else {
                self.pos = start;
                return Err(self.error(format!("unknown name `{name}`")));
            };
            if !self.eat("(") {
                return Err(self.error(format!("expected `(` after `{name}`")));
            }
            let mut args = Vec::new();
            if !self.eat(")") {
                self.descend()?;
                loop {
                    args.push(self.or()?);
                    if self.eat(")") {
                        break;
                    }
                    if !self.eat(",") {
                        return Err(self.error("expected `,` or `)`"));
                    }
                }
                self.depth -= 1;
            }
            if args.len() != arity {
                return Err(self.error(format!("`{name}` takes {arity} argument(s), got {}", args.len())));
            }
            return Ok(Node::Call(function, args));
        }
        Err(self.error(format!("unexpected `{first}`")))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    struct Env;
    impl ExprEnv for Env {
        fn call(&self, function: Function, args: &[String]) -> ExprValue {
            match function {
                Function::Satisfied => ExprValue::Bool(args[0] == "a"),
                Function::Attempts => ExprValue::Num(2.0),
                Function::Status => ExprValue::Str("in_progress".into()),
                _ => ExprValue::Bool(false),
            }
        }
        fn turns(&self) -> u32 {
            4
        }
    }

    #[test]
    fn evaluates_operators_and_functions() {
        let cases = [
            (r#"satisfied("a")"#, true),
            (r#"satisfied("b")"#, false),
            (r#"!satisfied("b") && turns >= 4"#, true),
            (r#"attempts("x") < 2 || status("x") == "in_progress""#, true),
            (r#"(turns > 5 || false) && true"#, false),
            (r#"turns != 4"#, false),
        ];
        for (source, want) in cases {
            assert_eq!(Expr::parse(source).unwrap().holds(&Env), want, "{source}");
        }
    }

    proptest::proptest! {
        #[test]
        fn parsing_never_panics_and_errors_point_inside_the_input(source in "[a-z_()\"'!&|<>=0-9 ,.北é]{0,40}") {
            match Expr::parse(&source) {
                Ok(e) => { let _ = e.holds(&Env); }
                Err(e) => proptest::prop_assert!(e.offset <= source.len()),
            }
        }

        #[test]
        fn numbers_compare_like_numbers(a in 0u32..1000, b in 0u32..1000) {
            let e = Expr::parse(&format!("{a} < {b} && !({a} >= {b})")).unwrap();
            proptest::prop_assert_eq!(e.holds(&Env), a < b);
        }
    }

    #[test]
    fn deep_nesting_and_long_chains_are_refused_without_recursing_on_them() {
        let deep = format!("{}turns > 1{}", "(".repeat(100_000), ")".repeat(100_000));
        let err = Expr::parse(&deep).unwrap_err();
        assert!(err.message.contains("nested more than 64 levels deep"), "{}", err.message);
        assert_eq!(err.offset, 65);
        let nots = format!("{}true", "!".repeat(100_000));
        assert!(Expr::parse(&nots).unwrap_err().message.contains("nested more than 64"));
        let calls = "satisfied(".repeat(100_000);
        assert!(Expr::parse(&calls).unwrap_err().message.contains("nested more than 64"));
        let chain = vec!["turns > 1"; 100_000].join(" && ");
        assert!(Expr::parse(&chain).unwrap_err().message.contains("more than 1000 operators"));
        // Within the bounds, both parse.
        let nested = format!("{}turns > 1{}", "(".repeat(64), ")".repeat(64));
        assert!(Expr::parse(&nested).is_ok());
        let chain = vec!["turns > 1"; 300].join(" && ");
        assert!(Expr::parse(&chain).is_ok());
    }

    #[test]
    fn reports_errors_with_offsets() {
        let err = Expr::parse(r#"satisfied("a") && nope("b")"#).unwrap_err();
        assert_eq!(err.offset, 18);
        assert!(Expr::parse(r#"satisfied("a", "b")"#).is_err());
        assert!(Expr::parse(r#"satisfied("a"#).is_err());
        assert!(Expr::parse("turns >").is_err());
    }
}
