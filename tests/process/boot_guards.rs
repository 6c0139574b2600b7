//! Boot guards: an unusable configuration stops the process before it serves,
//! with exit status 2 and exactly one line on stderr naming the variable.

use crate::common;

use common::Harness;
use sasha_service::Role;

/// Starts `role` with `env` and expects a one-line refusal naming `var` and
/// containing `fragment`.
async fn refused(harness: &Harness, role: Role, env: &[(&str, &str)], var: &str, fragment: &str) {
    let (status, stderr) = harness.boot_failure(role, env).await;
    assert_eq!(
        status.code(),
        Some(2),
        "{role} {env:?} exited with {status}: {stderr}"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{role} {env:?}: expected one line, got:\n{stderr}"
    );
    let line = lines[0];
    assert!(
        line.starts_with(&format!("sasha {role}: invalid configuration: {var}: ")),
        "{line}"
    );
    assert!(
        line.contains(fragment),
        "{line} should mention {fragment:?}"
    );
}

#[tokio::test]
async fn origin_guards() {
    let harness = Harness::new();
    for role in [Role::EdgeSandbox, Role::StudioCore] {
        for (value, fragment) in [
            ("http://localhost:3007/", "must not end with a slash"),
            ("http://localhost:3007/studio", "must not contain a path"),
            ("http://localhost:3007?a=b", "must not contain a query"),
            ("http://localhost:3007#x", "must not contain a fragment"),
            (
                "http://admin:pw@localhost:3007",
                "must not contain credentials",
            ),
            ("http://*.localhost:3007", "must not contain a wildcard"),
            ("localhost:3007", "absolute origin"),
            ("ws://localhost:3007", "must use http or https"),
        ] {
            refused(
                &harness,
                role,
                &[("SASHA_PUBLIC_ORIGIN", value)],
                "SASHA_PUBLIC_ORIGIN",
                fragment,
            )
            .await;
            refused(
                &harness,
                role,
                &[("SASHA_APP_SANDBOX_ORIGIN", value)],
                "SASHA_APP_SANDBOX_ORIGIN",
                fragment,
            )
            .await;
        }
        // Same hostname, another port: cookies are shared, so it is refused.
        refused(
            &harness,
            role,
            &[
                ("SASHA_PUBLIC_ORIGIN", "https://studio.example.com"),
                (
                    "SASHA_APP_SANDBOX_ORIGIN",
                    "https://studio.example.com:8443",
                ),
            ],
            "SASHA_APP_SANDBOX_ORIGIN",
            "different hostname",
        )
        .await;
    }
    refused(
        &harness,
        Role::McpGateway,
        &[("MCP_PUBLIC_ORIGIN", "https://mcp.example.com/mcp")],
        "MCP_PUBLIC_ORIGIN",
        "must not contain a path",
    )
    .await;
}

#[tokio::test]
async fn app_data_root_must_stay_outside_docs_root() {
    let harness = Harness::new();
    let docs = harness.path().join("docs");
    let docs_text = docs.display().to_string();
    for role in [Role::DataWorker, Role::StudioCore] {
        // Lexically inside, also through `..`.
        let inside = docs.join("data").display().to_string();
        refused(
            &harness,
            role,
            &[("DOCS_ROOT", &docs_text), ("APP_DATA_ROOT", &inside)],
            "APP_DATA_ROOT",
            "inside DOCS_ROOT",
        )
        .await;
        let dotted = format!("{}/../docs/x", harness.path().join("elsewhere").display());
        refused(
            &harness,
            role,
            &[("DOCS_ROOT", &docs_text), ("APP_DATA_ROOT", &dotted)],
            "APP_DATA_ROOT",
            "inside DOCS_ROOT",
        )
        .await;
        // The default <dirname(DB_PATH)>/apps lands inside DOCS_ROOT.
        let db = docs.join("core.sqlite").display().to_string();
        refused(
            &harness,
            role,
            &[("DOCS_ROOT", &docs_text), ("DB_PATH", &db)],
            "APP_DATA_ROOT",
            "default",
        )
        .await;
    }
    // A symlink that points back into DOCS_ROOT.
    std::fs::create_dir_all(docs.join("apps")).unwrap();
    let link = harness.path().join("data-link");
    std::os::unix::fs::symlink(docs.join("apps"), &link).unwrap();
    let through_link = link.join("store").display().to_string();
    for role in [Role::DataWorker, Role::StudioCore] {
        refused(
            &harness,
            role,
            &[("DOCS_ROOT", &docs_text), ("APP_DATA_ROOT", &through_link)],
            "APP_DATA_ROOT",
            "symlink",
        )
        .await;
    }
    assert!(
        !link.join("store").exists(),
        "nothing was created inside DOCS_ROOT"
    );
    // DOCS_ROOT itself reached through a symlink, data root next to its target.
    let docs_link = harness.path().join("docs-link");
    std::os::unix::fs::symlink(&docs, &docs_link).unwrap();
    refused(
        &harness,
        Role::DataWorker,
        &[
            ("DOCS_ROOT", &docs_link.display().to_string()),
            ("APP_DATA_ROOT", &docs.join("apps/x").display().to_string()),
        ],
        "APP_DATA_ROOT",
        "symlink",
    )
    .await;
}

