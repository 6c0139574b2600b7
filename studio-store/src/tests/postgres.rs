//! What only the PostgreSQL store does: TLS to the server (`sslmode=require`
//! against servers of the test's own, with certificates minted for them), a
//! held writers' lock answered as busy, and the server's errors sorted into
//! retryable and not.

use sasha_testkit::{PrivateServer, Tls};

use super::*;

/// A password in the URL, which no message may repeat (the test servers
/// trust loopback and ignore it).
const URL_PASSWORD: &str = "url-password-never-shown";

fn fixed_clock() -> Clock {
    Arc::new(|| START)
}

/// `url` (`postgres://postgres@…/db`) with [`URL_PASSWORD`] and `query`.
fn with_password(url: &str, query: &str) -> String {
    let url = url.replacen("postgres@", &format!("postgres:{URL_PASSWORD}@"), 1);
    format!("{url}{query}")
}

/// Connecting must fail: the error, checked to be retryable, sayable and
/// free of the URL's password.
fn refused(url: &str, ca_file: Option<&std::path::Path>) -> String {
    let Err(error) = Store::connect(url, 2, ca_file, fixed_clock()) else {
        panic!("connected to {url}");
    };
    assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
    let message = error.to_string();
    assert!(!message.contains(URL_PASSWORD), "{message}");
    message
}

/// Whether the store's pooled connection is encrypted, in the server's words.
fn encrypted(store: &Store) -> (bool, String) {
    store
        .connection()
        .unwrap()
        .query_row(
            "SELECT ssl, coalesce(version, '') FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            (),
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap()
}

#[test]
fn sslmode_require_with_the_servers_ca_connects_encrypted() {
    let server = PrivateServer::start_with(Tls::Required);
    let ca = server.tls_files().unwrap().ca;
    let url = with_password(&server.database(), "?sslmode=require");
    let store = Store::connect(&url, 2, Some(&ca), fixed_clock()).unwrap();
    let (ssl, version) = encrypted(&store);
    assert!(ssl, "the server says the connection is not encrypted");
    assert!(version.starts_with("TLSv1."), "{version}");
    // The store works over it: a write and a read back.
    let user = store
        .create_user("ada", UserRole::Member, PASSWORD)
        .unwrap();
    assert_eq!(store.user_by_name("ada").unwrap().unwrap().id, user.id);
}

#[test]
fn a_ca_that_did_not_sign_the_servers_certificate_is_refused() {
    let server = PrivateServer::start_with(Tls::Required);
    let dir = tempfile::tempdir().unwrap();
    let stranger = dir.path().join("stranger.crt");
    std::fs::write(&stranger, sasha_testkit::unrelated_ca_pem()).unwrap();
    let url = with_password(&server.database(), "?sslmode=require");
    let message = refused(&url, Some(&stranger));
    assert!(
        message.contains("the server's TLS certificate was refused (UnknownIssuer)")
            && message.contains(&format!("the CA file {}", stranger.display())),
        "{message}"
    );
    // The system's roots did not sign it either.
    let message = refused(&url, None);
    assert!(
        message.contains("refused (UnknownIssuer), verified against the system's root"),
        "{message}"
    );
}

#[test]
fn sslmode_require_against_a_server_without_tls_is_refused() {
    let url = with_password(&sasha_testkit::postgres_database(), "?sslmode=require");
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, sasha_testkit::unrelated_ca_pem()).unwrap();
    let message = refused(&url, Some(&ca));
    assert!(message.contains("does not support TLS"), "{message}");
}

#[test]
fn a_server_that_requires_tls_refuses_a_plain_connection() {
    let server = PrivateServer::start_with(Tls::Required);
    let database = server.database();
    for query in ["", "?sslmode=disable", "?sslmode=prefer"] {
        let message = refused(&with_password(&database, query), None);
        // The server's own refusal (pg_hba.conf admits only hostssl).
        assert!(message.contains("no encryption"), "{query}: {message}");
    }
}

#[test]
fn a_held_writers_lock_answers_busy_and_writes_nothing() {
    let url = sasha_testkit::postgres_database();
    let store =
        Store::connect_waiting(&url, 2, None, Duration::from_millis(200), fixed_clock()).unwrap();
    // Another replica's write transaction, open: it holds the writers' lock.
    let (pool, _) = crate::db::connect_postgres(&url, 1, None, BUSY_TIMEOUT).unwrap();
    let mut holder = crate::db::Conn::postgres(&pool).unwrap();
    let held = holder.write_transaction().unwrap();

    let error = store
        .create_user("ada", UserRole::Member, PASSWORD)
        .unwrap_err();
    assert!(matches!(error, StoreError::Busy), "{error:?}");
    assert!(error.is_retryable());
    // Reads take no lock, and see nothing of the refused write.
    assert!(store.users().unwrap().is_empty());

    held.commit().unwrap();
    let user = store
        .create_user("ada", UserRole::Member, PASSWORD)
        .unwrap();
    assert_eq!(store.users().unwrap(), vec![user]);
}

#[test]
fn the_servers_errors_say_whether_to_retry() {
    let url = sasha_testkit::postgres_database();
    let (pool, _) = crate::db::connect_postgres(&url, 1, None, BUSY_TIMEOUT).unwrap();
    let connection = crate::db::Conn::postgres(&pool).unwrap();
    // Each raised by the server with its real SQLSTATE, as a lost race, a
    // waited-out lock, a restart or a fault would raise it.
    for (condition, retryable) in [
        ("serialization_failure", true),
        ("deadlock_detected", true),
        ("lock_not_available", true),
        ("query_canceled", true),
        ("admin_shutdown", true),
        ("cannot_connect_now", true),
        ("unique_violation", false),
        ("undefined_table", false),
    ] {
        let error: StoreError = connection
            .execute_batch(&format!(
                "DO $$ BEGIN RAISE EXCEPTION 'raised' USING ERRCODE = '{condition}'; END $$"
            ))
            .unwrap_err()
            .into();
        assert_eq!(error.is_retryable(), retryable, "{condition}: {error:?}");
        let expected = match condition {
            "admin_shutdown" | "cannot_connect_now" => {
                matches!(error, StoreError::Unavailable(_))
            }
            _ if retryable => matches!(error, StoreError::Busy),
            _ => matches!(error, StoreError::Database(_)),
        };
        assert!(expected, "{condition}: {error:?}");
    }
}

#[test]
fn the_urls_own_options_are_kept_beside_the_lock_timeout() {
    let url = format!(
        "{}?options=-c%20statement_timeout%3D4321%20-c%20lock_timeout%3D999999",
        sasha_testkit::postgres_database()
    );
    let store = Store::connect(&url, 1, None, fixed_clock()).unwrap();
    let setting = |name: &str| -> String {
        store
            .connection()
            .unwrap()
            .query_row(&format!("SHOW {name}"), (), |row| row.get(0))
            .unwrap()
    };
    assert_eq!(setting("statement_timeout"), "4321ms");
    // The writers' lock waits the store's time, whatever the URL says.
    assert_eq!(
        setting("lock_timeout"),
        format!("{}s", BUSY_TIMEOUT.as_secs())
    );
}
