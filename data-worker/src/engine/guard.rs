//! The read guard on the data: inside the one transaction in which a
//! contract is set up on an app's file (its pending migrations, a new
//! manifest), no existing row may become readable by anyone who could not
//! read it before, and no row may change owner, unless an admin approved
//! this very publication ([`Approval`]). This is the check that cannot be
//! fooled by how a package names things: it compares the app's own rows.
//!
//! - **What the rows were written under** is recorded in the file itself,
//!   in `_sasha_read_policy` (table → [`Readers`] as JSON, the contract that
//!   set it, who approved it), written in the same transaction as the
//!   migrations, so it moves with the data (backups, restores, previews) and
//!   can only change through this guard. An entry outlives its table's
//!   declaration: undeclared rows keep their protection for when they are
//!   declared again.
//! - **Owners**: before the pending migrations run, each owner-scoped
//!   table's `(id, owner)` pairs (by the recorded owner field) are hashed
//!   in id order; after them, the same pairs by the new contract's owner
//!   field must hash the same. A rename of the owner column that keeps every
//!   value is no change; a column of someone's id renamed onto the owner
//!   field, or an `UPDATE` of it, is. A table left without rows has given
//!   nothing away.
//! - **Rows**: with migrations pending, the ids of every app table (declared
//!   or not, shared or not) are hashed before and after: a table that holds
//!   rows afterwards must hold exactly the rows it held, so no row is copied
//!   or made (into a shared table, say) on the way.
//! - **Policy**: a table holding rows may not become shared or read in full
//!   by managers ([`Readers::widened_by`]; a new owner field is judged by
//!   its values above, not its name).
//! - **Rows nobody recorded**: a declared table holding rows that the record
//!   does not cover (only migrations could have put them there) is refused.
//!   A file with no record at all (written before this guard) records the
//!   contract it is first set up with: its owner columns are still checked
//!   by value, its policy is trusted once.
//!
//! What it does not compare: the other values of rows that stay. Moving a
//! value between two existing rows takes an `UPDATE`, which the validator
//! refuses in every migration (with `INSERT` and `DELETE`; a rebuild's copy
//! is proven to move every value under its own name), and the grammar never
//! lets a user's write reach another user's row.
//!
//! A refusal is `APP_ACCESS_DENIED` naming the table and the change, and
//! the transaction is never committed. This module must never weaken the
//! comparison for a caller that names no approval: every contract a data
//! call or a drift check brings in is set up with [`Approval::None`]; only
//! studio-core's `ApplyContract` for a publication an admin approved carries
//! [`Approval::Admin`], and only the engine's own preview path, on a copy
//! that already holds nothing but its previewer's readable rows,
//! [`Approval::PreviewCopy`].

use std::collections::BTreeMap;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, Transaction};
use sasha_contract::data::{
    DataContract, ID_COLUMN, ReadChange, ReadPolicy, Readers, Widening, is_platform_name,
    is_sqlite_internal,
};
use sasha_proto::{AppError, ErrorCode};
use serde_json::json;
use sha2::{Digest as _, Sha256};

use super::{NOW_SQL, quote_identifier, sql_error};

/// Who approved the contract being set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval<'a> {
    /// Nobody: every widening and owner change is refused.
    None,
    /// The admin (a user id) who approved a publication after its review
    /// showed what it widens.
    Admin(&'a str),
    /// A preview's scratch copy, which holds only the rows its previewer
    /// reads live (`preview::keep_visible` ran before any contract): a draft
    /// that widens or hands rows on there shows them nothing they cannot
    /// read already, so its change is run and recorded, never refused.
    /// Only the engine's preview path names it.
    PreviewCopy,
}

/// The platform table the guard records the read policy in.
pub(super) const RECORD_SQL: &str = r#"
CREATE TABLE IF NOT EXISTS _sasha_read_policy (
    table_name TEXT PRIMARY KEY,
    readers TEXT NOT NULL,
    contract_hash TEXT NOT NULL,
    approved_by TEXT,
    recorded_at TEXT NOT NULL
) STRICT;
"#;

/// One recorded entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Recorded {
    readers: Readers,
    contract_hash: String,
    approved_by: Option<String>,
}

