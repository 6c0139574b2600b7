//! The one SQL surface every table module writes to, over either backend:
//! SQLite (`rusqlite`, the embedded default) or PostgreSQL (`postgres`, a
//! pooled client). A module's statements are written once, in the subset both
//! engines run alike (numbered `?N` placeholders, `ON CONFLICT`, `RETURNING`,
//! `COLLATE NOCASE`, which PostgreSQL resolves to the schema's case-folding
//! collation, and `rowid`, a column PostgreSQL's tables declare where a
//! statement orders by it); each backend keeps its own schema and migrations.
//!
//! Values cross as five kinds ([`Value`]: null, integer, real, text, bytes) so
//! a module never names a driver type; [`Bind`] and [`Column`] convert the
//! store's own types.
//!
//! Writes are serialised as SQLite serialises them: a write transaction on
//! PostgreSQL first takes one transaction-scoped advisory lock, so every
//! read-then-write the modules do (member-app caps, single-use tokens,
//! first-discovery grants, draft compare-and-set) stays race-free across
//! replicas without a second, PostgreSQL-only locking scheme to keep right.
//! The control plane writes rarely (sign-ins, grants, drafts), so one writer
//! at a time costs nothing a person notices (measured in bench/README.md).
//!
//! What it must never do: hand a driver error to a caller (every failure
//! becomes a [`DbError`], then a `StoreError`), format a value into SQL text,
//! or run a write on PostgreSQL without the writers' lock.

mod postgres;
mod sqlite;

use std::cell::RefCell;
use std::sync::MutexGuard;

pub(crate) use self::postgres::{
    PgPool, connect as connect_postgres, describe as describe_postgres,
};

/// One value bound to a statement or read from a row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Integer(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

/// A value read from PostgreSQL, owned (its row is decoded once); also any
/// column read as whatever kind it holds (`copy`, which moves rows without
/// knowing their types).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OwnedValue {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl OwnedValue {
    fn as_value(&self) -> Value<'_> {
        match self {
            OwnedValue::Null => Value::Null,
            OwnedValue::Integer(value) => Value::Integer(*value),
            OwnedValue::Real(value) => Value::Real(*value),
            OwnedValue::Text(value) => Value::Text(value),
            OwnedValue::Blob(value) => Value::Blob(value),
        }
    }
}

impl Bind for OwnedValue {
    fn bind(&self) -> Value<'_> {
        self.as_value()
    }
}

impl Column for OwnedValue {
    fn column(value: Value<'_>) -> Result<OwnedValue, String> {
        Ok(match value {
            Value::Null => OwnedValue::Null,
            Value::Integer(value) => OwnedValue::Integer(value),
            Value::Real(value) => OwnedValue::Real(value),
            Value::Text(text) => OwnedValue::Text(text.to_owned()),
            Value::Blob(bytes) => OwnedValue::Blob(bytes.to_vec()),
        })
    }
}

/// Why a statement failed, before the store says what it means.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DbError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error("postgresql: {0}")]
    Postgres(#[from] ::postgres::Error),
    /// No connection could be had from the pool in time.
    #[error("the core database cannot be reached: {0}")]
    Unreachable(String),
    /// `query_row` found no row.
    #[error("the query returned no rows")]
    NoRows,
    /// A stored value is not of the type the code reads.
    #[error("column {index}: {detail}")]
    Conversion { index: usize, detail: String },
}

/// `query_row(…).optional()`: no row is `None`, not an error.
pub(crate) trait OptionalExtension<T> {
    fn optional(self) -> Result<Option<T>, DbError>;
}

