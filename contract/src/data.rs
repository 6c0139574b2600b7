//! The data contract: what an app declares about its tables, the structure
//! SQLite reports for them, the migrations that build it, and the hash that
//! names the whole. The validator produces it, data-worker enforces it and the
//! gateway publishes tools from it; all three read these types.
//!
//! This module must never decide whether a package is valid (that is the
//! validator's job) and never open a database: [`read_schema`] reads one the
//! caller opened.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The column the platform adds to every declared table for optimistic concurrency.
pub const VERSION_COLUMN: &str = "_sasha_version";
/// The column every declared table addresses its rows by.
pub const ID_COLUMN: &str = "id";
/// How an index key part that is an expression (not a column) is recorded.
pub const EXPRESSION_KEY: &str = "<expression>";

/// How rows of a declared table are shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Each row belongs to the user in `ownerField`; users see only their rows.
    Owner,
    /// Every user with a grant sees every row.
    Shared,
}

/// Who may write a declared table's rows (`write:` in the manifest).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WritePolicy {
    /// Every grant holder (the default).
    #[default]
    Use,
    /// Only holders of `manage` (reference tables such as a project list).
    Manage,
}

impl WritePolicy {
    fn is_default(&self) -> bool {
        *self == WritePolicy::default()
    }

    /// The manifest's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            WritePolicy::Use => "use",
            WritePolicy::Manage => "manage",
        }
    }
}

/// One declared table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TableDeclaration {
    pub access: Access,
    /// Required for `access: owner`, refused for `access: shared`.
    #[serde(default)]
    pub owner_field: Option<String>,
    /// Who may create, update and delete rows. Left out of the canonical
    /// form when it is the default, so a contract without policies keeps
    /// its hash.
    #[serde(default, skip_serializing_if = "WritePolicy::is_default")]
    pub write: WritePolicy,
    /// For `access: owner` only: `manage` holders read every owner's rows
    /// (a manager's roll-up); their writes stay bound to their own rows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub managers_read_all: bool,
}

impl TableDeclaration {
    /// Whether a caller (holding `manage` on the app, or not) may write rows.
    /// The one rule data-worker enforces and the gateway lists tools by.
    pub fn may_write(&self, manages: bool) -> bool {
        self.write == WritePolicy::Use || manages
    }

    /// Whether a caller's reads see every owner's rows: a `manage` holder on
    /// an owner-scoped table that declares `managersReadAll`.
    pub fn reads_every_owner(&self, manages: bool) -> bool {
        manages && self.managers_read_all && self.access == Access::Owner
    }
}

/// The JSON value kinds a column of `declared_type` holds, from SQLite's
/// affinity rules: INT → integer; CHAR/CLOB/TEXT → string; REAL/FLOA/DOUB →
/// number; anything else numeric or text. A `DATE` column holds text in
/// [`DATE_FORMAT`]. `null` is not included.
pub fn value_kinds(declared_type: &str) -> &'static [&'static str] {
    let declared = declared_type.to_ascii_uppercase();
    if value_format(&declared).is_some() {
        &["string"]
    } else if declared.contains("INT") {
        &["integer"]
    } else if ["CHAR", "CLOB", "TEXT"]
        .iter()
        .any(|t| declared.contains(t))
    {
        &["string"]
    } else if ["REAL", "FLOA", "DOUB"]
        .iter()
        .any(|t| declared.contains(t))
    {
        &["number"]
    } else {
        &["string", "number"]
    }
}

/// The JSON Schema `format` of a `DATE` column's values: `YYYY-MM-DD`, a day
/// that exists in the calendar.
pub const DATE_FORMAT: &str = "date";

/// The typed kind a column's declared type gives its values beyond their JSON
/// type: [`DATE_FORMAT`] for exactly `DATE`, nothing otherwise.
pub fn value_format(declared_type: &str) -> Option<&'static str> {
    declared_type
        .eq_ignore_ascii_case("DATE")
        .then_some(DATE_FORMAT)
}

