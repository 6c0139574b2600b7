//! The replication settings a role reads once at boot: every variable's
//! name and rule lives here, and the roles, `sasha up` and `sasha restore`
//! read them through [`ReplicaConfig::from_env`].
//!
//! Unset `SASHA_REPLICA_URL` means no replication at all (`None`): nothing
//! else is read, nothing changes. What it must never do: start a role with a
//! replica URL it cannot use, or keep a credential anywhere but in
//! [`Credentials`] (which never prints one).

use std::path::{Path, PathBuf};
use std::time::Duration;

use sasha_service::config::{ConfigError, Env};

use crate::url::ReplicaUrl;

/// Where every database is replicated; unset turns replication off.
pub const REPLICA_URL: &str = "SASHA_REPLICA_URL";
/// `sync` (the default) or `async`.
pub const REPLICA_MODE: &str = "SASHA_REPLICA_MODE";
/// The Litestream control socket this role talks to.
pub const REPLICA_SOCKET: &str = "SASHA_REPLICA_SOCKET";
/// How long a sync-mode write waits for object storage before it fails.
pub const REPLICA_SYNC_TIMEOUT: &str = "SASHA_REPLICA_SYNC_TIMEOUT_SECS";
/// The async mode's bound on unreplicated writes.
pub const REPLICA_MAX_LAG: &str = "SASHA_REPLICA_MAX_LAG_SECS";
/// How long a role waits at boot for object storage and its socket.
pub const REPLICA_BOOT_WAIT: &str = "SASHA_REPLICA_BOOT_WAIT_SECS";
/// The `litestream` executable (restores, and `sasha up`'s replicator).
pub const LITESTREAM: &str = "SASHA_LITESTREAM";
/// The standard AWS credential variables Litestream reads too.
pub const ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
pub const SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";
pub const SESSION_TOKEN: &str = "AWS_SESSION_TOKEN";

/// The socket's file name in the folder of the role's databases, when
/// `SASHA_REPLICA_SOCKET` is unset (a sidecar sharing the volume finds it
/// there).
pub const SOCKET_NAME: &str = ".litestream.sock";

/// Default seconds a sync-mode write waits for object storage: under the
/// gateway's default 10 s call deadline, so the caller hears the retryable
/// refusal rather than a timeout.
pub const DEFAULT_SYNC_TIMEOUT_SECS: usize = 5;
/// Default bound, in seconds, on how far async replication may fall behind
/// before writes pause.
pub const DEFAULT_MAX_LAG_SECS: usize = 10;
/// Default seconds a role waits at boot for object storage and for the
/// control socket (a sidecar or storage server starting beside it) before it
/// stops with one line.
pub const DEFAULT_BOOT_WAIT_SECS: usize = 30;

/// When a write is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Only once its commit is in object storage: no acknowledged write is
    /// lost with the disk.
    Sync,
    /// Once committed locally; object storage follows within the bound, and
    /// writes pause (retryable) while it is further behind.
    Async,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Sync => "sync",
            Mode::Async => "async",
        }
    }
}

/// Object storage credentials, from the standard AWS variables. Its `Debug`
/// names the key id's first characters only, never the secret.
#[derive(Clone)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: String = self.access_key_id.chars().take(4).collect();
        f.debug_struct("Credentials")
            .field("access_key_id", &format!("{shown}…"))
            .finish_non_exhaustive()
    }
}

