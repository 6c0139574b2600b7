//! The PostgreSQL side of the SQL surface: the pool, TLS, the writers' lock,
//! `?N` placeholders as `$N`, and values to and from the wire types.
//!
//! The client is `postgres` (the blocking face of `tokio-postgres`, same
//! maintainers) under an `r2d2` pool, because every store call is already
//! blocking work run off the async threads (`blocking`): an async client
//! would change ~140 calls and every caller for no gain in a path that waits
//! on the database either way.
//!
//! Each pooled connection keeps the statements it prepared ([`Session`]):
//! a statement given as text costs two round trips (parse and describe,
//! then bind and execute) and a prepared one one; the store's reads on the
//! governed path (`token`, `access`, `write_consent` for `AuthorizeCall`)
//! measured 0.19 ms each that way (`bench/README.md`). r2d2 and `postgres`
//! keep no such cache, hence the few lines here.
//!
//! What it must never do: run a write without the writers' lock, build SQL
//! from a value, or let a broken connection go back into the pool (r2d2
//! drops a client whose connection closed). A checked-out connection is not
//! tested first: that would be one more round trip to the server on every
//! store call, and a connection PostgreSQL closed (a restart) fails its one
//! call as retryable and is dropped.

use std::cell::RefCell;
use std::collections::HashMap;
use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};
use postgres::{IsolationLevel, NoTls};
use r2d2_postgres::PostgresConnectionManager;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{DbError, OwnedValue, Value};

/// The advisory lock every write transaction takes first: one writer at a
/// time, as on SQLite (see the module header of `db`). The number spells
/// "sasha-wr".
const WRITERS_LOCK: i64 = 0x7361_7368_612d_7772;

/// How long a call waits for a pooled connection before the database counts
/// as unreachable.
const CHECKOUT_TIMEOUT: Duration = Duration::from_secs(5);

/// Most statements one connection keeps prepared; past it they are
/// prepared afresh (the store's SQL is a few hundred fixed texts).
const MAX_STATEMENTS: usize = 512;

/// The pool, with or without TLS as the URL's `sslmode` asks.
#[derive(Clone)]
pub(crate) enum PgPool {
    Plain(r2d2::Pool<Sessions<NoTls>>),
    Tls(r2d2::Pool<Sessions<MakeRustlsConnect>>),
}

/// A pooled client; returned to the pool when dropped.
pub(crate) enum PgClient {
    Plain(r2d2::PooledConnection<Sessions<NoTls>>),
    Tls(r2d2::PooledConnection<Sessions<MakeRustlsConnect>>),
}

impl std::ops::Deref for PgClient {
    type Target = Session;

    fn deref(&self) -> &Session {
        match self {
            PgClient::Plain(session) => session,
            PgClient::Tls(session) => session,
        }
    }
}

impl std::ops::DerefMut for PgClient {
    fn deref_mut(&mut self) -> &mut Session {
        match self {
            PgClient::Plain(session) => session,
            PgClient::Tls(session) => session,
        }
    }
}

/// One connection and the statements prepared on it (by their `$N` text).
pub(crate) struct Session {
    client: postgres::Client,
    statements: HashMap<String, postgres::Statement>,
}

/// r2d2's manager of [`Session`]s: `r2d2_postgres`'s, with each connection's
/// statements kept beside it.
#[derive(Debug)]
pub(crate) struct Sessions<T>(PostgresConnectionManager<T>);

impl<T> r2d2::ManageConnection for Sessions<T>
where
    T: Send + Sync + 'static,
    PostgresConnectionManager<T>:
        r2d2::ManageConnection<Connection = postgres::Client, Error = postgres::Error>,
{
    type Connection = Session;
    type Error = postgres::Error;

    fn connect(&self) -> Result<Session, postgres::Error> {
        Ok(Session {
            client: self.0.connect()?,
            statements: HashMap::new(),
        })
    }

    fn is_valid(&self, session: &mut Session) -> Result<(), postgres::Error> {
        self.0.is_valid(&mut session.client)
    }

    fn has_broken(&self, session: &mut Session) -> bool {
        self.0.has_broken(&mut session.client)
    }
}

