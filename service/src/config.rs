//! Reading configuration from the environment, and the boot guards the spec
//! requires. Every process builds one typed config from an [`Env`] once at start;
//! a bad value stops it with one line naming the variable ([`ConfigError`]).
//!
//! Empty variables count as unset, so a compose file can blank a value out.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};

use crate::Role;
use crate::identity::TlsFiles;

/// Where configuration values come from: the process environment in production,
/// a map in tests.
pub trait Env {
    /// The value of `name`, or `None` when unset or empty.
    fn var(&self, name: &str) -> Option<String>;
}

/// The real process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|value| !value.is_empty())
    }
}

impl Env for HashMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).filter(|value| !value.is_empty()).cloned()
    }
}

/// A configuration value that cannot be used. Displays as one line:
/// `VARIABLE: what is wrong`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}: {reason}")]
pub struct ConfigError {
    /// The environment variable at fault.
    pub var: &'static str,
    /// What is wrong with it, including the offending value where safe.
    pub reason: String,
}

impl ConfigError {
    pub fn new(var: &'static str, reason: impl Into<String>) -> ConfigError {
        ConfigError {
            var,
            reason: reason.into(),
        }
    }
}

/// One documented environment variable. [`VARIABLES`] is the single list that
/// `sasha serve --help` prints and `docs/operating.md`'s table is checked against.
#[derive(Debug, Clone, Copy)]
pub struct Variable {
    pub name: &'static str,
    /// The roles that read it.
    pub roles: &'static str,
    pub default: &'static str,
    pub meaning: &'static str,
}

