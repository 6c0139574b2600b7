//! Reading a package folder into memory, under the package rules.
//!
//! Paths are relative POSIX paths of at most [`MAX_DEPTH`] components. Names
//! that are not UTF-8, or hold a backslash, a percent sign, a control or an
//! invisible character, are refused; so is any symlink (never followed) and any
//! file that is not a regular file. Dot-files and dot-folders are ignored.
//! Reading stops at [`MAX_FILES`] distinct files or [`MAX_TOTAL_BYTES`], so a
//! hostile folder (100k files, a 50 MB file) costs only what the limits allow.
//!
//! Text files (the [`TEXT_EXTENSIONS`]) must be UTF-8 without NUL and are kept
//! as text; binary assets (the [`BINARY_EXTENSIONS`]: raster images and WOFF2
//! fonts) are kept as bytes, within the same limits, and judged by
//! [`crate::asset`]. Every other extension is refused.
//!
//! It never follows a link out of the package and never writes.

use std::collections::{BTreeMap, VecDeque};
use std::io::Read as _;
use std::path::Path;

use crate::diagnostics::{Diagnostics, line_of};

/// Most distinct files a package may hold.
pub const MAX_FILES: usize = 64;
/// Most bytes all files together may hold.
pub const MAX_TOTAL_BYTES: u64 = 1024 * 1024;
/// Most bytes one file may hold.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Most path components of a file (`a/b/c/d.svg` has 4).
pub const MAX_DEPTH: usize = 4;
/// Most entries read from one folder before giving up on it.
const MAX_DIR_ENTRIES: usize = 1024;
/// The extensions of a package's text files.
pub const TEXT_EXTENSIONS: [&str; 10] = [
    "md", "html", "css", "js", "sql", "yaml", "yml", "json", "txt", "svg",
];
/// The extensions of a package's binary assets: PNG, JPEG, WebP and GIF images
/// and WOFF2 fonts, checked by [`crate::asset`] and inlined as `data:` URLs.
pub const BINARY_EXTENSIONS: [&str; 6] = ["png", "jpg", "jpeg", "webp", "gif", "woff2"];

/// A package's files, by package-relative path: text files in `files`, binary
/// assets in `binary` (a path is in at most one of them, decided by its
/// extension; see [`is_binary_path`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackageSource {
    pub files: BTreeMap<String, String>,
    pub binary: BTreeMap<String, Vec<u8>>,
}

impl PackageSource {
    /// How many files the package holds, text and binary.
    pub fn len(&self) -> usize {
        self.files.len() + self.binary.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.binary.is_empty()
    }

    /// Whether `path` is a file of the package, text or binary.
    pub fn contains(&self, path: &str) -> bool {
        self.files.contains_key(path) || self.binary.contains_key(path)
    }

    /// Every path, text and binary, sorted.
    pub fn paths(&self) -> std::collections::BTreeSet<String> {
        self.files
            .keys()
            .chain(self.binary.keys())
            .cloned()
            .collect()
    }

    /// Every file as `(path, bytes)` in path order, text and binary merged
    /// (a text-only package gives exactly its text files in order).
    pub fn entries(&self) -> Vec<(&str, &[u8])> {
        let mut entries: Vec<(&str, &[u8])> = self
            .files
            .iter()
            .map(|(path, text)| (path.as_str(), text.as_bytes()))
            .chain(
                self.binary
                    .iter()
                    .map(|(path, bytes)| (path.as_str(), bytes.as_slice())),
            )
            .collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        entries
    }

    /// Puts (or, with `None`, removes) one file as a change would leave it: a
    /// binary path's bytes go to `binary`, anything else must be UTF-8 and goes
    /// to `files`. Bytes that are not UTF-8 at a text path are left out, as
    /// [`read_package`] leaves out such a file.
    pub fn set(&mut self, path: &str, bytes: Option<&[u8]>) {
        self.files.remove(path);
        self.binary.remove(path);
        match bytes {
            Some(bytes) if is_binary_path(path) => {
                self.binary.insert(path.to_owned(), bytes.to_vec());
            }
            Some(bytes) => {
                if let Ok(text) = std::str::from_utf8(bytes) {
                    self.files.insert(path.to_owned(), text.to_owned());
                }
            }
            None => {}
        }
    }
}

/// The extension of the last path segment, when it has a stem.
pub fn extension_of(path: &str) -> Option<&str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.rsplit_once('.')
        .filter(|(stem, _)| !stem.is_empty())
        .map(|(_, extension)| extension)
}

/// Whether `path` names a text file of a package (by its extension).
pub fn is_text_path(path: &str) -> bool {
    extension_of(path).is_some_and(|extension| TEXT_EXTENSIONS.contains(&extension))
}

