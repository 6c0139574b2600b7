//! DOCX to Markdown: `word/document.xml` read from the ZIP container with
//! quick-xml, without recursion.
//!
//! Paragraphs become paragraphs; `pStyle` `Heading1`…`Heading6` (and `Title`)
//! become `#`…`######`; numbered or `List…`-styled paragraphs become `- `
//! items (indented by `ilvl`); tables become Markdown tables (a nested table's
//! text joins its outer cell); `w:br`/`w:cr` are hard line breaks. Drawings,
//! text boxes, embedded objects and field codes are skipped.
//!
//! Bombs: the archive may declare at most [`MAX_ENTRIES`] entries (read from
//! the end-of-central-directory record before the archive is parsed), and
//! `word/document.xml` may declare and actually yield at most
//! [`MAX_DOCUMENT_XML_BYTES`] (read through a limited reader). quick-xml never
//! expands entities declared in a DTD.

use std::io::{Cursor, Read as _};

use quick_xml::events::{BytesStart, Event};

use crate::markdown::{table, table_cell};
use crate::refusal::{Refusal, looks_like};

/// Most bytes `word/document.xml` may expand to (50 MiB).
pub const MAX_DOCUMENT_XML_BYTES: u64 = 50 * 1024 * 1024;
/// Most entries the archive may have.
pub const MAX_ENTRIES: usize = 10_000;
/// The OLE compound file signature (Word 97–2003, password-protected Office).
const OLE_MAGIC: &[u8] = b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1";
/// Elements whose whole subtree carries no body text for a reader.
const SKIPPED: &[&str] = &[
    "drawing",
    "pict",
    "object",
    "AlternateContent",
    "instrText",
    "delText",
    "sdtPr",
    "footnotePr",
    "endnotePr",
];

pub(super) fn convert(data: &[u8]) -> Result<String, Refusal> {
    if data.starts_with(OLE_MAGIC) {
        return Err(Refusal::DocxProtectedOrLegacy);
    }
    if !data.starts_with(b"PK\x03\x04") {
        return Err(Refusal::NotDocx {
            looks_like: looks_like(data),
        });
    }
    let entries = declared_entries(data).ok_or(Refusal::DocxMalformed)?;
    if entries > MAX_ENTRIES {
        return Err(Refusal::DocxTooManyParts { limit: MAX_ENTRIES });
    }
    let mut archive =
        zip::ZipArchive::new(Cursor::new(data)).map_err(|_| Refusal::DocxMalformed)?;
    let entry = match archive.by_name("word/document.xml") {
        Ok(entry) => entry,
        Err(zip::result::ZipError::FileNotFound) => return Err(Refusal::DocxNotWord),
        Err(
            zip::result::ZipError::UnsupportedArchive(_) | zip::result::ZipError::InvalidPassword,
        ) => {
            return Err(Refusal::DocxEncrypted);
        }
        Err(_) => return Err(Refusal::DocxMalformed),
    };
    if entry.encrypted() {
        return Err(Refusal::DocxEncrypted);
    }
    let too_large = Refusal::DocxTooLarge {
        limit_mib: (MAX_DOCUMENT_XML_BYTES / (1024 * 1024)) as usize,
    };
    if entry.size() > MAX_DOCUMENT_XML_BYTES {
        return Err(too_large);
    }
    // The declared size may lie: the limited reader is what bounds memory.
    let mut xml = Vec::with_capacity(entry.size() as usize);
    entry
        .take(MAX_DOCUMENT_XML_BYTES + 1)
        .read_to_end(&mut xml)
        .map_err(|_| Refusal::DocxMalformed)?;
    if xml.len() as u64 > MAX_DOCUMENT_XML_BYTES {
        return Err(too_large);
    }
    let xml = std::str::from_utf8(&xml).map_err(|_| Refusal::DocxMalformed)?;
    document_markdown(xml.strip_prefix('\u{FEFF}').unwrap_or(xml))
}

/// The entry count of the end-of-central-directory record, `None` when there
/// is no such record. ZIP64 archives say `0xFFFF` here, which is over the
/// limit: a Word document never needs them.
fn declared_entries(data: &[u8]) -> Option<usize> {
    const EOCD: &[u8] = b"PK\x05\x06";
    const EOCD_LEN: usize = 22;
    // The record is the last thing in the file, after a comment of at most 64 KiB.
    let search_from = data.len().saturating_sub(EOCD_LEN + u16::MAX as usize);
    let tail = &data[search_from..];
    let at = tail
        .windows(EOCD.len())
        .rposition(|window| window == EOCD)?;
    let record = tail.get(at..at + EOCD_LEN)?;
    Some(u16::from_le_bytes([record[10], record[11]]) as usize)
}

/// One block of output.
#[derive(Debug)]
enum Block {
    Paragraph(String),
    ListItem(String),
    Table(String),
}