/// What the guard read before the pending migrations ran.
#[derive(Debug)]
pub(super) struct Before {
    /// The recorded policy; `None` for a file that has none yet.
    recorded: Option<BTreeMap<String, Recorded>>,
    /// The policy the rows were written under: the record, or (no record)
    /// the contract's own.
    baseline: ReadPolicy,
    /// The hash of each owner-scoped baseline table's (id, owner) pairs, for
    /// the tables whose owners could change in this setup; `None` for a
    /// table the file did not have.
    owners: BTreeMap<String, Option<[u8; 32]>>,
    /// With migrations pending, the hash of every app table's ids.
    ids: Option<BTreeMap<String, [u8; 32]>>,
}

/// Reads the record and hashes the owners that this setup could change:
/// every owner-scoped table when migrations are pending, else only those
/// whose owner field the contract renames.
pub(super) fn before(
    tx: &Transaction<'_>,
    contract: &DataContract,
    migrations_pending: bool,
) -> Result<Before, AppError> {
    let recorded = read_record(tx)?;
    let declared = contract.read_policy();
    let baseline: ReadPolicy = match &recorded {
        Some(recorded) => recorded
            .iter()
            .map(|(table, entry)| (table.clone(), entry.readers.clone()))
            .collect(),
        None => declared.clone(),
    };
    let mut owners = BTreeMap::new();
    for (table, readers) in &baseline {
        let Some(field) = readers.owner_field() else {
            continue;
        };
        let renamed = declared
            .get(table)
            .and_then(Readers::owner_field)
            .is_some_and(|now| now != field);
        if migrations_pending || renamed {
            owners.insert(table.clone(), owner_hash(tx, table, field)?);
        }
    }
    let ids = if migrations_pending {
        let mut ids = BTreeMap::new();
        for table in app_tables(tx)? {
            if let Some(hash) = ids_hash(tx, &table)? {
                ids.insert(table, hash);
            }
        }
        Some(ids)
    } else {
        None
    };
    Ok(Before {
        recorded,
        baseline,
        owners,
        ids,
    })
}

/// After the migrations (and the compatibility check): refuses what the
/// contract would widen without `approval`, else records its policy.
/// `changed_by` names what changed owners (the migration files, or the
/// manifest) in a refusal.
pub(super) fn after(
    tx: &Transaction<'_>,
    contract: &DataContract,
    before: Before,
    approval: Approval<'_>,
    changed_by: &str,
) -> Result<(), AppError> {
    let declared = contract.read_policy();
    let mut widened = Vec::new();
    let owner_field = |table: &str| {
        before
            .baseline
            .get(table)
            .and_then(Readers::owner_field)
            .map(str::to_owned)
    };
    // Rows made, copied in or taken out by the migrations, in any table.
    if let Some(ids) = &before.ids {
        for table in app_tables(tx)? {
            if holds_rows(tx, &table)? && ids.get(&table) != ids_hash(tx, &table)?.as_ref() {
                widened.push(Widening {
                    owner_field: owner_field(&table),
                    table,
                    change: ReadChange::Rows,
                });
            }
        }
    }
    for (table, now) in &declared {
        if !holds_rows(tx, table)? || widened.iter().any(|w| &w.table == table) {
            continue;
        }
        let Some(was) = before.baseline.get(table) else {
            widened.push(Widening {
                table: table.clone(),
                owner_field: None,
                change: ReadChange::Unrecorded,
            });
            continue;
        };
        let Some(field) = was.owner_field() else {
            continue;
        };
        let widening = |change| Widening {
            table: table.clone(),
            owner_field: Some(field.to_owned()),
            change,
        };
        // A new owner field is judged by its values, below.
        widened.extend(
            was.widened_by(now)
                .into_iter()
                .filter(|change| !matches!(change, ReadChange::OwnerField(_)))
                .map(widening),
        );
        if let (Some(hashed), Some(now_field)) = (before.owners.get(table), now.owner_field())
            && *hashed != owner_hash(tx, table, now_field)?
        {
            widened.push(widening(ReadChange::Owners));
        }
    }
    if approval != Approval::PreviewCopy
        && !matches!(approval, Approval::Admin(_))
        && !widened.is_empty()
    {
        return Err(refusal(&widened, changed_by));
    }
    record(tx, contract, &before, approval)
}

/// Whether `table` exists in the file and holds a row.
fn holds_rows(tx: &Transaction<'_>, table: &str) -> Result<bool, AppError> {
    if !has_table(tx, table)? {
        return Ok(false);
    }
    tx.query_row(
        &format!(
            "SELECT EXISTS (SELECT 1 FROM main.{})",
            quote_identifier(table)
        ),
        [],
        |row| row.get(0),
    )
    .map_err(sql_error)
}

