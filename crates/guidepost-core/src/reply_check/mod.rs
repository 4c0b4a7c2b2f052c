//! Checks on a reply before it reaches the customer.
//!
//! A model asked for the agent's next message can get it wrong in ways a customer notices at
//! once and the model itself rarely does: it repeats the customer's words, writes the
//! customer's next message instead of the agent's, states a figure it was never given, or
//! answers in another language than the agent speaks. Each of these is told from the text,
//! with no model call, by [`check_reply`]; the runtime asks again or falls back to a safe
//! reply, and the simulator checks every reply of every run the same way.
//!
//! ```
//! use guidepost_core::reply_check::{Grounding, ReplyCheck, ReplyContext, check_reply};
//! use serde_json::json;
//!
//! let history = vec![("customer".to_string(), "Hi, what is the weather in Paris tomorrow?".to_string())];
//! let mut grounding = Grounding::new();
//! grounding.add_json(&json!({"error": "no data for this city; supported: 北京, 上海"}));
//! let context = ReplyContext { history: &history, grounding: &grounding, language: Some("zh"), checks: &ReplyCheck::ALL, must_ask: &[], failed_lookups: &[] };
//!
//! let problems = check_reply("你好，我想查询巴黎明天的天气。", &context);
//! assert_eq!(problems[0].check, ReplyCheck::CustomerVoice);
//! let problems = check_reply("巴黎明天晴，18度。", &context);
//! assert_eq!(problems[0].check, ReplyCheck::InventedFact);
//! assert!(check_reply("抱歉，暂时查不到巴黎的天气。可以查询：北京、上海。", &context).is_empty());
//! ```

mod denial;
mod facts;
mod language;
mod voice;

use serde::{Deserialize, Serialize};

pub use facts::Grounding;
pub use language::{LanguageCode, detect_language, is_language_code, language_name, matches_language, primary_subtag};

/// One kind of reply check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReplyCheck {
    /// The reply only repeats the customer's latest message.
    Echo,
    /// The reply is word for word a message the agent already sent.
    Repeated,
    /// The reply speaks as the customer: asks for what the customer asked, or calls the
    /// customer's things its own.
    CustomerVoice,
    /// The reply states a figure (amount, temperature, time, date, number) that no tool
    /// result, variable, glossary term, instruction or message gave.
    InventedFact,
    /// The reply is not in the agent's language (or the customer's, for an agent that
    /// follows the customer).
    WrongLanguage,
    /// The reply says the agent cannot help or has no data, although every tool call of the
    /// turn returned data, and it repeats none of it.
    DeniesToolResult,
    /// The turn waits on details only the customer can give (a tool cannot run without
    /// them), and the reply asks no question: the customer is left with nothing to answer.
    Unasked,
    /// A lookup of the turn was lost (its service failed, timed out or could not be reached)
    /// and the reply does not say that something could not be done: it would pass for an
    /// answer.
    HidesFailedLookup,
    /// The reply gives a figure of an earlier answer about something the customer named
    /// before to what the customer's latest message names instead, when nothing of this turn
    /// gave that figure: Shanghai's 20°C said of Beijing after "And Beijing?".
    BorrowedFact,
}

impl ReplyCheck {
    /// Every check.
    pub const ALL: [ReplyCheck; 9] = [
        ReplyCheck::Echo,
        ReplyCheck::Repeated,
        ReplyCheck::CustomerVoice,
        ReplyCheck::InventedFact,
        ReplyCheck::WrongLanguage,
        ReplyCheck::DeniesToolResult,
        ReplyCheck::Unasked,
        ReplyCheck::HidesFailedLookup,
        ReplyCheck::BorrowedFact,
    ];

    /// The check's name as written in scenarios and traces (`customer_voice`).
    pub fn name(self) -> &'static str {
        match self {
            ReplyCheck::Echo => "echo",
            ReplyCheck::Repeated => "repeated",
            ReplyCheck::CustomerVoice => "customer_voice",
            ReplyCheck::InventedFact => "invented_fact",
            ReplyCheck::WrongLanguage => "wrong_language",
            ReplyCheck::DeniesToolResult => "denies_tool_result",
            ReplyCheck::Unasked => "unasked",
            ReplyCheck::HidesFailedLookup => "hides_failed_lookup",
            ReplyCheck::BorrowedFact => "borrowed_fact",
        }
    }
}