/// The paragraph being read.
#[derive(Debug, Default)]
struct Paragraph {
    text: String,
    heading: Option<usize>,
    /// `Some(level)` for a list paragraph.
    list: Option<usize>,
}

/// The outermost table being read; nested tables only add text to its cells.
#[derive(Debug, Default)]
struct Table {
    rows: Vec<Vec<String>>,
    row: Vec<String>,
    cell: String,
}

/// The walk over `word/document.xml`.
#[derive(Debug, Default)]
struct Walker {
    blocks: Vec<Block>,
    paragraph: Option<Paragraph>,
    table: Option<Table>,
    /// How many `w:tbl` are open (the outermost is `table`).
    table_depth: usize,
    /// Inside `w:pPr` (where `w:tab` declares tab stops rather than a tab).
    in_paragraph_properties: bool,
    /// Inside `w:t`.
    in_text: bool,
    /// Open elements of a skipped subtree.
    skipping: usize,
}

fn document_markdown(xml: &str) -> Result<String, Refusal> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut walker = Walker::default();
    loop {
        let event = reader.read_event().map_err(|_| Refusal::DocxMalformed)?;
        if walker.skipping > 0 {
            match event {
                Event::Start(_) => walker.skipping += 1,
                Event::End(_) => walker.skipping -= 1,
                Event::Eof => break,
                _ => {}
            }
            continue;
        }
        match event {
            Event::Start(element) => walker.open(&element, false),
            Event::Empty(element) => walker.open(&element, true),
            Event::End(element) => walker.close(element.local_name().as_ref()),
            Event::Text(text) if walker.in_text => walker.push_text(&text.xml10_content()),
            Event::CData(text) if walker.in_text => walker.push_text(&text.xml10_content()),
            Event::GeneralRef(reference) if walker.in_text => {
                if let Ok(Some(c)) = reference.resolve_char_ref() {
                    walker.push_text(&c.to_string());
                } else if let Some(text) =
                    quick_xml::escape::resolve_predefined_entity(&reference.xml10_content())
                {
                    walker.push_text(text);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(walker.finish())
}

impl Walker {
    fn open(&mut self, element: &BytesStart<'_>, empty: bool) {
        let name = element.local_name();
        let name = name.as_ref();
        if SKIPPED.contains(&name) {
            if !empty {
                self.skipping = 1;
            }
            return;
        }
        match name {
            "p" if !empty => self.paragraph = Some(Paragraph::default()),
            "pPr" if !empty => self.in_paragraph_properties = true,
            "pStyle" => {
                if let (Some(style), Some(paragraph)) = (value(element), self.paragraph.as_mut()) {
                    let lower = style.to_ascii_lowercase();
                    if let Some(level) = lower.strip_prefix("heading").and_then(heading_level) {
                        paragraph.heading = Some(level);
                    } else if lower == "title" {
                        paragraph.heading = Some(1);
                    } else if lower.starts_with("list") && paragraph.list.is_none() {
                        paragraph.list = Some(0);
                    }
                }
            }
            "numPr" => {
                if let Some(paragraph) = self.paragraph.as_mut() {
                    paragraph.list.get_or_insert(0);
                }
            }
            "ilvl" => {
                if let (Some(level), Some(paragraph)) = (value(element), self.paragraph.as_mut()) {
                    paragraph.list = Some(level.trim().parse::<usize>().unwrap_or(0).min(8));
                }
            }
            "t" if !empty => self.in_text = true,
            "tab" if !self.in_paragraph_properties => self.push_text("\t"),
            "br" | "cr" if !self.in_paragraph_properties => self.push_text("\n"),
            "noBreakHyphen" => self.push_text("-"),
            "tbl" if !empty => {
                self.close_paragraph();
                self.table_depth += 1;
                if self.table_depth == 1 {
                    self.table = Some(Table::default());
                }
            }
            "tr" if self.table_depth == 1 => {
                if let Some(table) = self.table.as_mut() {
                    table.row.clear();
                }
            }
            "tc" if self.table_depth == 1 => {
                if let Some(table) = self.table.as_mut() {
                    table.cell.clear();
                }
            }
            _ => {}
        }
    }

    fn close(&mut self, name: &str) {
        match name {
            "p" => self.close_paragraph(),
            "pPr" => self.in_paragraph_properties = false,
            "t" => self.in_text = false,
            "tc" if self.table_depth == 1 => {
                if let Some(table) = self.table.as_mut() {
                    let cell = std::mem::take(&mut table.cell);
                    table.row.push(cell);
                }
            }
            "tr" if self.table_depth == 1 => {
                if let Some(table) = self.table.as_mut() {
                    let row = std::mem::take(&mut table.row);
                    table.rows.push(row);
                }
            }
            "tbl" => {
                self.table_depth = self.table_depth.saturating_sub(1);
                if self.table_depth == 0
                    && let Some(table) = self.table.take()
                    && !table.rows.is_empty()
                {
                    let columns = table.rows.iter().map(Vec::len).max().unwrap_or(1);
                    self.blocks
                        .push(Block::Table(table_markdown(&table.rows, columns)));
                }
            }
            _ => {}
        }
    }

    fn push_text(&mut self, text: &str) {
        if let Some(paragraph) = self.paragraph.as_mut() {
            paragraph.text.push_str(text);
        }
    }

    fn close_paragraph(&mut self) {
        let Some(paragraph) = self.paragraph.take() else {
            return;
        };
        if let Some(table) = self.table.as_mut() {
            let text = paragraph.text.trim();
            if !text.is_empty() {
                if !table.cell.is_empty() {
                    table.cell.push('\n');
                }
                table.cell.push_str(text);
            }
            return;
        }
        let text = hard_breaks(paragraph.text.trim());
        if text.is_empty() {
            return;
        }
        let block = match (paragraph.heading, paragraph.list) {
            (Some(level), _) => Block::Paragraph(format!(
                "{} {}",
                "#".repeat(level),
                text.replace("  \n", " ")
            )),
            (None, Some(level)) => Block::ListItem(format!("{}- {text}", "  ".repeat(level))),
            (None, None) => Block::Paragraph(text),
        };
        self.blocks.push(block);
    }

    fn finish(mut self) -> String {
        self.close_paragraph();
        let mut markdown = String::new();
        let mut previous_was_item = false;
        for block in self.blocks {
            let is_item = matches!(block, Block::ListItem(_));
            if !markdown.is_empty() {
                markdown.push_str(if is_item && previous_was_item {
                    "\n"
                } else {
                    "\n\n"
                });
            }
            match block {
                Block::Paragraph(text) | Block::ListItem(text) => markdown.push_str(&text),
                Block::Table(text) => markdown.push_str(text.trim_end()),
            }
            previous_was_item = is_item;
        }
        if !markdown.is_empty() {
            markdown.push('\n');
        }
        markdown
    }
}

/// The `w:val` attribute.
fn value(element: &BytesStart<'_>) -> Option<String> {
    element
        .attributes()
        .flatten()
        .find(|attr| attr.key.local_name().as_ref() == "val")
        .map(|attr| attr.value.into_owned())
}

fn heading_level(digits: &str) -> Option<usize> {
    match digits.trim().parse::<usize>() {
        Ok(level @ 1..=6) => Some(level),
        _ => None,
    }
}

/// Line breaks inside a paragraph as Markdown hard breaks (two spaces before
/// the newline), each line trimmed of other trailing space.
fn hard_breaks(text: &str) -> String {
    text.split('\n')
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("  \n")
}

fn table_markdown(rows: &[Vec<String>], columns: usize) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| table_cell(cell)).collect())
        .collect();
    table(&cells, columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(inner: &str) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\
             <w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\"><w:body>{inner}</w:body></w:document>"
        )
    }

    #[test]
    fn paragraphs_headings_lists_breaks() {
        let xml = body(
            "<w:p><w:pPr><w:pStyle w:val=\"Heading2\"/><w:tabs><w:tab w:val=\"left\" w:pos=\"720\"/></w:tabs></w:pPr><w:r><w:t>Plan</w:t></w:r></w:p>\
             <w:p><w:r><w:t xml:space=\"preserve\">Fish &amp; chips </w:t></w:r><w:r><w:t>&#8364;5</w:t><w:br/><w:t>second line</w:t></w:r></w:p>\
             <w:p><w:pPr><w:numPr><w:ilvl w:val=\"0\"/><w:numId w:val=\"1\"/></w:numPr></w:pPr><w:r><w:t>first</w:t></w:r></w:p>\
             <w:p><w:pPr><w:numPr><w:ilvl w:val=\"1\"/><w:numId w:val=\"1\"/></w:numPr></w:pPr><w:r><w:t>nested</w:t></w:r></w:p>\
             <w:p/>\
             <w:p><w:r><w:drawing><w:t>hidden</w:t></w:drawing><w:t>after</w:t></w:r></w:p>",
        );
        assert_eq!(
            document_markdown(&xml).unwrap(),
            "## Plan\n\nFish & chips €5  \nsecond line\n\n- first\n  - nested\n\nafter\n"
        );
    }

    #[test]
    fn tables_become_markdown_tables() {
        let xml = body(
            "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Name</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Note</w:t></w:r></w:p></w:tc></w:tr>\
             <w:tr><w:tc><w:p><w:r><w:t>Ada</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>a|b</w:t></w:r></w:p><w:p><w:r><w:t>more</w:t></w:r></w:p></w:tc></w:tr></w:tbl>",
        );
        assert_eq!(
            document_markdown(&xml).unwrap(),
            "| Name | Note |\n| --- | --- |\n| Ada | a\\|b<br>more |\n"
        );
    }

    #[test]
    fn broken_xml_is_refused() {
        assert_eq!(
            document_markdown("<w:document><w:body></w:p></w:document>"),
            Err(Refusal::DocxMalformed)
        );
    }
}