/// Runs `sql` (`?N` placeholders) on `client` through `run`, with the
/// statement prepared once per connection. A statement that failed is
/// forgotten, so the next call prepares it afresh (a replica's migration
/// may have changed a table it reads).
fn with_statement<C: postgres::GenericClient, T>(
    statements: &mut HashMap<String, postgres::Statement>,
    client: &mut C,
    sql: &str,
    run: impl FnOnce(&mut C, &postgres::Statement) -> Result<T, postgres::Error>,
) -> Result<T, DbError> {
    let sql = numbered_placeholders(sql);
    let statement = match statements.get(&sql) {
        Some(statement) => statement.clone(),
        None => {
            let statement = client.prepare(&sql)?;
            if statements.len() >= MAX_STATEMENTS {
                statements.clear();
            }
            statements.insert(sql.clone(), statement.clone());
            statement
        }
    };
    run(client, &statement).map_err(|error| {
        statements.remove(&sql);
        error.into()
    })
}

/// Opens a pool of `size` connections on `url` (`postgres://…`). TLS is used
/// when the URL's `sslmode` is `require` (rustls, verifying the server
/// against `ca_file`, or the system's roots without one); `disable` and
/// `prefer`, the default, connect in the clear (the default suits a database
/// on the same host or private network; say `sslmode=require` otherwise).
/// Every connection's statements wait `lock_timeout` for a lock (the
/// writers' lock included) before the call fails as busy
/// (`crate::BUSY_TIMEOUT`, as on SQLite).
pub(crate) fn connect(
    url: &str,
    size: u32,
    ca_file: Option<&std::path::Path>,
    lock_timeout: Duration,
) -> Result<(PgPool, String), DbError> {
    let mut config: postgres::Config = url.parse().map_err(|error: postgres::Error| {
        DbError::Unreachable(format!("not a PostgreSQL URL: {error}"))
    })?;
    let place = place(&config);
    // After the URL's own `options` (a `search_path`, say), which are kept:
    // the last `-c` of a setting wins, so the wait stays the store's rule.
    // Zero would mean no limit to PostgreSQL.
    let ours = format!("-c lock_timeout={}", lock_timeout.as_millis().max(1));
    let options = match config.get_options() {
        Some(theirs) if !theirs.trim().is_empty() => format!("{theirs} {ours}"),
        _ => ours,
    };
    config.options(&options);
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CHECKOUT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("sasha studio-core");
    }
    let tls = config.get_ssl_mode() == postgres::config::SslMode::Require;
    let pool = if tls {
        let connector = MakeRustlsConnect::new(tls_config(ca_file)?);
        // One connection first, so a wrong password or an unreachable host
        // is reported as itself rather than as the pool's time-out.
        config
            .connect(connector.clone())
            .map_err(|error| DbError::Unreachable(describe_tls(&error, ca_file)))?;
        let manager = Sessions(PostgresConnectionManager::new(config, connector));
        PgPool::Tls(
            r2d2::Pool::builder()
                .max_size(size)
                .connection_timeout(CHECKOUT_TIMEOUT)
                .test_on_check_out(false)
                .build(manager)
                .map_err(unreachable)?,
        )
    } else {
        config.ssl_mode(postgres::config::SslMode::Disable);
        config
            .connect(NoTls)
            .map_err(|error| DbError::Unreachable(describe(&error)))?;
        let manager = Sessions(PostgresConnectionManager::new(config, NoTls));
        PgPool::Plain(
            r2d2::Pool::builder()
                .max_size(size)
                .connection_timeout(CHECKOUT_TIMEOUT)
                .test_on_check_out(false)
                .build(manager)
                .map_err(unreachable)?,
        )
    };
    Ok((pool, place))
}

/// `postgresql://host:port/database`, from the parsed URL: no credentials.
fn place(config: &postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(host)) => host.clone(),
        Some(postgres::config::Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let database = config.get_dbname().unwrap_or_default();
    format!("postgresql://{host}:{port}/{database}")
}

/// A connection failure in the server's words (a wrong password, an unknown
/// database) or the network's (refused, timed out): never the URL.
pub(crate) fn describe(error: &postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return db.message().to_owned();
    }
    match error.source() {
        Some(source) => format!("{error}: {source}"),
        None => error.to_string(),
    }
}

