//! The configuration and error tables of the operator's guide
//! (`docs/operating.md`) must match the code: every variable with its
//! default, every registry code with its status and retryability, and nothing
//! the code does not have. The undo bounds the author's and the operator's
//! guides state are the code's.

use sasha_proto::ErrorCode;
use sasha_service::config::VARIABLES;

/// The table rows whose first cell is a code span of upper-case letters and
/// underscores, split into trimmed cells.
fn rows(guide: &str) -> Vec<Vec<String>> {
    guide
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            line.split('|')
                .map(|cell| cell.trim().to_owned())
                .collect::<Vec<_>>()
        })
        .filter(|cells| {
            cells.len() > 2
                && cells[1].len() > 2
                && cells[1][1..cells[1].len() - 1]
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c == '_')
        })
        .collect()
}

fn operating_guide() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operating.md")).unwrap()
}

#[test]
fn every_variable_is_documented_with_its_default() {
    let guide = operating_guide();
    for variable in VARIABLES {
        let row = format!(
            "| `{}` | {} | `{}` |",
            variable.name, variable.roles, variable.default
        );
        assert!(
            guide.contains(&row),
            "docs/operating.md lacks the row {row}"
        );
    }
    let documented = rows(&guide)
        .iter()
        .filter(|cells| cells[2].parse::<u16>().is_err())
        .count();
    assert_eq!(
        documented,
        VARIABLES.len(),
        "docs/operating.md documents variables the code does not read"
    );
}

#[test]
fn every_error_code_is_documented_with_its_status() {
    let guide = operating_guide();
    for code in ErrorCode::ALL {
        let row = format!(
            "| `{}` | {} | {} |",
            code.as_str(),
            code.http_status().as_u16(),
            if code.retryable() { "yes" } else { "no" }
        );
        assert!(
            guide.contains(&row),
            "docs/operating.md lacks the row {row}"
        );
    }
    let documented = rows(&guide)
        .iter()
        .filter(|cells| cells[2].parse::<u16>().is_ok())
        .count();
    assert_eq!(documented, ErrorCode::ALL.len());
}

/// `n` with a comma between thousands, as the guides write numbers.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[test]
fn the_undo_bounds_in_the_guides_are_the_codes() {
    use sasha_contract::grammar::{MAX_UNDO_ENTRIES, MAX_UNDO_ROWS};
    for guide in ["mcp-gateway/docs/data.md", "docs/audit.md"] {
        let text = std::fs::read_to_string(format!("{}/{guide}", env!("CARGO_MANIFEST_DIR")))
            .unwrap()
            .replace('\n', " ");
        for stated in [
            format!("at most {} changes", thousands(MAX_UNDO_ENTRIES)),
            format!("{} rows", thousands(MAX_UNDO_ROWS)),
        ] {
            assert!(text.contains(&stated), "{guide} does not say {stated:?}");
        }
    }
}
