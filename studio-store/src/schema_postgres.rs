//! The core database's schema on PostgreSQL, and the code that applies it.
//!
//! PostgreSQL's versions follow SQLite's numbering (`schema::latest_version`):
//! its first migration creates, in one step, the schema SQLite reaches at
//! version 17, so a database copied from SQLite (`sasha admin migrate-core`)
//! lands at the same version, and every later migration is written for both
//! backends under one number. Replicas starting at once take turns on an
//! advisory lock, so the schema is created once.
//!
//! What it must never do: hold anything but schema, or apply a migration
//! outside the one transaction that records it.

use super::StoreError;
use super::db::{Conn, Sql as _};

/// One PostgreSQL schema step.
struct Migration {
    version: i64,
    name: &'static str,
    sql: &'static str,
}

/// Every PostgreSQL migration, in order.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 17,
        name: "the schema of SQLite version 17",
        sql: include_str!("schema/postgres.sql"),
    },
    Migration {
        version: 18,
        name: "studio-core replicas",
        sql: include_str!("schema/postgres_18.sql"),
    },
    Migration {
        version: 19,
        name: "throttle cells",
        sql: include_str!("schema/postgres_19.sql"),
    },
    Migration {
        version: 20,
        name: "uploaded documents",
        sql: include_str!("schema/postgres_20.sql"),
    },
    Migration {
        version: 21,
        name: "app chat conversations",
        sql: include_str!("schema/postgres_21.sql"),
    },
    Migration {
        version: 22,
        name: "package heads",
        sql: include_str!("schema/postgres_22.sql"),
    },
    Migration {
        version: 23,
        name: "data-worker placement",
        sql: include_str!("schema/postgres_23.sql"),
    },
    Migration {
        version: 24,
        name: "user sources",
        sql: include_str!("schema/postgres_24.sql"),
    },
    Migration {
        version: 25,
        name: "sign-in through an OpenID provider",
        sql: include_str!("schema/postgres_25.sql"),
    },
    Migration {
        version: 26,
        name: "SCIM provisioning",
        sql: include_str!("schema/postgres_26.sql"),
    },
    Migration {
        version: 27,
        name: "token origins",
        sql: include_str!("schema/postgres_27.sql"),
    },
];

/// The lock replicas take turns on while migrating ("sasha-mg").
const MIGRATION_LOCK: i64 = 0x7361_7368_612d_6d67;

pub(super) fn migrate(connection: &mut Conn<'_>, now: i64) -> Result<(), StoreError> {
    let transaction = connection.write_transaction()?;
    transaction.execute("SELECT pg_advisory_xact_lock(?1)", (MIGRATION_LOCK,))?;
    transaction.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version    BIGINT PRIMARY KEY,
            name       TEXT NOT NULL,
            applied_at BIGINT NOT NULL
        );",
    )?;
    let current: i64 = transaction.query_row(
        "SELECT CAST(coalesce(max(version), 0) AS BIGINT) FROM schema_migrations",
        (),
        |row| row.get(0),
    )?;
    let latest = super::schema::latest_version();
    if current > latest {
        return Err(StoreError::Database(format!(
            "the core database has schema version {current}, newer than this build's {latest}"
        )));
    }
    for migration in MIGRATIONS.iter().filter(|m| m.version > current) {
        transaction.execute_batch(migration.sql)?;
        transaction.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)",
            (migration.version, migration.name, now),
        )?;
    }
    transaction.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PostgreSQL reaches the version SQLite does: a copy between them needs
    /// no translation of versions.
    #[test]
    fn the_last_postgresql_migration_is_the_last_sqlite_one() {
        let last = MIGRATIONS.last().map(|m| m.version);
        assert_eq!(last, Some(crate::schema::latest_version()));
        for pair in MIGRATIONS.windows(2) {
            assert_eq!(pair[1].version, pair[0].version + 1, "{}", pair[1].name);
        }
    }
}
