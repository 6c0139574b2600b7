//! How a YAML parser's errors and lines read in a diagnostic, for the
//! manifest's front matter and the action descriptors alike: the reason is
//! the parser's own message without its position (the diagnostic carries
//! the line) and without advice about the parser's options, and a line is
//! found from the offset the parser reports by the package's one line rule
//! ([`LineIndex`]: at `\n` only), not taken from the parser, which also
//! ends a line at a lone `\r`.
//!
//! This module must never parse YAML itself: serde-saphyr does.

use std::borrow::Cow;

use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::{
    DefaultMessageFormatter, Error, Localizer, Location, MessageFormatter, SnippetMode,
};

use crate::diagnostics::LineIndex;

/// One YAML text's places as the lines a diagnostic names.
pub(crate) struct YamlText<'a> {
    text: &'a str,
    lines: LineIndex,
}

impl<'a> YamlText<'a> {
    pub(crate) fn new(text: &'a str) -> YamlText<'a> {
        YamlText {
            text,
            lines: LineIndex::new(text),
        }
    }

    /// The line of a place the parser reports (0: unknown). Values carry a
    /// byte offset; the scanner's errors only a character offset.
    pub(crate) fn line_at(&self, location: Location) -> u32 {
        let span = location.span();
        let byte = match span.byte_offset() {
            Some(byte) => usize::try_from(byte).ok(),
            None => usize::try_from(span.offset()).ok().and_then(|chars| {
                self.text
                    .char_indices()
                    .map(|(byte, _)| byte)
                    .chain([self.text.len()])
                    .nth(chars)
            }),
        };
        match byte {
            Some(byte) => self.lines.line(byte),
            None => u32::try_from(location.line()).unwrap_or(0),
        }
    }

    /// The line of a parse error, when the parser placed it.
    pub(crate) fn error_line(&self, error: &Error) -> Option<u32> {
        Some(self.line_at(error.location()?)).filter(|line| *line > 0)
    }
}

/// The reason of a YAML parse error for a person: the first line of the
/// parser's message with no position and no advice about its options.
pub(crate) fn reason(error: &Error) -> String {
    let text = error.render_with_options(serde_saphyr::render_options! {
        formatter: &Plain,
        snippets: SnippetMode::Off,
    });
    let first = text.lines().next().unwrap_or("invalid YAML");
    first.trim().trim_end_matches('.').to_owned()
}

/// The parser's English messages with these changes: no " at line L,
/// column C" (wrong once a lone `\r` or the manifest's opening `---` moves
/// lines, and the diagnostic names the line), and a repeated key and a
/// breached parsing limit said plainly rather than as the parser's options
/// and types.
struct Plain;

impl Localizer for Plain {
    fn attach_location<'a>(&self, base: Cow<'a, str>, _: Location) -> Cow<'a, str> {
        base
    }
}

impl MessageFormatter for Plain {
    fn localizer(&self) -> &dyn Localizer {
        self
    }

    fn format_message<'a>(&self, error: &'a Error) -> Cow<'a, str> {
        match error {
            Error::DuplicateMappingKey { key: Some(key), .. } => {
                Cow::Owned(format!("the key {key} appears twice in one mapping"))
            }
            Error::DuplicateMappingKey { key: None, .. } => {
                Cow::Borrowed("a key appears twice in one mapping")
            }
            Error::Budget { breach, .. } => Cow::Borrowed(match breach {
                BudgetBreach::Anchors { .. } | BudgetBreach::Aliases { .. } => {
                    "anchors and aliases (&name, *name) are not allowed; write each value out"
                }
                BudgetBreach::Documents { .. } => "only one YAML document is allowed",
                BudgetBreach::Depth { .. } => "the YAML nests too deeply",
                _ => "the YAML is too large or too complex to read",
            }),
            _ => DefaultMessageFormatter.format_message(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_carriage_return_ends_a_yaml_line_but_not_a_diagnostic_line() {
        // A scanner error (a character offset) and a value (a byte offset),
        // after a lone `\r` and a character of several bytes.
        let text = "a: é\rb: {c\r\r\r";
        let error = serde_saphyr::from_str::<serde_json::Value>(text).unwrap_err();
        assert!(error.location().unwrap().line() > 1, "{error}");
        assert_eq!(YamlText::new(text).error_line(&error), Some(1));
        let text = "a: é\r\nb: 2\rc: [d\n";
        let error = serde_saphyr::from_str::<serde_json::Value>(text).unwrap_err();
        assert_eq!(YamlText::new(text).error_line(&error), Some(2), "{error}");
        let text = "a: é\r\nb: 2\rc: 1\nc: 2\n";
        let error = serde_saphyr::from_str_with_options::<serde_json::Value>(
            text,
            serde_saphyr::options! {duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error},
        )
        .unwrap_err();
        assert!(error.location().unwrap().span().byte_offset().is_some());
        assert_eq!(YamlText::new(text).error_line(&error), Some(3), "{error}");
    }

    #[test]
    fn reasons_carry_no_position_and_no_option_advice() {
        let error = serde_saphyr::from_str_with_options::<serde_json::Value>(
            "a: 1\na: 2\n",
            serde_saphyr::options! {duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error},
        )
        .unwrap_err();
        assert_eq!(reason(&error), "the key a appears twice in one mapping");
        let error = serde_saphyr::from_str::<serde_json::Value>("a: {b: 1\n").unwrap_err();
        let reason = reason(&error);
        assert!(!reason.contains("line") && !reason.is_empty(), "{reason}");
    }
}
