//! Errors that point at the offending token.
//!
//! An ipfw command is usually typed once and fixed by eye, so an error says
//! what was expected, quotes what was found, and draws a caret under it, the
//! way a compiler would. A close misspelling of a keyword gets a suggestion.

use std::fmt;

/// What kind of mistake a [`ParseError`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The words do not follow the grammar (unknown keyword, missing value).
    Syntax,
    /// A well-formed value outside its allowed range.
    Range,
    /// A FreeBSD feature this build does not implement: an AQM, a scheduler
    /// type, a rule option or action.
    Unavailable,
    /// A file named by the command (a delay profile) could not be read or parsed.
    File,
}

/// A command that could not be parsed, with the position of the culprit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub kind: ErrorKind,
    /// The complete sentence, e.g. "expected `to`, found `in`".
    pub message: String,
    /// Byte offset of the culprit in `source` (its end when `found` is `None`).
    pub offset: usize,
    /// Byte length of the culprit (0 at end of line).
    pub len: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
    /// The nearest valid keyword, when one is close to what was typed.
    pub suggestion: Option<&'static str>,
    /// The command line the offsets refer to.
    pub source: String,
}

impl ParseError {
    pub(crate) fn new(
        kind: ErrorKind,
        message: impl Into<String>,
        source: &str,
        offset: usize,
        len: usize,
    ) -> Self {
        let offset = offset.min(source.len());
        let len = len.min(source.len() - offset);
        let column = source.get(..offset).map_or(offset, |s| s.chars().count()) + 1;
        ParseError {
            kind,
            message: message.into(),
            offset,
            len,
            column,
            suggestion: None,
            source: source.to_string(),
        }
    }

    pub(crate) fn with_suggestion(mut self, s: Option<&'static str>) -> Self {
        self.suggestion = s;
        self
    }

    /// The offending text, or `None` when the line ended too early.
    pub fn found(&self) -> Option<&str> {
        self.source
            .get(self.offset..self.offset + self.len)
            .filter(|s| !s.is_empty())
    }

    /// The source line with a caret line under the culprit, each indented by
    /// four spaces. Tabs are kept in the caret line so it stays aligned;
    /// other control characters are shown escaped (`\u{0}`), never raw, and
    /// the caret follows their escaped width.
    pub fn snippet(&self) -> String {
        let line: String = self.source.chars().map(shown).collect();
        let before = self.source.get(..self.offset).unwrap_or_default();
        let pad: String = before
            .chars()
            .map(|c| match c {
                '\t' => "\t".to_string(),
                c => " ".repeat(shown(c).chars().count()),
            })
            .collect();
        let width = self
            .source
            .get(self.offset..self.offset + self.len)
            .map_or(1, |s| {
                s.chars()
                    .map(|c| shown(c).chars().count())
                    .sum::<usize>()
                    .max(1)
            });
        format!("    {line}\n    {pad}{}", "^".repeat(width))
    }
}

/// A character of a source line as an error shows it: a line break as a
/// space, a tab as is, any other control character (a NUL, an escape that
/// would drive the terminal) escaped.
fn shown(c: char) -> String {
    match c {
        '\n' | '\r' => " ".to_string(),
        '\t' => "\t".to_string(),
        c if c.is_control() => c.escape_default().collect(),
        c => c.to_string(),
    }
}

/// A message with the control characters it quotes from the input escaped;
/// its own line breaks and tabs kept.
fn escaped(message: &str) -> std::borrow::Cow<'_, str> {
    if !message
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return message.into();
    }
    message
        .chars()
        .map(|c| match c {
            '\n' | '\t' => c.to_string(),
            c if c.is_control() => c.escape_default().collect(),
            c => c.to_string(),
        })
        .collect::<String>()
        .into()
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (column {})", escaped(&self.message), self.column)?;
        if let Some(s) = &self.suggestion {
            write!(f, "; did you mean `{s}`?")?;
        }
        write!(f, "\n{}", self.snippet())
    }
}

impl std::error::Error for ParseError {}

/// An error in a commands file: the 1-based line and what went wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {error}")]
pub struct FileError {
    pub line: usize,
    pub error: ParseError,
}

/// The JSON views' field names (`pipe show --json`, the HTTP API) and the
/// command language's keyword for each, so that one given where the other
/// is expected gets its "did you mean": `delay_ns` for `delay`, `bw` for
/// `bandwidth_bps`, and back.
pub const FIELD_NAMES: &[(&str, &str)] = &[
    ("bandwidth_bps", "bw"),
    ("bandwidth_bps", "bandwidth"),
    ("delay_ns", "delay"),
    ("burst_bytes", "burst"),
    ("limit_packets", "queue"),
    ("limit_bytes", "queue"),
    ("lmax_bytes", "lmax"),
    ("sched_type", "type"),
];