/// What a value of `format` must be, in words ("hours … must be …").
pub fn format_rule(format: &str) -> &'static str {
    match format {
        DATE_FORMAT => "must be a calendar date written YYYY-MM-DD",
        _ => "must be a text value",
    }
}

/// Whether `text` is a value of `format` (see [`value_format`]); the rule it
/// breaks ([`format_rule`]) when not. The calendar is the `time` crate's.
pub fn check_format(format: &str, text: &str) -> Result<(), &'static str> {
    if format != DATE_FORMAT {
        return Ok(());
    }
    let bytes = text.as_bytes();
    let shaped = bytes.len() == 10
        && bytes.iter().enumerate().all(|(at, byte)| match at {
            4 | 7 => *byte == b'-',
            _ => byte.is_ascii_digit(),
        });
    let number = |range: std::ops::Range<usize>| text[range].parse::<u16>().ok();
    let day = shaped
        .then(|| {
            let month = time::Month::try_from(u8::try_from(number(5..7)?).ok()?).ok()?;
            let day = u8::try_from(number(8..10)?).ok()?;
            time::Date::from_calendar_date(i32::from(number(0..4)?), month, day).ok()
        })
        .flatten();
    day.map(|_| ()).ok_or(format_rule(format))
}

/// One column, as SQLite reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Column {
    pub name: String,
    /// The declared type as written, uppercased (`INTEGER`, `TEXT`, `VARCHAR(10)`, or
    /// empty when none was declared).
    pub declared_type: String,
    pub not_null: bool,
    /// The default expression's text as SQLite stores it (`'x'`, `0`,
    /// `datetime('now')`), or `None`.
    pub default_value: Option<String>,
    pub primary_key: bool,
    /// A generated column; refused in declared packages, recorded so the live
    /// database can be compared faithfully.
    #[serde(default, skip_serializing_if = "is_false")]
    pub generated: bool,
}

/// One index created with `CREATE [UNIQUE] INDEX`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    pub name: String,
    pub table: String,
    /// Key columns in order; an expression key part is [`EXPRESSION_KEY`].
    pub columns: Vec<String>,
    pub unique: bool,
    /// Has a `WHERE` clause; refused in packages.
    #[serde(default, skip_serializing_if = "is_false")]
    pub partial: bool,
}

/// One `REFERENCES` constraint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForeignKey {
    pub columns: Vec<String>,
    pub parent_table: String,
    /// Empty when the parent's primary key is implied.
    pub parent_columns: Vec<String>,
    pub on_update: String,
    pub on_delete: String,
}

/// One `CHECK` constraint. Its name is the app's own wording of the rule
/// (`CONSTRAINT "hours must be between 0 and 24" CHECK (…)`), which is what a
/// violation tells the caller; the expression never leaves the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The table's columns the expression reads, in table order.
    pub columns: Vec<String>,
    /// The expression as the SQL parser prints it, so schema.sql and the
    /// migrations' replay compare equal however each was spaced.
    pub expression: String,
}

/// One table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Table {
    pub name: String,
    /// In declaration order (columns added by a migration come last).
    pub columns: Vec<Column>,
    /// `UNIQUE` constraints written in the table definition, each a column list, sorted.
    #[serde(default)]
    pub unique: Vec<Vec<String>>,
    /// Sorted.
    #[serde(default)]
    pub foreign_keys: Vec<ForeignKey>,
    /// `CHECK` constraints, in definition order (column constraints first).
    /// Left out when there are none, so a table without rules reads as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
    /// The definition holds `CHECK` text the SQL parser could not read, so
    /// [`Table::checks`] may be incomplete; the validator refuses it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub checks_unreadable: bool,
    #[serde(default)]
    pub strict: bool,
    #[serde(default)]
    pub without_rowid: bool,
}

impl Table {
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|column| column.name == name)
    }

    /// The named `CHECK` constraint a violation message names.
    pub fn check_named(&self, name: &str) -> Option<&Check> {
        self.checks
            .iter()
            .find(|check| check.name.as_deref() == Some(name))
    }
}

