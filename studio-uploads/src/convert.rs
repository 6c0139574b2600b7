//! Converting one uploaded file to Markdown, or saying why not.
//!
//! The type comes from the extension and the content must agree (magic bytes
//! for PDF and DOCX, UTF-8 without NUL bytes for the text types), so a renamed
//! binary is refused. Every converter runs under `catch_unwind`: third-party
//! readers (the PDF text extractor above all) may panic on hostile input, and
//! a panic is a refusal of that file, never of the process.
//!
//! Bounds, per file:
//!
//! - CSV: at most [`MAX_CSV_ROWS`] data rows and [`MAX_CSV_COLUMNS`] columns,
//!   cells cut at [`crate::markdown::MAX_CSV_CELL_CHARS`]; a final line says what was left out.
//! - HTML: element nesting at most [`MAX_HTML_DEPTH`] (refused beyond).
//! - PDF and DOCX: see [`super::pdf`] and [`super::docx`].
//! - The Markdown of any file: at most [`MAX_MARKDOWN_BYTES`]; a longer one is
//!   **truncated** at a line boundary and ends with a note line (refusing would
//!   lose a long document entirely; the assistant is told it is partial).

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::limits::MAX_MARKDOWN_BYTES;
use crate::markdown::{table, table_cell};
use crate::refusal::{Refusal, SIGNATURES, looks_like};
use crate::{docx, pdf};

/// Most data rows of a CSV table (the header row not counted).
pub const MAX_CSV_ROWS: usize = 5_000;
/// Most columns of a CSV table.
pub const MAX_CSV_COLUMNS: usize = 50;
/// Deepest element nesting of an HTML document.
pub const MAX_HTML_DEPTH: usize = 512;
/// Most characters of an extension quoted back in a refusal.
const MAX_SHOWN_EXTENSION_CHARS: usize = 16;

/// The document types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Markdown,
    Csv,
    Html,
    Pdf,
    Docx,
}

impl Kind {
    /// The type of an extension (case-insensitive, without the dot).
    pub fn from_extension(extension: &str) -> Option<Kind> {
        match extension.to_ascii_lowercase().as_str() {
            "txt" => Some(Kind::Text),
            "md" | "markdown" => Some(Kind::Markdown),
            "csv" => Some(Kind::Csv),
            "html" | "htm" => Some(Kind::Html),
            "pdf" => Some(Kind::Pdf),
            "docx" => Some(Kind::Docx),
            _ => None,
        }
    }
}

/// Converts `data`, whose name ends in `.<extension>`, to Markdown of at most
/// [`MAX_MARKDOWN_BYTES`].
pub fn convert(extension: Option<&str>, data: &[u8]) -> Result<String, Refusal> {
    let Some(extension) = extension else {
        return Err(Refusal::Unsupported { extension: None });
    };
    let Some(kind) = Kind::from_extension(extension) else {
        return Err(Refusal::Unsupported {
            extension: Some(shown_extension(extension)),
        });
    };
    if data.is_empty() {
        return Err(Refusal::Empty);
    }
    let markdown = catch_unwind(AssertUnwindSafe(|| convert_kind(kind, data)))
        .unwrap_or(Err(Refusal::Failed))?;
    Ok(truncate(markdown, MAX_MARKDOWN_BYTES))
}

fn convert_kind(kind: Kind, data: &[u8]) -> Result<String, Refusal> {
    match kind {
        Kind::Text | Kind::Markdown => Ok(normalize_newlines(text(data)?)),
        Kind::Csv => csv_table(text(data)?),
        Kind::Html => html(text(data)?),
        Kind::Pdf => pdf::convert(data),
        Kind::Docx => docx::convert(data),
    }
}

/// The note line that ends a truncated document.
pub fn truncation_note(limit: usize) -> String {
    format!(
        "\n\n_[Truncated: the converted document was longer than {} MiB; the rest was left out.]_\n",
        limit / (1024 * 1024)
    )
}

/// `markdown` cut to at most `limit` bytes: at the last line break that leaves
/// room for the note (at a character boundary if there is none), then the note.
pub fn truncate(markdown: String, limit: usize) -> String {
    if markdown.len() <= limit {
        return markdown;
    }
    let note = truncation_note(limit);
    let mut cut = limit.saturating_sub(note.len());
    while !markdown.is_char_boundary(cut) {
        cut -= 1;
    }
    if let Some(line_end) = markdown[..cut].rfind('\n') {
        cut = line_end;
    }
    let mut kept = markdown;
    kept.truncate(cut);
    let trimmed = kept.trim_end().len();
    kept.truncate(trimmed);
    kept.push_str(&note);
    kept
}