/// A problem found in a reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyProblem {
    /// The check that found it.
    pub check: ReplyCheck,
    /// What in the reply shows it (the phrase, the figure, the language found).
    pub evidence: String,
}

impl ReplyProblem {
    fn new(check: ReplyCheck, evidence: impl Into<String>) -> Self {
        Self { check, evidence: evidence.into() }
    }

    /// Why the reply was refused, addressed to the model that wrote it.
    pub fn explanation(&self) -> String {
        match self.check {
            ReplyCheck::Echo => "it only repeats the customer's words.".to_string(),
            ReplyCheck::Repeated => "you already sent exactly this earlier; the conversation has moved on.".to_string(),
            ReplyCheck::CustomerVoice => format!(
                "it speaks as the customer (\"{}\"). You are the agent: answer the customer, do not ask what they asked.",
                self.evidence
            ),
            ReplyCheck::InventedFact => format!(
                "it states {}, which no tool result, instruction or message gave you. State only facts you were given; if you do not have them, say so.",
                self.evidence
            ),
            ReplyCheck::WrongLanguage => format!("it is not written in {}.", self.evidence),
            ReplyCheck::DeniesToolResult => format!(
                "it says you cannot help or have no data (\"{}\"), but the tool call of this turn succeeded. Tell the customer what it returned.",
                self.evidence
            ),
            ReplyCheck::Unasked => format!(
                "it asks the customer nothing, but nothing can be done before they give: {}. End the reply with a question asking for it.",
                self.evidence
            ),
            ReplyCheck::HidesFailedLookup => format!(
                "the lookup {} failed this turn (its service did not answer properly), but the reply reads as if it had worked. Tell the customer you could not look it up right now; state nothing it would have returned.",
                self.evidence
            ),
            ReplyCheck::BorrowedFact => format!(
                "it states {}: that figure was given for something else earlier in the conversation, and nothing this turn gave it for what the customer now asks about. Do not reuse it; say you do not have that information yet.",
                self.evidence
            ),
        }
    }
}

impl std::fmt::Display for ReplyProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.check {
            ReplyCheck::Echo => write!(f, "echo: repeats the customer's message"),
            ReplyCheck::Repeated => write!(f, "repeated: an earlier agent message word for word"),
            ReplyCheck::CustomerVoice => write!(f, "customer_voice: speaks as the customer (\"{}\")", self.evidence),
            ReplyCheck::InventedFact => write!(f, "invented_fact: states {} from nowhere", self.evidence),
            ReplyCheck::WrongLanguage => write!(f, "wrong_language: not in {}", self.evidence),
            ReplyCheck::DeniesToolResult => {
                write!(f, "denies_tool_result: says \"{}\" although the tool returned data", self.evidence)
            }
            ReplyCheck::Unasked => write!(f, "unasked: asks nothing although it needs {}", self.evidence),
            ReplyCheck::HidesFailedLookup => {
                write!(f, "hides_failed_lookup: does not say that {} could not be looked up", self.evidence)
            }
            ReplyCheck::BorrowedFact => {
                write!(f, "borrowed_fact: states {}, a figure given earlier for something else", self.evidence)
            }
        }
    }
}

/// What a reply is checked against.
#[derive(Debug, Clone, Copy)]
pub struct ReplyContext<'a> {
    /// The conversation before the reply, as (speaker, text): `customer`, `agent`, or
    /// another speaker.
    pub history: &'a [(String, String)],
    /// What the reply's facts may come from (add the conversation's texts too).
    pub grounding: &'a Grounding,
    /// The agent's language setting: a code, or `None` (or `customer`) to follow the
    /// customer.
    pub language: Option<&'a str>,
    /// The checks to run.
    pub checks: &'a [ReplyCheck],
    /// What the customer must be asked for before the turn's action can be taken (the
    /// details a tool is missing), as the reply prompt names them; empty when nothing waits.
    pub must_ask: &'a [String],
    /// The tools whose calls this turn were lost (the service failed, timed out or could not
    /// be reached): the reply must say something could not be done.
    pub failed_lookups: &'a [String],
}