impl<T> OptionalExtension<T> for Result<T, DbError> {
    fn optional(self) -> Result<Option<T>, DbError> {
        match self {
            Ok(value) => Ok(Some(value)),
            Err(DbError::NoRows) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// A Rust value a statement can bind.
pub(crate) trait Bind {
    fn bind(&self) -> Value<'_>;
}

/// A Rust value a row's column can be read as.
pub(crate) trait Column: Sized {
    fn column(value: Value<'_>) -> Result<Self, String>;
}

macro_rules! bind_integer {
    ($($type:ty),+) => {$(
        impl Bind for $type {
            fn bind(&self) -> Value<'_> {
                Value::Integer(i64::from(*self))
            }
        }
        impl Column for $type {
            fn column(value: Value<'_>) -> Result<$type, String> {
                match value {
                    Value::Integer(value) => <$type>::try_from(value)
                        .map_err(|_| format!("{value} is out of range")),
                    other => Err(format!("expected an integer, found {other:?}")),
                }
            }
        }
    )+};
}

bind_integer!(i64, i32, u32);

impl Bind for bool {
    fn bind(&self) -> Value<'_> {
        Value::Integer(i64::from(*self))
    }
}

impl Column for bool {
    fn column(value: Value<'_>) -> Result<bool, String> {
        match value {
            Value::Integer(value) => Ok(value != 0),
            other => Err(format!("expected a boolean, found {other:?}")),
        }
    }
}

impl Bind for f64 {
    fn bind(&self) -> Value<'_> {
        Value::Real(*self)
    }
}

impl Column for f64 {
    fn column(value: Value<'_>) -> Result<f64, String> {
        match value {
            Value::Real(value) => Ok(value),
            #[allow(clippy::cast_precision_loss, reason = "SQLite's own conversion")]
            Value::Integer(value) => Ok(value as f64),
            other => Err(format!("expected a number, found {other:?}")),
        }
    }
}

impl Bind for str {
    fn bind(&self) -> Value<'_> {
        Value::Text(self)
    }
}

impl Bind for String {
    fn bind(&self) -> Value<'_> {
        Value::Text(self)
    }
}

impl Column for String {
    fn column(value: Value<'_>) -> Result<String, String> {
        match value {
            Value::Text(text) => Ok(text.to_owned()),
            other => Err(format!("expected text, found {other:?}")),
        }
    }
}

impl Bind for [u8] {
    fn bind(&self) -> Value<'_> {
        Value::Blob(self)
    }
}

impl Bind for Vec<u8> {
    fn bind(&self) -> Value<'_> {
        Value::Blob(self)
    }
}

impl Column for Vec<u8> {
    fn column(value: Value<'_>) -> Result<Vec<u8>, String> {
        match value {
            Value::Blob(bytes) => Ok(bytes.to_vec()),
            other => Err(format!("expected bytes, found {other:?}")),
        }
    }
}

impl<T: Bind> Bind for Option<T> {
    fn bind(&self) -> Value<'_> {
        self.as_ref().map_or(Value::Null, Bind::bind)
    }
}

impl<T: Column> Column for Option<T> {
    fn column(value: Value<'_>) -> Result<Option<T>, String> {
        match value {
            Value::Null => Ok(None),
            other => T::column(other).map(Some),
        }
    }
}

impl<T: Bind + ?Sized> Bind for &T {
    fn bind(&self) -> Value<'_> {
        (**self).bind()
    }
}

/// A closed word stored as its one spelling (the caller vocabulary and the
/// store's own enums).
macro_rules! bind_word {
    ($($type:ty),+) => {$(
        impl $crate::db::Bind for $type {
            fn bind(&self) -> $crate::db::Value<'_> {
                $crate::db::Value::Text(self.as_str())
            }
        }
        impl $crate::db::Column for $type {
            fn column(value: $crate::db::Value<'_>) -> Result<$type, String> {
                match value {
                    $crate::db::Value::Text(text) => text.parse().map_err(|error| format!("{error}")),
                    other => Err(format!("expected a word, found {other:?}")),
                }
            }
        }
    )+};
}
pub(crate) use bind_word;

bind_word!(
    sasha_contract::caller::Role,
    sasha_contract::caller::Scope,
    sasha_contract::caller::PrincipalKind,
    sasha_contract::caller::AppAccess,
    sasha_contract::caller::CallSource
);

/// A statement's parameters: a tuple of [`Bind`] values, an array of one
/// type, or `()` for none.
pub(crate) trait Params {
    fn values(&self) -> Vec<Value<'_>>;
}

impl Params for () {
    fn values(&self) -> Vec<Value<'_>> {
        Vec::new()
    }
}

impl<T: Bind, const N: usize> Params for [T; N] {
    fn values(&self) -> Vec<Value<'_>> {
        self.iter().map(Bind::bind).collect()
    }
}

impl Params for &[&dyn Bind] {
    fn values(&self) -> Vec<Value<'_>> {
        self.iter().map(|value| value.bind()).collect()
    }
}

macro_rules! tuple_params {
    ($(($($name:ident $index:tt),+))+) => {$(
        impl<$($name: Bind),+> Params for ($($name,)+) {
            fn values(&self) -> Vec<Value<'_>> {
                vec![$(self.$index.bind()),+]
            }
        }
    )+};
}