/// A database's structure, normalised so two databases compare with `==`.
/// SQLite's own `sqlite_*` objects and the indexes behind `PRIMARY KEY`/`UNIQUE`
/// constraints are left out (the constraints are recorded on the table).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schema {
    pub tables: BTreeMap<String, Table>,
    pub indexes: BTreeMap<String, Index>,
}

/// One migration file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Migration {
    /// `migrations/NNN-name.sql`.
    pub file: String,
    /// `NNN`: 1, 2, 3, … without gaps.
    pub number: u32,
    pub sql: String,
    /// sha256 hex of the file's bytes; the data-worker records it when it applies
    /// the migration, so an edit to an applied migration is detectable.
    pub checksum: String,
}

/// Everything a data app declares about its data, proven consistent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataContract {
    /// The structure `schema.sql` states (equal to the migrations' replay).
    pub schema: Schema,
    /// In order.
    pub migrations: Vec<Migration>,
    /// The manifest's declared tables (a subset of the schema's tables).
    pub tables: BTreeMap<String, TableDeclaration>,
    /// sha256 hex over [`contract_hash`]'s canonical JSON.
    pub hash: String,
}

impl DataContract {
    /// A declared table with its structure.
    pub fn declared_table(&self, name: &str) -> Option<(&TableDeclaration, &Table)> {
        Some((self.tables.get(name)?, self.schema.tables.get(name)?))
    }

    /// Who may read each declared table's rows (see [`ReadPolicy`]).
    pub fn read_policy(&self) -> ReadPolicy {
        read_policy(&self.tables)
    }
}

mod policy;
pub use policy::{
    DATA_OWNER_CHANGED, DATA_READ_WIDENED, DATA_ROWS_CHANGED, ReadChange, ReadPolicy, Readers,
    Widening, read_policy, widened_reads,
};

/// The contract hash: sha256 hex of the canonical JSON
/// `{"version":1,"tables":{name:{"access":…,"ownerField":…|null}},"migrations":[{"number":…,"file":…,"checksum":…}]}`
/// (object keys in a fixed order, tables sorted by name). The migrations'
/// checksums pin the structure, since `schema.sql` is proven equal to their replay.
pub fn contract_hash(
    tables: &BTreeMap<String, TableDeclaration>,
    migrations: &[Migration],
) -> String {
    #[derive(Serialize)]
    struct CanonicalMigration<'a> {
        number: u32,
        file: &'a str,
        checksum: &'a str,
    }
    #[derive(Serialize)]
    struct Canonical<'a> {
        version: u32,
        tables: &'a BTreeMap<String, TableDeclaration>,
        migrations: Vec<CanonicalMigration<'a>>,
    }
    let canonical = Canonical {
        version: 1,
        tables,
        migrations: migrations
            .iter()
            .map(|m| CanonicalMigration {
                number: m.number,
                file: &m.file,
                checksum: &m.checksum,
            })
            .collect(),
    };
    // Serialising plain structs and BTreeMaps cannot fail.
    let json = serde_json::to_vec(&canonical).unwrap_or_default();
    sha256_hex(&json)
}