impl ReplyContext<'_> {
    fn last_customer(&self) -> Option<&str> {
        self.history.iter().rev().find(|(who, _)| who == "customer").map(|(_, t)| t.as_str())
    }

    /// The language the reply must be in: the agent's, or that of the customer's latest
    /// message whose language can be told.
    fn expected(&self) -> Option<Expected<'_>> {
        match self.language.filter(|l| *l != "customer") {
            Some(code) => Some(Expected::Agents(code)),
            None => self
                .history
                .iter()
                .rev()
                .filter(|(who, _)| who == "customer")
                .find_map(|(_, text)| detect_language(text))
                .map(Expected::Customers),
        }
    }

    /// The code of the language the reply must be in (see [`ReplyCheck::WrongLanguage`]).
    pub fn expected_language(&self) -> Option<String> {
        self.expected().map(|e| e.code().to_string())
    }
}

/// The language a reply must be in.
enum Expected<'a> {
    /// The agent's fixed language, a code as written in the definition.
    Agents(&'a str),
    /// The customer's, as detected.
    Customers(LanguageCode),
}

impl Expected<'_> {
    fn code(&self) -> &str {
        match self {
            Self::Agents(code) => code,
            Self::Customers(code) => code,
        }
    }

    fn accepts(&self, found: LanguageCode) -> bool {
        match self {
            Self::Agents(code) => matches_language(code, found),
            Self::Customers(code) => language::same_language(found, code),
        }
    }
}

/// Whether `reply` ends with sentences whose letters are `last` (the customer's message,
/// as [`voice::letters`] reads it): "Sure! What is the weather in Shanghai?" repeats the
/// customer's question after words of its own, but "Where are you going from 221 Baker
/// Street?" asks the next question about the customer's answer ("From 221 Baker Street.").
fn ends_with_sentences(reply: &str, last: &str) -> bool {
    let ends = |c: char| matches!(c, '.' | '!' | '?' | '。' | '！' | '？' | '；' | ';' | '\n');
    std::iter::once(0)
        .chain(reply.char_indices().filter(|(_, c)| ends(*c)).map(|(i, c)| i + c.len_utf8()))
        .any(|start| voice::letters(&reply[start..]) == last)
}

/// `reply` without the sentences at its opening that only say again what the customer just
/// wrote ("Hello! I need a taxi. Can you give me the pickup address?" after "Hello, I need a
/// taxi."), when something of the agent's own follows them (more than a greeting or an
/// acknowledgement); `None` when no opening sentence repeats the customer, when one comes
/// after words of the agent's own (a reply that ends with the customer's question has not
/// answered it), or when nothing would be left. Small models often open a reply by restating
/// the request in the customer's voice, the rest of the reply being right: the reply is kept
/// without it, provided it then passes every check ([`check_reply`]), instead of being asked
/// for again.
pub fn without_customers_words(reply: &str, context: &ReplyContext<'_>) -> Option<String> {
    let customer = voice::letters(context.last_customer()?);
    let ends = |c: char| matches!(c, '.' | '!' | '?' | '。' | '！' | '？' | '；' | ';' | '\n');
    let mut sentences = Vec::new();
    let mut start = 0;
    for (i, c) in reply.char_indices() {
        if ends(c) {
            sentences.push(&reply[start..i + c.len_utf8()]);
            start = i + c.len_utf8();
        }
    }
    sentences.push(&reply[start..]);
    // More than a greeting or a word or two ("OK.", "好的。").
    let says = |sentence: &str| {
        let own = voice::letters(sentence);
        own.chars().count() >= 8 || own.chars().filter(|c| voice::is_dense_script(*c)).count() >= 4
    };
    // A sentence of the customer's: its words all in the customer's message, in order.
    let repeats = |sentence: &str| {
        says(sentence) && !voice::is_greeting(&sentence.to_lowercase()) && customer.contains(&voice::letters(sentence))
    };
    // Only the opening restates: a reply that says the customer's words after words of its
    // own (a question repeated at its end) has not answered it, and is not mended.
    let mut kept = Vec::new();
    let (mut removed, mut own) = (false, false);
    for sentence in sentences {
        if repeats(sentence) {
            if own {
                return None;
            }
            removed = true;
        } else {
            own |= says(sentence) && !voice::is_greeting(&sentence.to_lowercase());
            kept.push(sentence);
        }
    }
    let mended = kept.concat().trim().to_string();
    (removed && own && check_reply(&mended, context).is_empty()).then_some(mended)
}