tuple_params! {
    (A 0)
    (A 0, B 1)
    (A 0, B 1, C 2)
    (A 0, B 1, C 2, D 3)
    (A 0, B 1, C 2, D 3, E 4)
    (A 0, B 1, C 2, D 3, E 4, F 5)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13)
}

/// One result row.
pub(crate) struct Row<'a> {
    inner: RowInner<'a>,
}

enum RowInner<'a> {
    Sqlite(&'a rusqlite::Row<'a>),
    Postgres(&'a [OwnedValue]),
}

/// A column position (rusqlite's call shape `row.get::<_, T>(0)`).
pub(crate) trait RowIndex {
    fn index(self) -> usize;
}

impl RowIndex for usize {
    fn index(self) -> usize {
        self
    }
}

impl Row<'_> {
    /// Column `index` as a `T`.
    pub(crate) fn get<I: RowIndex, T: Column>(&self, index: I) -> Result<T, DbError> {
        let index = index.index();
        let converted = match &self.inner {
            RowInner::Sqlite(row) => {
                let value = row.get_ref(index)?;
                T::column(sqlite::value_of(value))
            }
            RowInner::Postgres(values) => match values.get(index) {
                Some(value) => T::column(value.as_value()),
                None => Err(format!("no column {index}")),
            },
        };
        converted.map_err(|detail| DbError::Conversion { index, detail })
    }
}

/// Which engine a statement runs on, for the few places whose SQL differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The database's own clock, now, in unix milliseconds, as an SQL
    /// expression: the one place it is spelled per engine ([`Sql::now_ms`]
    /// reads it). PostgreSQL's `clock_timestamp()` is the instant the
    /// statement runs, where `now()` would be the start of the transaction,
    /// before it waited for the writers' lock; SQLite's `'subsec'` keeps the
    /// milliseconds of its clock.
    pub(crate) fn now_ms(self) -> &'static str {
        match self {
            Dialect::Sqlite => "CAST(round(unixepoch('subsec') * 1000) AS INTEGER)",
            Dialect::Postgres => {
                "CAST(floor(extract(epoch FROM clock_timestamp()) * 1000) AS BIGINT)"
            }
        }
    }
}