/// Every environment variable any role reads.
#[rustfmt::skip]
pub const VARIABLES: &[Variable] = &[
    Variable { name: "SASHA_STATE_DIR", roles: "all", default: "./.sasha", meaning: "base of every default path below and of the development certificates" },
    Variable { name: "DOCS_ROOT", roles: "studio-core, data-worker", default: "$SASHA_STATE_DIR/docs", meaning: "the served docs tree; app packages live in DOCS_ROOT/apps/<app-id>/" },
    Variable { name: "DB_PATH", roles: "studio-core, data-worker", default: "$SASHA_STATE_DIR/core.sqlite", meaning: "the core SQLite database file" },
    Variable { name: "DATABASE_URL", roles: "studio-core, sasha admin", default: "(unset: the SQLite file at DB_PATH)", meaning: "the core database on PostgreSQL, postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=require]; every studio-core replica shares it; not together with DATABASE_URL_FILE" },
    Variable { name: "DATABASE_URL_FILE", roles: "studio-core, sasha admin", default: "(unset)", meaning: "file holding DATABASE_URL (trimmed), for a container secret; not together with DATABASE_URL" },
    Variable { name: "SASHA_DATABASE_POOL_SIZE", roles: "studio-core, sasha admin", default: "8", meaning: "PostgreSQL connections each process keeps (1 to 256)" },
    Variable { name: "SASHA_DATABASE_CA_FILE", roles: "studio-core, sasha admin", default: "(unset: the system's roots)", meaning: "PEM CA that verifies the PostgreSQL server when DATABASE_URL says sslmode=require" },
    Variable { name: "APP_DATA_ROOT", roles: "studio-core, data-worker", default: "<dirname(DB_PATH)>/apps", meaning: "one SQLite file per app; refused at boot if it is or resolves inside DOCS_ROOT" },
    Variable { name: "UPLOADS_ROOT", roles: "studio-core", default: "$SASHA_STATE_DIR/uploads", meaning: "an upload folder of an earlier build (one folder per user, Markdown), imported into the core database at boot and left as it is; nothing is written there; refused at boot if it is or resolves inside DOCS_ROOT" },
    Variable { name: "SASHA_PUBLIC_ORIGIN", roles: "studio-core, edge-sandbox, mcp-gateway", default: DEFAULT_PUBLIC_ORIGIN, meaning: "the Studio origin: absolute, no trailing slash, path, query, fragment, credentials or wildcard" },
    Variable { name: "SASHA_APP_SANDBOX_ORIGIN", roles: "studio-core, edge-sandbox", default: DEFAULT_SANDBOX_ORIGIN, meaning: "the sandbox origin; same rules, and its hostname must differ from the Studio's" },
    Variable { name: "MCP_PUBLIC_ORIGIN", roles: "mcp-gateway, studio-core", default: "$SASHA_PUBLIC_ORIGIN", meaning: "the origin MCP clients use for /mcp; OAuth access tokens are bound to <origin>/mcp" },
    Variable { name: "SASHA_REVISION_HISTORY", roles: "studio-core", default: "64", meaning: "superseded app revisions kept in process memory; older ones are read from the revision ledger" },
    Variable { name: "SASHA_REVISION_RETENTION", roles: "studio-core", default: "50", meaning: "how many of each app's newest revisions the revision ledger keeps (0 to 100000); the current revision is never pruned; pruned ones answer APP_REVISION_UNAVAILABLE" },
    Variable { name: "SASHA_BUNDLED_APPS", roles: "studio-core", default: "seed", meaning: "seed: install the bundled apps into DOCS_ROOT/apps at startup (absent ones; untouched old releases are refreshed, edits kept); off: leave DOCS_ROOT alone" },
    Variable { name: "SASHA_CHAT_BASE_URL", roles: "studio-core", default: "(unset: chat unavailable)", meaning: "OpenAI-compatible API base for app chat, e.g. http://127.0.0.1:11434/v1; requests go to <base>/chat/completions" },
    Variable { name: "SASHA_CHAT_MODEL", roles: "studio-core", default: "(required with SASHA_CHAT_BASE_URL)", meaning: "the model name sent with every chat request" },
    Variable { name: "SASHA_CHAT_API_KEY", roles: "studio-core", default: "(unset: no Authorization header)", meaning: "bearer key for the chat provider; not together with SASHA_CHAT_API_KEY_FILE" },
    Variable { name: "SASHA_CHAT_API_KEY_FILE", roles: "studio-core", default: "(unset)", meaning: "file holding the chat provider's key (trimmed); not together with SASHA_CHAT_API_KEY" },
    Variable { name: "SASHA_CHAT_TIMEOUT_SECS", roles: "studio-core", default: "120", meaning: "seconds one whole chat turn may take (1 to 3600); then APP_TIMEOUT" },
    Variable { name: "SASHA_ASSISTANT_MCP_URL", roles: "studio-core", default: "$MCP_PUBLIC_ORIGIN/mcp", meaning: "where the Studio assistant's MCP client reaches mcp-gateway, as the signed-in user (an internal URL such as http://mcp-gateway:3014/mcp in production)" },
    Variable { name: "SASHA_CHAT_IDLE_SECS", roles: "studio-core", default: "30", meaning: "seconds to wait for the provider's first byte or between bytes (1 to 3600); then APP_TIMEOUT" },
    Variable { name: "SASHA_SSO_ADMIN_GROUPS", roles: "studio-core", default: "(unset)", meaning: "groups (names or ids, comma-separated, exact) whose people are admins, from the OpenID groups claim or SCIM memberships" },
    Variable { name: "SASHA_SSO_STAFF_GROUPS", roles: "studio-core", default: "(unset)", meaning: "groups whose people are staff, as SASHA_SSO_ADMIN_GROUPS; the highest mapped role wins" },
    Variable { name: "SASHA_SSO_MEMBER_GROUPS", roles: "studio-core", default: "(unset)", meaning: "groups whose people are members; * admits everyone the provider vouches for; a person no group maps gets no access" },
    Variable { name: "SASHA_OIDC_ISSUER", roles: "studio-core", default: "(unset: no sign-in through an identity provider)", meaning: "the OpenID provider's issuer, exactly as its ID tokens' iss says it (https; http only on loopback); its discovery document is <issuer>/.well-known/openid-configuration; the provider sends people back to <SASHA_PUBLIC_ORIGIN>/auth/oidc/callback (docs/sso.md)" },
    Variable { name: "SASHA_OIDC_CLIENT_ID", roles: "studio-core", default: "(required with SASHA_OIDC_ISSUER)", meaning: "the client id Studio has at the provider" },
    Variable { name: "SASHA_OIDC_CLIENT_SECRET_FILE", roles: "studio-core", default: "(required with SASHA_OIDC_ISSUER)", meaning: "file holding the client secret (trimmed, at most 8 KiB); never logged" },
    Variable { name: "SASHA_OIDC_SCOPES", roles: "studio-core", default: "openid profile email", meaning: "space-separated scopes asked for; must include openid" },
    Variable { name: "SASHA_OIDC_GROUPS_CLAIM", roles: "studio-core", default: "groups", meaning: "the ID-token claim whose strings are the person's groups (Entra ID: groups or roles; Keycloak: groups with a group mapper)" },
    Variable { name: "SASHA_OIDC_USERNAME_CLAIM", roles: "studio-core", default: "(unset: preferred_username, then email)", meaning: "the ID-token claim that is the Sasha user name" },
    Variable { name: "SASHA_OIDC_CA_FILE", roles: "studio-core", default: "(unset: the public web's roots)", meaning: "PEM CA certificates trusted beside the public roots for reaching the provider, when it is behind the organisation's own certificate authority" },
    Variable { name: "SASHA_OIDC_PROVIDER_NAME", roles: "studio-core", default: "single sign-on", meaning: "shown on the sign-in button as Sign in with <name> (at most 64 characters)" },
    Variable { name: "SASHA_SSO_ONLY", roles: "studio-core", default: "0", meaning: "1: password sign-in is refused (APP_ACCESS_DENIED) for everyone but SASHA_SSO_BREAK_GLASS_ADMIN; needs SASHA_OIDC_ISSUER" },
    Variable { name: "SASHA_SSO_BREAK_GLASS_ADMIN", roles: "studio-core", default: "(unset: with SASHA_SSO_ONLY, nobody; sasha admin still works)", meaning: "the one admin who may still sign in with a password when SASHA_SSO_ONLY=1" },
    Variable { name: "SASHA_EDGE_ADDR", roles: "edge-sandbox", default: "127.0.0.1:3010", meaning: "HTTP listen address of the sandbox origin" },
    Variable { name: "SASHA_CORE_HTTP_ADDR", roles: "studio-core", default: "127.0.0.1:3011", meaning: "HTTP listen address of Studio and /api" },
    Variable { name: "SASHA_CORE_GRPC_ADDR", roles: "studio-core", default: "127.0.0.1:3012", meaning: "mTLS gRPC listen address of CoreService" },
    Variable { name: "SASHA_DATA_GRPC_ADDR", roles: "data-worker", default: "127.0.0.1:3013", meaning: "mTLS gRPC listen address of DataService" },
    Variable { name: "SASHA_GATEWAY_HTTP_ADDR", roles: "mcp-gateway", default: "127.0.0.1:3014", meaning: "HTTP listen address of /mcp" },
    Variable { name: "SASHA_GATEWAY_EARLY_READS", roles: "mcp-gateway", default: "1", meaning: "1: a read (a table's, or an action's that only reads) by a credential studio-core accepted for its app in the last 30 s is sent to data-worker beside its fresh check, its answer released only if the check asks exactly the same (decision 0048); 0: every read waits for its check, and no body is read before it" },
    Variable { name: "SASHA_GATEWAY_CALL_DEADLINE_SECS", roles: "mcp-gateway", default: "10", meaning: "seconds a request waits on studio-core or data-worker for authentication, the catalogue or a data operation (1 to 300); then APP_TIMEOUT (retryable)" },
    Variable { name: "SASHA_CORE_GRPC_URL", roles: "mcp-gateway, data-worker (leases)", default: "https://127.0.0.1:3012", meaning: "where the gateway reaches studio-core (https only); several replicas' URLs comma-separated, each call going to one that answers" },
    Variable { name: "SASHA_DATA_GRPC_URL", roles: "studio-core, mcp-gateway", default: "https://127.0.0.1:3013", meaning: "where core and the gateway reach the one data-worker (https only; not read with SASHA_DATA_PLACEMENT=leases)" },
    Variable { name: "SASHA_DATA_PLACEMENT", roles: "studio-core, data-worker, mcp-gateway", default: "single", meaning: "single: one data-worker at SASHA_DATA_GRPC_URL holds every app; leases: data-workers hold leases from studio-core and each app has one owner, moved when its worker is lost or drained" },
    Variable { name: "SASHA_DATA_WORKER_ID", roles: "data-worker", default: "(unset; required with leases)", meaning: "this worker's stable name in the placement (letters, digits, '-', '.', '_'; at most 63)" },
    Variable { name: "SASHA_DATA_ADVERTISE_URL", roles: "data-worker", default: "https://$SASHA_DATA_GRPC_ADDR", meaning: "where core and the gateways reach this worker, recorded with its lease (https only)" },
    Variable { name: "SASHA_DATA_LEASE_SECS", roles: "studio-core", default: "10", meaning: "seconds a data-worker's lease lasts from its last renewal (2 to 300); a lost worker's apps move after it" },
    Variable { name: "SASHA_TLS_CA", roles: "studio-core, data-worker, mcp-gateway", default: "$SASHA_STATE_DIR/certs/ca.pem", meaning: "PEM CA certificate every role trusts" },
    Variable { name: "SASHA_TLS_CERT", roles: "studio-core, data-worker, mcp-gateway", default: "$SASHA_STATE_DIR/certs/<role>.pem", meaning: "PEM certificate of this role (SAN <role>.sasha.internal)" },
    Variable { name: "SASHA_TLS_KEY", roles: "studio-core, data-worker, mcp-gateway", default: "$SASHA_STATE_DIR/certs/<role>-key.pem", meaning: "PEM private key of this role" },
    Variable { name: "RUST_LOG", roles: "all", default: crate::telemetry::DEFAULT_FILTER, meaning: "log filter (tracing EnvFilter syntax); logs go to stderr" },
    Variable { name: "OTEL_EXPORTER_OTLP_ENDPOINT", roles: "all", default: "(unset: no export)", meaning: "OTLP/gRPC collector for spans, e.g. http://127.0.0.1:4317" },
    Variable { name: "OTEL_BSP_SCHEDULE_DELAY", roles: "all", default: "5000", meaning: "milliseconds between span export batches" },
    Variable { name: "SASHA_HEALTH_ADDR", roles: "all", default: "(unset: no probe listener)", meaning: "listen address of GET /livez and GET /readyz for orchestrators, e.g. 0.0.0.0:9090; readiness turns 503 as soon as shutdown begins" },
    Variable { name: "SASHA_SHUTDOWN_GRACE_SECS", roles: "all", default: "20", meaning: "seconds a stopping role lets in-flight requests and streams finish after SIGTERM (0 to 3600); then it exits anyway" },
    Variable { name: "SASHA_EXIT_ON_STDIN_EOF", roles: "all", default: "(unset)", meaning: "1: also stop when stdin closes (set by sasha up for its children)" },
    Variable { name: "SASHA_REPLICA_URL", roles: "studio-core, data-worker", default: "(unset: no replication)", meaning: "where every database is replicated, s3://BUCKET[/PREFIX]?region=…[&endpoint=http(s)://host:port][&force-path-style=BOOL]; the bucket must exist; no credentials in the URL" },
    Variable { name: "SASHA_REPLICA_MODE", roles: "studio-core, data-worker", default: "sync", meaning: "sync: a write is acknowledged only once object storage holds it; async: once committed here, object storage following within SASHA_REPLICA_MAX_LAG_SECS" },
    Variable { name: "SASHA_REPLICA_SOCKET", roles: "studio-core, data-worker", default: "<database folder>/.litestream.sock", meaning: "the control socket of the role's Litestream replicator (a sidecar, or sasha up's child)" },
    Variable { name: "SASHA_REPLICA_SYNC_TIMEOUT_SECS", roles: "studio-core, data-worker", default: "5", meaning: "seconds a sync-mode write waits for object storage (1 to 300); then APP_DATABASE_UNAVAILABLE (retryable), the write not acknowledged" },
    Variable { name: "SASHA_REPLICA_MAX_LAG_SECS", roles: "studio-core, data-worker", default: "10", meaning: "async mode: how far replication may fall behind (1 to 3600) before writes pause (APP_DATABASE_UNAVAILABLE); lag past half of it is logged" },
    Variable { name: "SASHA_REPLICA_BOOT_WAIT_SECS", roles: "studio-core, data-worker", default: "30", meaning: "seconds a starting role waits for object storage and its replicator's socket (1 to 600); then it stops with one line naming what to fix" },
    Variable { name: "SASHA_LITESTREAM", roles: "studio-core, data-worker", default: "litestream", meaning: "the Litestream 0.5 executable that restores (a role's missing databases at boot, sasha restore, an app's rows as they were for a restore from the replica) and replicates (sasha up, sasha litestream)" },
    Variable { name: "AWS_ACCESS_KEY_ID", roles: "studio-core, data-worker", default: "(required with SASHA_REPLICA_URL)", meaning: "object storage access key id, also given to Litestream; never logged" },
    Variable { name: "AWS_SECRET_ACCESS_KEY", roles: "studio-core, data-worker", default: "(required with SASHA_REPLICA_URL)", meaning: "object storage secret key; never logged" },
    Variable { name: "AWS_SESSION_TOKEN", roles: "studio-core, data-worker", default: "(unset)", meaning: "object storage session token, for temporary credentials" },
];

