//! How a YAML parser's errors and lines read in a diagnostic, for the
//! manifest's front matter and the action descriptors alike: the reason is
//! the parser's own message without its position (the diagnostic carries
//! the line, counted from the file's start) and without advice about the
//! parser's options, and every line is counted as the rest of the package's
//! diagnostics count them ([`crate::diagnostics::line_of`]: at `\n` only),
//! where YAML also ends a line at a lone `\r`.
//!
//! This module must never parse YAML itself: serde-saphyr does.

use std::borrow::Cow;

use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::{
    DefaultMessageFormatter, Error, Localizer, Location, MessageFormatter, SnippetMode,
};

/// YAML's line numbers of one text mapped to the lines a diagnostic names.
pub(crate) struct YamlLines {
    /// The diagnostic line of each YAML line, from YAML line 1; `None` when
    /// the two agree (no lone `\r`), which is every ordinary file.
    lines: Option<Vec<u32>>,
}

impl YamlLines {
    pub(crate) fn new(text: &str) -> YamlLines {
        let bytes = text.as_bytes();
        let lone_cr = |at: usize| bytes[at] == b'\r' && bytes.get(at + 1) != Some(&b'\n');
        if !(0..bytes.len()).any(lone_cr) {
            return YamlLines { lines: None };
        }
        let mut line = 1u32;
        let mut lines = vec![line];
        for (at, &byte) in bytes.iter().enumerate() {
            if byte == b'\n' {
                line = line.saturating_add(1);
                lines.push(line);
            } else if lone_cr(at) {
                lines.push(line);
            }
        }
        YamlLines { lines: Some(lines) }
    }

    /// The diagnostic line of 1-based YAML line `yaml_line` (0 stays 0:
    /// unknown); a line past the end is the last one.
    pub(crate) fn line(&self, yaml_line: u32) -> u32 {
        match (&self.lines, yaml_line) {
            (None, _) | (_, 0) => yaml_line,
            (Some(lines), n) => lines
                .get(n as usize - 1)
                .or(lines.last())
                .copied()
                .unwrap_or(n),
        }
    }

    /// The diagnostic line of a parse error, when the parser placed it.
    pub(crate) fn error_line(&self, error: &Error) -> Option<u32> {
        let location = error.location()?;
        let line = u32::try_from(location.line())
            .ok()
            .filter(|line| *line > 0)?;
        Some(self.line(line))
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
    fn lines_agree_without_a_lone_carriage_return() {
        let lines = YamlLines::new("a: 1\r\nb: 2\n");
        assert!(lines.lines.is_none());
        assert_eq!(lines.line(2), 2);
    }

    #[test]
    fn a_lone_carriage_return_ends_a_yaml_line_but_not_a_diagnostic_line() {
        let lines = YamlLines::new("a: 1\rb: 2\r\nc: 3\nd: [\r\r");
        // YAML lines: "a: 1", "b: 2", "c: 3", "d: [", "", "".
        assert_eq!(
            (1..=7).map(|n| lines.line(n)).collect::<Vec<_>>(),
            [1, 1, 2, 3, 3, 3, 3]
        );
        assert_eq!(lines.line(0), 0);
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
        let lines = YamlLines::new("a: 1\rb: {c\r\r\r");
        let error = serde_saphyr::from_str::<serde_json::Value>("a: 1\rb: {c\r\r\r").unwrap_err();
        assert_eq!(lines.error_line(&error), Some(1), "{error}");
    }
}
