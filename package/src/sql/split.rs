//! Splitting a migration's SQL text into statements, with the tokens the
//! checks in `sql` read (the reserved names, the leading keyword, the
//! `ALTER` form, the rebuild's copy). It never hands SQLite anything: the
//! statements it splits are prepared by `sql`'s scratch database.

use super::{MAX_STATEMENTS, is_platform_name, is_sqlite_internal};

/// A file holds more than [`MAX_STATEMENTS`] statements.
pub(super) struct TooManyStatements;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TokenKind {
    Word,
    Quoted,
    Literal,
    Punct,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Token<'a> {
    pub(super) kind: TokenKind,
    pub(super) text: &'a str,
}

impl Token<'_> {
    pub(super) fn is_word(&self, word: &str) -> bool {
        self.kind == TokenKind::Word && self.text.eq_ignore_ascii_case(word)
    }

    /// The name a word or quoted identifier spells.
    pub(super) fn name(&self) -> Option<String> {
        match self.kind {
            TokenKind::Word => Some(self.text.to_owned()),
            TokenKind::Quoted => {
                let inner = self
                    .text
                    .get(1..self.text.len().saturating_sub(1))
                    .unwrap_or_default();
                Some(inner.replace("\"\"", "\"").replace("``", "`"))
            }
            _ => None,
        }
    }
}

/// One statement: its text (from its first token to its `;`), where that
/// starts in the file, and its tokens.
#[derive(Debug)]
pub(super) struct Lexed<'a> {
    pub(super) text: &'a str,
    pub(super) offset: usize,
    pub(super) tokens: Vec<Token<'a>>,
}

impl Lexed<'_> {
    pub(super) fn reserved_name(&self) -> Option<String> {
        self.tokens
            .iter()
            .filter_map(Token::name)
            .find(|name| is_platform_name(name) || is_sqlite_internal(name))
    }

    pub(super) fn leading_keyword(&self) -> String {
        match self.tokens.first() {
            Some(token) if token.kind == TokenKind::Word && token.text.len() <= 20 => {
                token.text.to_ascii_uppercase()
            }
            _ => "this statement".to_owned(),
        }
    }

    pub(super) fn is_drop_if_exists(&self) -> bool {
        let t = &self.tokens;
        t.len() >= 4
            && t[0].is_word("DROP")
            && (t[1].is_word("TABLE") || t[1].is_word("INDEX"))
            && t[2].is_word("IF")
            && t[3].is_word("EXISTS")
    }

    /// The new name of `ALTER TABLE [schema .] name RENAME TO new_name`.
    pub(super) fn renamed_table_to(&self) -> Option<String> {
        let t = &self.tokens;
        let at = if t.get(3).is_some_and(|token| token.text == ".") {
            5
        } else {
            3
        };
        match t.get(at..) {
            Some([rename, to, name, ..]) if rename.is_word("RENAME") && to.is_word("TO") => {
                name.name()
            }
            _ => None,
        }
    }

    /// Why this ALTER TABLE form is refused, or `None` for ADD [COLUMN],
    /// RENAME [COLUMN] a TO b and RENAME TO (judged by [`rebuild::Rebuilds`]).
    pub(super) fn alter_refusal(&self) -> Option<&'static str> {
        let t = &self.tokens;
        // ALTER TABLE [schema .] name <action>
        let mut at = 3;
        if t.get(3)
            .is_some_and(|token| token.kind == TokenKind::Punct && token.text == ".")
        {
            at = 5;
        }
        let action = t.get(at)?;
        if action.is_word("ADD") || action.is_word("RENAME") {
            // RENAME TO (a table) is judged as the end of a rebuild.
            None
        } else if action.is_word("DROP") {
            Some(
                "ALTER TABLE … DROP COLUMN is refused: migrations may add or rename columns, never drop them",
            )
        } else {
            Some(
                "only ALTER TABLE … ADD COLUMN and ALTER TABLE … RENAME COLUMN are allowed in migrations",
            )
        }
    }
}

fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$' || byte >= 0x80
}

/// Index just past the quoted run starting at `start`, where a doubled quote
/// is an escaped quote; the end of `bytes` when unterminated.
fn skip_quoted(bytes: &[u8], start: usize, quote: u8) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        if bytes[i] == quote {
            if bytes.get(i + 1) == Some(&quote) {
                i += 2;
                continue;
            }
            return i + 1;
        }
        i += 1;
    }
    bytes.len()
}