/// [`VARIABLES`] as aligned text for `--help`.
pub fn variables_help() -> String {
    let width = VARIABLES.iter().map(|v| v.name.len()).max().unwrap_or(0);
    let mut text = String::from("Environment (empty counts as unset):\n");
    for variable in VARIABLES {
        text.push_str(&format!(
            "  {:width$}  {} [default: {}] ({})\n",
            variable.name, variable.meaning, variable.default, variable.roles
        ));
    }
    text
}

/// The state folder: the base of every default path. `SASHA_STATE_DIR`, or
/// `./.sasha`.
pub fn state_dir(env: &dyn Env) -> PathBuf {
    env.var("SASHA_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".sasha"))
}

/// A listen address such as `127.0.0.1:3011`.
pub fn socket_addr(
    env: &dyn Env,
    var: &'static str,
    default: &str,
) -> Result<SocketAddr, ConfigError> {
    let text = env.var(var).unwrap_or_else(|| default.to_owned());
    text.parse().map_err(|_| {
        ConfigError::new(
            var,
            format!("{text:?} is not a socket address such as 127.0.0.1:3011"),
        )
    })
}

/// A listen address that may be left unset (`None`).
pub fn optional_socket_addr(
    env: &dyn Env,
    var: &'static str,
) -> Result<Option<SocketAddr>, ConfigError> {
    let Some(text) = env.var(var) else {
        return Ok(None);
    };
    text.parse().map(Some).map_err(|_| {
        ConfigError::new(
            var,
            format!("{text:?} is not a socket address such as 0.0.0.0:9090"),
        )
    })
}

/// On or off: `1`, `true` or `on`; `0`, `false` or `off`; `default` when
/// unset.
pub fn switch(env: &dyn Env, var: &'static str, default: bool) -> Result<bool, ConfigError> {
    match env.var(var).as_deref().map(str::trim) {
        None => Ok(default),
        Some("1" | "true" | "on") => Ok(true),
        Some("0" | "false" | "off") => Ok(false),
        Some(other) => Err(ConfigError::new(
            var,
            format!("{other:?} is neither 1 (on) nor 0 (off)"),
        )),
    }
}

/// A whole number in `0..=max`, with a default.
pub fn count(
    env: &dyn Env,
    var: &'static str,
    default: usize,
    max: usize,
) -> Result<usize, ConfigError> {
    match env.var(var) {
        None => Ok(default),
        Some(text) => match text.parse::<usize>() {
            Ok(value) if value <= max => Ok(value),
            _ => Err(ConfigError::new(
                var,
                format!("{text:?} is not a whole number from 0 to {max}"),
            )),
        },
    }
}

/// An internal gRPC URL such as `https://127.0.0.1:3012`.
pub fn grpc_url(env: &dyn Env, var: &'static str, default: &str) -> Result<String, ConfigError> {
    let text = env.var(var).unwrap_or_else(|| default.to_owned());
    check_grpc_url(var, &text)?;
    Ok(text)
}

/// One or more internal gRPC URLs, comma-separated, for a role that runs as
/// several replicas (each call goes to one that answers).
pub fn grpc_urls(
    env: &dyn Env,
    var: &'static str,
    default: &str,
) -> Result<Vec<String>, ConfigError> {
    let text = env.var(var).unwrap_or_else(|| default.to_owned());
    let urls: Vec<String> = text.split(',').map(|url| url.trim().to_owned()).collect();
    for url in &urls {
        check_grpc_url(var, url)?;
    }
    Ok(urls)
}

fn check_grpc_url(var: &'static str, text: &str) -> Result<(), ConfigError> {
    let url = url::Url::parse(text)
        .map_err(|_| ConfigError::new(var, format!("{text:?} is not an absolute URL")))?;
    if url.scheme() != "https" {
        return Err(ConfigError::new(
            var,
            format!("{text:?} must use https: internal gRPC is always mutual TLS"),
        ));
    }
    if url.host_str().is_none() || url.port_or_known_default().is_none() {
        return Err(ConfigError::new(
            var,
            format!("{text:?} has no host and port"),
        ));
    }
    Ok(())
}

/// The TLS files of `role`: `SASHA_TLS_CA`, `SASHA_TLS_CERT`, `SASHA_TLS_KEY`,
/// defaulting to the development PKI in `<state>/certs`.
pub fn tls_files(env: &dyn Env, role: Role) -> TlsFiles {
    let certs = state_dir(env).join("certs");
    let path = |var: &str, default: PathBuf| env.var(var).map(PathBuf::from).unwrap_or(default);
    TlsFiles {
        ca: path("SASHA_TLS_CA", certs.join("ca.pem")),
        cert: path("SASHA_TLS_CERT", certs.join(format!("{role}.pem"))),
        key: path("SASHA_TLS_KEY", certs.join(format!("{role}-key.pem"))),
    }
}

/// Loads the role's mTLS identity, reporting a failure against the variable that
/// names the unusable file.
pub fn identity(env: &dyn Env, role: Role) -> Result<crate::identity::Identity, ConfigError> {
    let files = tls_files(env, role);
    crate::identity::Identity::load(&files).map_err(|error| {
        let message = error.to_string();
        let var = if message.contains(&files.key.display().to_string()) {
            "SASHA_TLS_KEY"
        } else if message.contains(&files.cert.display().to_string()) {
            "SASHA_TLS_CERT"
        } else {
            "SASHA_TLS_CA"
        };
        ConfigError::new(var, message)
    })
}

/// Telemetry settings shared by every role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// `RUST_LOG`: the log filter (default `telemetry::DEFAULT_FILTER`).
    pub rust_log: Option<String>,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`: OTLP/gRPC collector; unset means no export.
    pub otlp_endpoint: Option<String>,
}

impl TelemetryConfig {
    pub fn from_env(env: &dyn Env) -> Result<TelemetryConfig, ConfigError> {
        let otlp_endpoint = env.var("OTEL_EXPORTER_OTLP_ENDPOINT");
        if let Some(endpoint) = &otlp_endpoint {
            let url = url::Url::parse(endpoint).map_err(|_| {
                ConfigError::new(
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                    format!("{endpoint:?} is not an absolute URL"),
                )
            })?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(ConfigError::new(
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                    format!("{endpoint:?} must use http or https"),
                ));
            }
        }
        Ok(TelemetryConfig {
            rust_log: env.var("RUST_LOG"),
            otlp_endpoint,
        })
    }
}

/// An origin as the spec requires it: absolute `http`/`https`, no trailing slash,
/// path, query, fragment, credentials or wildcard, written in canonical form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    serialized: String,
    host: String,
    port: u16,
}

impl Origin {
    /// Parses and checks one origin. The error is the reason, without the
    /// variable name.
    pub fn parse(text: &str) -> Result<Origin, String> {
        if text.contains('*') {
            return Err(format!("{text:?} must not contain a wildcard"));
        }
        let not_absolute =
            || format!("{text:?} is not an absolute origin such as https://studio.example.com");
        let url = url::Url::parse(text).map_err(|_| not_absolute())?;
        if !text.contains("://") {
            return Err(not_absolute());
        }
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("{text:?} must use http or https"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!("{text:?} must not contain credentials"));
        }
        if url.query().is_some() {
            return Err(format!("{text:?} must not contain a query"));
        }
        if url.fragment().is_some() {
            return Err(format!("{text:?} must not contain a fragment"));
        }
        if url.path() != "/" {
            return Err(format!("{text:?} must not contain a path"));
        }
        if text.ends_with('/') {
            return Err(format!("{text:?} must not end with a slash"));
        }
        let host = url
            .host_str()
            .ok_or_else(|| format!("{text:?} has no host"))?
            .to_owned();
        let serialized = url.origin().ascii_serialization();
        if serialized != text {
            return Err(format!(
                "{text:?} must be written exactly as {serialized:?}"
            ));
        }
        let port = url
            .port_or_known_default()
            .ok_or_else(|| format!("{text:?} has no port"))?;
        Ok(Origin {
            serialized,
            host,
            port,
        })
    }

    /// The origin as written, e.g. `https://studio.example.com`.
    pub fn as_str(&self) -> &str {
        &self.serialized
    }

    /// The hostname, e.g. `studio.example.com` (IPv6 in brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port, explicit or the scheme's default.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether an HTTP `Host` header (or an absolute-form request's authority)
    /// names this origin. Case-insensitive; an explicit default port matches.
    pub fn matches_authority(&self, authority: &str) -> bool {
        let authority = authority.to_ascii_lowercase();
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !port.contains(']') => match port.parse::<u16>() {
                Ok(port) => (host.to_owned(), port),
                Err(_) => return false,
            },
            _ => (authority.clone(), self.default_port()),
        };
        host == self.host && port == self.port
    }

    fn default_port(&self) -> u16 {
        if self.serialized.starts_with("https:") {
            443
        } else {
            80
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.serialized)
    }
}