/// The problems of `reply`, in the order of [`ReplyCheck::ALL`]; empty when it passes.
pub fn check_reply(reply: &str, context: &ReplyContext<'_>) -> Vec<ReplyProblem> {
    let mut problems = Vec::new();
    let runs = |check: ReplyCheck| context.checks.contains(&check);
    let reply_letters = voice::letters(reply);
    if reply_letters.is_empty() {
        return problems;
    }
    let last_customer = context.last_customer();
    if runs(ReplyCheck::Echo)
        && let Some(last) = last_customer.map(voice::letters)
        && !last.is_empty()
        && (reply_letters == last || (last.chars().count() >= 6 && ends_with_sentences(reply, &last)))
    {
        problems.push(ReplyProblem::new(ReplyCheck::Echo, reply.trim()));
    }
    if runs(ReplyCheck::Repeated)
        && context.history.iter().any(|(who, text)| who != "customer" && voice::letters(text) == reply_letters)
    {
        problems.push(ReplyProblem::new(ReplyCheck::Repeated, reply.trim()));
    }
    if runs(ReplyCheck::CustomerVoice)
        && let Some(evidence) = voice::customer_request(reply, last_customer)
            .or_else(|| voice::restated_sentence(reply, last_customer))
            .or_else(|| voice::customer_possession(reply, context.history))
    {
        problems.push(ReplyProblem::new(ReplyCheck::CustomerVoice, evidence));
    }
    if runs(ReplyCheck::InventedFact) {
        let mut grounding = context.grounding.clone();
        for (_, text) in context.history {
            grounding.add_text(text);
        }
        let invented = facts::ungrounded(reply, &grounding);
        if !invented.is_empty() {
            problems.push(ReplyProblem::new(ReplyCheck::InventedFact, invented.join(", ")));
        }
    }
    if runs(ReplyCheck::WrongLanguage)
        && let Some(expected) = context.expected()
        && let Some(found) = detect_language(reply)
        && !expected.accepts(found)
    {
        problems.push(ReplyProblem::new(ReplyCheck::WrongLanguage, language_name(expected.code())));
    }
    if runs(ReplyCheck::DeniesToolResult)
        && let Some(phrase) = denial::denies(reply, context.grounding.turn_results(), last_customer)
    {
        problems.push(ReplyProblem::new(ReplyCheck::DeniesToolResult, phrase));
    }
    if runs(ReplyCheck::Unasked) && !context.must_ask.is_empty() && !asks_a_question(reply) {
        problems.push(ReplyProblem::new(ReplyCheck::Unasked, context.must_ask.join(", ")));
    }
    if runs(ReplyCheck::HidesFailedLookup) && !context.failed_lookups.is_empty() && !denial::admits_failure(reply) {
        problems.push(ReplyProblem::new(ReplyCheck::HidesFailedLookup, context.failed_lookups.join(", ")));
    }
    if runs(ReplyCheck::BorrowedFact) {
        let borrowed = facts::borrowed(reply, context.grounding, context.history);
        if !borrowed.is_empty() {
            problems.push(ReplyProblem::new(ReplyCheck::BorrowedFact, borrowed.join(", ")));
        }
    }
    problems
}

/// Polite requests that ask for something without a question mark ("Please tell me the city.",
/// "请告诉我你要查询的城市。"), in the languages Guidepost's checks know, lowercase.
const REQUESTS: &[&str] = &[
    "please tell",
    "please let me know",
    "let me know",
    "please provide",
    "please share",
    "please give",
    "please send",
    "please specify",
    "please confirm",
    "please enter",
    "tell me which",
    "tell me what",
    "tell me where",
    "tell me when",
    "请告诉",
    "告诉我",
    "请提供",
    "请问",
    "请说",
    "请输入",
    "请确认",
    "请指定",
    "麻烦告诉",
    "por favor, indique",
    "por favor indique",
    "dígame",
    "indíqueme",
    "merci de préciser",
    "merci d'indiquer",
    "veuillez",
    "indiquez-moi",
    "bitte nennen sie",
    "bitte geben sie",
    "bitte teilen sie",
];

