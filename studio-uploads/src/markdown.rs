//! Markdown tables as the converters write them (CSV files, DOCX tables):
//! cells escaped and bounded, rows padded to the header.
//!
//! What it must never do: let a cell break its row (a line break or a `|`)
//! or grow without bound.

/// Most characters of one CSV cell.
pub const MAX_CSV_CELL_CHARS: usize = 1_000;
/// One cell's text as a Markdown table cell: no line breaks, `|` escaped,
/// at most [`MAX_CSV_CELL_CHARS`] characters.
pub fn table_cell(text: &str) -> String {
    let mut cell = String::with_capacity(text.len().min(MAX_CSV_CELL_CHARS));
    for (index, c) in text.trim().chars().enumerate() {
        if index == MAX_CSV_CELL_CHARS {
            cell.push('…');
            break;
        }
        match c {
            '|' => cell.push_str("\\|"),
            '\r' => {}
            '\n' => cell.push_str("<br>"),
            c if c.is_control() => cell.push(' '),
            c => cell.push(c),
        }
    }
    cell
}

/// Rows of already escaped cells as a Markdown table of `columns` columns;
/// the first row is the header. Short rows are padded.
pub fn table(rows: &[Vec<String>], columns: usize) -> String {
    let columns = columns.max(1);
    let mut markdown = String::new();
    let mut line = |cells: &[String]| {
        markdown.push('|');
        for index in 0..columns {
            markdown.push(' ');
            markdown.push_str(cells.get(index).map(String::as_str).unwrap_or_default());
            markdown.push_str(" |");
        }
        markdown.push('\n');
    };
    line(&rows[0]);
    line(&vec!["---".to_owned(); columns]);
    for row in &rows[1..] {
        line(row);
    }
    markdown
}