/// Reads one origin variable, with a default.
pub fn origin(env: &dyn Env, var: &'static str, default: &str) -> Result<Origin, ConfigError> {
    let text = env.var(var).unwrap_or_else(|| default.to_owned());
    Origin::parse(&text).map_err(|reason| ConfigError::new(var, reason))
}

/// The Studio origin and the sandbox origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origins {
    /// `SASHA_PUBLIC_ORIGIN`: where users reach Studio.
    pub studio: Origin,
    /// `SASHA_APP_SANDBOX_ORIGIN`: where the sandbox proxy is served.
    pub sandbox: Origin,
}

/// The default Studio origin of local development.
pub const DEFAULT_PUBLIC_ORIGIN: &str = "http://localhost:3007";
/// The default sandbox origin of local development.
pub const DEFAULT_SANDBOX_ORIGIN: &str = "http://127.0.0.1:3007";

impl Origins {
    /// Reads both origins and refuses a pair that shares a hostname: another port
    /// on one hostname does not isolate cookies.
    pub fn from_env(env: &dyn Env) -> Result<Origins, ConfigError> {
        let studio = origin(env, "SASHA_PUBLIC_ORIGIN", DEFAULT_PUBLIC_ORIGIN)?;
        let sandbox = origin(env, "SASHA_APP_SANDBOX_ORIGIN", DEFAULT_SANDBOX_ORIGIN)?;
        if studio.host().eq_ignore_ascii_case(sandbox.host()) {
            return Err(ConfigError::new(
                "SASHA_APP_SANDBOX_ORIGIN",
                format!(
                    "{sandbox} must use a different hostname than SASHA_PUBLIC_ORIGIN {studio}: another port on the same host shares its cookies"
                ),
            ));
        }
        Ok(Origins { studio, sandbox })
    }
}

