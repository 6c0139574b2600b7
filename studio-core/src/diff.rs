//! What changed between two sets of package files: per file added, removed
//! or changed, with unified diffs of changed text files within one budget.
//! The history tools' `diffAppRevisions` and a draft's changes against the
//! live app are both this.
//!
//! What it must never do: diff a binary asset as text, or answer past
//! [`MAX_DIFF_BYTES`] (files past it are listed with `truncated`).

use std::collections::{BTreeMap, BTreeSet};

use studio_store::RevisionFile;

use crate::source::is_binary;

/// Most bytes of unified diff one `diffAppRevisions` answer carries; files
/// past it are listed with `truncated` and no diff.
pub(crate) const MAX_DIFF_BYTES: usize = 256 * 1024;

/// How long one file's diff may search for the shortest edit script before
/// it settles for a coarser (still correct) one.
const DIFF_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

/// Lines of context around each change in a unified diff.
const DIFF_CONTEXT: usize = 3;

/// One file that differs between two sets of files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileChange {
    pub(crate) path: String,
    /// `added`, `removed` or `changed`.
    pub(crate) change: &'static str,
    /// The sha256 of the file before (absent when added).
    pub(crate) from_version: Option<String>,
    /// The sha256 of the file after (absent when removed).
    pub(crate) to_version: Option<String>,
    /// The unified diff of a changed text file, within the budget.
    pub(crate) unified: Option<String>,
    pub(crate) binary: bool,
    /// The diff was left out: the budget ran out.
    pub(crate) truncated: bool,
}

/// The files that differ from `from` to `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Diff {
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) files: Vec<FileChange>,
    /// Some file's diff was left out for the budget.
    pub(crate) truncated: bool,
}

/// Per file added, removed or changed, with unified diffs of changed text
/// files within [`MAX_DIFF_BYTES`] in all.
pub(crate) fn diff_files(
    from: &str,
    to: &str,
    before: &[(RevisionFile, Vec<u8>)],
    after: &[(RevisionFile, Vec<u8>)],
) -> Diff {
    let old: BTreeMap<&str, &(RevisionFile, Vec<u8>)> = before
        .iter()
        .map(|entry| (entry.0.path.as_str(), entry))
        .collect();
    let new: BTreeMap<&str, &(RevisionFile, Vec<u8>)> = after
        .iter()
        .map(|entry| (entry.0.path.as_str(), entry))
        .collect();
    let paths: BTreeSet<&str> = old.keys().chain(new.keys()).copied().collect();
    let mut budget = MAX_DIFF_BYTES;
    let mut truncated = false;
    let mut files = Vec::new();
    for path in paths {
        let binary = is_binary(path);
        let (change, from_version, to_version, unified, cut) = match (old.get(path), new.get(path))
        {
            (None, Some(added)) => ("added", None, Some(added.0.sha256.clone()), None, false),
            (Some(removed), None) => ("removed", Some(removed.0.sha256.clone()), None, None, false),
            (Some(was), Some(is)) if was.0.sha256 == is.0.sha256 => continue,
            (Some(was), Some(is)) => {
                let texts = (!binary && budget > 0)
                    .then(|| {
                        Some((
                            std::str::from_utf8(&was.1).ok()?,
                            std::str::from_utf8(&is.1).ok()?,
                        ))
                    })
                    .flatten();
                let (unified, cut) = match texts {
                    Some((a, b)) => {
                        let text = similar::TextDiff::configure()
                            .timeout(DIFF_TIMEOUT)
                            .diff_lines(a, b);
                        let text = text
                            .unified_diff()
                            .context_radius(DIFF_CONTEXT)
                            .header(&format!("{from}/{path}"), &format!("{to}/{path}"))
                            .to_string();
                        if text.len() <= budget {
                            budget -= text.len();
                            (Some(text), false)
                        } else {
                            (None, true)
                        }
                    }
                    // Out of budget before the diff was even made.
                    None if !binary && budget == 0 => (None, true),
                    None => (None, false),
                };
                (
                    "changed",
                    Some(was.0.sha256.clone()),
                    Some(is.0.sha256.clone()),
                    unified,
                    cut,
                )
            }
            (None, None) => continue,
        };
        truncated |= cut;
        files.push(FileChange {
            path: path.to_owned(),
            change,
            from_version,
            to_version,
            unified,
            binary,
            truncated: cut,
        });
    }
    Diff {
        from: from.to_owned(),
        to: to.to_owned(),
        files,
        truncated,
    }
}