/// A role's replication settings.
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
    /// `SASHA_REPLICA_URL`.
    pub url: ReplicaUrl,
    /// `SASHA_REPLICA_MODE`.
    pub mode: Mode,
    /// `SASHA_REPLICA_SOCKET`, default `<database folder>/.litestream.sock`.
    pub socket: PathBuf,
    /// `SASHA_REPLICA_SYNC_TIMEOUT_SECS` (1 to 300, default 5).
    pub sync_timeout: Duration,
    /// `SASHA_REPLICA_MAX_LAG_SECS` (1 to 3600, default 10).
    pub max_lag: Duration,
    /// `SASHA_REPLICA_BOOT_WAIT_SECS` (1 to 600, default 30).
    pub boot_wait: Duration,
    /// `SASHA_LITESTREAM`, default `litestream` (looked up on `PATH`).
    pub litestream: PathBuf,
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`.
    pub credentials: Credentials,
}

impl ReplicaConfig {
    /// The settings, or `None` when `SASHA_REPLICA_URL` is unset.
    /// `database_folder` is where the role keeps its databases: the default
    /// socket lives there.
    pub fn from_env(
        env: &dyn Env,
        database_folder: &Path,
    ) -> Result<Option<ReplicaConfig>, ConfigError> {
        let Some(text) = env.var(REPLICA_URL) else {
            return Ok(None);
        };
        let url =
            ReplicaUrl::parse(&text).map_err(|reason| ConfigError::new(REPLICA_URL, reason))?;
        let mode = match env.var(REPLICA_MODE).as_deref() {
            None | Some("sync") => Mode::Sync,
            Some("async") => Mode::Async,
            Some(other) => {
                return Err(ConfigError::new(
                    REPLICA_MODE,
                    format!("{other:?} is neither sync nor async"),
                ));
            }
        };
        let socket = env
            .var(REPLICA_SOCKET)
            .map_or_else(|| database_folder.join(SOCKET_NAME), PathBuf::from);
        // sun_path holds 108 bytes with its terminating NUL.
        if socket.as_os_str().len() > 107 {
            return Err(ConfigError::new(
                REPLICA_SOCKET,
                format!(
                    "{} is longer than a Unix socket path may be (107 bytes); set a shorter SASHA_REPLICA_SOCKET",
                    socket.display()
                ),
            ));
        }
        let seconds =
            |var: &'static str, default: usize, max: usize| match sasha_service::config::count(
                env, var, default, max,
            )? {
                0 => Err(ConfigError::new(var, format!("must be from 1 to {max}"))),
                value => Ok(Duration::from_secs(value as u64)),
            };
        let credentials = Credentials {
            access_key_id: env.var(ACCESS_KEY_ID).ok_or_else(|| {
                ConfigError::new(
                    ACCESS_KEY_ID,
                    "must be set with SASHA_REPLICA_URL (the object storage credentials)",
                )
            })?,
            secret_access_key: env.var(SECRET_ACCESS_KEY).ok_or_else(|| {
                ConfigError::new(
                    SECRET_ACCESS_KEY,
                    "must be set with SASHA_REPLICA_URL (the object storage credentials)",
                )
            })?,
            session_token: env.var(SESSION_TOKEN),
        };
        Ok(Some(ReplicaConfig {
            url,
            mode,
            socket,
            sync_timeout: seconds(REPLICA_SYNC_TIMEOUT, DEFAULT_SYNC_TIMEOUT_SECS, 300)?,
            max_lag: seconds(REPLICA_MAX_LAG, DEFAULT_MAX_LAG_SECS, 3600)?,
            boot_wait: seconds(REPLICA_BOOT_WAIT, DEFAULT_BOOT_WAIT_SECS, 600)?,
            litestream: env
                .var(LITESTREAM)
                .map_or_else(|| PathBuf::from("litestream"), PathBuf::from),
            credentials,
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    const URL: (&str, &str) = (REPLICA_URL, "s3://bucket/p?endpoint=http://127.0.0.1:1");
    const KEY: (&str, &str) = (ACCESS_KEY_ID, "AKIDEXAMPLE");
    const SECRET: (&str, &str) = (SECRET_ACCESS_KEY, "secret-never-shown");

    #[test]
    fn unset_url_is_no_replication() {
        assert!(
            ReplicaConfig::from_env(&env(&[]), Path::new("/d"))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn defaults_are_sync_and_a_socket_beside_the_databases() {
        let config = ReplicaConfig::from_env(&env(&[URL, KEY, SECRET]), Path::new("/d"))
            .unwrap()
            .unwrap();
        assert_eq!(config.mode, Mode::Sync);
        assert_eq!(config.socket, Path::new("/d/.litestream.sock"));
        assert_eq!(config.sync_timeout, Duration::from_secs(5));
        assert_eq!(config.boot_wait, Duration::from_secs(30));
        assert!(!format!("{config:?}").contains("secret-never-shown"));
    }

    #[test]
    fn every_variable_is_in_the_documented_list() {
        for name in [
            REPLICA_URL,
            REPLICA_MODE,
            REPLICA_SOCKET,
            REPLICA_SYNC_TIMEOUT,
            REPLICA_MAX_LAG,
            REPLICA_BOOT_WAIT,
            LITESTREAM,
            ACCESS_KEY_ID,
            SECRET_ACCESS_KEY,
            SESSION_TOKEN,
        ] {
            assert!(
                sasha_service::config::VARIABLES
                    .iter()
                    .any(|variable| variable.name == name),
                "{name} is not in sasha_service::config::VARIABLES"
            );
        }
        assert_eq!(
            DEFAULT_SYNC_TIMEOUT_SECS.to_string(),
            documented_default(REPLICA_SYNC_TIMEOUT)
        );
        assert_eq!(
            DEFAULT_MAX_LAG_SECS.to_string(),
            documented_default(REPLICA_MAX_LAG)
        );
        assert_eq!(
            DEFAULT_BOOT_WAIT_SECS.to_string(),
            documented_default(REPLICA_BOOT_WAIT)
        );
        assert_eq!(
            format!("<database folder>/{SOCKET_NAME}"),
            documented_default(REPLICA_SOCKET)
        );
    }

    fn documented_default(name: &str) -> &'static str {
        sasha_service::config::VARIABLES
            .iter()
            .find(|variable| variable.name == name)
            .map(|variable| variable.default)
            .unwrap_or_default()
    }

    #[test]
    fn each_bad_value_names_its_variable() {
        for (pairs, var) in [
            (vec![(REPLICA_URL, "http://x")], REPLICA_URL),
            (vec![URL, SECRET], ACCESS_KEY_ID),
            (vec![URL, KEY], SECRET_ACCESS_KEY),
            (vec![URL, KEY, SECRET, (REPLICA_MODE, "fast")], REPLICA_MODE),
            (
                vec![URL, KEY, SECRET, (REPLICA_SYNC_TIMEOUT, "0")],
                REPLICA_SYNC_TIMEOUT,
            ),
            (
                vec![URL, KEY, SECRET, (REPLICA_MAX_LAG, "soon")],
                REPLICA_MAX_LAG,
            ),
            (
                vec![URL, KEY, SECRET, (REPLICA_BOOT_WAIT, "601")],
                REPLICA_BOOT_WAIT,
            ),
        ] {
            let error = ReplicaConfig::from_env(&env(&pairs), Path::new("/d")).unwrap_err();
            assert_eq!(error.var, var, "{error}");
        }
        let long = "/x".repeat(60);
        let error = ReplicaConfig::from_env(
            &env(&[URL, KEY, SECRET, (REPLICA_SOCKET, &long)]),
            Path::new("/d"),
        )
        .unwrap_err();
        assert_eq!(error.var, REPLICA_SOCKET);
    }
}