/// Whether `path` names a binary asset of a package (by its extension).
pub fn is_binary_path(path: &str) -> bool {
    extension_of(path).is_some_and(|extension| BINARY_EXTENSIONS.contains(&extension))
}

/// The bytes of base64 `content` as the tools take it: the standard
/// alphabet, ASCII whitespace between the characters ignored, padding
/// optional. `None` when it is not base64.
pub fn base64_bytes(content: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let encoded: String = content
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    )
    .decode(encoded.as_bytes())
    .ok()
}

/// The extensions a package file may have, for messages: `.md … .svg .png …`.
pub fn allowed_extensions() -> String {
    TEXT_EXTENSIONS
        .iter()
        .chain(BINARY_EXTENSIONS.iter())
        .map(|extension| format!(".{extension}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Why a name is not a usable package path component, or `None` when it is.
pub fn invalid_name_reason(name: &str) -> Option<&'static str> {
    if name.is_empty() || name == "." || name == ".." {
        return Some("path components must not be empty, `.` or `..`");
    }
    if name.contains('\\') {
        return Some("backslashes are not path separators here; use `/`");
    }
    if name.contains('%') {
        return Some("percent signs are refused so that no path can hide an escape");
    }
    if name.chars().any(char::is_control) {
        return Some("control characters are refused in file names");
    }
    if name.chars().any(is_invisible) {
        return Some("invisible or direction-changing characters are refused in file names");
    }
    None
}

/// Characters that render as nothing or reorder text.
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{FFF0}'..='\u{FFF8}' | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0000}'..='\u{E0FFF}')
}

/// Reads the package in `dir`, recording every rule violation.
pub fn read_package(dir: &Path, diagnostics: &mut Diagnostics) -> PackageSource {
    let mut source = PackageSource::default();
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => {
            diagnostics.push(
                ".",
                None,
                "PATH_SYMLINK",
                "the package folder is a symlink; packages are read only from real folders",
            );
            return source;
        }
        Ok(meta) if meta.is_dir() => {}
        _ => {
            diagnostics.push(
                ".",
                None,
                "PACKAGE_UNREADABLE",
                "the package folder does not exist or is not a folder",
            );
            return source;
        }
    }
    let mut total: u64 = 0;
    let mut queue: VecDeque<(std::path::PathBuf, String)> = VecDeque::new();
    queue.push_back((dir.to_path_buf(), String::new()));
    while let Some((folder, prefix)) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            diagnostics.push(
                display(&prefix),
                None,
                "PACKAGE_UNREADABLE",
                "this folder cannot be read",
            );
            continue;
        };
        let mut names = Vec::new();
        for entry in entries.flatten() {
            if names.len() == MAX_DIR_ENTRIES {
                diagnostics.push(display(&prefix), None, "PACKAGE_TOO_MANY_FILES", format!("a folder may hold at most {MAX_DIR_ENTRIES} entries; the rest were not read"));
                break;
            }
            names.push(entry.file_name());
        }
        names.sort();
        for raw in names {
            let Some(name) = raw.to_str() else {
                diagnostics.push(
                    display(&prefix),
                    None,
                    "PATH_INVALID_NAME",
                    "a file name is not valid UTF-8",
                );
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            let path = if prefix.is_empty() {
                name.to_owned()
            } else {
                format!("{prefix}/{name}")
            };
            if let Some(reason) = invalid_name_reason(name) {
                diagnostics.push(&path, None, "PATH_INVALID_NAME", reason);
                continue;
            }
            let full = folder.join(name);
            let Ok(meta) = std::fs::symlink_metadata(&full) else {
                diagnostics.push(
                    &path,
                    None,
                    "PACKAGE_UNREADABLE",
                    "this file cannot be read",
                );
                continue;
            };
            let depth = path.split('/').count();
            if meta.file_type().is_symlink() {
                diagnostics.push(
                    &path,
                    None,
                    "PATH_SYMLINK",
                    "symlinks are refused in packages; copy the file in instead",
                );
            } else if meta.is_dir() {
                if depth >= MAX_DEPTH {
                    diagnostics.push(
                        &path,
                        None,
                        "PATH_TOO_DEEP",
                        format!("files may be at most {MAX_DEPTH} levels deep"),
                    );
                } else {
                    queue.push_back((full, path));
                }
            } else if !meta.is_file() {
                diagnostics.push(
                    &path,
                    None,
                    "PATH_NOT_REGULAR",
                    "only regular files are allowed in packages",
                );
            } else if !is_text_path(name) && !is_binary_path(name) {
                diagnostics.push(
                    &path,
                    None,
                    "PATH_EXTENSION",
                    format!(
                        "only text files and image or font assets are allowed: {}",
                        allowed_extensions()
                    ),
                );
            } else if source.len() == MAX_FILES {
                diagnostics.push(
                    &path,
                    None,
                    "PACKAGE_TOO_MANY_FILES",
                    format!("a package may hold at most {MAX_FILES} files; reading stopped here"),
                );
                return source;
            } else if meta.len() > MAX_FILE_BYTES {
                diagnostics.push(
                    &path,
                    None,
                    "FILE_TOO_LARGE",
                    format!(
                        "a file may hold at most {MAX_FILE_BYTES} bytes; this one has {}",
                        meta.len()
                    ),
                );
            } else if total + meta.len() > MAX_TOTAL_BYTES {
                diagnostics.push(&path, None, "PACKAGE_TOO_LARGE", format!("a package may hold at most {MAX_TOTAL_BYTES} bytes in total; reading stopped here"));
                return source;
            } else if is_binary_path(name) {
                match read_bytes(&full, &path, diagnostics) {
                    Some(bytes) => {
                        total += bytes.len() as u64;
                        source.binary.insert(path, bytes);
                    }
                    None => total += meta.len(),
                }
            } else {
                match read_text(&full, &path, diagnostics) {
                    Some(text) => {
                        total += text.len() as u64;
                        source.files.insert(path, text);
                    }
                    None => total += meta.len(),
                }
            }
        }
    }
    source
}

