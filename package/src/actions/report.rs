//! Where one action descriptor's problems go: each refusal becomes a
//! diagnostic of the descriptor's file with its line, and marks the
//! descriptor failed, so one pass reports every problem and nothing failed
//! is compiled. The descriptor's compiler and its schema checks share it.
//!
//! What it must never do: drop a refusal, or let a failed descriptor pass.

use crate::diagnostics::Diagnostics;

/// The diagnostics of one descriptor file, and whether any was reported.
pub(super) struct Report<'a> {
    pub(super) file: &'a str,
    pub(super) diagnostics: &'a mut Diagnostics,
    pub(super) failed: bool,
}

impl Report<'_> {
    /// Records one refusal at `line` (0: no line) and marks the descriptor
    /// failed.
    pub(super) fn push(&mut self, line: u32, code: &str, reason: impl Into<String>) {
        self.diagnostics
            .push(self.file, (line > 0).then_some(line), code, reason);
        self.failed = true;
    }
}