/// The app's own tables in the file: not SQLite's, not the platform's.
pub(super) fn app_tables(tx: &Connection) -> Result<Vec<String>, AppError> {
    let mut statement = tx
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .map_err(sql_error)?;
    let names = statement
        .query_map([], |row| row.get::<_, String>(0))
        .map_err(sql_error)?;
    let mut tables = Vec::new();
    for name in names {
        let name = name.map_err(sql_error)?;
        if !is_platform_name(&name) && !is_sqlite_internal(&name) {
            tables.push(name);
        }
    }
    Ok(tables)
}

fn has_table(tx: &Transaction<'_>, table: &str) -> Result<bool, AppError> {
    tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1)",
        [table],
        |row| row.get(0),
    )
    .map_err(sql_error)
}

fn has_column(tx: &Transaction<'_>, table: &str, column: &str) -> Result<bool, AppError> {
    tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info(?1, 'main') WHERE name = ?2 COLLATE NOCASE)",
        [table, column],
        |row| row.get(0),
    )
    .map_err(sql_error)
}

/// sha256 over `table`'s rows in id order, each as its id and its `field`
/// (NULL where the table has no such column), every value tagged with its
/// storage class; `None` when the file has no such table. O(1) memory:
/// the pairs are streamed, never held.
fn owner_hash(
    tx: &Transaction<'_>,
    table: &str,
    field: &str,
) -> Result<Option<[u8; 32]>, AppError> {
    let owner = if has_table(tx, table)? && has_column(tx, table, field)? {
        quote_identifier(field)
    } else {
        "NULL".to_owned()
    };
    rows_hash(tx, table, &owner)
}

/// sha256 over `table`'s ids in order; `None` when the file has no such
/// table.
fn ids_hash(tx: &Transaction<'_>, table: &str) -> Result<Option<[u8; 32]>, AppError> {
    rows_hash(tx, table, "NULL")
}

/// sha256 over `table`'s rows in id order, each as its id (its rowid for a
/// table without an `id`) and `value` (an SQL expression).
fn rows_hash(tx: &Transaction<'_>, table: &str, value: &str) -> Result<Option<[u8; 32]>, AppError> {
    if !has_table(tx, table)? {
        return Ok(None);
    }
    let without_rowid: bool = tx
        .query_row(
            "SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?1",
            [table],
            |row| row.get(0),
        )
        .map_err(sql_error)?;
    let quoted = quote_identifier(table);
    let query = if has_column(tx, table, ID_COLUMN)? {
        format!(
            "SELECT {}, {value} FROM main.{quoted} ORDER BY 1",
            quote_identifier(ID_COLUMN)
        )
    } else if !without_rowid {
        format!("SELECT rowid, {value} FROM main.{quoted} ORDER BY 1")
    } else {
        // No id and no rowid (never a declared table): its whole rows, in
        // the order of their primary key.
        format!("SELECT * FROM main.{quoted}")
    };
    let mut statement = tx.prepare(&query).map_err(sql_error)?;
    let width = statement.column_count();
    let mut rows = statement.query([]).map_err(sql_error)?;
    let mut hasher = Sha256::new();
    while let Some(row) = rows.next().map_err(sql_error)? {
        for index in 0..width {
            feed(&mut hasher, row.get_ref(index).map_err(sql_error)?);
        }
    }
    Ok(Some(hasher.finalize().into()))
}

/// One value into the hash, unambiguously: a tag, then a fixed-width value
/// or a length and the bytes.
fn feed(hasher: &mut Sha256, value: ValueRef<'_>) {
    match value {
        ValueRef::Null => hasher.update([0]),
        ValueRef::Integer(integer) => {
            hasher.update([1]);
            hasher.update(integer.to_le_bytes());
        }
        ValueRef::Real(real) => {
            hasher.update([2]);
            hasher.update(real.to_bits().to_le_bytes());
        }
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => {
            hasher.update([if matches!(value, ValueRef::Text(_)) {
                3
            } else {
                4
            }]);
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        }
    }
}

