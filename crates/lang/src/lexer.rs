//! Words, braces and commas, each with its byte offset in the line.
//!
//! ipfw's own parser works on argv, so words are whatever the shell split on
//! blanks. We also split `{`, `}` and `,` off so that `{ a, b }`, `{a,b}` and
//! `a,b` all read the same, and keep offsets so errors can point at a token.

use crate::error::{suggest, ErrorKind, ParseError};
use crate::units::{number_in, ValueError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tok {
    Word,
    LBrace,
    RBrace,
    Comma,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token<'a> {
    pub kind: Tok,
    pub text: &'a str,
    /// Byte offset in the source line.
    pub start: usize,
}

impl Token<'_> {
    pub fn end(&self) -> usize {
        self.start + self.text.len()
    }

    /// Case-insensitive keyword test; FreeBSD is case-sensitive, but nothing
    /// in the language depends on case, and `Pipe 1 Config` is not worth an error.
    pub fn is(&self, kw: &str) -> bool {
        self.kind == Tok::Word && self.text.eq_ignore_ascii_case(kw)
    }
}

/// Splits `src[start..end]` into tokens.
pub(crate) fn tokenize(src: &str, start: usize, end: usize) -> Vec<Token<'_>> {
    let region = src.get(start..end).unwrap_or_default();
    let mut toks = Vec::new();
    let mut word_start: Option<usize> = None;
    for (i, c) in region.char_indices() {
        let punct = match c {
            '{' => Some(Tok::LBrace),
            '}' => Some(Tok::RBrace),
            ',' => Some(Tok::Comma),
            _ => None,
        };
        if c.is_whitespace() || punct.is_some() {
            if let Some(ws) = word_start.take() {
                toks.push(Token {
                    kind: Tok::Word,
                    text: &region[ws..i],
                    start: start + ws,
                });
            }
            if let Some(kind) = punct {
                toks.push(Token {
                    kind,
                    text: &region[i..i + 1],
                    start: start + i,
                });
            }
        } else if word_start.is_none() {
            word_start = Some(i);
        }
    }
    if let Some(ws) = word_start {
        toks.push(Token {
            kind: Tok::Word,
            text: &region[ws..],
            start: start + ws,
        });
    }
    toks
}

/// A token stream with the source line kept for error messages.
pub(crate) struct Cursor<'a> {
    src: &'a str,
    toks: Vec<Token<'a>>,
    pos: usize,
    /// Where the input ends, for "found end of line" errors.
    end: usize,
    /// What was taken but may not be what the user meant ([`Self::note`]).
    notes: Vec<String>,
}

impl<'a> Cursor<'a> {
    pub fn new(src: &'a str, start: usize, end: usize) -> Self {
        let toks = tokenize(src, start, end);
        let end = toks.last().map_or(start, Token::end);
        Cursor {
            src,
            toks,
            pos: 0,
            end,
            notes: Vec::new(),
        }
    }

