//! A table's rows as CSV: an import file read into one create request per
//! row, and an export's rows written back as a file of the same shape.
//!
//! The first record names the columns. A cell is typed by its column's kind
//! (a whole number, a number, text, a date); an empty cell is no value, so a
//! create leaves the column to its default or to NULL. The columns the
//! platform assigns (an INTEGER `id`, the owner field) are skipped on import
//! and said to be, so an export imports back as new rows of the importer's.
//!
//! An export is opened by people in spreadsheets, which run a cell that
//! begins with `=`, `+`, `-`, `@`, a tab or a carriage return as a formula
//! (CSV injection: a colleague's `=HYPERLINK(…)` in the manager's download).
//! Following OWASP's guidance, no exported text cell begins with one of
//! [`FORMULA_TRIGGERS`]: such a cell, and one that is only single quotes
//! before such a character, gets one more `'` in front, which spreadsheets
//! show as text. Import takes exactly one `'` off a cell of that shape, so
//! every text value comes back byte for byte, and a file a spreadsheet saved
//! with its own `'` marks reads as the values the person saw. Numbers are
//! written as JSON numerals (`-5`, `1.5e3`), which no spreadsheet reads as a
//! formula, so they stay numbers.
//!
//! It must never write SQL or decide who owns a row: each row it reads is the
//! `values` of an ordinary create, checked by the same rules and stamped with
//! the same owner, and it writes only rows the governed list returned.

use sasha_contract::data::value_kinds;
use sasha_contract::grammar::{MAX_CSV_BYTES, MAX_CSV_ROWS};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Map, Number, Value, json};

use super::{ID_COLUMN, TableSpec, VERSION_COLUMN, invalid, shown};

/// One row of an import: its number (1 is the first after the header) and
/// the values a create of it writes, with the columns they bind.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportRow {
    pub row: u64,
    pub values: Map<String, Value>,
}

/// An import file, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportFile {
    pub rows: Vec<ImportRow>,
    /// Header columns left to the platform (the INTEGER id, the owner field).
    pub skipped: Vec<String>,
}

/// `error` about row `row`: the same error with the row in its message and
/// details, so the person can find the line to fix.
pub fn at_row(row: u64, error: AppError) -> AppError {
    let mut details = match error.details.clone() {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    details.insert("row".to_owned(), json!(row));
    AppError {
        message: format!("row {row}: {}", error.message),
        ..error
    }
    .with_details(Value::Object(details))
}

/// Reads `text` as rows of `table`, each cell typed by its column, or the
/// first problem (with its row and field). Each row is then checked by the
/// create it becomes (the service wraps that error with [`at_row`]).
pub fn read_import(table: &TableSpec, text: &str) -> Result<ImportFile, AppError> {
    if text.len() > MAX_CSV_BYTES {
        return Err(AppError::new(
            ErrorCode::ResourceLimit,
            format!(
                "an import file may hold at most {MAX_CSV_BYTES} bytes; this one has {}: split it",
                text.len()
            ),
        ));
    }
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut reader = ::csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .map_err(|error| unreadable(0, &error))?
        .iter()
        .map(str::to_owned)
        .collect();
    if header.iter().all(String::is_empty) {
        return Err(invalid(
            "the file's first line must name the columns, separated by commas",
        ));
    }
    // Each header cell: the column it fills, or `None` when the platform assigns it.
    let mut columns: Vec<Option<usize>> = Vec::with_capacity(header.len());
    let mut skipped = Vec::new();
    for (at, name) in header.iter().enumerate() {
        if header[..at].contains(name) {
            return Err(invalid(format!(
                "column {} is named twice in the header",
                shown(name)
            )));
        }
        let Some(index) = table.columns.iter().position(|c| &c.name == name) else {
            if name == VERSION_COLUMN {
                skipped.push(name.clone());
                columns.push(None);
                continue;
            }
            return Err(invalid(format!(
                "the header names {}, which is not a field of table {}",
                shown(name),
                table.name
            ))
            .with_details(json!({"table": table.name, "field": name, "row": 0})));
        };
        let assigned = (name == ID_COLUMN && table.integer_id())
            || table.owner_field.as_deref() == Some(name.as_str());
        if assigned {
            skipped.push(name.clone());
            columns.push(None);
        } else {
            columns.push(Some(index));
        }
    }
    let mut rows = Vec::new();
    for (at, record) in reader.records().enumerate() {
        let row = at as u64 + 1;
        if rows.len() == MAX_CSV_ROWS {
            return Err(AppError::new(
                ErrorCode::ResourceLimit,
                format!("an import file may hold at most {MAX_CSV_ROWS} rows: split it"),
            ));
        }
        let record = record.map_err(|error| unreadable(row, &error))?;
        let mut values = Map::new();
        for (cell, column) in record.iter().zip(&columns) {
            let Some(column) = column.map(|index| &table.columns[index]) else {
                continue;
            };
            if cell.is_empty() {
                continue;
            }
            let cell = unneutralised(cell);
            let value = typed(cell, value_kinds(&column.declared_type)).ok_or_else(|| {
                at_row(
                    row,
                    invalid(format!(
                        "{} must be {}, not {}",
                        column.name,
                        kind_words(value_kinds(&column.declared_type)),
                        shown(cell)
                    ))
                    .with_details(json!({"table": table.name, "field": column.name})),
                )
            })?;
            values.insert(column.name.clone(), value);
        }
        rows.push(ImportRow { row, values });
    }
    if rows.is_empty() {
        return Err(invalid("the file has a header but no rows to import"));
    }
    Ok(ImportFile { rows, skipped })
}

fn unreadable(row: u64, error: &::csv::Error) -> AppError {
    let reason = match error.kind() {
        ::csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => {
            format!("it has {len} cells where the header has {expected_len}")
        }
        _ => "it is not valid CSV".to_owned(),
    };
    let error = invalid(format!("the file cannot be read: {reason}"));
    if row == 0 { error } else { at_row(row, error) }
}

/// A cell as a value of a column holding `kinds`; `None` when it is not one.
fn typed(cell: &str, kinds: &[&str]) -> Option<Value> {
    match kinds {
        ["integer"] => cell.parse::<i64>().ok().map(Value::from),
        ["number"] => cell
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number),
        _ => Some(Value::String(cell.to_owned())),
    }
}

