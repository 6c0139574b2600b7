//! The shape checks of `suggestImprovement`: what a model may send as an
//! improvement suggestion, before anything is stored.
//!
//! A suggestion is words about a problem: a kind, a severity, a one-line
//! summary, an optional detail, and optional metadata that points at an app,
//! a tool, an error code or a diagnostic id in fixed formats. The summary and
//! the detail are refused, by their shape and without looking anything up,
//! when they carry what a suggestion must not: credentials (token prefixes,
//! `Bearer `, PEM blocks, `password=`, `api_key`, long opaque strings),
//! absolute paths (`/etc/…`, `~/`, `C:\`, `\\server`, `file://`), source code
//! (fences, tags, `function … (`, `=>`, SQL statements, several lines ending
//! in `;`, `{` or `}`) and records (JSON text, email addresses, CSV/TSV rows).
//! The refusal names the kind of content and asks for words instead; it never
//! repeats the refused text, which may be a secret.
//!
//! Invisible formatting characters (zero-width spaces, soft hyphens, …) are
//! ignored by the content checks, so they cannot split a token prefix to get
//! it past them; bidirectional controls are refused outright, since they make
//! an admin's terminal show text in another order than it is stored.
//!
//! Everything here is a pure function of its input and runs in microseconds
//! (the input is at most [`MAX_SUGGESTION_JSON_BYTES`], every scan linear).
//! The shapes that are patterns (token prefixes, paths, keywords, email
//! addresses) are `regex` expressions, which match in time linear in the
//! text; what counts lines or judges a run as a whole (table rows, lines
//! ending in `;`, whether a long run is a name) stays plain code.

use std::sync::LazyLock;

use regex::Regex;
use sasha_contract::ids::is_kebab_id;
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Map, Value};

use studio_store::{Suggestion, SuggestionKind, SuggestionMetadata, SuggestionSeverity};

/// The suggestion's JSON has at most this many bytes (8 KiB).
pub(crate) const MAX_SUGGESTION_JSON_BYTES: usize = 8 * 1024;
/// The summary has at least this many characters (after trimming).
const MIN_SUMMARY_CHARS: usize = 10;
/// The summary has at most this many characters (after trimming).
const MAX_SUMMARY_CHARS: usize = 300;
/// The detail has at most this many bytes.
const MAX_DETAIL_BYTES: usize = 2048;
/// `metadata.tool` has at most this many characters.
const MAX_TOOL_CHARS: usize = 128;
/// `metadata.errorCode` has at most this many characters after `APP_`.
const MAX_ERROR_CODE_SUFFIX_CHARS: usize = 40;
/// A run of this many characters of `[A-Za-z0-9+/=_-]` reads as a secret.
const MIN_OPAQUE_RUN: usize = 32;
/// Refused key names are echoed back with at most this many characters.
const MAX_ECHOED_KEY_CHARS: usize = 64;

const KEYS: &[&str] = &["kind", "summary", "detail", "severity", "metadata"];
const METADATA_KEYS: &[&str] = &["appId", "tool", "errorCode", "diagnosticId"];

/// The kinds of content a suggestion's text must not carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    Credential,
    AbsolutePath,
    SourceCode,
    Records,
}

impl Refused {
    /// The stable name in the refusal's details.
    fn name(self) -> &'static str {
        match self {
            Refused::Credential => "credential",
            Refused::AbsolutePath => "absolute-path",
            Refused::SourceCode => "source-code",
            Refused::Records => "records",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Refused::Credential => {
                "what looks like a credential or secret (a token, key, password or long opaque string)"
            }
            Refused::AbsolutePath => "an absolute file path",
            Refused::SourceCode => "source code",
            Refused::Records => "records or data (JSON, an email address or CSV/TSV rows)",
        }
    }
}

/// Parses and checks a suggestion (see the module documentation). Refusals
/// are `APP_RESOURCE_LIMIT` for an oversized input and `APP_INPUT_INVALID`
/// otherwise, with `details.field` naming the refused key.
pub(crate) fn parse(json: &str) -> Result<Suggestion, AppError> {
    if json.len() > MAX_SUGGESTION_JSON_BYTES {
        return Err(AppError::new(
            ErrorCode::ResourceLimit,
            format!("a suggestion has at most {MAX_SUGGESTION_JSON_BYTES} bytes of JSON"),
        )
        .with_details(serde_json::json!({ "limit": MAX_SUGGESTION_JSON_BYTES })));
    }
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(json) else {
        return Err(invalid("suggestion", "a suggestion must be a JSON object"));
    };
    refuse_unknown_keys(&object, KEYS, "")?;

    let kind = required_string(&object, "kind")?
        .parse::<SuggestionKind>()
        .map_err(|error| invalid("kind", format!("kind must be {}", error.expected)))?;
    let severity = required_string(&object, "severity")?
        .parse::<SuggestionSeverity>()
        .map_err(|error| invalid("severity", format!("severity must be {}", error.expected)))?;
    let metadata = metadata(&object)?;
    let summary = summary(required_string(&object, "summary")?)?;
    let detail = optional_string(&object, "detail", "")?
        .map(detail)
        .transpose()?
        .flatten();
    Ok(Suggestion {
        kind,
        severity,
        summary,
        detail,
        metadata,
    })
}