/// Where a statement runs: a connection outside a transaction, or inside one.
enum Target<'a> {
    Sqlite(&'a rusqlite::Connection),
    /// Outside a transaction: a write takes the writers' lock in a
    /// transaction of its own.
    PostgresClient(&'a RefCell<self::postgres::PgClient>),
    /// Inside a transaction, which took the lock when it began if it writes.
    PostgresTransaction(&'a dyn self::postgres::Run),
}

/// The statements both a connection and a transaction run.
pub(crate) trait Sql {
    #[doc(hidden)]
    #[allow(
        private_interfaces,
        reason = "the seam between the trait and its two implementors"
    )]
    fn target(&self) -> Target<'_>;

    fn dialect(&self) -> Dialect {
        match self.target() {
            Target::Sqlite(_) => Dialect::Sqlite,
            _ => Dialect::Postgres,
        }
    }

    /// Runs one statement; the number of rows it changed.
    fn execute(&self, sql: &str, params: impl Params) -> Result<usize, DbError> {
        let values = params.values();
        match self.target() {
            Target::Sqlite(connection) => sqlite::execute(connection, sql, &values),
            Target::PostgresClient(client) => {
                self::postgres::execute_alone(&mut client.borrow_mut(), sql, &values)
            }
            Target::PostgresTransaction(run) => run.execute(sql, &values),
        }
    }

    /// The database's own clock, now, in unix milliseconds: what a lease is
    /// timed by, so every studio-core replica and the operator CLI agree on
    /// it whatever their own clocks say.
    fn now_ms(&self) -> Result<i64, DbError> {
        let sql = format!("SELECT {}", self.dialect().now_ms());
        self.query_row(&sql, (), |row| row.get(0))
    }

    /// Runs several statements without parameters (schema, tests).
    fn execute_batch(&self, sql: &str) -> Result<(), DbError> {
        match self.target() {
            Target::Sqlite(connection) => Ok(connection.execute_batch(sql)?),
            Target::PostgresClient(client) => {
                self::postgres::batch_alone(&mut client.borrow_mut(), sql)
            }
            Target::PostgresTransaction(run) => run.batch(sql),
        }
    }

    /// The first row mapped by `map`; [`DbError::NoRows`] when there is none.
    fn query_row<T>(
        &self,
        sql: &str,
        params: impl Params,
        map: impl FnOnce(&Row<'_>) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        let values = params.values();
        match self.target() {
            Target::Sqlite(connection) => {
                let mut statement = connection.prepare_cached(sql)?;
                let mut rows = statement.query(rusqlite::params_from_iter(values.iter()))?;
                match rows.next()? {
                    Some(row) => map(&Row {
                        inner: RowInner::Sqlite(row),
                    }),
                    None => Err(DbError::NoRows),
                }
            }
            Target::PostgresClient(_) | Target::PostgresTransaction(_) => {
                let rows = self.postgres_rows(sql, &values, true)?;
                match rows.first() {
                    Some(row) => map(&Row {
                        inner: RowInner::Postgres(row),
                    }),
                    None => Err(DbError::NoRows),
                }
            }
        }
    }

    /// Every row mapped by `map`, in order.
    fn query_map<T>(
        &self,
        sql: &str,
        params: impl Params,
        mut map: impl FnMut(&Row<'_>) -> Result<T, DbError>,
    ) -> Result<std::vec::IntoIter<Result<T, DbError>>, DbError> {
        let values = params.values();
        let mut out = Vec::new();
        match self.target() {
            Target::Sqlite(connection) => {
                let mut statement = connection.prepare_cached(sql)?;
                let mut rows = statement.query(rusqlite::params_from_iter(values.iter()))?;
                while let Some(row) = rows.next()? {
                    out.push(map(&Row {
                        inner: RowInner::Sqlite(row),
                    }));
                }
            }
            Target::PostgresClient(_) | Target::PostgresTransaction(_) => {
                for row in &self.postgres_rows(sql, &values, false)? {
                    out.push(map(&Row {
                        inner: RowInner::Postgres(row),
                    }));
                }
            }
        }
        Ok(out.into_iter())
    }

    /// A statement to run later with parameters (rusqlite's call shape).
    fn prepare(&self, sql: &str) -> Result<Statement<'_, Self>, DbError>
    where
        Self: Sized,
    {
        Ok(Statement {
            on: self,
            sql: sql.to_owned(),
        })
    }

    /// [`Sql::prepare`]; SQLite keeps every statement in its cache anyway.
    fn prepare_cached(&self, sql: &str) -> Result<Statement<'_, Self>, DbError>
    where
        Self: Sized,
    {
        self.prepare(sql)
    }

    #[doc(hidden)]
    fn postgres_rows(
        &self,
        sql: &str,
        values: &[Value<'_>],
        first_only: bool,
    ) -> Result<Vec<Vec<OwnedValue>>, DbError> {
        match self.target() {
            Target::PostgresClient(client) => {
                self::postgres::query_alone(&mut client.borrow_mut(), sql, values, first_only)
            }
            Target::PostgresTransaction(run) => run.query(sql, values),
            Target::Sqlite(_) => unreachable!("only called for PostgreSQL targets"),
        }
    }
}

/// A prepared statement: the SQL and where it runs.
pub(crate) struct Statement<'a, S: Sql> {
    on: &'a S,
    sql: String,
}

impl<S: Sql> Statement<'_, S> {
    pub(crate) fn query_row<T>(
        &mut self,
        params: impl Params,
        map: impl FnOnce(&Row<'_>) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        self.on.query_row(&self.sql, params, map)
    }

    pub(crate) fn query_map<T>(
        &mut self,
        params: impl Params,
        map: impl FnMut(&Row<'_>) -> Result<T, DbError>,
    ) -> Result<std::vec::IntoIter<Result<T, DbError>>, DbError> {
        self.on.query_map(&self.sql, params, map)
    }
}

/// A connection for the length of one store call: SQLite's one connection
/// (held under its lock), or one from PostgreSQL's pool.
pub(crate) struct Conn<'s> {
    inner: ConnInner<'s>,
}

enum ConnInner<'s> {
    Sqlite(MutexGuard<'s, rusqlite::Connection>),
    /// A connection of its own (tests reading what is really stored).
    #[cfg(test)]
    SqliteOwned(rusqlite::Connection),
    Postgres(Box<RefCell<self::postgres::PgClient>>),
}

impl<'s> Conn<'s> {
    pub(crate) fn sqlite(connection: MutexGuard<'s, rusqlite::Connection>) -> Conn<'s> {
        Conn {
            inner: ConnInner::Sqlite(connection),
        }
    }

    #[cfg(test)]
    pub(crate) fn sqlite_owned(connection: rusqlite::Connection) -> Conn<'static> {
        Conn {
            inner: ConnInner::SqliteOwned(connection),
        }
    }

    pub(crate) fn postgres(pool: &PgPool) -> Result<Conn<'static>, DbError> {
        Ok(Conn {
            inner: ConnInner::Postgres(Box::new(RefCell::new(self::postgres::checkout(pool)?))),
        })
    }

    /// A transaction that writes: SQLite's `BEGIN IMMEDIATE`, PostgreSQL's
    /// writers' lock. Rolled back when dropped without [`Tx::commit`].
    pub(crate) fn write_transaction(&mut self) -> Result<Tx<'_>, DbError> {
        Ok(Tx {
            inner: match &mut self.inner {
                ConnInner::Sqlite(connection) => TxInner::Sqlite(
                    connection
                        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?,
                ),
                #[cfg(test)]
                ConnInner::SqliteOwned(connection) => TxInner::Sqlite(
                    connection
                        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?,
                ),
                ConnInner::Postgres(client) => {
                    TxInner::Postgres(self::postgres::begin_write(client.get_mut())?)
                }
            },
        })
    }

    /// A transaction whose reads see one state of the database: SQLite's
    /// deferred transaction, PostgreSQL's repeatable read. It must not write.
    pub(crate) fn read_transaction(&mut self) -> Result<Tx<'_>, DbError> {
        Ok(Tx {
            inner: match &mut self.inner {
                ConnInner::Sqlite(connection) => TxInner::Sqlite(connection.transaction()?),
                #[cfg(test)]
                ConnInner::SqliteOwned(connection) => TxInner::Sqlite(connection.transaction()?),
                ConnInner::Postgres(client) => {
                    TxInner::Postgres(self::postgres::begin_read(client.get_mut())?)
                }
            },
        })
    }

    /// The SQLite connection itself (tests set its pragmas).
    #[cfg(test)]
    pub(crate) fn as_sqlite(&mut self) -> Option<&mut rusqlite::Connection> {
        match &mut self.inner {
            ConnInner::Sqlite(connection) => Some(connection),
            #[cfg(test)]
            ConnInner::SqliteOwned(connection) => Some(connection),
            ConnInner::Postgres(_) => None,
        }
    }
}