/// The candidate closest to `word` by edit distance, if it is close enough to
/// be a plausible typo. Transpositions count once (`form` is one step from
/// `from`), and the tolerance grows with the word so short words do not
/// attract unrelated suggestions; a very short word only completes a
/// keyword it starts (`ad` for `add`).
/// A word of one shape (a JSON view's field name, or the command
/// language's keyword) that names a candidate of the other shape counts
/// as its misspelling (see [`FIELD_NAMES`]).
pub fn suggest(word: &str, candidates: &[&'static str]) -> Option<&'static str> {
    let word = word.to_ascii_lowercase();
    if word.is_empty() || word.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let other = FIELD_NAMES.iter().find_map(|&(view, lang)| {
        let of = |a: &str, b: &'static str| (word == a && candidates.contains(&b)).then_some(b);
        of(view, lang).or_else(|| of(lang, view))
    });
    if other.is_some() {
        return other;
    }
    let tolerance = match word.chars().count() {
        0..=2 => 0,
        3..=4 => 1,
        5..=8 => 2,
        _ => 3,
    };
    let plausible = |d: usize, c: &str| {
        d > 0 && d < c.len() && (d <= tolerance || (d == 1 && c.starts_with(word.as_str())))
    };
    // The distance is at least the difference in length, and costs the
    // product of the lengths: a candidate out of reach is not compared, so
    // a huge token (a 1 MiB sysctl name) costs one pass over it, not a
    // table of a million rows per candidate.
    let len = word.chars().count();
    candidates
        .iter()
        .filter(|c| len <= c.len() + tolerance.max(1))
        .map(|c| (distance(&word, c), *c))
        .filter(|&(d, c)| plausible(d, c))
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Damerau-Levenshtein distance (see [`suggest`]), with the work it did
/// counted in tests.
fn distance(a: &str, b: &str) -> usize {
    #[cfg(test)]
    tests::CELLS.with(|c| c.set(c.get() + (a.chars().count() * b.chars().count()) as u64));
    strsim::damerau_levenshtein(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Cells of the distance tables [`distance`] filled on this thread.
        pub(super) static CELLS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    fn cells() -> u64 {
        CELLS.with(std::cell::Cell::get)
    }

    /// A token far longer than any keyword is compared with none of them:
    /// the work is one pass over it, whatever its length.
    #[test]
    fn a_huge_token_is_not_compared() {
        let huge = "n".repeat(1 << 20);
        let before = cells();
        assert_eq!(
            suggest(&huge, &["delay", "net.inet.ip.dummynet.expire"]),
            None
        );
        assert_eq!(
            cells() - before,
            0,
            "distance tables filled for a 1 MiB token"
        );
        // A near miss still gets its suggestion, for a table of its size.
        let before = cells();
        assert_eq!(suggest("dleay", &["delay", "bw"]), Some("delay"));
        assert_eq!(cells() - before, 5 * 5, "only `delay` is within reach");
    }

    #[test]
    fn caret_sits_under_the_token() {
        let src = "ipfw add 100 pipe 1 form any to any";
        let e = ParseError::new(ErrorKind::Syntax, "expected `from`", src, 20, 4)
            .with_suggestion(Some("from"));
        assert_eq!(e.column, 21);
        assert_eq!(e.found(), Some("form"));
        let shown = e.to_string();
        assert!(shown.contains("did you mean `from`?"), "{shown}");
        assert!(
            shown.ends_with(
                "\n    ipfw add 100 pipe 1 form any to any\n                        ^^^^"
            ),
            "{shown}"
        );
    }

    #[test]
    fn end_of_line_caret_follows_the_text() {
        let e = ParseError::new(
            ErrorKind::Syntax,
            "expected a bandwidth",
            "pipe 1 config bw",
            16,
            0,
        );
        assert_eq!(e.found(), None);
        assert!(e.snippet().ends_with("                    ^"));
    }

    #[test]
    fn control_characters_are_shown_escaped() {
        let src = "pipe 1 config bw 1\0x\u{1b}[2J delay 5";
        let e = ParseError::new(
            ErrorKind::Syntax,
            "bad bandwidth `1\0x\u{1b}[2J`",
            src,
            17,
            7,
        );
        let shown = e.to_string();
        assert!(
            !shown.contains('\0') && !shown.contains('\u{1b}'),
            "{shown:?}"
        );
        let expected = [
            r"bad bandwidth `1\u{0}x\u{1b}[2J` (column 18)",
            r"    pipe 1 config bw 1\u{0}x\u{1b}[2J delay 5",
            // 4 + 17 columns, then 16 for the 7 bytes as shown.
            "                     ^^^^^^^^^^^^^^^^",
        ];
        assert_eq!(shown, expected.join("\n"));
    }

    #[test]
    fn suggestions_are_close_or_absent() {
        assert_eq!(suggest("form", &["from", "to", "in"]), Some("from"));
        assert_eq!(suggest("dleay", &["delay", "bw"]), Some("delay"));
        assert_eq!(suggest("xyzzy", &["delay", "bw"]), None);
        assert_eq!(suggest("100", &["10"]), None);
        // A JSON view's field name where a keyword is expected, and back.
        assert_eq!(suggest("delay_ns", &["bw", "delay"]), Some("delay"));
        assert_eq!(suggest("bandwidth_bps", &["bw", "delay"]), Some("bw"));
        assert_eq!(
            suggest("delay", &["bandwidth_bps", "delay_ns"]),
            Some("delay_ns")
        );
        assert_eq!(
            suggest("bandwidth", &["bandwidth_bps", "delay_ns"]),
            Some("bandwidth_bps")
        );
        assert_eq!(suggest("delay_ns", &["bw"]), None);
    }
}
