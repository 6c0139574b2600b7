//! Where the core database is: PostgreSQL when `DATABASE_URL` (or
//! `DATABASE_URL_FILE`) names one, else the SQLite file at `DB_PATH`. Every
//! process that opens the core database (studio-core's replicas, `sasha
//! admin`, `sasha up`) makes this choice here, the same way.
//!
//! What it must never do: log, print or put into an error the URL's password
//! ([`PostgresConfig`]'s `Debug` and [`PostgresConfig::place`] leave it out),
//! or accept a URL that is not `postgres://`/`postgresql://`.

use std::fmt;
use std::path::PathBuf;

use crate::config::{ConfigError, Env, StoragePaths};

/// The variable naming the PostgreSQL core database.
pub const DATABASE_URL: &str = "DATABASE_URL";
/// The variable naming a file that holds it (a container secret).
pub const DATABASE_URL_FILE: &str = "DATABASE_URL_FILE";
/// Connections in each process's pool.
pub const DATABASE_POOL_SIZE: &str = "SASHA_DATABASE_POOL_SIZE";
/// The CA that verifies the server when the URL says `sslmode=require`.
pub const DATABASE_CA_FILE: &str = "SASHA_DATABASE_CA_FILE";

/// Connections in a pool when nothing else is configured: enough for the
/// blocking threads a replica runs store work on at once, far below
/// PostgreSQL's default 100 connections for several replicas.
pub const DEFAULT_POOL_SIZE: u32 = 8;
/// The largest pool a process may ask for.
pub const MAX_POOL_SIZE: u32 = 256;

/// The core database a process opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreDatabase {
    /// The embedded default: one SQLite file, one process writing it.
    Sqlite(PathBuf),
    /// A PostgreSQL database every studio-core replica shares.
    Postgres(PostgresConfig),
}

/// How to reach the PostgreSQL core database.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresConfig {
    /// `postgres://user:password@host:port/db[?sslmode=require]`; secret.
    pub url: String,
    pub pool_size: u32,
    pub ca_file: Option<PathBuf>,
}

impl PostgresConfig {
    /// The URL without its password, for messages.
    pub fn place(&self) -> String {
        match url::Url::parse(&self.url) {
            Ok(mut url) => {
                if url.password().is_some() {
                    let _ = url.set_password(Some("***"));
                }
                url.to_string()
            }
            Err(_) => "(an unreadable DATABASE_URL)".to_owned(),
        }
    }
}

impl fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("url", &self.place())
            .field("pool_size", &self.pool_size)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

impl CoreDatabase {
    /// Reads `DATABASE_URL` / `DATABASE_URL_FILE` (not both),
    /// `SASHA_DATABASE_POOL_SIZE` and `SASHA_DATABASE_CA_FILE`; without a URL,
    /// the SQLite file of `storage`.
    pub fn from_env(env: &dyn Env, storage: &StoragePaths) -> Result<CoreDatabase, ConfigError> {
        let url = match (env.var(DATABASE_URL), env.var(DATABASE_URL_FILE)) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::new(
                    DATABASE_URL_FILE,
                    "set either DATABASE_URL or DATABASE_URL_FILE, not both",
                ));
            }
            (Some(url), None) => Some((DATABASE_URL, url.trim().to_owned())),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(&path).map_err(|error| {
                    ConfigError::new(DATABASE_URL_FILE, format!("cannot read {path}: {error}"))
                })?;
                Some((DATABASE_URL_FILE, text.trim().to_owned()))
            }
            (None, None) => None,
        };
        let Some((var, url)) = url.filter(|(_, url)| !url.is_empty()) else {
            for stray in [DATABASE_POOL_SIZE, DATABASE_CA_FILE] {
                if env.var(stray).is_some() {
                    return Err(ConfigError::new(
                        stray,
                        "applies to a PostgreSQL core database only: set DATABASE_URL too, or unset it",
                    ));
                }
            }
            return Ok(CoreDatabase::Sqlite(storage.db_path.clone()));
        };
        check_url(var, &url)?;
        let pool_size = match env.var(DATABASE_POOL_SIZE) {
            None => DEFAULT_POOL_SIZE,
            Some(text) => text
                .parse::<u32>()
                .ok()
                .filter(|size| (1..=MAX_POOL_SIZE).contains(size))
                .ok_or_else(|| {
                    ConfigError::new(
                        DATABASE_POOL_SIZE,
                        format!("{text:?} is not a whole number from 1 to {MAX_POOL_SIZE}"),
                    )
                })?,
        };
        let ca_file = env.var(DATABASE_CA_FILE).map(PathBuf::from);
        if let Some(path) = &ca_file
            && !path.is_file()
        {
            return Err(ConfigError::new(
                DATABASE_CA_FILE,
                format!("{} is not a readable file", path.display()),
            ));
        }
        Ok(CoreDatabase::Postgres(PostgresConfig {
            url,
            pool_size,
            ca_file,
        }))
    }

    /// Where it is, for messages: the file, or the URL without its password.
    pub fn place(&self) -> String {
        match self {
            CoreDatabase::Sqlite(path) => path.display().to_string(),
            CoreDatabase::Postgres(config) => config.place(),
        }
    }
}

