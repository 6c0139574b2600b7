//! The names of uploaded documents: what the user called the file (shown back,
//! bounded) and the safe name it is stored under.
//!
//! The safe-name rule is one function, [`safe_stem`], used both to derive a
//! stored name and to check a name asked for later ([`is_document_name`]): a
//! name is valid exactly when the rule maps its stem to itself, so `../x`,
//! `.hidden.md`, `a/b.md` or a non-NFC spelling can never be opened.

use unicode_normalization::{UnicodeNormalization as _, is_nfc};

/// Most characters of an original name kept for display.
pub const MAX_ORIGINAL_CHARS: usize = 255;
/// Most characters of an extension a shortened original name keeps.
const MAX_KEPT_EXTENSION_CHARS: usize = 16;
/// Most characters of a safe stem (the name without `.md`).
pub const MAX_STEM_CHARS: usize = 100;
/// Most bytes of a safe stem: 100 characters of a non-Latin script can take
/// 300 bytes, more than a file system allows in one name.
const MAX_STEM_BYTES: usize = 200;
/// The stem used when nothing of the original name survives.
pub const FALLBACK_STEM: &str = "document";
/// The extension of every stored document.
pub const EXTENSION: &str = ".md";

/// The last path segment of `given` (`/` and `\` both separate), without
/// control or bidirectional-override characters, trimmed, at most
/// [`MAX_ORIGINAL_CHARS`] characters (a longer name keeps its extension:
/// `long…name.pdf`); `document` when nothing is left.
pub fn display_name(given: &str) -> String {
    let last = given.rsplit(['/', '\\']).next().unwrap_or_default();
    let cleaned: String = last
        .chars()
        .filter(|c| !c.is_control() && !is_bidi_control(*c))
        .collect();
    let cleaned = cleaned.trim();
    if cleaned.is_empty() {
        return FALLBACK_STEM.to_owned();
    }
    if cleaned.chars().count() <= MAX_ORIGINAL_CHARS {
        return cleaned.to_owned();
    }
    match split_extension(cleaned) {
        (stem, Some(extension)) if extension.chars().count() <= MAX_KEPT_EXTENSION_CHARS => {
            let keep = MAX_ORIGINAL_CHARS - 2 - extension.chars().count();
            let stem: String = stem.chars().take(keep).collect();
            format!("{stem}\u{2026}.{extension}")
        }
        _ => cleaned.chars().take(MAX_ORIGINAL_CHARS).collect(),
    }
}

/// `(stem, extension)` of a display name: `brief.PDF` → `("brief", Some("PDF"))`,
/// `.hidden.md` → `(".hidden", Some("md"))`, `README` → `("README", None)`.
pub fn split_extension(name: &str) -> (&str, Option<&str>) {
    match name.rsplit_once('.') {
        Some((stem, extension)) => (stem, Some(extension)),
        None => (name, None),
    }
}

