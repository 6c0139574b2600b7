//! The one shape of every package refusal.

use serde::Serialize;

/// One problem in a package. `file` is package-relative (POSIX, no leading
/// `./`); `line` is 1-based when the problem has a place in the file; `code` is a
/// stable upper-snake-case identifier; `reason` is a sentence for the author,
/// lowercase, no trailing period, naming what to do where that is useful.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Diagnostic {
    pub file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    pub code: String,
    pub reason: String,
}

/// Collects the diagnostics of one validation pass.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Diagnostics(Vec<Diagnostic>);

impl Diagnostics {
    pub fn new() -> Diagnostics {
        Diagnostics::default()
    }

    /// Records one problem.
    pub fn push(&mut self, file: &str, line: Option<u32>, code: &str, reason: impl Into<String>) {
        self.0.push(Diagnostic {
            file: file.to_owned(),
            line,
            code: code.to_owned(),
            reason: reason.into(),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }

    /// Appends every diagnostic of `other`.
    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }

    /// The diagnostics in a stable order (file, line, code, reason), without
    /// exact duplicates.
    pub fn into_sorted(mut self) -> Vec<Diagnostic> {
        self.0.sort();
        self.0.dedup();
        self.0
    }
}

/// The 1-based line of byte `offset` in `text`.
pub fn line_of(text: &str, offset: usize) -> u32 {
    let offset = offset.min(text.len());
    let newlines = text.as_bytes()[..offset]
        .iter()
        .filter(|b| **b == b'\n')
        .count();
    u32::try_from(newlines + 1).unwrap_or(u32::MAX)
}

/// 1-based line numbers by byte offset in logarithmic time, for the many
/// lookups of one file (`diagnostics::line_of` counts from the start of the
/// text on every call, which is quadratic over a whole document).
#[derive(Debug, Clone)]
pub(crate) struct LineIndex {
    /// Byte offset where each line starts.
    starts: Vec<usize>,
}

impl LineIndex {
    pub(crate) fn new(text: &str) -> LineIndex {
        let starts = std::iter::once(0)
            .chain(
                text.bytes()
                    .enumerate()
                    .filter(|(_, byte)| *byte == b'\n')
                    .map(|(offset, _)| offset + 1),
            )
            .collect();
        LineIndex { starts }
    }

    /// The line of byte `offset`, as `diagnostics::line_of` counts it.
    pub(crate) fn line(&self, offset: usize) -> u32 {
        u32::try_from(self.starts.partition_point(|&start| start <= offset)).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_one_based() {
        let text = "a\nbb\nccc";
        assert_eq!(line_of(text, 0), 1);
        assert_eq!(line_of(text, 2), 2);
        assert_eq!(line_of(text, 5), 3);
        assert_eq!(line_of(text, 999), 3);
    }

    #[test]
    fn sorted_and_deduplicated() {
        let mut diagnostics = Diagnostics::new();
        diagnostics.push("b.js", None, "X", "b");
        diagnostics.push("a.js", Some(2), "X", "a");
        diagnostics.push("a.js", Some(2), "X", "a");
        let sorted = diagnostics.into_sorted();
        assert_eq!(sorted.len(), 2);
        assert_eq!(sorted[0].file, "a.js");
    }
}