/// Whether `name` follows the ASCII identifier grammar every table, column and
/// field selector uses: `^[A-Za-z_][A-Za-z0-9_]{0,62}$`.
pub fn is_identifier(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && (bytes[0].is_ascii_alphabetic() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// The prefix of the platform's own tables in an app's data file
/// (`_sasha_migrations`, `_sasha_idempotency`, `_sasha_audit`) and of its row
/// version column; no package may name anything with it.
/// Hex digits of a draft's preview id, which names its scratch data.
pub const PREVIEW_ID_CHARS: usize = 32;

/// A draft's preview id: [`PREVIEW_ID_CHARS`] lowercase hex digits (it
/// becomes part of a file name in data-worker and a header value on the
/// wire). studio-core makes them, the gateway and data-worker check them.
pub fn is_preview_id(preview: &str) -> bool {
    preview.len() == PREVIEW_ID_CHARS
        && preview
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

pub const PLATFORM_PREFIX: &str = "_sasha";

/// Whether `name` belongs to the platform (starts with [`PLATFORM_PREFIX`], any case).
pub fn is_platform_name(name: &str) -> bool {
    name.len() >= PLATFORM_PREFIX.len()
        && name.as_bytes()[..PLATFORM_PREFIX.len()].eq_ignore_ascii_case(PLATFORM_PREFIX.as_bytes())
}

/// The prefix of the tables the replicator (Litestream) keeps in every
/// database it replicates (`_litestream_seq`, `_litestream_lock`).
pub const REPLICATOR_PREFIX: &str = "_litestream_";

/// Whether `name` is one of SQLite's own objects (`sqlite_…`), or one the
/// replicator keeps beside them ([`is_replicator_name`]), any case: never
/// an app's table, never read, written or shown as one.
pub fn is_sqlite_internal(name: &str) -> bool {
    (name.len() >= 7 && name.as_bytes()[..7].eq_ignore_ascii_case(b"sqlite_"))
        || is_replicator_name(name)
}

/// Whether `name` is one of the replicator's tables ([`REPLICATOR_PREFIX`], any case).
pub fn is_replicator_name(name: &str) -> bool {
    name.len() >= REPLICATOR_PREFIX.len()
        && name.as_bytes()[..REPLICATOR_PREFIX.len()]
            .eq_ignore_ascii_case(REPLICATOR_PREFIX.as_bytes())
}

mod preview;
pub use preview::{PreviewScope, RowScope};

#[cfg(feature = "sqlite")]
mod read;
#[cfg(feature = "sqlite")]
pub use read::read_schema;

fn is_false(value: &bool) -> bool {
    !*value
}

/// sha256 hex of `bytes`: a migration's checksum and the contract hash.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Whether `text` is a sha256 as [`sha256_hex`] writes it: 64 lowercase hex
/// digits (a revision, a tree hash, a draft's content hash).
pub fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sha256_is_64_lowercase_hex_digits() {
        assert!(is_sha256_hex(&sha256_hex(b"x")));
        for not in [
            "",
            "A".repeat(64).as_str(),
            "g".repeat(64).as_str(),
            "a".repeat(63).as_str(),
            "a".repeat(65).as_str(),
        ] {
            assert!(!is_sha256_hex(not), "{not}");
        }
    }

    #[test]
    fn reserved_prefixes_match_in_any_case_and_never_split_a_character() {
        assert!(is_platform_name("_sasha_audit"));
        assert!(is_platform_name("_SASHA"));
        assert!(!is_platform_name("_sash"));
        assert!(!is_platform_name("sasha_x"));
        assert!(is_sqlite_internal("SQLITE_master"));
        assert!(!is_sqlite_internal("sqlite"));
        assert!(is_sqlite_internal("_litestream_seq"));
        assert!(is_sqlite_internal("_LITESTREAM_lock"));
        assert!(!is_sqlite_internal("_litestream"));
        // A multi-byte character across the prefix's length is not a match
        // (and not a panic).
        assert!(!is_sqlite_internal("sqlitéxyz"));
        assert!(!is_platform_name("_sasé"));
    }

    #[test]
    fn a_date_column_takes_only_calendar_days_written_yyyy_mm_dd() {
        assert_eq!(value_format("date"), Some(DATE_FORMAT));
        assert_eq!(value_kinds("DATE"), ["string"]);
        assert_eq!(value_format("DATETIME"), None);
        for good in ["2026-12-02", "2024-02-29", "0001-01-01"] {
            assert_eq!(check_format(DATE_FORMAT, good), Ok(()), "{good}");
        }
        for bad in [
            "next tuesday",
            "12/02/2026",
            "2026-2-02",
            "2026-02-30",
            "2025-02-29",
            "2026-13-01",
            "2026-00-10",
            "+2026-12-02",
            "2026-12-02T00:00",
            "２０２６-12-02",
        ] {
            assert!(check_format(DATE_FORMAT, bad).is_err(), "{bad}");
        }
        // Other formats are not this function's to judge.
        assert_eq!(check_format("email", "x"), Ok(()));
    }
}