/// The storage locations: the served docs tree, the core database, the
/// per-app data files and the users' uploaded documents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoragePaths {
    /// `DOCS_ROOT`: app packages live in `<DOCS_ROOT>/apps/<app-id>/`.
    pub docs_root: PathBuf,
    /// `DB_PATH`: the core SQLite database file.
    pub db_path: PathBuf,
    /// `APP_DATA_ROOT`: one SQLite file per app; never inside `DOCS_ROOT`.
    pub app_data_root: PathBuf,
    /// `UPLOADS_ROOT`: where an earlier build kept uploaded documents as
    /// Markdown, `<UPLOADS_ROOT>/<user-id>/`, imported into the core database
    /// at studio-core's boot; never inside `DOCS_ROOT`, so such a document is
    /// never served.
    pub uploads_root: PathBuf,
}

impl StoragePaths {
    /// Reads the four paths (defaults in the state folder; `APP_DATA_ROOT`
    /// defaults to `<dirname(DB_PATH)>/apps`, `UPLOADS_ROOT` to
    /// `<SASHA_STATE_DIR>/uploads`) and checks that neither the app data root
    /// nor the uploads root is inside the docs root, lexically and after
    /// resolving symlinks. Runs before any of the directories is created.
    pub fn from_env(env: &dyn Env) -> Result<StoragePaths, ConfigError> {
        let state = state_dir(env);
        let docs_root = env
            .var("DOCS_ROOT")
            .map(PathBuf::from)
            .unwrap_or_else(|| state.join("docs"));
        let db_path = env
            .var("DB_PATH")
            .map(PathBuf::from)
            .unwrap_or_else(|| state.join("core.sqlite"));
        if db_path.file_name().is_none() {
            return Err(ConfigError::new(
                "DB_PATH",
                format!("{} does not name a file", db_path.display()),
            ));
        }
        let explicit_data_root = env.var("APP_DATA_ROOT").map(PathBuf::from);
        let app_data_root = explicit_data_root.clone().unwrap_or_else(|| {
            db_path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default()
                .join("apps")
        });
        let explicit_uploads_root = env.var("UPLOADS_ROOT").map(PathBuf::from);
        let uploads_root = explicit_uploads_root
            .clone()
            .unwrap_or_else(|| state.join("uploads"));
        let paths = StoragePaths {
            docs_root,
            db_path,
            app_data_root,
            uploads_root,
        };
        paths.check_outside_docs(
            "APP_DATA_ROOT",
            &paths.app_data_root,
            (explicit_data_root.is_none()).then_some("<dirname(DB_PATH)>/apps"),
            "app databases",
        )?;
        paths.check_outside_docs(
            "UPLOADS_ROOT",
            &paths.uploads_root,
            (explicit_uploads_root.is_none()).then_some("<SASHA_STATE_DIR>/uploads"),
            "uploaded documents",
        )?;
        Ok(paths)
    }