fn display(prefix: &str) -> &str {
    if prefix.is_empty() { "." } else { prefix }
}

/// Reads at most one byte past the file limit (a file may grow after `stat`).
fn read_bytes(full: &Path, path: &str, diagnostics: &mut Diagnostics) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    let read = std::fs::File::open(full)
        .and_then(|file| file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes));
    if read.is_err() {
        diagnostics.push(path, None, "PACKAGE_UNREADABLE", "this file cannot be read");
        return None;
    }
    if bytes.len() as u64 > MAX_FILE_BYTES {
        diagnostics.push(
            path,
            None,
            "FILE_TOO_LARGE",
            format!("a file may hold at most {MAX_FILE_BYTES} bytes"),
        );
        return None;
    }
    Some(bytes)
}

fn read_text(full: &Path, path: &str, diagnostics: &mut Diagnostics) -> Option<String> {
    let bytes = read_bytes(full, path, diagnostics)?;
    text_of(path, &bytes, diagnostics).map(str::to_owned)
}

/// The text of the text file `path` from its bytes: UTF-8 without NUL, or a
/// diagnostic at the line where it stops being so. The one rule for text,
/// whether the bytes come from a package folder or from a person's upload.
pub fn text_of<'a>(path: &str, bytes: &'a [u8], diagnostics: &mut Diagnostics) -> Option<&'a str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            if let Some(offset) = text.find('\0') {
                diagnostics.push(
                    path,
                    Some(line_of(text, offset)),
                    "SOURCE_NUL",
                    "text files must not contain NUL characters",
                );
                return None;
            }
            Some(text)
        }
        Err(error) => {
            let valid = error.valid_up_to();
            let prefix = String::from_utf8_lossy(&bytes[..valid]);
            diagnostics.push(
                path,
                Some(line_of(&prefix, valid)),
                "SOURCE_NOT_UTF8",
                "files must be UTF-8 text",
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, path: &str, text: &str) {
        let full = dir.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }

    fn read(dir: &Path) -> (PackageSource, Vec<(String, String)>) {
        let mut diagnostics = Diagnostics::new();
        let source = read_package(dir, &mut diagnostics);
        let codes = diagnostics
            .into_sorted()
            .into_iter()
            .map(|d| (d.file, d.code))
            .collect();
        (source, codes)
    }

    #[test]
    fn reads_text_files_and_ignores_dot_files() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "APP.md", "---\n");
        write(dir.path(), "assets/logo.svg", "<svg/>");
        write(dir.path(), ".git/config", "x");
        write(dir.path(), ".DS_Store", "x");
        let (source, codes) = read(dir.path());
        assert!(codes.is_empty(), "{codes:?}");
        assert_eq!(
            source.files.keys().collect::<Vec<_>>(),
            ["APP.md", "assets/logo.svg"]
        );
    }

    #[test]
    fn refuses_links_depth_names_and_binaries() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a/b/c/ok.txt", "x");
        write(dir.path(), "a/b/c/d/too-deep.txt", "x");
        write(dir.path(), "logo.exe", "x");
        write(dir.path(), "photo.bmp", "x");
        write(dir.path(), "logo.png", "x");
        write(dir.path(), "font.woff2", "x");
        write(dir.path(), "back\\slash.txt", "x");
        write(dir.path(), "50%.txt", "x");
        write(dir.path(), "zero\u{200B}width.txt", "x");
        write(dir.path(), "bell\u{7}.txt", "x");
        std::fs::write(dir.path().join("latin1.txt"), [0x66, 0xE9]).unwrap();
        write(dir.path(), "nul.txt", "a\0b");
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("passwd.txt")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("a"), dir.path().join("linked")).unwrap();
        let (source, codes) = read(dir.path());
        let expect = [
            ("50%.txt", "PATH_INVALID_NAME"),
            ("a/b/c/d", "PATH_TOO_DEEP"),
            ("back\\slash.txt", "PATH_INVALID_NAME"),
            ("bell\u{7}.txt", "PATH_INVALID_NAME"),
            ("latin1.txt", "SOURCE_NOT_UTF8"),
            ("linked", "PATH_SYMLINK"),
            ("logo.exe", "PATH_EXTENSION"),
            ("nul.txt", "SOURCE_NUL"),
            ("passwd.txt", "PATH_SYMLINK"),
            ("photo.bmp", "PATH_EXTENSION"),
            ("zero\u{200B}width.txt", "PATH_INVALID_NAME"),
        ];
        let expect: Vec<(String, String)> = expect
            .iter()
            .map(|(f, c)| ((*f).into(), (*c).into()))
            .collect();
        assert_eq!(codes, expect);
        assert_eq!(source.files.keys().collect::<Vec<_>>(), ["a/b/c/ok.txt"]);
        // Binary assets are read as bytes, whatever they hold: whether they
        // are what their extension says is crate::asset's to judge.
        assert_eq!(
            source.binary.keys().collect::<Vec<_>>(),
            ["font.woff2", "logo.png"]
        );
        assert_eq!(source.binary["logo.png"], b"x");
    }

    #[test]
    fn stops_at_the_file_and_size_limits() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..2000 {
            write(dir.path(), &format!("f{i:04}.txt"), "x");
        }
        let (source, codes) = read(dir.path());
        assert_eq!(source.files.len(), MAX_FILES);
        assert!(
            codes
                .iter()
                .any(|(_, code)| code == "PACKAGE_TOO_MANY_FILES")
        );

        let dir = tempfile::tempdir().unwrap();
        let big = "x".repeat(600 * 1024);
        write(dir.path(), "a.txt", &big);
        write(dir.path(), "b.txt", &big);
        write(dir.path(), "huge.txt", &"y".repeat(2 * 1024 * 1024));
        let (source, codes) = read(dir.path());
        assert_eq!(source.files.len(), 1);
        assert!(
            codes.contains(&("b.txt".into(), "PACKAGE_TOO_LARGE".into())),
            "{codes:?}"
        );
    }

    #[test]
    fn a_symlinked_package_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "real/APP.md", "x");
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
        let (_, codes) = read(&dir.path().join("link"));
        assert_eq!(codes, [(".".to_owned(), "PATH_SYMLINK".to_owned())]);
    }

    #[test]
    fn binary_assets_count_against_the_same_limits() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..40 {
            write(dir.path(), &format!("t{i:02}.txt"), "x");
        }
        for i in 0..40 {
            std::fs::write(dir.path().join(format!("i{i:02}.png")), [0x89, b'P']).unwrap();
        }
        let (source, codes) = read(dir.path());
        assert_eq!(source.len(), MAX_FILES);
        assert!(!source.binary.is_empty() && !source.files.is_empty());
        assert!(
            codes
                .iter()
                .any(|(_, code)| code == "PACKAGE_TOO_MANY_FILES")
        );

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.png"), vec![1u8; 600 * 1024]).unwrap();
        std::fs::write(dir.path().join("b.woff2"), vec![2u8; 600 * 1024]).unwrap();
        std::fs::write(dir.path().join("c.gif"), vec![3u8; 2 * 1024 * 1024]).unwrap();
        let (source, codes) = read(dir.path());
        assert_eq!(source.binary.keys().collect::<Vec<_>>(), ["a.png"]);
        assert!(
            codes.contains(&("b.woff2".into(), "PACKAGE_TOO_LARGE".into())),
            "{codes:?}"
        );
    }

    #[test]
    fn entries_merge_text_and_binary_in_path_order() {
        let mut source = PackageSource::default();
        source.set("b.png", Some(&[1, 2]));
        source.set("a.txt", Some(b"a"));
        source.set("c.css", Some(b"c"));
        // Not UTF-8 at a text path: left out, as reading the folder would.
        source.set("d.txt", Some(&[0xFF]));
        let entries: Vec<(&str, &[u8])> = source.entries();
        assert_eq!(
            entries,
            [
                ("a.txt", &b"a"[..]),
                ("b.png", &[1, 2][..]),
                ("c.css", &b"c"[..])
            ]
        );
        assert!(source.contains("b.png") && !source.contains("d.txt"));
        source.set("b.png", None);
        assert!(!source.contains("b.png"));
        assert_eq!(source.len(), 2);
    }
}