fn invalid(field: &str, message: impl Into<String>) -> AppError {
    AppError::new(ErrorCode::InputInvalid, message)
        .with_details(serde_json::json!({ "field": field }))
}

fn refused(field: &str, content: Refused) -> AppError {
    AppError::new(
        ErrorCode::InputInvalid,
        format!(
            "{field} contains {}, which a suggestion must not include; describe the problem in words \
             (an app id, tool, error code or diagnostic id goes in metadata)",
            content.description()
        ),
    )
    .with_details(serde_json::json!({ "field": field, "refused": content.name() }))
}

/// Refuses the first key of `object` that is not in `allowed`, naming it.
/// `prefix` is `""` or `"metadata."`.
fn refuse_unknown_keys(
    object: &Map<String, Value>,
    allowed: &[&str],
    prefix: &str,
) -> Result<(), AppError> {
    let Some(key) = object.keys().find(|key| !allowed.contains(&key.as_str())) else {
        return Ok(());
    };
    let shown: String = key.chars().take(MAX_ECHOED_KEY_CHARS).collect();
    let field = format!("{prefix}{shown}");
    let allowed = allowed.join(", ");
    Err(invalid(
        &field,
        format!("unknown key {field:?}; the allowed keys are {allowed}"),
    ))
}

fn required_string<'a>(object: &'a Map<String, Value>, key: &str) -> Result<&'a str, AppError> {
    match object.get(key) {
        None | Some(Value::Null) => Err(invalid(key, format!("{key} is required"))),
        Some(Value::String(text)) => Ok(text),
        Some(_) => Err(invalid(key, format!("{key} must be a string"))),
    }
}

/// A string, or `None` for an absent key or `null`.
fn optional_string<'a>(
    object: &'a Map<String, Value>,
    key: &str,
    prefix: &str,
) -> Result<Option<&'a str>, AppError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(invalid(
            &format!("{prefix}{key}"),
            format!("{prefix}{key} must be a string"),
        )),
    }
}

/// Line breaks and controls that never belong in a summary, and in a detail
/// only as `\n` and `\t`: C0/C1 controls, the Unicode line and paragraph
/// separators, and the bidirectional embedding, override and isolate
/// controls.
fn is_forbidden_control(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

/// Characters that render as nothing; the content checks skip them.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2060}'..='\u{2064}'
            | '\u{206A}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
    )
}

fn summary(text: &str) -> Result<String, AppError> {
    let text = text.trim();
    let chars = text.chars().count();
    if !(MIN_SUMMARY_CHARS..=MAX_SUMMARY_CHARS).contains(&chars) {
        return Err(invalid(
            "summary",
            format!("summary must have {MIN_SUMMARY_CHARS} to {MAX_SUMMARY_CHARS} characters"),
        ));
    }
    if text.chars().any(is_forbidden_control) {
        return Err(invalid(
            "summary",
            "summary must be a single line without control characters",
        ));
    }
    if let Some(content) = refused_content(text) {
        return Err(refused("summary", content));
    }
    Ok(text.to_owned())
}

/// The checked detail; `None` when it is only whitespace.
fn detail(text: &str) -> Result<Option<String>, AppError> {
    if text.len() > MAX_DETAIL_BYTES {
        return Err(invalid(
            "detail",
            format!("detail must have at most {MAX_DETAIL_BYTES} bytes"),
        ));
    }
    if text
        .chars()
        .any(|c| c != '\n' && c != '\t' && is_forbidden_control(c))
    {
        return Err(invalid(
            "detail",
            "detail must not contain control characters other than line feeds and tabs",
        ));
    }
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    if let Some(content) = refused_content(text) {
        return Err(refused("detail", content));
    }
    Ok(Some(text.to_owned()))
}