    /// Refuses `path` (the value of `var`, or its `default` when that is
    /// `Some`) when it is or resolves inside `DOCS_ROOT`, where `what` would
    /// be served as static files.
    fn check_outside_docs(
        &self,
        var: &'static str,
        path: &Path,
        default: Option<&str>,
        what: &str,
    ) -> Result<(), ConfigError> {
        let origin = default
            .map(|default| format!(" (the default {default})"))
            .unwrap_or_default();
        let docs = absolute_lexical(&self.docs_root);
        let inner = absolute_lexical(path);
        if inner.starts_with(&docs) {
            return Err(ConfigError::new(
                var,
                format!(
                    "{}{origin} is inside DOCS_ROOT {}: {what} would be served as static files",
                    path.display(),
                    self.docs_root.display()
                ),
            ));
        }
        let docs_resolved = resolve_existing_prefix(&docs);
        let inner_resolved = resolve_existing_prefix(&inner);
        if inner_resolved.starts_with(&docs_resolved) {
            return Err(ConfigError::new(
                var,
                format!(
                    "{}{origin} resolves through a symlink to {}, inside DOCS_ROOT {}: {what} would be served as static files",
                    path.display(),
                    inner_resolved.display(),
                    docs_resolved.display()
                ),
            ));
        }
        Ok(())
    }
}