impl Sql for Conn<'_> {
    #[allow(
        private_interfaces,
        reason = "the seam between the trait and its two implementors"
    )]
    fn target(&self) -> Target<'_> {
        match &self.inner {
            ConnInner::Sqlite(connection) => Target::Sqlite(connection),
            #[cfg(test)]
            ConnInner::SqliteOwned(connection) => Target::Sqlite(connection),
            ConnInner::Postgres(client) => Target::PostgresClient(client),
        }
    }
}

/// An open transaction.
pub(crate) struct Tx<'c> {
    inner: TxInner<'c>,
}

enum TxInner<'c> {
    Sqlite(rusqlite::Transaction<'c>),
    Postgres(self::postgres::PgTransaction<'c>),
}

impl Tx<'_> {
    pub(crate) fn commit(self) -> Result<(), DbError> {
        match self.inner {
            TxInner::Sqlite(transaction) => Ok(transaction.commit()?),
            TxInner::Postgres(transaction) => transaction.commit(),
        }
    }
}

impl Sql for Tx<'_> {
    #[allow(
        private_interfaces,
        reason = "the seam between the trait and its two implementors"
    )]
    fn target(&self) -> Target<'_> {
        match &self.inner {
            TxInner::Sqlite(transaction) => Target::Sqlite(transaction),
            TxInner::Postgres(transaction) => Target::PostgresTransaction(transaction),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::postgres::numbered_placeholders;

    #[test]
    fn placeholders_are_renumbered_outside_quotes_only() {
        assert_eq!(
            numbered_placeholders("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND d IN (?2, ?10)"),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND d IN ($2, $10)"
        );
        assert_eq!(
            numbered_placeholders("SELECT \"?3\" FROM t WHERE e = ?3 -- ?4\n AND f = ?4"),
            "SELECT \"?3\" FROM t WHERE e = $3 -- ?4\n AND f = $4"
        );
    }
}