/// The recorded policy; `None` when the file has no record (no table, or
/// an empty one).
fn read_record(tx: &Transaction<'_>) -> Result<Option<BTreeMap<String, Recorded>>, AppError> {
    if !has_table(tx, "_sasha_read_policy")? {
        return Ok(None);
    }
    let mut statement = tx
        .prepare(
            "SELECT table_name, readers, contract_hash, approved_by FROM _sasha_read_policy \
             ORDER BY table_name",
        )
        .map_err(sql_error)?;
    let rows = statement
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, Option<String>>(3)?,
            ))
        })
        .map_err(sql_error)?;
    let mut recorded = BTreeMap::new();
    for row in rows {
        let (table, readers, contract_hash, approved_by) = row.map_err(sql_error)?;
        let readers = serde_json::from_str(&readers)
            .map_err(|_| super::internal("an entry of _sasha_read_policy is not a read policy"))?;
        recorded.insert(
            table,
            Recorded {
                readers,
                contract_hash,
                approved_by,
            },
        );
    }
    Ok((!recorded.is_empty()).then_some(recorded))
}

/// Writes the record: every earlier entry, with the contract's declared
/// tables replacing theirs (a changed entry names the approving admin, if
/// any). The whole table is rewritten from what was read before the
/// migrations, so nothing a migration did to it survives.
fn record(
    tx: &Transaction<'_>,
    contract: &DataContract,
    before: &Before,
    approval: Approval<'_>,
) -> Result<(), AppError> {
    let mut entries = before.recorded.clone().unwrap_or_default();
    for (table, readers) in contract.read_policy() {
        let unchanged = entries
            .get(&table)
            .is_some_and(|entry| entry.readers == readers);
        if unchanged {
            continue;
        }
        entries.insert(
            table,
            Recorded {
                readers,
                contract_hash: contract.hash.clone(),
                approved_by: match approval {
                    Approval::Admin(user_id) => Some(user_id.to_owned()),
                    Approval::None | Approval::PreviewCopy => None,
                },
            },
        );
    }
    if before.recorded.as_ref() == Some(&entries) && has_table(tx, "_sasha_read_policy")? {
        return Ok(());
    }
    tx.execute_batch(RECORD_SQL).map_err(sql_error)?;
    tx.execute("DELETE FROM _sasha_read_policy", [])
        .map_err(sql_error)?;
    let mut insert = tx
        .prepare(&format!(
            "INSERT INTO _sasha_read_policy \
             (table_name, readers, contract_hash, approved_by, recorded_at) \
             VALUES (?1, ?2, ?3, ?4, {NOW_SQL})"
        ))
        .map_err(sql_error)?;
    for (table, entry) in &entries {
        let readers = serde_json::to_string(&entry.readers)
            .map_err(|_| super::internal("a read policy does not serialise"))?;
        insert
            .execute((table, readers, &entry.contract_hash, &entry.approved_by))
            .map_err(sql_error)?;
    }
    Ok(())
}

/// The refusal: the first finding in words, every finding as a diagnostic
/// against the file that made it (the manifest for a policy, else the
/// migrations).
fn refusal(widened: &[Widening], changed_by: &str) -> AppError {
    let diagnostics: Vec<serde_json::Value> = widened
        .iter()
        .map(|widening| {
            let file = match widening.change {
                ReadChange::Shared | ReadChange::ManagersReadAll => "APP.md",
                _ => changed_by,
            };
            json!({"file": file, "code": widening.code(), "reason": widening.reason(), "table": widening.table})
        })
        .collect();
    let (first, table) = widened
        .first()
        .map(|widening| (widening.reason(), widening.table.clone()))
        .unwrap_or_default();
    let error = AppError::new(
        ErrorCode::AccessDenied,
        format!(
            "{first}; only a publication whose review showed this and an admin approved may do it (a \
             member app never may), so nothing was changed"
        ),
    )
    .with_details(json!({"table": table, "diagnostics": diagnostics}));
    tracing::warn!(
        diagnostic_id = %error.diagnostic_id,
        table = %table,
        findings = widened.len(),
        "data engine: a contract that widens reads or changes owners was refused"
    );
    error
}

/// Sets up `conn` (trusted, no authorizer) for `contract` the way the
/// engine does, with `approval`: the grammar-free entry the read guard's
/// oracle drives (`engine::guard::oracle`).
#[cfg(any(test, feature = "oracle"))]
pub fn setup_for_oracle(
    conn: &mut rusqlite::Connection,
    contract: &DataContract,
    approval: Approval<'_>,
) -> Result<Vec<String>, AppError> {
    super::setup(conn, None, contract, approval, super::Publisher::default())
}

#[cfg(any(test, feature = "oracle"))]
pub mod oracle;

#[cfg(test)]
mod tests;