/// The content of a text type as UTF-8 without a byte-order mark.
fn text(data: &[u8]) -> Result<&str, Refusal> {
    if data.starts_with(&[0xFF, 0xFE]) || data.starts_with(&[0xFE, 0xFF]) {
        return Err(Refusal::Utf16);
    }
    let looks_like = looks_like(data);
    // Two-byte signatures ("MZ") can begin real text; longer ones cannot.
    if SIGNATURES
        .iter()
        .any(|(magic, _)| magic.len() >= 4 && data.starts_with(magic))
    {
        return Err(Refusal::NotText { looks_like });
    }
    if data.contains(&0) {
        return Err(Refusal::NotText { looks_like });
    }
    let text = std::str::from_utf8(data).map_err(|_| Refusal::NotText { looks_like })?;
    Ok(text.strip_prefix('\u{FEFF}').unwrap_or(text))
}

/// The extension as a refusal may quote it: printable, bounded.
fn shown_extension(extension: &str) -> String {
    let shown: String = extension
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_SHOWN_EXTENSION_CHARS)
        .collect();
    shown.to_ascii_lowercase()
}

fn normalize_newlines(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// A CSV file as one Markdown table: the first record is the header; `,` is
/// the separator unless the first line has more `;` or tabs.
fn csv_table(text: &str) -> Result<String, Refusal> {
    let first_line = text.lines().next().unwrap_or_default();
    let count = |needle: char| first_line.matches(needle).count();
    let delimiter = if count('\t') > count(',') && count('\t') >= count(';') {
        b'\t'
    } else if count(';') > count(',') {
        b';'
    } else {
        b','
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(delimiter)
        .from_reader(text.as_bytes());
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut total_rows = 0usize;
    let mut total_columns = 0usize;
    for record in reader.records() {
        let record = record.map_err(|_| Refusal::CsvMalformed)?;
        total_rows += 1;
        total_columns = total_columns.max(record.len());
        if rows.len() <= MAX_CSV_ROWS {
            rows.push(
                record
                    .iter()
                    .take(MAX_CSV_COLUMNS)
                    .map(table_cell)
                    .collect(),
            );
        }
    }
    if rows.is_empty() {
        return Ok(String::new());
    }
    let columns = total_columns.min(MAX_CSV_COLUMNS);
    let mut markdown = table(&rows, columns);
    let data_rows = total_rows - 1;
    let shown_rows = rows.len() - 1;
    if data_rows > shown_rows || total_columns > columns {
        markdown.push_str(&format!(
            "\n_[Table truncated: showing {shown_rows} of {data_rows} rows and {columns} of {total_columns} columns.]_\n"
        ));
    }
    Ok(markdown)
}

/// Tags whose content is never text for a reader.
const HTML_SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "iframe", "object", "embed", "canvas", "svg", "head",
];

/// HTML to Markdown with htmd: scripts, styles and embedded objects dropped;
/// images keep their alt text and only an http(s) source; links keep only an
/// http(s), mailto or relative target.
fn html(text: &str) -> Result<String, Refusal> {
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(HTML_SKIPPED.to_vec())
        .add_handler(
            vec!["img"],
            |handlers: &dyn htmd::element_handler::Handlers, element: htmd::Element| {
                let attribute = |wanted: &str| {
                    element
                        .attrs
                        .iter()
                        .find(|attr| &*attr.name.local == wanted)
                        .map(|attr| attr.value.to_string())
                };
                let src = attribute("src").unwrap_or_default();
                if is_web_url(&src) {
                    return handlers.fallback(element);
                }
                let alt = attribute("alt").unwrap_or_default();
                let alt = alt.trim();
                (!alt.is_empty()).then(|| alt.to_owned().into())
            },
        )
        .add_handler(
            vec!["a"],
            |handlers: &dyn htmd::element_handler::Handlers, element: htmd::Element| {
                let href = element
                    .attrs
                    .iter()
                    .find(|attr| &*attr.name.local == "href")
                    .map(|attr| attr.value.trim().to_ascii_lowercase());
                match href {
                    Some(href) if has_unsafe_scheme(&href) => {
                        Some(handlers.walk_children(element.node))
                    }
                    _ => handlers.fallback(element),
                }
            },
        )
        .build();
    let tree = converter.html_to_tree(text).map_err(|_| Refusal::Failed)?;
    if depth(&tree) > MAX_HTML_DEPTH {
        return Err(Refusal::HtmlTooDeep {
            limit: MAX_HTML_DEPTH,
        });
    }
    Ok(converter.tree_to_markdown(&tree))
}

fn is_web_url(url: &str) -> bool {
    let url = url.trim().to_ascii_lowercase();
    url.starts_with("https://") || url.starts_with("http://")
}

/// A link target with a scheme other than http, https and mailto (a relative
/// or fragment link has none).
fn has_unsafe_scheme(href: &str) -> bool {
    let Some((scheme, _)) = href.split_once(':') else {
        return false;
    };
    let is_scheme = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    is_scheme && !matches!(scheme, "http" | "https" | "mailto")
}

/// The deepest nesting below `root`, walked without recursion.
fn depth(root: &std::rc::Rc<htmd::Node>) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(root.clone(), 0usize)];
    while let Some((node, level)) = pending.pop() {
        deepest = deepest.max(level);
        if level > MAX_HTML_DEPTH {
            break;
        }
        for child in node.children.borrow().iter() {
            pending.push((child.clone(), level + 1));
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

        /// Any bytes under any supported extension are refused with a reason
        /// or converted within the stored bound, never a panic (the
        /// `documents` fuzz target runs the same property at length).
        #[test]
        fn any_bytes_convert_or_are_refused(
            kind in 0usize..6,
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2048),
            prefix in 0usize..3,
        ) {
            let extension = ["txt", "md", "csv", "html", "pdf", "docx"][kind];
            // Some inputs start like the real thing, to get past the magic.
            let mut file = [&b""[..], b"%PDF-1.7\n", b"PK\x03\x04"][prefix].to_vec();
            file.extend(data);
            if let Ok(markdown) = convert(Some(extension), &file) {
                proptest::prop_assert!(markdown.len() <= MAX_MARKDOWN_BYTES + 200);
            }
        }
    }

    #[test]
    fn truncation_keeps_whole_lines_and_says_so() {
        let text = "line one\nline two\nline three\n".repeat(10);
        let cut = truncate(text.clone(), 200);
        assert!(cut.len() <= 200, "{}", cut.len());
        assert!(cut.ends_with(&truncation_note(200)));
        let kept = cut.strip_suffix(&truncation_note(200)).unwrap();
        assert!(text.starts_with(kept));
        assert!(
            kept.ends_with("line one")
                || kept.ends_with("line two")
                || kept.ends_with("line three")
        );
        assert_eq!(truncate("short".to_owned(), 200), "short");
        // No line break: cut at a character boundary.
        let wide = "報".repeat(200);
        let cut = truncate(wide, 300);
        assert!(cut.len() <= 300);
    }

    #[test]
    fn csv_cells_are_escaped_and_tables_bounded() {
        let markdown = csv_table("name,comment\nAda,\"a | b\"\nBob,\"two\nlines\"\n").unwrap();
        assert_eq!(
            markdown,
            "| name | comment |\n| --- | --- |\n| Ada | a \\| b |\n| Bob | two<br>lines |\n"
        );
        let wide: Vec<String> = (0..60).map(|i| format!("c{i}")).collect();
        let mut text = wide.join(",");
        text.push('\n');
        for row in 0..(MAX_CSV_ROWS + 7) {
            text.push_str(&format!("{row}\n"));
        }
        let markdown = csv_table(&text).unwrap();
        assert!(markdown.ends_with(&format!(
            "_[Table truncated: showing {MAX_CSV_ROWS} of {} rows and {MAX_CSV_COLUMNS} of 60 columns.]_\n",
            MAX_CSV_ROWS + 7
        )));
        assert!(!markdown.contains("| c50 |"));
        let semicolons = csv_table("a;b\n1;2\n").unwrap();
        assert!(semicolons.starts_with("| a | b |"), "{semicolons}");
    }

    #[test]
    fn html_links_and_images_are_kept_only_when_safe() {
        let markdown = html(
            "<p><a href=\"javascript:alert(1)\">click</a> <a href=\"https://example.com/\">site</a> \
             <img src=\"data:image/png;base64,AAAA\" alt=\"chart\"> <img src=\"https://example.com/a.png\" alt=\"logo\"></p>",
        )
        .unwrap();
        assert!(!markdown.contains("javascript"), "{markdown}");
        assert!(!markdown.contains("data:"), "{markdown}");
        assert!(markdown.contains("click"), "{markdown}");
        assert!(
            markdown.contains("[site](https://example.com/)"),
            "{markdown}"
        );
        assert!(markdown.contains("chart"), "{markdown}");
        assert!(
            markdown.contains("![logo](https://example.com/a.png)"),
            "{markdown}"
        );
    }

    #[test]
    fn deep_html_is_refused() {
        let deep = format!("{}x{}", "<div>".repeat(2000), "</div>".repeat(2000));
        assert_eq!(
            html(&deep),
            Err(Refusal::HtmlTooDeep {
                limit: MAX_HTML_DEPTH,
            })
        );
    }

    #[test]
    fn text_types_refuse_binary() {
        assert_eq!(
            text(b"\x89PNG\r\n\x1a\n\0\0"),
            Err(Refusal::NotText {
                looks_like: Some("a PNG image")
            })
        );
        assert_eq!(
            text(b"abc\0def"),
            Err(Refusal::NotText { looks_like: None })
        );
        assert_eq!(text(b"\xff\xfeh\0i\0"), Err(Refusal::Utf16));
        assert_eq!(text(b"\xef\xbb\xbfhello").unwrap(), "hello");
        assert_eq!(
            convert(Some("exe"), b"MZ").unwrap_err().reason(),
            ".exe is not a supported document type; supported: .txt .md .csv .html .pdf .docx"
        );
    }
}