/// The safe stem of `stem`: Unicode NFC; letters, digits, `_`, `-` and `.`
/// kept, every other character (spaces included) mapped to `-`; runs of `-`
/// and of `.` collapsed (so never `..`); no leading or trailing `-` or `.`;
/// at most [`MAX_STEM_CHARS`] characters and 200 bytes; [`FALLBACK_STEM`]
/// when nothing is left.
pub fn safe_stem(stem: &str) -> String {
    let mut out = String::new();
    let mut dash = false;
    for c in stem.nfc() {
        if c.is_alphanumeric() || c == '_' {
            if dash && !out.is_empty() {
                if !fits(&out, '-') {
                    break;
                }
                out.push('-');
            }
            dash = false;
            if !fits(&out, c) {
                break;
            }
            out.push(c);
        } else if c == '.' {
            if out.is_empty() || out.ends_with('.') {
                continue;
            }
            if dash {
                if !fits(&out, '-') {
                    break;
                }
                out.push('-');
                dash = false;
            }
            if !fits(&out, '.') {
                break;
            }
            out.push('.');
        } else {
            dash = true;
        }
    }
    let trimmed = out.trim_end_matches(['-', '.']);
    if trimmed.is_empty() {
        FALLBACK_STEM.to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// The `attempt`-th name tried for `stem` (1-based): `brief.md`, `brief-2.md`,
/// … The stem is shortened so that stem and suffix stay within the bounds.
pub fn candidate(stem: &str, attempt: usize) -> String {
    if attempt <= 1 {
        return format!("{stem}{EXTENSION}");
    }
    let suffix = format!("-{attempt}");
    let mut base = String::new();
    for c in stem.chars() {
        if base.chars().count() + suffix.len() >= MAX_STEM_CHARS
            || base.len() + c.len_utf8() + suffix.len() > MAX_STEM_BYTES
        {
            break;
        }
        base.push(c);
    }
    let base = base.trim_end_matches(['-', '.']);
    let base = if base.is_empty() { FALLBACK_STEM } else { base };
    format!("{base}{suffix}{EXTENSION}")
}

/// Whether `name` is a stored document's name: `<stem>.md` where the stem is
/// NFC and [`safe_stem`] maps it to itself.
pub fn is_document_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(EXTENSION) else {
        return false;
    };
    !stem.is_empty() && is_nfc(stem) && safe_stem(stem) == stem
}

fn fits(out: &str, next: char) -> bool {
    out.chars().count() < MAX_STEM_CHARS && out.len() + next.len_utf8() <= MAX_STEM_BYTES
}

/// Characters that reorder how a name is displayed (bidi embeddings,
/// overrides and isolates), dropped from shown names.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(given: &str) -> String {
        let display = display_name(given);
        let (stem, _) = split_extension(&display);
        candidate(&safe_stem(stem), 1)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

        /// Whatever a browser calls a file, the stored name is one the
        /// safe-name rule reads back, with no separator (the `paths` fuzz
        /// target runs the same property at length).
        #[test]
        fn any_given_name_stores_under_a_safe_name(given in "\\PC{0,120}") {
            let shown = display_name(&given);
            proptest::prop_assert!(!shown.contains('/') && !shown.contains('\\'));
            let name = stored(&given);
            proptest::prop_assert!(is_document_name(&name), "{given:?} became {name:?}");
        }
    }

    #[test]
    fn names_become_safe() {
        let check = |given: &str, expected: &str| {
            let name = stored(given);
            assert_eq!(name, expected, "{given:?}");
            assert!(is_document_name(&name), "{name:?} must be readable");
        };
        check("../../etc/passwd.txt", "passwd.md");
        check(".hidden.md", "hidden.md");
        check("a/b\\c.csv", "c.md");
        check("Quarterly report (final).docx", "Quarterly-report-final.md");
        check("  spaced   out  .txt", "spaced-out.md");
        check("...dots...and..more.pdf", "dots.and.more.md");
        check("-leading-dash.md", "leading-dash.md");
        check("Überblick Straße.md", "Überblick-Straße.md");
        check("報告書.docx", "報告書.md");
        // Decomposed input is stored composed.
        check("Cafe\u{301}.txt", "Caf\u{e9}.md");
        check("💥🔥.txt", "document.md");
        check(".md", "document.md");
        check("", "document.md");
        check("name\u{202E}txt.exe.pdf", "nametxt.exe.md");
        check("a+b=c.csv", "a-b-c.md");
        check("tab\there.csv", "tabhere.md");
    }

    #[test]
    fn long_names_are_bounded() {
        let long = format!("{}.txt", "x".repeat(300));
        let name = stored(&long);
        assert_eq!(name, format!("{}.md", "x".repeat(MAX_STEM_CHARS)));
        assert!(display_name(&"y".repeat(400)).chars().count() == MAX_ORIGINAL_CHARS);
        let shown = display_name(&format!("{}.docx", "z".repeat(400)));
        assert_eq!(shown.chars().count(), MAX_ORIGINAL_CHARS);
        assert!(shown.ends_with("z\u{2026}.docx"), "{shown}");
        let wide = format!("{}.txt", "報".repeat(300));
        let name = stored(&wide);
        assert!(
            name.len() <= MAX_STEM_BYTES + EXTENSION.len(),
            "{}",
            name.len()
        );
        assert!(is_document_name(&name));
        let suffixed = candidate(&"x".repeat(MAX_STEM_CHARS), 12);
        assert_eq!(suffixed.chars().count(), MAX_STEM_CHARS + EXTENSION.len());
        assert!(suffixed.ends_with("-12.md"));
        assert!(is_document_name(&suffixed));
    }

    #[test]
    fn candidates_count_up() {
        assert_eq!(candidate("brief", 1), "brief.md");
        assert_eq!(candidate("brief", 2), "brief-2.md");
        assert_eq!(candidate("brief", 3), "brief-3.md");
    }

    #[test]
    fn only_safe_names_are_document_names() {
        for ok in ["brief.md", "brief-2.md", "a.b.md", "Überblick.md", "x_y.md"] {
            assert!(is_document_name(ok), "{ok}");
        }
        for bad in [
            "../x.md",
            "../x",
            "a/b.md",
            "a\\b.md",
            ".hidden.md",
            ".md",
            "brief.txt",
            "brief",
            "a..b.md",
            "a b.md",
            "a--b.md",
            "-a.md",
            "a-.md",
            "Cafe\u{301}.md",
            "/etc/passwd.md",
            ".sasha-tmp-0011223344556677",
            "",
        ] {
            assert!(!is_document_name(bad), "{bad:?}");
        }
    }
}