/// A `postgres://` or `postgresql://` URL with a host and a database name;
/// the error never repeats the URL (it may hold a password).
fn check_url(var: &'static str, text: &str) -> Result<(), ConfigError> {
    let shape = "must be postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=require]";
    let url = url::Url::parse(text)
        .map_err(|error| ConfigError::new(var, format!("{shape} ({error})")))?;
    if !matches!(url.scheme(), "postgres" | "postgresql") {
        return Err(ConfigError::new(
            var,
            format!("{shape}: the scheme is {:?}", url.scheme()),
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ConfigError::new(var, format!("{shape}: it names no host")));
    }
    if url.path().trim_start_matches('/').is_empty() {
        return Err(ConfigError::new(
            var,
            format!("{shape}: it names no database"),
        ));
    }
    for (key, value) in url.query_pairs() {
        if key == "sslmode" && !matches!(value.as_ref(), "disable" | "prefer" | "require") {
            return Err(ConfigError::new(
                var,
                format!("sslmode={value} is not one of disable, prefer or require"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn storage() -> StoragePaths {
        StoragePaths::from_env(&HashMap::from([(
            "SASHA_STATE_DIR".to_owned(),
            "/tmp/state".to_owned(),
        )]))
        .unwrap()
    }

    fn read(vars: &[(&str, &str)]) -> Result<CoreDatabase, ConfigError> {
        let env: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        CoreDatabase::from_env(&env, &storage())
    }

    #[test]
    fn without_a_url_the_core_database_is_the_sqlite_file() {
        assert_eq!(
            read(&[]).unwrap(),
            CoreDatabase::Sqlite(PathBuf::from("/tmp/state/core.sqlite"))
        );
    }

    #[test]
    fn a_url_names_postgresql_with_its_pool() {
        let CoreDatabase::Postgres(config) = read(&[
            (
                "DATABASE_URL",
                "postgres://sasha:s3cret@db.internal:5432/sasha?sslmode=require",
            ),
            ("SASHA_DATABASE_POOL_SIZE", "16"),
        ])
        .unwrap() else {
            panic!("not PostgreSQL");
        };
        assert_eq!(config.pool_size, 16);
        assert_eq!(
            config.place(),
            "postgres://sasha:***@db.internal:5432/sasha?sslmode=require"
        );
        assert!(!format!("{config:?}").contains("s3cret"));
    }

    #[test]
    fn the_url_can_come_from_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("url");
        std::fs::write(&file, "postgres://sasha@db/sasha\n").unwrap();
        let CoreDatabase::Postgres(config) =
            read(&[("DATABASE_URL_FILE", file.to_str().unwrap())]).unwrap()
        else {
            panic!("not PostgreSQL");
        };
        assert_eq!(config.url, "postgres://sasha@db/sasha");
        assert_eq!(config.pool_size, DEFAULT_POOL_SIZE);
    }

    #[test]
    fn bad_settings_are_refused_naming_the_variable_never_the_password() {
        for (vars, var, says) in [
            (
                vec![("DATABASE_URL", "mysql://u:pw@h/db")],
                "DATABASE_URL",
                "scheme",
            ),
            (
                vec![("DATABASE_URL", "postgres://u:pw@h")],
                "DATABASE_URL",
                "no database",
            ),
            (
                vec![("DATABASE_URL", "not a url pw")],
                "DATABASE_URL",
                "must be",
            ),
            (
                vec![("DATABASE_URL", "postgres://u:pw@h/db?sslmode=verify-full")],
                "DATABASE_URL",
                "sslmode",
            ),
            (
                vec![
                    ("DATABASE_URL", "postgres://u:pw@h/db"),
                    ("DATABASE_URL_FILE", "/x"),
                ],
                "DATABASE_URL_FILE",
                "not both",
            ),
            (
                vec![("DATABASE_URL_FILE", "/nonexistent/url")],
                "DATABASE_URL_FILE",
                "cannot read",
            ),
            (
                vec![
                    ("DATABASE_URL", "postgres://u:pw@h/db"),
                    ("SASHA_DATABASE_POOL_SIZE", "0"),
                ],
                "SASHA_DATABASE_POOL_SIZE",
                "1 to 256",
            ),
            (
                vec![("SASHA_DATABASE_POOL_SIZE", "4")],
                "SASHA_DATABASE_POOL_SIZE",
                "PostgreSQL",
            ),
            (
                vec![
                    ("DATABASE_URL", "postgres://u:pw@h/db"),
                    ("SASHA_DATABASE_CA_FILE", "/nope"),
                ],
                "SASHA_DATABASE_CA_FILE",
                "readable",
            ),
        ] {
            let error = read(&vars).unwrap_err();
            assert_eq!(error.var, var, "{vars:?}");
            assert!(error.reason.contains(says), "{vars:?}: {}", error.reason);
            assert!(!error.reason.contains("pw"), "{vars:?}: {}", error.reason);
        }
    }
}