/// [`describe`] for a TLS connection; when rustls refused the server's
/// certificate, also what it was verified against, which is what an
/// operator changes (`SASHA_DATABASE_CA_FILE`, or the server's certificate).
fn describe_tls(error: &postgres::Error, ca_file: Option<&std::path::Path>) -> String {
    let described = describe(error);
    let mut next: Option<&(dyn StdError + 'static)> = error.source();
    while let Some(cause) = next {
        // rustls's error travels inside an io::Error, whose `source` skips it.
        let refusal = cause.downcast_ref::<rustls::Error>().or_else(|| {
            cause
                .downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::get_ref)
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if let Some(rustls::Error::InvalidCertificate(why)) = refusal {
            let roots = ca_file.map_or_else(
                || "the system's root certificates".to_owned(),
                |path| format!("the CA file {}", path.display()),
            );
            return format!(
                "the server's TLS certificate was refused ({why:?}), verified against {roots}"
            );
        }
        next = cause.source();
    }
    described
}

fn unreachable(error: r2d2::Error) -> DbError {
    DbError::Unreachable(error.to_string())
}

fn tls_config(ca_file: Option<&std::path::Path>) -> Result<rustls::ClientConfig, DbError> {
    let mut roots = rustls::RootCertStore::empty();
    let certificates: Vec<rustls_pki_types::CertificateDer<'static>> = match ca_file {
        Some(path) => {
            use rustls_pki_types::pem::PemObject as _;
            rustls_pki_types::CertificateDer::pem_file_iter(path)
                .and_then(Iterator::collect)
                .map_err(|error| {
                    DbError::Unreachable(format!("the CA file {}: {error}", path.display()))
                })?
        }
        None => rustls_native_certs::load_native_certs().certs,
    };
    let (added, _ignored) = roots.add_parsable_certificates(certificates);
    if added == 0 {
        return Err(DbError::Unreachable(
            "sslmode=require but no CA certificate to verify the server with".into(),
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| DbError::Unreachable(error.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

pub(crate) fn checkout(pool: &PgPool) -> Result<PgClient, DbError> {
    Ok(match pool {
        PgPool::Plain(pool) => PgClient::Plain(pool.get().map_err(unreachable)?),
        PgPool::Tls(pool) => PgClient::Tls(pool.get().map_err(unreachable)?),
    })
}

/// SQLite's `?N` (and bare `?`) placeholders as PostgreSQL's `$N`, outside
/// string literals, quoted names and comments.
pub(crate) fn numbered_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut chars = sql.chars().peekable();
    let mut highest = 0_u32;
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push(c);
                for inner in chars.by_ref() {
                    out.push(inner);
                    if inner == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for inner in chars.by_ref() {
                    out.push(inner);
                    if inner == '\n' {
                        break;
                    }
                }
            }
            '?' => {
                let mut digits = String::new();
                while let Some(digit) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*digit);
                    chars.next();
                }
                let number = digits.parse().unwrap_or(highest + 1);
                highest = highest.max(number);
                out.push('$');
                out.push_str(&number.to_string());
            }
            other => out.push(other),
        }
    }
    out
}

/// Whether a statement run outside a transaction changes rows, so it must
/// take the writers' lock.
fn writes(sql: &str) -> bool {
    let first = sql
        .trim_start()
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or_default();
    !(first.eq_ignore_ascii_case("SELECT") || first.eq_ignore_ascii_case("VALUES"))
}

fn parameters<'a>(values: &'a [Value<'a>]) -> Vec<&'a (dyn ToSql + Sync)> {
    values
        .iter()
        .map(|value| value as &(dyn ToSql + Sync))
        .collect()
}

fn decode(rows: Vec<postgres::Row>) -> Result<Vec<Vec<OwnedValue>>, DbError> {
    rows.into_iter()
        .map(|row| {
            (0..row.len())
                .map(|index| {
                    row.try_get::<_, Any>(index)
                        .map(|any| any.0)
                        .map_err(|error| DbError::Conversion {
                            index,
                            detail: error
                                .source()
                                .map_or_else(|| error.to_string(), ToString::to_string),
                        })
                })
                .collect()
        })
        .collect()
}

/// Statements inside an open transaction.
pub(crate) trait Run {
    fn execute(&self, sql: &str, values: &[Value<'_>]) -> Result<usize, DbError>;
    fn query(&self, sql: &str, values: &[Value<'_>]) -> Result<Vec<Vec<OwnedValue>>, DbError>;
    fn batch(&self, sql: &str) -> Result<(), DbError>;
}

/// A transaction on a pooled client, with that connection's statements;
/// rolled back when dropped uncommitted.
pub(crate) struct PgTransaction<'c> {
    transaction: RefCell<postgres::Transaction<'c>>,
    statements: RefCell<&'c mut HashMap<String, postgres::Statement>>,
}

impl PgTransaction<'_> {
    pub(crate) fn commit(self) -> Result<(), DbError> {
        Ok(self.transaction.into_inner().commit()?)
    }
}

impl Run for PgTransaction<'_> {
    fn execute(&self, sql: &str, values: &[Value<'_>]) -> Result<usize, DbError> {
        let (mut transaction, mut statements) =
            (self.transaction.borrow_mut(), self.statements.borrow_mut());
        let changed = with_statement(&mut statements, &mut *transaction, sql, |tx, statement| {
            tx.execute(statement, &parameters(values))
        })?;
        Ok(usize::try_from(changed).unwrap_or(usize::MAX))
    }

    fn query(&self, sql: &str, values: &[Value<'_>]) -> Result<Vec<Vec<OwnedValue>>, DbError> {
        let (mut transaction, mut statements) =
            (self.transaction.borrow_mut(), self.statements.borrow_mut());
        decode(with_statement(
            &mut statements,
            &mut *transaction,
            sql,
            |tx, statement| tx.query(statement, &parameters(values)),
        )?)
    }

    fn batch(&self, sql: &str) -> Result<(), DbError> {
        Ok(self.transaction.borrow_mut().batch_execute(sql)?)
    }
}

pub(crate) fn begin_write(client: &mut PgClient) -> Result<PgTransaction<'_>, DbError> {
    let Session { client, statements } = &mut **client;
    let mut transaction = client.transaction()?;
    with_statement(
        statements,
        &mut transaction,
        "SELECT pg_advisory_xact_lock(?1)",
        |tx, lock| tx.execute(lock, &[&WRITERS_LOCK]),
    )?;
    Ok(PgTransaction {
        transaction: RefCell::new(transaction),
        statements: RefCell::new(statements),
    })
}

pub(crate) fn begin_read(client: &mut PgClient) -> Result<PgTransaction<'_>, DbError> {
    let Session { client, statements } = &mut **client;
    let transaction = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()?;
    Ok(PgTransaction {
        transaction: RefCell::new(transaction),
        statements: RefCell::new(statements),
    })
}

pub(crate) fn execute_alone(
    client: &mut PgClient,
    sql: &str,
    values: &[Value<'_>],
) -> Result<usize, DbError> {
    let transaction = begin_write(client)?;
    let changed = transaction.execute(sql, values)?;
    transaction.commit()?;
    Ok(changed)
}

pub(crate) fn batch_alone(client: &mut PgClient, sql: &str) -> Result<(), DbError> {
    let transaction = begin_write(client)?;
    transaction.batch(sql)?;
    transaction.commit()
}

pub(crate) fn query_alone(
    client: &mut PgClient,
    sql: &str,
    values: &[Value<'_>],
    first_only: bool,
) -> Result<Vec<Vec<OwnedValue>>, DbError> {
    if writes(sql) {
        let transaction = begin_write(client)?;
        let rows = transaction.query(sql, values)?;
        transaction.commit()?;
        return Ok(rows);
    }
    let Session { client, statements } = &mut **client;
    let parameters = parameters(values);
    let mut run = |statements: &mut HashMap<String, postgres::Statement>| {
        with_statement(statements, client, sql, |client, statement| {
            if first_only {
                client
                    .query_opt(statement, &parameters)
                    .map(|row| row.into_iter().collect())
            } else {
                client.query(statement, &parameters)
            }
        })
    };
    // Outside a transaction a failed statement is tried once more, prepared
    // afresh: a table another replica's migration rebuilt is a new table
    // to a statement prepared before.
    let cached = statements.contains_key(&numbered_placeholders(sql));
    let rows = match run(statements) {
        Err(DbError::Postgres(_)) if cached => run(statements)?,
        rows => rows?,
    };
    decode(rows)
}

/// Any column, as one of the store's value kinds.
struct Any(OwnedValue);

impl<'a> FromSql<'a> for Any {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Any, Box<dyn StdError + Sync + Send>> {
        let value = match *ty {
            Type::INT8 => OwnedValue::Integer(i64::from_sql(ty, raw)?),
            Type::INT4 => OwnedValue::Integer(i64::from(i32::from_sql(ty, raw)?)),
            Type::INT2 => OwnedValue::Integer(i64::from(i16::from_sql(ty, raw)?)),
            Type::BOOL => OwnedValue::Integer(i64::from(bool::from_sql(ty, raw)?)),
            Type::FLOAT8 => OwnedValue::Real(f64::from_sql(ty, raw)?),
            Type::FLOAT4 => OwnedValue::Real(f64::from(f32::from_sql(ty, raw)?)),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                OwnedValue::Text(String::from_sql(ty, raw)?)
            }
            Type::BYTEA => OwnedValue::Blob(Vec::<u8>::from_sql(ty, raw)?),
            ref other => {
                return Err(format!(
                    "a {other} column is not one of the store's value kinds (cast it in the query)"
                )
                .into());
            }
        };
        Ok(Any(value))
    }

    fn from_sql_null(_: &Type) -> Result<Any, Box<dyn StdError + Sync + Send>> {
        Ok(Any(OwnedValue::Null))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

impl ToSql for Value<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match (*self, ty) {
            (Value::Null, _) => Ok(IsNull::Yes),
            (Value::Integer(value), &Type::INT8) => value.to_sql(ty, out),
            (Value::Integer(value), &Type::INT4) => i32::try_from(value)?.to_sql(ty, out),
            (Value::Integer(value), &Type::INT2) => i16::try_from(value)?.to_sql(ty, out),
            (Value::Integer(value), &Type::BOOL) => (value != 0).to_sql(ty, out),
            #[allow(clippy::cast_precision_loss, reason = "SQLite's own conversion")]
            (Value::Integer(value), &Type::FLOAT8) => (value as f64).to_sql(ty, out),
            (Value::Integer(value), &Type::TEXT | &Type::VARCHAR) => {
                value.to_string().as_str().to_sql(ty, out)
            }
            (Value::Real(value), &Type::FLOAT8) => value.to_sql(ty, out),
            (Value::Text(text), &Type::TEXT | &Type::VARCHAR | &Type::BPCHAR | &Type::NAME) => {
                text.to_sql(ty, out)
            }
            (Value::Blob(bytes), &Type::BYTEA) => bytes.to_sql(ty, out),
            (value, ty) => Err(format!("cannot bind {value:?} as {ty}").into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_prepares_each_statement_once_and_afresh_after_a_rebuild() {
        let url = sasha_testkit::postgres_database();
        let (pool, _) = connect(&url, 1, None, Duration::from_secs(2)).unwrap();
        let mut client = checkout(&pool).unwrap();
        batch_alone(
            &mut client,
            "CREATE TABLE t (a TEXT); INSERT INTO t VALUES ('one')",
        )
        .unwrap();
        // The writers' lock of that write is one statement already.
        let kept = client.statements.len();
        let read = "SELECT a FROM t";
        let one: [Value<'_>; 0] = [];
        for _ in 0..3 {
            let rows = query_alone(&mut client, read, &one, false).unwrap();
            assert!(
                matches!(&rows[..], [row] if matches!(&row[0], OwnedValue::Text(a) if a == "one"))
            );
        }
        assert_eq!(
            client.statements.len(),
            kept + 1,
            "prepared once, used three times"
        );
        let key = numbered_placeholders(read);
        assert_eq!(client.statements[&key].columns()[0].type_(), &Type::TEXT);

        // Another replica's migration rebuilds the table with `a` as a
        // number: the statement prepared before cannot give the new rows
        // (PostgreSQL refuses a plan whose result changed), so the read is
        // prepared again and answers.
        batch_alone(
            &mut client,
            "CREATE TABLE t2 (a INTEGER); INSERT INTO t2 VALUES (2); \
             DROP TABLE t; ALTER TABLE t2 RENAME TO t",
        )
        .unwrap();
        let rows = query_alone(&mut client, read, &one, true).unwrap();
        assert!(matches!(&rows[..], [row] if matches!(row[0], OwnedValue::Integer(2))));
        assert_eq!(client.statements.len(), kept + 1);
        assert_eq!(client.statements[&key].columns()[0].type_(), &Type::INT4);

        // A statement that cannot run is not kept.
        let missing = "SELECT a FROM no_such_table";
        assert!(query_alone(&mut client, missing, &[], false).is_err());
        assert!(!client.statements.contains_key(missing));

        // Inside a transaction the connection's statements serve too.
        let transaction = begin_read(&mut client).unwrap();
        let rows = transaction.query(read, &one).unwrap();
        assert!(matches!(&rows[..], [row] if matches!(row[0], OwnedValue::Integer(2))));
        transaction.commit().unwrap();
        assert_eq!(client.statements.len(), kept + 1);
    }

    #[test]
    fn writes_are_told_from_reads_by_their_first_word() {
        assert!(!writes("  SELECT 1"));
        assert!(!writes("select x from t"));
        assert!(writes("DELETE FROM t RETURNING id"));
        assert!(writes("INSERT INTO t VALUES (1)"));
        assert!(writes("UPDATE t SET a = 1"));
        assert!(writes("WITH x AS (SELECT 1) DELETE FROM t"));
    }
}