/// Whether `text` asks something: a question mark of any script (`?`, the full-width `？`,
/// the Arabic `؟`, the Greek `;`, the Spanish opening `¿`), or a polite request for it
/// ([`REQUESTS`]).
fn asks_a_question(text: &str) -> bool {
    if text.chars().any(|c| matches!(c, '?' | '？' | '؟' | '\u{037E}' | '¿' | '⸮')) {
        return true;
    }
    let lower = text.to_lowercase();
    REQUESTS.iter().any(|r| lower.contains(r))
}

/// The reply sent when no composed reply passed the checks: the agent's `fallback_reply`, or
/// a short apology in `language` (English when it has none).
pub fn fallback_reply(agent: &crate::Agent, language: Option<&str>) -> String {
    if let Some(text) = &agent.fallback_reply {
        return text.clone();
    }
    match language.map(primary_subtag).as_deref() {
        Some("zh") => "抱歉，我现在没法给您一个可靠的答复。能换个说法再问一次吗？",
        Some("ja") => "申し訳ありません、今は確かなお答えができません。別の言い方でもう一度お願いできますか？",
        Some("fr") => "Désolé, je ne peux pas vous donner de réponse fiable pour le moment. Pourriez-vous reformuler ?",
        Some("de") => "Entschuldigung, darauf kann ich gerade keine verlässliche Antwort geben. Könnten Sie es anders formulieren?",
        Some("es") => "Lo siento, ahora no puedo darle una respuesta fiable. ¿Podría decirlo de otra manera?",
        Some("pt") => "Desculpe, não consigo dar uma resposta confiável agora. Poderia dizer de outra forma?",
        _ => "Sorry, I can't give you a reliable answer to that right now. Could you put it another way?",
    }
    .to_string()
}

/// The reply sent in strict composition when no approved template fits the message: the
/// agent's `no_match_reply`, or a request to say it another way in `language` (English when
/// it has none, or none of these).
pub fn no_match_reply(agent: &crate::Agent, language: Option<&str>) -> String {
    if let Some(text) = &agent.no_match_reply {
        return text.clone();
    }
    match language.map(primary_subtag).as_deref() {
        Some("zh") => "抱歉，我没太明白您的意思。能换个说法吗？",
        Some("ja") => "申し訳ありません、よく分かりませんでした。別の言い方でお願いできますか？",
        Some("fr") => "Désolé, je ne suis pas sûr d'avoir compris. Pourriez-vous le dire autrement ?",
        Some("de") => "Entschuldigung, ich bin nicht sicher, ob ich das verstanden habe. Könnten Sie es anders sagen?",
        Some("es") => "Lo siento, no estoy seguro de haberle entendido. ¿Podría decirlo de otra manera?",
        Some("pt") => "Desculpe, não tenho certeza se entendi. Poderia dizer de outra forma?",
        _ => "Sorry, I'm not sure I understood. Could you say that another way?",
    }
    .to_string()
}

/// The reply sent when a consequential tool call's outcome is lost and the call was not
/// sent again (its service cannot tell a repeat from a new call): it says the request went
/// out, that its outcome is being checked, and asks the customer not to send it again, in
/// `language` (English when it has none). Nothing the model writes goes out instead: it
/// might say the request succeeded, or failed.
pub fn outcome_check_reply(language: Option<&str>) -> String {
    match language.map(primary_subtag).as_deref() {
        Some("zh") => "您的请求已经发出，但我还无法确认是否成功。我们正在核实，请不要重复提交。",
        Some("ja") => "ご依頼は送信しましたが、完了したかどうかをまだ確認できていません。現在確認中ですので、もう一度送信しないでください。",
        Some("fr") => "Votre demande a été envoyée, mais je ne peux pas encore confirmer qu'elle a abouti. Nous vérifions ce qui s'est passé ; merci de ne pas la renvoyer.",
        Some("de") => "Ihre Anfrage wurde gesendet, aber ich kann noch nicht bestätigen, ob sie ausgeführt wurde. Wir prüfen das gerade, bitte senden Sie sie nicht noch einmal.",
        Some("es") => "Su solicitud se envió, pero todavía no puedo confirmar si se completó. Estamos comprobando lo ocurrido; por favor, no la envíe de nuevo.",
        Some("pt") => "Seu pedido foi enviado, mas ainda não consigo confirmar se foi concluído. Estamos verificando o que aconteceu; por favor, não o envie novamente.",
        _ => "Your request was sent, but I can't confirm yet whether it went through. We're checking what happened, so please don't send it again.",
    }
    .to_string()
}