fn metadata(object: &Map<String, Value>) -> Result<SuggestionMetadata, AppError> {
    const PREFIX: &str = "metadata.";
    let metadata = match object.get("metadata") {
        None | Some(Value::Null) => return Ok(SuggestionMetadata::default()),
        Some(Value::Object(metadata)) => metadata,
        Some(_) => return Err(invalid("metadata", "metadata must be a JSON object")),
    };
    refuse_unknown_keys(metadata, METADATA_KEYS, PREFIX)?;
    let checked = |key: &str, valid: fn(&str) -> bool, rule: &str| {
        optional_string(metadata, key, PREFIX)?
            .map(|value| {
                if valid(value) {
                    Ok(value.to_owned())
                } else {
                    Err(invalid(
                        &format!("{PREFIX}{key}"),
                        format!("{PREFIX}{key} must be {rule}"),
                    ))
                }
            })
            .transpose()
    };
    Ok(SuggestionMetadata {
        app_id: checked(
            "appId",
            is_kebab_id,
            "a lowercase kebab-case app id of at most 60 characters",
        )?,
        tool: checked(
            "tool",
            is_tool_name,
            "a tool name of 1 to 128 characters of A-Z, a-z, 0-9 and _",
        )?,
        error_code: checked(
            "errorCode",
            is_error_code,
            "an error code: APP_ and 1 to 40 characters of A-Z and _",
        )?,
        diagnostic_id: checked(
            "diagnosticId",
            is_lowercase_uuid,
            "a UUID in lowercase hex with dashes",
        )?,
    })
}