/// `path` made absolute against the working directory with `.` and `..` folded,
/// without touching the file system.
pub fn absolute_lexical(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut normal = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    normal
}

/// Resolves symlinks in the longest existing prefix of an absolute, lexically
/// normal path, and appends the part that does not exist yet.
fn resolve_existing_prefix(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(resolved) = existing.canonicalize() {
            let mut full = resolved;
            for part in rest.iter().rev() {
                full.push(part);
            }
            return full;
        }
        match (
            existing.file_name().map(|name| name.to_owned()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn a_switch_is_on_or_off_and_nothing_else() {
        const VAR: &str = "SASHA_GATEWAY_EARLY_READS";
        for (text, on) in [
            ("1", true),
            ("true", true),
            (" on ", true),
            ("0", false),
            ("off", false),
            ("false", false),
        ] {
            assert_eq!(
                switch(&env(&[(VAR, text)]), VAR, !on).unwrap(),
                on,
                "{text}"
            );
        }
        assert!(switch(&env(&[]), VAR, true).unwrap());
        assert!(!switch(&env(&[]), VAR, false).unwrap());
        let refused = switch(&env(&[(VAR, "yes")]), VAR, true).unwrap_err();
        assert_eq!(
            refused.to_string(),
            format!("{VAR}: \"yes\" is neither 1 (on) nor 0 (off)")
        );
    }

    #[test]
    fn origins_accept_canonical_forms() {
        for ok in [
            "https://studio.example.com",
            "http://localhost:3007",
            "http://127.0.0.1:3007",
            "https://views.example.com:8443",
            "http://[::1]:3007",
        ] {
            let origin = Origin::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert_eq!(origin.as_str(), ok);
        }
    }

    #[test]
    fn origins_refuse_everything_the_spec_forbids() {
        let check = |text: &str, expected: &str| {
            let reason = Origin::parse(text).unwrap_err();
            assert!(reason.contains(expected), "{text}: {reason}");
        };
        check("https://studio.example.com/", "must not end with a slash");
        check("https://studio.example.com/app", "must not contain a path");
        check("https://studio.example.com?x=1", "must not contain a query");
        check(
            "https://studio.example.com#top",
            "must not contain a fragment",
        );
        check(
            "https://user:pw@studio.example.com",
            "must not contain credentials",
        );
        check(
            "https://user@studio.example.com",
            "must not contain credentials",
        );
        check("https://*.example.com", "wildcard");
        check("*", "wildcard");
        check("studio.example.com", "not an absolute origin");
        check("/relative", "not an absolute origin");
        check("ftp://studio.example.com", "must use http or https");
        check("javascript:alert(1)", "not an absolute origin");
        check("localhost:3007", "not an absolute origin");
        check("https://Studio.Example.com", "must be written exactly as");
        check(
            "https://studio.example.com:443",
            "must be written exactly as",
        );
    }

    #[test]
    fn origin_pair_must_differ_in_hostname() {
        let error = Origins::from_env(&env(&[
            ("SASHA_PUBLIC_ORIGIN", "http://localhost:3007"),
            ("SASHA_APP_SANDBOX_ORIGIN", "http://localhost:3008"),
        ]))
        .unwrap_err();
        assert_eq!(error.var, "SASHA_APP_SANDBOX_ORIGIN");
        assert!(error.reason.contains("different hostname"), "{error}");
        let origins = Origins::from_env(&env(&[])).unwrap();
        assert_eq!(origins.studio.as_str(), DEFAULT_PUBLIC_ORIGIN);
        assert_eq!(origins.sandbox.as_str(), DEFAULT_SANDBOX_ORIGIN);
        let error = Origins::from_env(&env(&[("SASHA_PUBLIC_ORIGIN", "http://x/")])).unwrap_err();
        assert_eq!(error.var, "SASHA_PUBLIC_ORIGIN");
    }

    #[test]
    fn authority_matching() {
        let origin = Origin::parse("http://127.0.0.1:3007").unwrap();
        assert!(origin.matches_authority("127.0.0.1:3007"));
        assert!(!origin.matches_authority("127.0.0.1:3008"));
        assert!(!origin.matches_authority("localhost:3007"));
        assert!(!origin.matches_authority("127.0.0.1"));
        assert!(!origin.matches_authority("127.0.0.1:3007:1"));
        let https = Origin::parse("https://views.example.com").unwrap();
        assert!(https.matches_authority("views.example.com"));
        assert!(https.matches_authority("VIEWS.example.com:443"));
        assert!(!https.matches_authority("views.example.com.evil.test"));
        let v6 = Origin::parse("http://[::1]:3007").unwrap();
        assert!(v6.matches_authority("[::1]:3007"));
        assert!(!v6.matches_authority("[::1]"));
    }

    #[test]
    fn data_root_defaults_beside_the_database() {
        let state = tempfile::tempdir().unwrap();
        let paths =
            StoragePaths::from_env(&env(&[("SASHA_STATE_DIR", state.path().to_str().unwrap())]))
                .unwrap();
        assert_eq!(paths.app_data_root, state.path().join("apps"));
        assert_eq!(paths.docs_root, state.path().join("docs"));
        assert_eq!(paths.uploads_root, state.path().join("uploads"));
    }

    #[test]
    fn uploads_root_inside_docs_root_is_refused() {
        let state = tempfile::tempdir().unwrap();
        let docs = state.path().join("docs");
        let error = StoragePaths::from_env(&env(&[
            ("DOCS_ROOT", docs.to_str().unwrap()),
            (
                "UPLOADS_ROOT",
                docs.join("apps/../uploads").to_str().unwrap(),
            ),
        ]))
        .unwrap_err();
        assert_eq!(error.var, "UPLOADS_ROOT");
        assert!(error.reason.contains("inside DOCS_ROOT"), "{error}");
        assert!(error.reason.contains("uploaded documents"), "{error}");
        // The default follows SASHA_STATE_DIR, so a docs tree that is the
        // state folder itself is caught too.
        let error = StoragePaths::from_env(&env(&[
            ("SASHA_STATE_DIR", state.path().to_str().unwrap()),
            ("DOCS_ROOT", state.path().to_str().unwrap()),
            ("APP_DATA_ROOT", "/elsewhere/apps"),
        ]))
        .unwrap_err();
        assert_eq!(error.var, "UPLOADS_ROOT");
        assert!(
            error
                .reason
                .contains("the default <SASHA_STATE_DIR>/uploads"),
            "{error}"
        );
        // Through a symlink.
        std::fs::create_dir_all(docs.join("inner")).unwrap();
        let link = state.path().join("uploads-link");
        std::os::unix::fs::symlink(docs.join("inner"), &link).unwrap();
        let error = StoragePaths::from_env(&env(&[
            ("DOCS_ROOT", docs.to_str().unwrap()),
            ("UPLOADS_ROOT", link.join("uploads").to_str().unwrap()),
        ]))
        .unwrap_err();
        assert_eq!(error.var, "UPLOADS_ROOT");
        assert!(error.reason.contains("symlink"), "{error}");
        assert!(!link.join("uploads").exists());
        let paths = StoragePaths::from_env(&env(&[
            ("DOCS_ROOT", docs.to_str().unwrap()),
            ("UPLOADS_ROOT", state.path().join("up").to_str().unwrap()),
        ]))
        .unwrap();
        assert_eq!(paths.uploads_root, state.path().join("up"));
    }

    #[test]
    fn data_root_inside_docs_root_is_refused_lexically() {
        let state = tempfile::tempdir().unwrap();
        let docs = state.path().join("docs");
        let error = StoragePaths::from_env(&env(&[
            ("DOCS_ROOT", docs.to_str().unwrap()),
            ("APP_DATA_ROOT", docs.join("x/../data").to_str().unwrap()),
        ]))
        .unwrap_err();
        assert_eq!(error.var, "APP_DATA_ROOT");
        assert!(error.reason.contains("inside DOCS_ROOT"), "{error}");
        // The default follows DB_PATH, so a database inside the docs tree is caught too.
        let error = StoragePaths::from_env(&env(&[
            ("DOCS_ROOT", docs.to_str().unwrap()),
            ("DB_PATH", docs.join("core.sqlite").to_str().unwrap()),
        ]))
        .unwrap_err();
        assert!(error.reason.contains("default"), "{error}");
        assert!(!docs.exists(), "the guard runs before anything is created");
    }

    #[test]
    fn data_root_symlinked_into_docs_root_is_refused() {
        let state = tempfile::tempdir().unwrap();
        let docs = state.path().join("docs");
        std::fs::create_dir_all(docs.join("inner")).unwrap();
        let link = state.path().join("data-link");
        std::os::unix::fs::symlink(docs.join("inner"), &link).unwrap();
        let error = StoragePaths::from_env(&env(&[
            ("DOCS_ROOT", docs.to_str().unwrap()),
            ("APP_DATA_ROOT", link.join("apps").to_str().unwrap()),
        ]))
        .unwrap_err();
        assert!(error.reason.contains("symlink"), "{error}");
        assert!(!link.join("apps").exists());
    }
}