/// What a customer is told when their message could not be answered at all (a turn that
/// failed): that something went wrong and they may try again, in `language` (English when
/// there is none, or none of these). What went wrong is for the turn's trace and the log.
pub fn failure_notice(language: Option<&str>) -> String {
    match language.map(primary_subtag).as_deref() {
        Some("zh") => "抱歉，处理您的消息时出错了，请稍后再试。",
        Some("ja") => "申し訳ありません、メッセージの処理中にエラーが発生しました。しばらくしてからもう一度お試しください。",
        Some("fr") => "Désolé, une erreur est survenue pendant le traitement de votre message. Veuillez réessayer dans un instant.",
        Some("de") => "Entschuldigung, bei der Bearbeitung Ihrer Nachricht ist ein Fehler aufgetreten. Bitte versuchen Sie es gleich noch einmal.",
        Some("es") => "Lo siento, se produjo un error al procesar su mensaje. Inténtelo de nuevo en un momento.",
        Some("pt") => "Desculpe, ocorreu um erro ao processar sua mensagem. Tente novamente em instantes.",
        _ => "Sorry, something went wrong while answering your message. Please try again in a moment.",
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(s, t)| (s.to_string(), t.to_string())).collect()
    }

    /// `f` with every check on, no grounding, nothing to ask.
    fn in_context<T>(
        history: &[(String, String)],
        language: Option<&str>,
        f: impl FnOnce(&ReplyContext<'_>) -> T,
    ) -> T {
        let grounding = Grounding::new();
        let context = ReplyContext {
            history,
            grounding: &grounding,
            language,
            checks: &ReplyCheck::ALL,
            must_ask: &[],
            failed_lookups: &[],
        };
        f(&context)
    }

    fn kinds(reply: &str, history: &[(String, String)], language: Option<&str>) -> Vec<ReplyCheck> {
        in_context(history, language, |context| check_reply(reply, context).into_iter().map(|p| p.check).collect())
    }

    fn mended(reply: &str, history: &[(String, String)], language: Option<&str>) -> Option<String> {
        in_context(history, language, |context| without_customers_words(reply, context))
    }

    #[test]
    fn the_no_match_reply_is_the_agents_own_or_in_the_replys_language() {
        let mut agent = crate::builder::AgentBuilder::new("Tian").build().unwrap().agent;
        assert_eq!(no_match_reply(&agent, Some("zh-CN")), "抱歉，我没太明白您的意思。能换个说法吗？");
        assert!(no_match_reply(&agent, None).starts_with("Sorry"));
        agent.no_match_reply = Some("Only balances, sorry.".into());
        assert_eq!(no_match_reply(&agent, Some("zh")), "Only balances, sorry.");
    }

    #[test]
    fn a_reply_that_opens_with_the_customers_request_is_kept_without_it() {
        let h = history(&[("customer", "Hello, I need a taxi.")]);
        let reply = "Hello! I need a taxi. Can you please provide me with the pickup address?";
        assert_eq!(kinds(reply, &h, None), [ReplyCheck::CustomerVoice]);
        assert_eq!(
            mended(reply, &h, None).as_deref(),
            Some("Hello! Can you please provide me with the pickup address?")
        );
        // In Chinese, and where the repeated sentence is not the first.
        let zh = history(&[("customer", "你好，我想查一下北京的天气")]);
        assert_eq!(
            mended("好的。我想查一下北京的天气。请稍等，我马上为您查询。", &zh, Some("zh")).as_deref(),
            Some("好的。请稍等，我马上为您查询。")
        );
        // Nothing of the agent's own left: no mended reply.
        assert_eq!(mended("Sure! I need a taxi.", &h, None), None);
        let where_to =
            history(&[("agent", "Where should the driver pick you up?"), ("customer", "From 221 Baker Street.")]);
        assert_eq!(mended("Got it. From 221 Baker Street.", &where_to, None), None);
        let morning = history(&[("customer", "Good morning, I need a taxi.")]);
        assert_eq!(
            mended("Good morning! I need a taxi. Where should the driver pick you up?", &morning, None).as_deref(),
            Some("Good morning! Where should the driver pick you up?")
        );
        // The customer's question repeated after words of its own: not answered, not mended.
        let fund = history(&[("customer", "Which fund should I put that money in?")]);
        assert_eq!(mended("Your balance is 15000 USD. Which fund should I put that money in?", &fund, None), None);
        // A reply that repeats no sentence of the customer's is not touched.
        assert_eq!(mended("Where would you like to go?", &h, None), None);
        // Left with a problem of its own, the reply is not mended either.
        assert_eq!(mended(reply, &h, Some("zh")), None, "an English reply from an agent that speaks Chinese");
    }

    #[test]
    fn a_question_about_the_customers_answer_is_no_echo_of_it() {
        let h = history(&[("agent", "Where should the driver pick you up?"), ("customer", "From 221 Baker Street.")]);
        assert!(kinds("Where are you going from 221 Baker Street?", &h, None).is_empty());
        assert_eq!(kinds("Got it. From 221 Baker Street.", &h, None), [ReplyCheck::Echo]);
        let zh = history(&[("customer", "北京天气怎么样？")]);
        assert_eq!(kinds("好的！北京天气怎么样？", &zh, Some("zh")), [ReplyCheck::Echo]);
    }

    #[test]
    fn each_check_catches_its_kind_of_bad_reply() {
        let h = history(&[("customer", "What is the weather in Shanghai?"), ("agent", "Which day?")]);
        assert_eq!(kinds("What is the weather in Shanghai?", &h, None), [ReplyCheck::Echo]);
        assert_eq!(kinds("Sure! What is the weather in Shanghai?", &h, None), [ReplyCheck::Echo]);
        assert_eq!(kinds("Which day?", &h, None), [ReplyCheck::Repeated]);
        assert_eq!(kinds("I want to know the weather in Shanghai.", &h, None), [ReplyCheck::CustomerVoice]);
        assert_eq!(kinds("It is 31 degrees in Shanghai.", &h, None), [ReplyCheck::InventedFact]);
        assert_eq!(kinds("上海今天多云。", &h, None), [ReplyCheck::WrongLanguage]);
        assert_eq!(kinds("Shanghai is cloudy today.", &h, Some("zh")), [ReplyCheck::WrongLanguage]);
        assert!(kinds("Shanghai is cloudy today.", &h, None).is_empty());
        assert!(kinds("上海今天多云。", &h, Some("zh-CN")).is_empty());
    }

    fn denial_kinds(reply: &str, results: &[(bool, serde_json::Value)]) -> Vec<ReplyCheck> {
        let h = history(&[
            ("customer", "Paris?"),
            ("agent", "抱歉，暂时没有该城市的天气数据。"),
            ("customer", "And in Beijing?"),
        ]);
        let mut grounding = Grounding::new();
        for (ok, result) in results {
            grounding.add_tool_result(*ok, &serde_json::json!({"location": "Beijing"}), result);
        }
        let context = ReplyContext {
            history: &h,
            grounding: &grounding,
            language: Some("zh"),
            checks: &ReplyCheck::ALL,
            must_ask: &[],
            failed_lookups: &[],
        };
        check_reply(reply, &context).into_iter().map(|p| p.check).collect()
    }

    #[test]
    fn a_reply_that_asks_nothing_while_a_detail_is_missing_is_caught() {
        let h = history(&[("customer", "你好，我想查一下天气")]);
        let grounding = Grounding::new();
        let must_ask = vec!["location".to_string()];
        let kinds = |reply: &str, must_ask: &[String]| -> Vec<ReplyCheck> {
            let context = ReplyContext {
                history: &h,
                grounding: &grounding,
                language: Some("zh"),
                checks: &ReplyCheck::ALL,
                must_ask,
                failed_lookups: &[],
            };
            check_reply(reply, &context).into_iter().map(|p| p.check).collect()
        };
        let greeting_only = "你好，我是天气助手，可以查询北京、上海、广州等城市的天气。";
        assert_eq!(kinds(greeting_only, &must_ask), [ReplyCheck::Unasked]);
        assert!(kinds("你好！你想查哪个城市的天气？", &must_ask).is_empty());
        // A polite request asks as well as a question does.
        assert!(kinds("我可以查询北京、上海等城市的天气。请告诉我你要查询的城市。", &must_ask).is_empty());
        assert!(
            kinds("I can look it up. Please tell me the city.", &must_ask).iter().all(|c| *c != ReplyCheck::Unasked)
        );
        assert!(kinds("Which city would you like?", &must_ask).iter().all(|c| *c != ReplyCheck::Unasked));
        // Nothing missing: a reply may well ask nothing.
        assert!(kinds(greeting_only, &[]).is_empty());
        let problem = ReplyProblem::new(ReplyCheck::Unasked, "location");
        assert!(problem.explanation().contains("location"), "{}", problem.explanation());
    }

    #[test]
    fn a_reply_denying_a_successful_lookup_is_caught() {
        let beijing = serde_json::json!({"data": {"city": "北京", "temperature": 15, "condition": "晴朗"}});
        // Naming the city (the result's `city`, echoing the question) tells nothing.
        let denial = "对不起，我无法提供北京的天气信息。可以查询其他城市。";
        assert_eq!(denial_kinds(denial, &[(true, beijing.clone())]), [ReplyCheck::DeniesToolResult]);
        // Telling the result, even with an apology beside it, passes.
        assert!(denial_kinds("北京现在晴朗，15°C。抱歉，无法查询明天的天气。", &[(true, beijing.clone())]).is_empty());
        // A failed call, or a result that found nothing, makes the apology right.
        assert!(
            denial_kinds(denial, &[(true, beijing.clone()), (false, serde_json::json!({"error": "down"}))]).is_empty()
        );
        assert!(denial_kinds(denial, &[(true, serde_json::json!({"data": {"cities": []}}))]).is_empty());
        // No tool this turn: nothing to deny.
        assert!(denial_kinds(denial, &[]).is_empty());
    }

    #[test]
    fn a_reply_that_passes_a_lost_lookup_off_as_an_answer_is_caught() {
        let h = history(&[("customer", "Is my order 42 on its way?")]);
        let grounding = Grounding::new();
        let lost = vec!["track_order".to_string()];
        let kinds = |reply: &str, failed_lookups: &[String]| -> Vec<ReplyCheck> {
            let context = ReplyContext {
                history: &h,
                grounding: &grounding,
                language: None,
                checks: &ReplyCheck::ALL,
                must_ask: &[],
                failed_lookups,
            };
            check_reply(reply, &context).into_iter().map(|p| p.check).collect()
        };
        assert_eq!(kinds("Everything looks fine with your order!", &lost), [ReplyCheck::HidesFailedLookup]);
        assert!(kinds("Sorry, I couldn't check your order right now. Please try again later.", &lost).is_empty());
        assert!(kinds("Our order system had a problem; please try again in a few minutes.", &lost).is_empty());
        assert!(kinds("Everything looks fine with your order!", &[]).is_empty(), "nothing was lost");
        let h = history(&[("customer", "我的订单到哪了？")]);
        let context = ReplyContext {
            history: &h,
            grounding: &grounding,
            language: Some("zh"),
            checks: &ReplyCheck::ALL,
            must_ask: &[],
            failed_lookups: &lost,
        };
        assert!(check_reply("抱歉，订单系统暂时出错，查询失败了。", &context).is_empty());
        assert_eq!(check_reply("您的订单一切正常。", &context)[0].check, ReplyCheck::HidesFailedLookup);
        // The fallback replies admit it, in every language they are written in.
        let agent = crate::builder::AgentBuilder::new("A").build().unwrap().agent;
        for language in ["en", "zh", "ja", "fr", "de", "es", "pt"] {
            let fallback = fallback_reply(&agent, Some(language));
            assert!(denial::admits_failure(&fallback), "{language}: {fallback}");
        }
    }

    #[test]
    fn the_customers_language_is_their_latest_telling_message() {
        let h = history(&[("customer", "上海的天气怎么样？"), ("agent", "今天多云。"), ("customer", "OK")]);
        assert!(kinds("还有什么可以帮您？", &h, None).is_empty());
        assert_eq!(kinds("Anything else I can do for you?", &h, None), [ReplyCheck::WrongLanguage]);
    }

    #[test]
    fn the_fallback_speaks_the_agents_language() {
        let mut agent = crate::builder::AgentBuilder::new("Tian").build().unwrap().agent;
        assert!(fallback_reply(&agent, Some("zh-CN")).starts_with("抱歉"));
        assert!(fallback_reply(&agent, None).starts_with("Sorry"));
        agent.fallback_reply = Some("One moment, a colleague will help.".into());
        assert_eq!(fallback_reply(&agent, Some("zh")), "One moment, a colleague will help.");
    }
}