fn is_tool_name(tool: &str) -> bool {
    (1..=MAX_TOOL_CHARS).contains(&tool.len())
        && tool.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn is_error_code(code: &str) -> bool {
    code.strip_prefix("APP_").is_some_and(|suffix| {
        (1..=MAX_ERROR_CODE_SUFFIX_CHARS).contains(&suffix.len())
            && suffix.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
    })
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` in lowercase hex.
fn is_lowercase_uuid(id: &str) -> bool {
    id.len() == 36
        && id.bytes().enumerate().all(|(index, b)| match index {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
        })
}

// --- content ----------------------------------------------------------------

/// The first kind of refused content in `text`, if any.
fn refused_content(text: &str) -> Option<Refused> {
    let text: String = text.chars().filter(|c| !is_invisible(*c)).collect();
    let text = text.as_str();
    if has_credential(text) {
        Some(Refused::Credential)
    } else if has_absolute_path(text) {
        Some(Refused::AbsolutePath)
    } else if has_source_code(text) {
        Some(Refused::SourceCode)
    } else if has_records(text) {
        Some(Refused::Records)
    } else {
        None
    }
}

/// A content pattern, compiled once. The patterns are constants, so a
/// failure to compile is a bug that every test run would show.
fn pattern(source: &str) -> Regex {
    Regex::new(source).unwrap_or_else(|error| panic!("content pattern {source:?}: {error}"))
}

/// Token prefixes, `Bearer `, PEM armour, `password=`/`password:`,
/// `api_key`/`apikey`, or a long run of base64/hex-like characters.
fn has_credential(text: &str) -> bool {
    // ASCII case-insensitive (`(?i-u)`): Unicode folding would also read the
    // Kelvin sign as `k` and the long s as `s`. `Bearer` is followed by ASCII
    // whitespace, `password` by spaces or tabs and then `=` or `:`.
    static CREDENTIAL: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i-u:sasha_(?:at|ak|ct|cf)_|api_?key|password[ \t]*[=:])|-----BEGIN|Bearer[ \t\n\x0C\r]",
        )
    });
    static OPAQUE_RUN: LazyLock<Regex> = LazyLock::new(|| {
        // Leftmost-first and greedy: each match is a whole run.
        pattern(&format!("[A-Za-z0-9+/=_-]{{{MIN_OPAQUE_RUN},}}"))
    });
    CREDENTIAL.is_match(text) || OPAQUE_RUN.find_iter(text).any(|run| !is_name(run.as_str()))
}

/// A long run that is a readable name rather than a secret: lowercase words
/// joined by `_` or `-` (an MCP tool name such as
/// `app__expense_log__expenses__create`, a UUID), each word at most 20
/// characters. Random secrets are mixed-case or unseparated.
fn is_name(run: &str) -> bool {
    run.bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        && run
            .split(['_', '-'])
            .filter(|word| !word.is_empty())
            .count()
            >= 2
        && run.split(['_', '-']).all(|word| word.len() <= 20)
}

/// `/a/…` at the start or after whitespace, a quote, an opening bracket or
/// `=`; `~/`; a drive path `C:\` or `C:/` whose letter starts a word (so
/// `https://` is no drive); a UNC path `\\server`; `file://`.
fn has_absolute_path(text: &str) -> bool {
    // `\s` is Unicode White_Space, as `char::is_whitespace`; a word
    // character is `char::is_alphanumeric` (Alphabetic or a number) or `_`.
    static ABSOLUTE_PATH: LazyLock<Regex> = LazyLock::new(|| {
        pattern(concat!(
            r"~/|(?i-u:file://)",
            r#"|(?:^|[\s"'`(\[{<=])/[^\s/]+/"#,
            r"|(?:^|[^\p{Alphabetic}\p{N}_])[A-Za-z]:[\\/]",
            r"|(?:^|[^\\])\\\\[\p{Alphabetic}\p{N}]",
        ))
    });
    ABSOLUTE_PATH.is_match(text)
}

/// Code fences, HTML tags, JavaScript functions and arrows, SQL statements,
/// or three or more lines ending in `;`, `{` or `}`.
fn has_source_code(text: &str) -> bool {
    // - `<script`, `<style`, `<html` in any ASCII case;
    // - `SELECT` and later `FROM`, each followed by whitespace and `FROM`
    //   preceded by it (uppercase, as SQL is written; "select … from" is
    //   ordinary English);
    // - the keyword `function` (a whole word: no word character or `$` on
    //   either side), then optionally whitespace and a name, then `(`:
    //   `function add(`, `function (`, `function(`. "the function I need
    //   (…)" is prose: after its "name" comes another word, not `(`.
    static SOURCE_CODE: LazyLock<Regex> = LazyLock::new(|| {
        pattern(concat!(
            r"```|(?i-u:<script|<style|<html)|=>|CREATE TABLE|INSERT INTO",
            r"|(?s:SELECT\s(?:.*\s)?FROM\s)",
            r"|(?:^|[^\p{Alphabetic}\p{N}_$])function(?:\s+[\p{Alphabetic}\p{N}_$]*)?\s*\(",
        ))
    });
    SOURCE_CODE.is_match(text)
        || text
            .lines()
            .filter(|line| line.trim_end().ends_with([';', '{', '}']))
            .count()
            >= 3
}

/// JSON text, an email address, or CSV/TSV rows.
fn has_records(text: &str) -> bool {
    // An email address is `local@domain.tld`: a local part of
    // `[A-Za-z0-9._%+-]`, and a domain of two or more dot-separated labels
    // whose last is two or more letters. The domain is the whole run of
    // `[A-Za-z0-9.-]` after the `@`, trailing dots and dashes aside, so
    // `a@b.cd-x` is no address.
    static RECORDS: LazyLock<Regex> = LazyLock::new(|| {
        pattern(concat!(
            r#"\{"|\[\{|": "#,
            r"|[A-Za-z0-9._%+-]@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}[.-]*(?:[^A-Za-z0-9.-]|$)",
        ))
    });
    RECORDS.is_match(text) || has_table_rows(text)
}

/// Three or more consecutive lines that look like rows of one table: each
/// with the same number (two or more) of commas outside double quotes, or
/// each with two or more tabs after its indentation.
///
/// The spec's rule is "3+ lines that each contain 2+ commas or tabs"; asking
/// for consecutive lines with equal comma counts keeps every CSV export and
/// lets through prose, where a few long sentences often have two commas each
/// but rarely in the same number line after line.
fn has_table_rows(text: &str) -> bool {
    const ROWS: usize = 3;
    let mut comma_run: Option<(usize, usize)> = None; // (commas per row, rows)
    let mut tab_rows = 0;
    for line in text.lines() {
        let commas = commas_outside_quotes(line);
        comma_run = match comma_run {
            _ if commas < 2 => None,
            Some((per_row, rows)) if per_row == commas => Some((per_row, rows + 1)),
            _ => Some((commas, 1)),
        };
        let tabs = line.trim_start().matches('\t').count();
        tab_rows = if tabs >= 2 { tab_rows + 1 } else { 0 };
        if comma_run.is_some_and(|(_, rows)| rows >= ROWS) || tab_rows >= ROWS {
            return true;
        }
    }
    false
}

fn commas_outside_quotes(line: &str) -> usize {
    let mut quoted = false;
    let mut commas = 0;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => commas += 1,
            _ => {}
        }
    }
    commas
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const OR_CLAUSES: &str = "The data grammar has no way to express OR between two where clauses; \
                              I had to make two list calls and merge them.";

    fn with(summary: &str, detail: Option<&str>) -> String {
        let mut suggestion = json!({"kind": "friction", "severity": "medium", "summary": summary});
        if let Some(detail) = detail {
            suggestion["detail"] = detail.into();
        }
        suggestion.to_string()
    }

    fn accepted(json: &str) -> Suggestion {
        parse(json).unwrap_or_else(|error| panic!("refused {json}: {error}"))
    }

    fn refusal(json: &str) -> AppError {
        match parse(json) {
            Ok(suggestion) => panic!("accepted {json}: {suggestion:?}"),
            Err(error) => error,
        }
    }

    /// Asserts `json` is refused as invalid input about `field`.
    fn check_invalid(json: &str, field: &str) -> AppError {
        let error = refusal(json);
        assert_eq!(error.code, ErrorCode::InputInvalid, "{json}: {error}");
        assert_eq!(error.details.as_ref().unwrap()["field"], field, "{json}");
        assert!(!error.retryable);
        error
    }

    /// Asserts `text` is refused as `content` both as the summary and as
    /// the detail, with a message that says what and asks for words, and
    /// without repeating the text.
    fn check_refused(text: &str, content: Refused) {
        let single_line = !text.contains('\n');
        let mut cases = vec![("detail", with(OR_CLAUSES, Some(text)))];
        if single_line && text.chars().count() >= MIN_SUMMARY_CHARS {
            cases.push(("summary", with(text, None)));
        }
        for (field, json) in cases {
            let error = check_invalid(&json, field);
            assert_eq!(
                error.details,
                Some(json!({"field": field, "refused": content.name()})),
                "{field}: {text:?}"
            );
            assert!(
                error.message.contains(content.description()),
                "{}",
                error.message
            );
            assert!(
                error.message.contains("describe the problem in words"),
                "{}",
                error.message
            );
            assert!(!error.message.contains(text.trim()), "{}", error.message);
        }
    }

    fn check_accepted(text: &str) {
        let detail = accepted(&with(OR_CLAUSES, Some(text)));
        assert_eq!(detail.detail.as_deref(), Some(text.trim()));
        if !text.contains('\n') && text.chars().count() >= MIN_SUMMARY_CHARS {
            assert_eq!(accepted(&with(text, None)).summary, text.trim());
        }
    }

    #[test]
    fn a_complete_suggestion_parses() {
        let json = json!({
            "kind": "bug",
            "severity": "high",
            "summary": "  Creating an expense answered APP_CONFLICT without naming the clashing field.  ",
            "detail": "I created the same expense twice with different idempotency keys.\n\
                       The second call failed, but the message did not say which column was unique.\n",
            "metadata": {
                "appId": "expense-log",
                "tool": "app__expense_log__expenses__create",
                "errorCode": "APP_CONFLICT",
                "diagnosticId": "0193c5e2-7a4b-7c3d-9e8f-1a2b3c4d5e6f"
            }
        });
        let suggestion = accepted(&json.to_string());
        assert_eq!(
            suggestion,
            Suggestion {
                kind: SuggestionKind::Bug,
                severity: SuggestionSeverity::High,
                summary:
                    "Creating an expense answered APP_CONFLICT without naming the clashing field."
                        .into(),
                detail: Some(
                    "I created the same expense twice with different idempotency keys.\n\
                     The second call failed, but the message did not say which column was unique."
                        .into()
                ),
                metadata: SuggestionMetadata {
                    app_id: Some("expense-log".into()),
                    tool: Some("app__expense_log__expenses__create".into()),
                    error_code: Some("APP_CONFLICT".into()),
                    diagnostic_id: Some("0193c5e2-7a4b-7c3d-9e8f-1a2b3c4d5e6f".into()),
                },
            }
        );
    }

    #[test]
    fn optional_keys_may_be_absent_null_or_blank() {
        for json in [
            json!({"kind": "docs", "severity": "low", "summary": OR_CLAUSES}),
            json!({"kind": "docs", "severity": "low", "summary": OR_CLAUSES,
                   "detail": null, "metadata": null}),
            json!({"kind": "docs", "severity": "low", "summary": OR_CLAUSES,
                   "detail": " \n\t ", "metadata": {"appId": null, "tool": null}}),
            json!({"kind": "docs", "severity": "low", "summary": OR_CLAUSES, "metadata": {}}),
        ] {
            let suggestion = accepted(&json.to_string());
            assert_eq!(suggestion.detail, None, "{json}");
            assert!(suggestion.metadata.is_empty(), "{json}");
        }
        for (kind, expected) in [
            ("bug", SuggestionKind::Bug),
            ("docs", SuggestionKind::Docs),
            ("feature", SuggestionKind::Feature),
            ("friction", SuggestionKind::Friction),
        ] {
            for (severity, severity_expected) in [
                ("low", SuggestionSeverity::Low),
                ("medium", SuggestionSeverity::Medium),
                ("high", SuggestionSeverity::High),
            ] {
                let json = json!({"kind": kind, "severity": severity, "summary": OR_CLAUSES});
                let suggestion = accepted(&json.to_string());
                assert_eq!(
                    (suggestion.kind, suggestion.severity),
                    (expected, severity_expected)
                );
            }
        }
    }

    #[test]
    fn realistic_suggestions_are_accepted() {
        for text in [
            OR_CLAUSES,
            "The /mcp endpoint answers 404 after my session expired instead of asking me to sign in again.",
            "The error page links to https://docs.example.com/apps/limits but that page never mentions the 200 row limit.",
            "Listing expenses by week needs the week-of action; the plain list tool has no date bucketing.",
            "The `sasha__files_upload` tool answers APP_OPERATION_UNAVAILABLE although the docs say it works.",
            "I could not tell read/write tools from read-only ones, and about 3/4 of my calls were retries.",
            "My bearer token expired mid-conversation and the error did not say that it had expired.",
            "Api-key principals are refused by the app tools, which the tool descriptions never mention.",
            "I had to select rows from two tables and insert into a third by hand, which took six calls.",
            "The function I need (grouping by month) is missing from the aggregate tool.",
            "Aggregate functions (sum, avg) cannot be combined with orderBy on the metric.",
            "Dates like 12/05/2025 are read as month/day, which surprised the person I was helping.",
            "Der Export verliert Umlaute: ä, ö und ü werden zu Fragezeichen.",
            "Version react@18.2.0 is mentioned in the brief but @sam said the app uses plain scripts.",
            "A summary of exactly thirty-one characters: abcdefghijklmnopqrstuvwxyz01234 is fine.",
            "Calling app__expense_log__expenses__create twice made two rows.",
            "It failed with 0193c5e2-7a4b-7c3d-9e8f-1a2b3c4d5e6f as diagnostic id.",
            "Please allow\u{00A0}non-breaking spaces and emoji 🚀 in app names.",
            "I wanted expenses that are either over 100 or tagged travel.\n\
             The grammar ANDs every where clause, so I listed twice and merged the rows by id.\n\
             An anyOf group of clauses would save the second call; until then, the docs could say so.",
            "- Filtering by date, category and amount needs three calls, which is slow.\n\
             - Sorting by name works, but sorting by a computed total does not, as far as I can see.\n\
             - Paging by week, month, and year is unclear to me, and the docs, sadly, do not say.\n\
             - Overall, the grammar is clear.",
            "Steps:\n1. Open the time sheet app.\n2. Add an entry for yesterday.\n3. The total stays at zero.",
            "One line ends with a semicolon;\nand a second one does too;\nbut the third does not.",
            "Two CSV-looking lines are fine: a, b, c\nand d, e, f",
        ] {
            check_accepted(text);
        }
    }

    #[test]
    fn credentials_are_refused() {
        for text in [
            "The token sasha_at_Zm9vYmFy stopped working after an hour.",
            "My key sasha_ak_abc was refused by the app routes.",
            "The chat token SASHA_CT_abc expired too soon.",
            "Redeeming sasha_cf_abc twice gave a different key.",
            "Calling with Authorization: Bearer abc123 fails on every request.",
            "The file started with -----BEGIN PRIVATE KEY----- and nothing else.",
            "The form posted password=hunter2 in the query string.",
            "The log shows Password: hunter2 in clear text.",
            "The config had password = hunter2 in it, which is wrong.",
            "Setting api_key in the environment did nothing at all.",
            "The client sends an apiKey header the server ignores.",
            "The secret AKIAIOSFODNN7EXAMPLEKEYDATA12345 leaked in a log line.",
            "The revision 3b1f0c9a4e6d2b7c8a5f1e0d9c3b2a1f4e5d6c7b is not served.",
            // Zero-width characters do not split a prefix.
            "The token sasha_\u{200B}at_abc stopped working after an hour.",
        ] {
            check_refused(text, Refused::Credential);
        }
    }

    #[test]
    fn absolute_paths_are_refused() {
        for text in [
            "/etc/passwd is readable by the app process.",
            "The log at /home/u/x.log grows without bound.",
            "Data goes to \"/var/lib/sasha\" which is not documented.",
            "It wrote to ('/tmp/a/b') and never cleaned up.",
            "The package path=/srv/apps/x was in the error message.",
            "The file ~/notes.txt was not picked up by the catalogue.",
            "On Windows C:\\Users\\me\\apps is not found by the CLI.",
            "The dev state folder d:/data/sasha is not created.",
            "Sharing \\\\fileserver\\apps does not work for packages.",
            "Links like file:///srv/x are rendered as plain text.",
            "Links like FILE://server/x are rendered as plain text.",
            "A path after a no-break space\u{00A0}/etc/hosts is still a path.",
        ] {
            check_refused(text, Refused::AbsolutePath);
        }
    }

    #[test]
    fn source_code_is_refused() {
        for text in [
            "The brief's example ```js render()``` does not run.",
            "The proxy strips <script src=x> without saying so.",
            "Inline <STYLE> blocks are refused without a reason.",
            "An <html lang=en> root is reported as an error.",
            "The runtime breaks on function add(a, b) in actions.",
            "The runtime breaks on function (a) in the brief example.",
            "The runtime breaks on function(a) in the brief example.",
            "Callbacks like rows.map(row => row.id) are slow here.",
            "The list tool is like SELECT id FROM expenses WHERE x but slower.",
            "The docs show CREATE TABLE notes without any types.",
            "Migrations with INSERT INTO seed rows are refused.",
            "The query is:\nSELECT id\nFROM expenses",
            "The action failed:\nconst rows = load();\nrows.sort();\nsave(rows);",
            "This does not validate:\nif (x) {\n  y();\n}",
        ] {
            check_refused(text, Refused::SourceCode);
        }
    }

    #[test]
    fn records_are_refused() {
        for text in [
            "Creating {\"amount\": 12} fails with a type error.",
            "The list answered [{ \"id\": 1 }] with one row only.",
            "The field \"note\": \"lunch\" was dropped on update.",
            "Ask ann.smith+apps@example.co.uk for the failing account.",
            "Mail ops@sasha.internal about it.",
            "The export looked like this:\nid,name,amount\n1,Ann,12\n2,Bob,13",
            "Quoted CSV too:\n1,\"Smith, Ann\",12\n2,\"Jones, Bob\",13\n3,Eve,14",
            "Tab separated:\nid\tname\tamount\n1\tAnn\t12\n2\tBob\t13",
        ] {
            check_refused(text, Refused::Records);
        }
    }

    #[test]
    fn the_input_is_bounded_in_bytes() {
        let base = with(OR_CLAUSES, None);
        // Insignificant whitespace counts: exactly 8 KiB is accepted…
        let padded = format!(
            "{base}{}",
            " ".repeat(MAX_SUGGESTION_JSON_BYTES - base.len())
        );
        assert_eq!(padded.len(), MAX_SUGGESTION_JSON_BYTES);
        accepted(&padded);
        // …one byte more is a resource limit, before any parsing.
        let error = refusal(&format!("{padded} "));
        assert_eq!(error.code, ErrorCode::ResourceLimit);
        assert!(!error.retryable);
        let error = refusal(&"x".repeat(MAX_SUGGESTION_JSON_BYTES + 1));
        assert_eq!(error.code, ErrorCode::ResourceLimit);
    }

    #[test]
    fn the_structure_is_checked_and_unknown_keys_are_named() {
        for json in ["", "not json", "[]", "\"text\"", "null", "{\"kind\": }"] {
            check_invalid(json, "suggestion");
        }
        let mut unknown: Value = serde_json::from_str(&with(OR_CLAUSES, None)).unwrap();
        unknown["title"] = "x".into();
        let error = check_invalid(&unknown.to_string(), "title");
        assert!(
            error.message.contains("unknown key \"title\""),
            "{}",
            error.message
        );
        assert!(
            error
                .message
                .contains("kind, summary, detail, severity, metadata"),
            "{}",
            error.message
        );
        let long_key = "k".repeat(500);
        let mut long: Value = serde_json::from_str(&with(OR_CLAUSES, None)).unwrap();
        long[&long_key] = 1.into();
        let error = check_invalid(&long.to_string(), &"k".repeat(MAX_ECHOED_KEY_CHARS));
        assert!(error.message.len() < 200, "{}", error.message);

        let mut nested: Value = serde_json::from_str(&with(OR_CLAUSES, None)).unwrap();
        nested["metadata"] = json!({"appId": "expense-log", "userEmail": "x"});
        let error = check_invalid(&nested.to_string(), "metadata.userEmail");
        assert_eq!(
            error.message,
            "unknown key \"metadata.userEmail\"; the allowed keys are appId, tool, errorCode, diagnosticId"
        );

        let base = json!({"kind": "bug", "severity": "low", "summary": OR_CLAUSES});
        for (field, change) in [
            ("kind", json!({"kind": null})),
            ("kind", json!({"kind": "rant"})),
            ("kind", json!({"kind": "Bug"})),
            ("kind", json!({"kind": 1})),
            ("severity", json!({"severity": "urgent"})),
            ("severity", json!({"severity": null})),
            ("summary", json!({"summary": null})),
            ("summary", json!({"summary": ["a list"]})),
            ("detail", json!({"detail": 12})),
            ("metadata", json!({"metadata": "expense-log"})),
            ("metadata", json!({"metadata": []})),
        ] {
            let mut json = base.clone();
            for (key, value) in change.as_object().unwrap() {
                json[key] = value.clone();
            }
            if json["kind"].is_null() {
                json.as_object_mut().unwrap().remove("kind");
            }
            check_invalid(&json.to_string(), field);
        }
        let error = check_invalid(
            &json!({"kind": "rant", "severity": "low", "summary": OR_CLAUSES}).to_string(),
            "kind",
        );
        assert_eq!(error.message, "kind must be bug, docs, feature or friction");
    }

    #[test]
    fn the_summary_is_one_line_of_10_to_300_characters() {
        let summary = |text: &str| with(text, None);
        // Characters, not bytes: 300 two-byte characters are fine.
        assert_eq!(
            accepted(&summary(&"é".repeat(300))).summary.chars().count(),
            300
        );
        assert_eq!(accepted(&summary(&"ü".repeat(10))).summary, "ü".repeat(10));
        // Counted after trimming.
        assert_eq!(accepted(&summary("  ten chars!  ")).summary, "ten chars!");
        for text in ["nine char", "   nine char   ", &"é".repeat(301), ""] {
            let error = check_invalid(&summary(text), "summary");
            assert_eq!(error.message, "summary must have 10 to 300 characters");
        }
        for text in [
            "two lines\nof summary",
            "a carriage\rreturn here",
            "a tab\tin the summary",
            "a bell \u{7} in the summary",
            "a line separator\u{2028}here",
            "a right-to-left \u{202E}override here",
            "an isolate \u{2066}here\u{2069} too",
        ] {
            let error = check_invalid(&summary(text), "summary");
            assert_eq!(
                error.message,
                "summary must be a single line without control characters"
            );
        }
    }

    #[test]
    fn the_detail_has_at_most_2048_bytes_and_no_controls_but_newline_and_tab() {
        let detail = |text: &str| with(OR_CLAUSES, Some(text));
        let longest = format!("{}abc", "word ".repeat(409));
        assert_eq!(longest.len(), MAX_DETAIL_BYTES);
        assert_eq!(
            accepted(&detail(&longest)).detail.unwrap().len(),
            MAX_DETAIL_BYTES
        );
        let error = check_invalid(&detail(&format!("{longest}d")), "detail");
        assert_eq!(error.message, "detail must have at most 2048 bytes");
        // Bytes, not characters: 1025 two-byte characters are too many.
        check_invalid(&detail(&"é".repeat(1025)), "detail");

        assert_eq!(
            accepted(&detail("first line\n\tindented second line"))
                .detail
                .unwrap(),
            "first line\n\tindented second line"
        );
        for text in [
            "windows\r\nline ends",
            "a bell \u{7} here",
            "an escape \u{1b}[31m here",
            "a nul \u{0} here",
            "a next-line \u{85} here",
            "an override \u{202E} here",
        ] {
            let error = check_invalid(&detail(text), "detail");
            assert_eq!(
                error.message,
                "detail must not contain control characters other than line feeds and tabs"
            );
        }
    }

    #[test]
    fn metadata_values_have_fixed_formats() {
        let with_metadata = |metadata: Value| {
            json!({"kind": "bug", "severity": "low", "summary": OR_CLAUSES, "metadata": metadata})
                .to_string()
        };
        let longest_tool = "t".repeat(128);
        let longest_code = format!("APP_{}", "X".repeat(40));
        let longest_app = format!("a{}", "-b".repeat(29) + "c");
        assert_eq!(longest_app.len(), 60);
        for metadata in [
            json!({"appId": "expense-log"}),
            json!({"appId": longest_app}),
            json!({"tool": "sasha__chat_execute"}),
            json!({"tool": longest_tool}),
            json!({"errorCode": "APP_INPUT_INVALID"}),
            json!({"errorCode": longest_code}),
            json!({"diagnosticId": "00000000-0000-0000-0000-000000000000"}),
        ] {
            let suggestion = accepted(&with_metadata(metadata.clone()));
            assert_eq!(
                serde_json::to_value(&suggestion.metadata).unwrap(),
                metadata
            );
        }
        for (field, metadata) in [
            ("metadata.appId", json!({"appId": "Expense-Log"})),
            ("metadata.appId", json!({"appId": "expense_log"})),
            ("metadata.appId", json!({"appId": "-expense"})),
            ("metadata.appId", json!({"appId": ""})),
            (
                "metadata.appId",
                json!({"appId": format!("a{}", "b".repeat(60))}),
            ),
            ("metadata.appId", json!({"appId": 12})),
            ("metadata.tool", json!({"tool": "app.expense-log"})),
            ("metadata.tool", json!({"tool": ""})),
            ("metadata.tool", json!({"tool": "t".repeat(129)})),
            ("metadata.tool", json!({"tool": "tool name"})),
            ("metadata.errorCode", json!({"errorCode": "APP_"})),
            ("metadata.errorCode", json!({"errorCode": "app_conflict"})),
            ("metadata.errorCode", json!({"errorCode": "E_CONFLICT"})),
            ("metadata.errorCode", json!({"errorCode": "APP_CONFLICT2"})),
            (
                "metadata.errorCode",
                json!({"errorCode": format!("APP_{}", "X".repeat(41))}),
            ),
            (
                "metadata.diagnosticId",
                json!({"diagnosticId": "0193C5E2-7A4B-7C3D-9E8F-1A2B3C4D5E6F"}),
            ),
            (
                "metadata.diagnosticId",
                json!({"diagnosticId": "0193c5e27a4b7c3d9e8f1a2b3c4d5e6f"}),
            ),
            (
                "metadata.diagnosticId",
                json!({"diagnosticId": "{0193c5e2-7a4b-7c3d-9e8f-1a2b3c4d5e6f}"}),
            ),
            (
                "metadata.diagnosticId",
                json!({"diagnosticId": "0193c5e2-7a4b-7c3d-9e8f-1a2b3c4d5e6g"}),
            ),
        ] {
            check_invalid(&with_metadata(metadata), field);
        }
    }
}
