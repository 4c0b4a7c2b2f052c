//! Which language a text is written in, as far as a reply check needs to know.
//!
//! Scripts tell most languages apart on their own (Han, kana, Hangul, Cyrillic, Arabic, ...);
//! among the languages written in Latin letters, the most frequent function words decide, and
//! a text that names none of them confidently is left undecided rather than guessed.

/// A detected language: a lowercase code (`zh`, `ja`, `en`, `fr`, ...), or a script family
/// when the script is known but not the language (`latin`, `cyrillic`).
pub type LanguageCode = &'static str;

/// Whether `code` looks like a language code: a 2–3 letter primary subtag, optionally
/// followed by subtags (`zh`, `en`, `pt-BR`, `zh-Hans-CN`).
pub fn is_language_code(code: &str) -> bool {
    let mut parts = code.split('-');
    let primary_ok =
        parts.next().is_some_and(|p| (2..=3).contains(&p.len()) && p.chars().all(|c| c.is_ascii_alphabetic()));
    primary_ok && parts.all(|p| (2..=8).contains(&p.len()) && p.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// The primary subtag of a language code, lowercased (`pt-BR` → `pt`).
pub fn primary_subtag(code: &str) -> String {
    code.split(['-', '_']).next().unwrap_or_default().to_ascii_lowercase()
}

#[derive(Debug, Default)]
struct ScriptCounts {
    han: usize,
    kana: usize,
    hangul: usize,
    cyrillic: usize,
    arabic: usize,
    hebrew: usize,
    greek: usize,
    thai: usize,
    devanagari: usize,
    /// Latin-script words (a word weighs about as much as one Han character).
    latin_words: usize,
}

fn count_scripts(text: &str) -> ScriptCounts {
    let mut counts = ScriptCounts::default();
    let mut in_latin_word = false;
    for c in text.chars() {
        let latin = c.is_ascii_alphabetic() || (('\u{00C0}'..='\u{024F}').contains(&c) && c.is_alphabetic());
        if latin && !in_latin_word {
            counts.latin_words += 1;
        }
        in_latin_word = latin;
        match c {
            '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}' | '\u{F900}'..='\u{FAFF}' => counts.han += 1,
            '\u{3040}'..='\u{30FF}' => counts.kana += 1,
            '\u{AC00}'..='\u{D7AF}' | '\u{1100}'..='\u{11FF}' => counts.hangul += 1,
            '\u{0400}'..='\u{04FF}' => counts.cyrillic += 1,
            '\u{0600}'..='\u{06FF}' => counts.arabic += 1,
            '\u{0590}'..='\u{05FF}' => counts.hebrew += 1,
            '\u{0370}'..='\u{03FF}' => counts.greek += 1,
            '\u{0E00}'..='\u{0E7F}' => counts.thai += 1,
            '\u{0900}'..='\u{097F}' => counts.devanagari += 1,
            _ => {}
        }
    }
    counts
}

/// Frequent function words of the Latin-script languages told apart.
const FUNCTION_WORDS: &[(LanguageCode, &[&str])] = &[
    (
        "en",
        &[
            "the", "and", "is", "are", "you", "your", "to", "of", "in", "for", "it", "what", "with", "can", "i",
            "this", "that", "please", "would", "will", "have", "not", "do", "my", "me", "be", "we", "our", "a",
        ],
    ),
    (
        "fr",
        &[
            "le", "la", "les", "et", "est", "vous", "votre", "de", "des", "du", "pour", "une", "un", "je", "ce", "que",
            "pas", "avec", "sur", "mon", "nous", "il", "bonjour", "merci",
        ],
    ),
    (
        "de",
        &[
            "der", "die", "das", "und", "ist", "sie", "ihr", "ihre", "zu", "von", "mit", "für", "ich", "nicht", "ein",
            "eine", "wir", "auf", "bitte", "danke", "wie", "mein",
        ],
    ),
    (
        "es",
        &[
            "el", "los", "las", "y", "es", "usted", "su", "para", "con", "una", "yo", "que", "por", "mi", "hola",
            "gracias", "está", "cómo", "del",
        ],
    ),
    (
        "pt",
        &[
            "o", "os", "as", "e", "é", "você", "seu", "sua", "para", "com", "uma", "eu", "que", "não", "meu", "olá",
            "obrigado", "do", "da", "em",
        ],
    ),
    (
        "it",
        &[
            "il", "gli", "e", "è", "lei", "suo", "per", "con", "una", "io", "che", "non", "mio", "ciao", "grazie",
            "della", "sono",
        ],
    ),
    (
        "nl",
        &[
            "de", "het", "een", "en", "is", "u", "uw", "voor", "met", "ik", "niet", "dat", "mijn", "wij", "graag",
            "dank",
        ],
    ),
];

fn latin_language(text: &str) -> Option<LanguageCode> {
    let words: Vec<String> = text
        .split(|c: char| !(c.is_alphabetic() || c == '\''))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut scores: Vec<(LanguageCode, usize)> = FUNCTION_WORDS
        .iter()
        .map(|(code, list)| (*code, words.iter().filter(|w| list.contains(&w.as_str())).count()))
        .collect();
    scores.sort_by_key(|s| std::cmp::Reverse(s.1));
    match scores.as_slice() {
        [(code, best), (_, second), ..] if *best >= 2 && *best >= second * 2 => Some(code),
        _ => None,
    }
}

/// The language of `text`, when it can be told with confidence; `None` for text too short or
/// too mixed to tell (a lone "OK", a city name).
///
/// ```
/// use guidepost_core::reply_check::detect_language;
/// assert_eq!(detect_language("上海今天多云，气温20度。"), Some("zh"));
/// assert_eq!(detect_language("The weather in Shanghai is cloudy today."), Some("en"));
/// assert_eq!(detect_language("OK"), None);
/// ```
pub fn detect_language(text: &str) -> Option<LanguageCode> {
    let c = count_scripts(text);
    let cjk = c.han + c.kana;
    let scripts: [(LanguageCode, usize); 9] = [
        (if c.kana * 10 >= cjk.max(1) && c.kana > 0 { "ja" } else { "zh" }, cjk),
        ("ko", c.hangul),
        ("cyrillic", c.cyrillic / 4),
        ("ar", c.arabic / 4),
        ("he", c.hebrew / 4),
        ("el", c.greek / 4),
        ("th", c.thai),
        ("hi", c.devanagari / 4),
        ("latin", c.latin_words),
    ];
    let total: usize = scripts.iter().map(|(_, n)| n).sum();
    let (code, best) = scripts.iter().copied().max_by_key(|(_, n)| *n)?;
    // Too little text, or no script clearly ahead.
    let enough = if code == "latin" { 3 } else { 2 };
    if best < enough || best * 10 < total * 6 {
        return None;
    }
    if code == "latin" { latin_language(text).or(Some("latin")) } else { Some(code) }
}

/// Whether a reply detected as `found` is in the language `expected` (a language code):
/// the same language, or the same script when only the script is known.
pub fn matches_language(expected: &str, found: LanguageCode) -> bool {
    let expected = primary_subtag(expected);
    match found {
        "latin" => !matches!(
            expected.as_str(),
            "zh" | "ja"
                | "ko"
                | "ru"
                | "uk"
                | "bg"
                | "sr"
                | "mk"
                | "be"
                | "kk"
                | "ar"
                | "fa"
                | "ur"
                | "he"
                | "el"
                | "th"
                | "hi"
                | "mr"
                | "ne"
        ),
        "cyrillic" => matches!(expected.as_str(), "ru" | "uk" | "bg" | "sr" | "mk" | "be" | "kk" | "mn"),
        "ar" => matches!(expected.as_str(), "ar" | "fa" | "ur"),
        "hi" => matches!(expected.as_str(), "hi" | "mr" | "ne"),
        // Chinese and Japanese share the Han characters; kana mark Japanese.
        "zh" => matches!(expected.as_str(), "zh" | "yue" | "ja"),
        other => expected == other,
    }
}

/// Whether two detected languages agree (for the customer's language).
pub(super) fn same_language(a: LanguageCode, b: LanguageCode) -> bool {
    a == b || (a == "latin" && matches_language(b, a)) || (b == "latin" && matches_language(a, b))
}

/// The human name of a language code, for notes to the model and messages.
pub fn language_name(code: &str) -> String {
    let name = match primary_subtag(code).as_str() {
        "zh" => "Chinese",
        "ja" => "Japanese",
        "ko" => "Korean",
        "en" => "English",
        "fr" => "French",
        "de" => "German",
        "es" => "Spanish",
        "pt" => "Portuguese",
        "it" => "Italian",
        "nl" => "Dutch",
        "ru" => "Russian",
        "uk" => "Ukrainian",
        "ar" => "Arabic",
        "he" => "Hebrew",
        "el" => "Greek",
        "th" => "Thai",
        "hi" => "Hindi",
        "cyrillic" => "a language written in Cyrillic",
        "latin" => "a language written in Latin letters",
        _ => return code.to_string(),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_and_latin_languages_are_told_apart() {
        assert_eq!(detect_language("你好，我想查询巴黎明天的天气。"), Some("zh"));
        assert_eq!(detect_language("東京の天気はどうですか"), Some("ja"));
        assert_eq!(detect_language("Bonjour, quel temps fait-il à Paris pour le week-end ?"), Some("fr"));
        assert_eq!(detect_language("Wie ist das Wetter in Berlin? Ich möchte es wissen."), Some("de"));
        assert_eq!(detect_language("Hi, what is the weather in Paris tomorrow?"), Some("en"));
        assert_eq!(detect_language("Погода в Москве"), Some("cyrillic"));
        // A Chinese reply naming a Latin-script city is still Chinese.
        assert_eq!(detect_language("抱歉，暂时不支持 Paris 的天气查询。可以查询：北京、上海。"), Some("zh"));
        assert_eq!(detect_language("Paris"), None);
        assert_eq!(detect_language("12 Oak Street"), None);
    }

    #[test]
    fn expected_languages_match_by_primary_subtag_and_script() {
        assert!(matches_language("zh-CN", "zh"));
        assert!(!matches_language("zh", "en"));
        assert!(!matches_language("zh", "latin"));
        assert!(matches_language("pt-BR", "pt"));
        assert!(matches_language("sv", "latin"));
        assert!(!matches_language("en", "fr"));
        assert!(is_language_code("pt-BR") && is_language_code("zh") && !is_language_code("Chinese!"));
    }
}