/// Splits SQL text at the `;` that end statements, the way SQLite's tokenizer
/// sees them: semicolons inside strings, quoted names and comments do not count,
/// and inside `CREATE TRIGGER … BEGIN … END` only the one after `END` does (so a
/// trigger is refused as a whole rather than reported as broken syntax).
///
/// Not `rusqlite::Batch` (SQLite's own prepare-and-tail), although the scratch
/// database is at hand: a `Batch` cannot get past a statement that fails to
/// prepare. rusqlite 0.43 drops SQLite's tail on a prepare error and
/// `Batch::next` returns the error without moving on, so it gives the same
/// error again on every call, and a file would be checked only up to its first
/// refused or broken statement, where the validator reports every independent
/// problem in it (`every_independent_statement_problem_is_reported`: a refused
/// seed, a refused `PRAGMA`, a syntax error and a refused view in one file).
/// The tokens are needed before SQLite sees a statement anyway (the reserved
/// names, the leading keyword, the `ALTER` form, the rebuild's copy), so the
/// split is a few lines of this tokenizer. `sqlite3_complete`, SQLite's own
/// end-of-statement test, is reachable from rusqlite only through `unsafe`
/// FFI, which the workspace forbids.
pub(super) fn split_statements(text: &str) -> Result<Vec<Lexed<'_>>, TooManyStatements> {
    let bytes = text.as_bytes();
    let mut statements = Vec::new();
    let mut tokens: Vec<Token<'_>> = Vec::new();
    let mut start_of_statement = 0;
    let mut in_trigger = false;
    let mut i = 0;
    pub(super) fn finish<'a>(
        statements: &mut Vec<Lexed<'a>>,
        tokens: &mut Vec<Token<'a>>,
        text: &'a str,
        start: usize,
        end: usize,
    ) -> Result<(), TooManyStatements> {
        if tokens.is_empty() {
            return Ok(());
        }
        if statements.len() == MAX_STATEMENTS {
            return Err(TooManyStatements);
        }
        statements.push(Lexed {
            text: &text[start..end],
            offset: start,
            tokens: std::mem::take(tokens),
        });
        Ok(())
    }
    while i < bytes.len() {
        let start = i;
        let kind = match bytes[i] {
            b' ' | b'\t' | b'\n' | b'\r' | 0x0c => {
                i += 1;
                continue;
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                i = bytes[i..]
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(bytes.len(), |n| i + n + 1);
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = text[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |n| i + 2 + n + 2);
                continue;
            }
            b'\'' => {
                i = skip_quoted(bytes, i, b'\'');
                TokenKind::Literal
            }
            quote @ (b'"' | b'`') => {
                i = skip_quoted(bytes, i, quote);
                TokenKind::Quoted
            }
            b'[' => {
                i = bytes[i..]
                    .iter()
                    .position(|b| *b == b']')
                    .map_or(bytes.len(), |n| i + n + 1);
                TokenKind::Quoted
            }
            b';' => {
                i += 1;
                let ends = !in_trigger || tokens.last().is_some_and(|token| token.is_word("END"));
                if ends {
                    finish(&mut statements, &mut tokens, text, start_of_statement, i)?;
                    in_trigger = false;
                    continue;
                }
                TokenKind::Punct
            }
            byte if is_word_byte(byte) => {
                while i < bytes.len() && is_word_byte(bytes[i]) {
                    i += 1;
                }
                TokenKind::Word
            }
            _ => {
                i += 1;
                TokenKind::Punct
            }
        };
        if tokens.is_empty() {
            start_of_statement = start;
        }
        tokens.push(Token {
            kind,
            text: &text[start..i],
        });
        if kind == TokenKind::Word && !in_trigger {
            in_trigger = starts_create_trigger(&tokens);
        }
    }
    finish(
        &mut statements,
        &mut tokens,
        text,
        start_of_statement,
        bytes.len(),
    )?;
    Ok(statements)
}

fn starts_create_trigger(tokens: &[Token<'_>]) -> bool {
    match tokens {
        [create, trigger, ..] if create.is_word("CREATE") && trigger.is_word("TRIGGER") => true,
        [create, temp, trigger, ..] => {
            create.is_word("CREATE")
                && (temp.is_word("TEMP") || temp.is_word("TEMPORARY"))
                && trigger.is_word("TRIGGER")
        }
        _ => false,
    }
}