#[tokio::test]
async fn addresses_certificates_and_telemetry() {
    let harness = Harness::new();
    refused(
        &harness,
        Role::DataWorker,
        &[("SASHA_DATA_GRPC_ADDR", "localhost")],
        "SASHA_DATA_GRPC_ADDR",
        "socket address",
    )
    .await;
    refused(
        &harness,
        Role::EdgeSandbox,
        &[("SASHA_EDGE_ADDR", "127.0.0.1:99999")],
        "SASHA_EDGE_ADDR",
        "socket address",
    )
    .await;
    refused(
        &harness,
        Role::McpGateway,
        &[("SASHA_CORE_GRPC_URL", "http://127.0.0.1:3012")],
        "SASHA_CORE_GRPC_URL",
        "must use https",
    )
    .await;
    refused(
        &harness,
        Role::StudioCore,
        &[("SASHA_DATA_GRPC_URL", "not a url")],
        "SASHA_DATA_GRPC_URL",
        "absolute URL",
    )
    .await;
    let missing = harness.path().join("missing.pem").display().to_string();
    refused(
        &harness,
        Role::DataWorker,
        &[("SASHA_TLS_CERT", &missing)],
        "SASHA_TLS_CERT",
        "missing.pem",
    )
    .await;
    refused(
        &harness,
        Role::StudioCore,
        &[("SASHA_TLS_KEY", &missing)],
        "SASHA_TLS_KEY",
        "missing.pem",
    )
    .await;
    let junk = harness.path().join("junk.pem");
    std::fs::write(&junk, "-----BEGIN NOTHING-----\n").unwrap();
    refused(
        &harness,
        Role::McpGateway,
        &[("SASHA_TLS_CA", &junk.display().to_string())],
        "SASHA_TLS_CA",
        "junk.pem",
    )
    .await;
    refused(
        &harness,
        Role::EdgeSandbox,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317")],
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "",
    )
    .await;
    refused(
        &harness,
        Role::EdgeSandbox,
        &[("RUST_LOG", "info,[[")],
        "RUST_LOG",
        "",
    )
    .await;
}

#[tokio::test]
async fn a_taken_port_is_one_clear_line() {
    let harness = Harness::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (status, stderr) = harness
        .boot_failure(Role::EdgeSandbox, &[("SASHA_EDGE_ADDR", &addr)])
        .await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("SASHA_EDGE_ADDR: cannot listen on {addr}")),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_unusable_core_database_is_one_clear_line() {
    let harness = Harness::new();
    // A directory where the database file should be, and a file that is no
    // SQLite database (damaged past its header).
    let directory = harness.path().join("not-a-file.sqlite");
    std::fs::create_dir_all(&directory).unwrap();
    let garbage = harness.path().join("garbage.sqlite");
    std::fs::write(&garbage, vec![0x5A; 8192]).unwrap();
    for (db, fragment) in [(directory, "cannot open"), (garbage, "cannot be read")] {
        let db_text = db.display().to_string();
        let (status, stderr) = harness
            .boot_failure(
                Role::StudioCore,
                &[
                    ("DB_PATH", &db_text),
                    ("SASHA_DATA_GRPC_URL", "https://127.0.0.1:9"),
                ],
            )
            .await;
        assert_eq!(status.code(), Some(1), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(
                "sasha studio-core: cannot start: DB_PATH: cannot open the core database"
            ) && stderr.contains(fragment),
            "{stderr}"
        );
    }
}

/// Sign-in through an identity provider that cannot work stops studio-core
/// before it serves: a provider setting without its issuer, passwords off
/// without a provider, an issuer without a client or any group mapping.
#[tokio::test]
async fn identity_provider_guards() {
    let harness = Harness::new();
    let secret = harness.dir.path().join("oidc-secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let secret = secret.to_str().unwrap();
    let issuer = ("SASHA_OIDC_ISSUER", "https://login.example.com/tenant/v2.0");
    for (env, var, fragment) in [
        (
            vec![("SASHA_OIDC_CLIENT_ID", "studio")],
            "SASHA_OIDC_CLIENT_ID",
            "SASHA_OIDC_ISSUER is not",
        ),
        (
            vec![("SASHA_SSO_ONLY", "1")],
            "SASHA_SSO_ONLY",
            "SASHA_OIDC_ISSUER is not",
        ),
        (
            vec![issuer, ("SASHA_OIDC_CLIENT_SECRET_FILE", secret)],
            "SASHA_OIDC_CLIENT_ID",
            "is required",
        ),
        (
            vec![
                issuer,
                ("SASHA_OIDC_CLIENT_ID", "studio"),
                ("SASHA_OIDC_CLIENT_SECRET_FILE", secret),
            ],
            "SASHA_SSO_MEMBER_GROUPS",
            "nobody can sign in",
        ),
        (
            vec![
                ("SASHA_OIDC_ISSUER", "http://login.example.com"),
                ("SASHA_OIDC_CLIENT_ID", "studio"),
                ("SASHA_OIDC_CLIENT_SECRET_FILE", secret),
                ("SASHA_SSO_MEMBER_GROUPS", "*"),
            ],
            "SASHA_OIDC_ISSUER",
            "must be https",
        ),
    ] {
        refused(&harness, Role::StudioCore, &env, var, fragment).await;
    }
}