fn kind_words(kinds: &[&str]) -> &'static str {
    match kinds {
        ["integer"] => "a whole number",
        ["number"] => "a number",
        _ => "text",
    }
}

/// The CSV of `rows` (as the governed list returned them) with one column per
/// declared field, in table order.
pub fn write_export(table: &TableSpec, rows: &[Map<String, Value>]) -> Result<String, AppError> {
    let mut writer = ::csv::Writer::from_writer(Vec::new());
    let names: Vec<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
    let failed = || AppError::new(ErrorCode::Internal, "the export could not be written");
    writer.write_record(&names).map_err(|_| failed())?;
    for row in rows {
        let cells = names.iter().map(|name| match row.get(*name) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => neutralised(text),
            Some(other) => other.to_string(),
        });
        writer.write_record(cells).map_err(|_| failed())?;
    }
    let bytes = writer.into_inner().map_err(|_| failed())?;
    // Every cell is a Rust string, so the file is UTF-8.
    String::from_utf8(bytes).map_err(|_| failed())
}

/// The first characters that make a spreadsheet read a cell as a formula
/// (OWASP, "CSV Injection").
pub const FORMULA_TRIGGERS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// Whether `text` is zero or more `'` followed by a [`FORMULA_TRIGGERS`]
/// character: the cells export marks with one more `'`.
fn starts_like_a_formula(text: &str) -> bool {
    text.trim_start_matches('\'')
        .starts_with(FORMULA_TRIGGERS.as_slice())
}

/// An exported text cell: `text`, with a `'` in front when it
/// [starts like a formula](starts_like_a_formula).
fn neutralised(text: &str) -> String {
    if starts_like_a_formula(text) {
        format!("'{text}")
    } else {
        text.to_owned()
    }
}

/// An imported cell with export's mark taken off: one leading `'` of a cell
/// that is `'` and then something that [starts like a
/// formula](starts_like_a_formula); any other cell as it is.
fn unneutralised(cell: &str) -> &str {
    match cell.strip_prefix('\'') {
        Some(rest) if starts_like_a_formula(rest) => rest,
        _ => cell,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_exported_text_cell_starts_like_a_formula_and_each_comes_back_unchanged() {
        let cases = [
            (
                r#"=HYPERLINK("https://x.test","y")"#,
                r#"'=HYPERLINK("https://x.test","y")"#,
            ),
            ("+1", "'+1"),
            ("-2+3", "'-2+3"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\t=1", "'\t=1"),
            ("\r=1", "'\r=1"),
            // Already marked by someone: one more mark, so import gives it back.
            ("'=1", "''=1"),
            ("''-1", "'''-1"),
            // Nothing a spreadsheet runs: unchanged.
            ("plain", "plain"),
            ("'tis", "'tis"),
            ("'", "'"),
            ("a=b", "a=b"),
            (" =1", " =1"),
            ("", ""),
        ];
        for (text, cell) in cases {
            assert_eq!(neutralised(text), cell, "{text:?}");
            assert!(
                !cell.starts_with(FORMULA_TRIGGERS.as_slice()),
                "{cell:?} starts like a formula"
            );
            assert_eq!(unneutralised(cell), text, "{cell:?}");
        }
        // A spreadsheet's own mark on a formula-like value is taken off; a
        // quote before anything else is the value's.
        assert_eq!(unneutralised("'@home"), "@home");
        assert_eq!(unneutralised("'home"), "'home");
    }
}