    /// Keeps a warning for the user about something taken as written
    /// (`bw 10` is 10 bit/s).
    pub fn note(&mut self, message: String) {
        self.notes.push(message);
    }

    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    pub fn peek(&self) -> Option<Token<'a>> {
        self.toks.get(self.pos).copied()
    }

    pub fn peek_nth(&self, n: usize) -> Option<Token<'a>> {
        self.toks.get(self.pos + n).copied()
    }

    /// The next token's text if it is a word.
    pub fn peek_word(&self) -> Option<&'a str> {
        self.peek().filter(|t| t.kind == Tok::Word).map(|t| t.text)
    }

    pub fn peek_is(&self, kw: &str) -> bool {
        self.peek().is_some_and(|t| t.is(kw))
    }

    /// The position of the next token, to look back at what a parser read
    /// since (with [`Cursor::tokens_since`]).
    pub fn mark(&self) -> usize {
        self.pos
    }

    /// The tokens read since `mark`.
    pub fn tokens_since(&self, mark: usize) -> &[Token<'a>] {
        self.toks.get(mark..self.pos).unwrap_or_default()
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }

    pub fn bump(&mut self) -> Option<Token<'a>> {
        let t = self.peek();
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    /// Consumes the keyword if it is next.
    pub fn eat(&mut self, kw: &str) -> bool {
        if self.peek_is(kw) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    pub fn eat_kind(&mut self, kind: Tok) -> bool {
        if self.peek().is_some_and(|t| t.kind == kind) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// The next token, which must be a word; `what` names it for the error
    /// ("a bandwidth after `bw`").
    pub fn word(&mut self, what: &str) -> Result<Token<'a>, ParseError> {
        match self.peek() {
            Some(t) if t.kind == Tok::Word => {
                self.pos += 1;
                Ok(t)
            }
            _ => Err(self.expected(what, &[])),
        }
    }

    /// "expected WHAT, found `x`" at the next token, with a suggestion drawn
    /// from `candidates` when the token is a near miss.
    pub fn expected(&self, what: &str, candidates: &[&'static str]) -> ParseError {
        match self.peek() {
            Some(t) => self.expected_at(t, what, candidates),
            None => ParseError::new(
                ErrorKind::Syntax,
                format!("expected {what}, found end of line"),
                self.src,
                self.end,
                0,
            ),
        }
    }

    /// [`Cursor::expected`] about a token already consumed.
    pub fn expected_at(&self, t: Token<'_>, what: &str, candidates: &[&'static str]) -> ParseError {
        self.error_at(
            t,
            ErrorKind::Syntax,
            format!("expected {what}, found `{}`", t.text),
        )
        .with_suggestion(suggest(t.text, candidates))
    }

    pub fn error_at(
        &self,
        t: Token<'_>,
        kind: ErrorKind,
        message: impl Into<String>,
    ) -> ParseError {
        ParseError::new(kind, message, self.src, t.start, t.text.len())
    }

    /// An error about part of a token, e.g. the value in `NAME=VALUE`.
    pub fn error_in(
        &self,
        t: Token<'_>,
        from: usize,
        kind: ErrorKind,
        message: impl Into<String>,
    ) -> ParseError {
        let from = from.min(t.text.len());
        ParseError::new(kind, message, self.src, t.start + from, t.text.len() - from)
    }

    /// The rest of the line from the next token, as written (a `// comment`),
    /// consuming every token.
    pub fn take_rest(&mut self) -> &'a str {
        let from = self.peek().map_or(self.end, |t| t.start);
        self.pos = self.toks.len();
        self.src.get(from..self.end).unwrap_or_default()
    }

    /// True if the next token is a word of digits only.
    pub fn peek_is_number(&self) -> bool {
        self.peek_word()
            .is_some_and(|w| w.bytes().all(|b| b.is_ascii_digit()))
    }

    /// The next word as a decimal integer in `lo..=hi`; `what` names it
    /// ("rule number") in the error, which gives the range.
    pub fn number(&mut self, what: &str, lo: u64, hi: u64) -> Result<u64, ParseError> {
        let t = self.word(&format!("a {what} ({lo}..{hi})"))?;
        number_in(t.text, what, lo, hi).map_err(|e| self.value_error(t, e))
    }

    /// A refused value, pointed at the token it came from.
    pub fn value_error(&self, t: Token<'_>, e: ValueError) -> ParseError {
        let kind = e.kind();
        self.error_at(t, kind, e.into_message())
    }

    /// Fails unless every token was consumed; `after` names what came before.
    pub fn finish(&self, after: &str) -> Result<(), ParseError> {
        match self.peek() {
            None => Ok(()),
            Some(t) => Err(self.error_at(
                t,
                ErrorKind::Syntax,
                format!("unexpected `{}` after {after}", t.text),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<&str> {
        tokenize(s, 0, s.len()).iter().map(|t| t.text).collect()
    }

    #[test]
    fn braces_and_commas_split_off() {
        assert_eq!(
            texts("from {a,b} to c, d"),
            ["from", "{", "a", ",", "b", "}", "to", "c", ",", "d"]
        );
        assert_eq!(texts("  bw   10Mbit/s\t"), ["bw", "10Mbit/s"]);
        assert_eq!(texts(""), Vec::<&str>::new());
    }

    #[test]
    fn offsets_point_into_the_line() {
        let s = "ipfw  add é 100";
        let t = tokenize(s, 0, s.len());
        assert_eq!(t[2].start, 10);
        assert_eq!(&s[t[3].start..t[3].end()], "100");
    }
}
