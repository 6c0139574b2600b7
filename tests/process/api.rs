//! The Studio HTTP API where only a running studio-core shows it: a revoked
//! grant survives a restart and rediscovery, behind https the session
//! cookie is `__Host-` prefixed, and a core database damaged on disk is a
//! retryable refusal until a backup is renamed into place. Every route against every kind of caller,
//! CSRF and Origin refusals, throttles and body bounds are router tests
//! (`studio-core/src/api/tests.rs`).

use crate::common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;

use common::core_database::CoreStore;
use common::{Harness, RawResponse, copy_dir, raw_http};
use sasha_service::Role;
use studio_store::{Scope, Store, TokenKind, UserRole};

const STUDIO: &str = "localhost:3007";

fn fixture(id: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/packages/valid")
        .join(id)
}

/// One request with an optional bearer token, extra header lines and JSON body.
async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    extra: &str,
    body: Option<&str>,
) -> RawResponse {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let body_headers = body
        .map(|b| {
            format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                b.len()
            )
        })
        .unwrap_or_else(|| "Content-Length: 0\r\n".to_owned());
    raw_http(
        addr,
        &format!(
            "{method} {path} HTTP/1.1\r\nHost: {STUDIO}\r\n{auth}{extra}{body_headers}Connection: close\r\n\r\n{}",
            body.unwrap_or("")
        ),
    )
    .await
}

struct Stack {
    harness: Harness,
    _data: common::RoleProcess,
    core: common::RoleProcess,
}

impl Stack {
    async fn start(harness: Harness) -> Stack {
        let data = harness.start(Role::DataWorker, &[]).await;
        let core = harness
            .start(
                Role::StudioCore,
                &[(
                    "SASHA_DATA_GRPC_URL",
                    format!("https://{}", data.listener("grpc")),
                )],
            )
            .await;
        Stack {
            harness,
            _data: data,
            core,
        }
    }

    fn http(&self) -> SocketAddr {
        self.core.listener("http")
    }

    fn store(&self) -> CoreStore {
        self.harness.store()
    }
}

fn scopes(names: &[Scope]) -> BTreeSet<Scope> {
    names.iter().copied().collect()
}

const PASSWORD: &str = "correct horse battery staple";

#[tokio::test]
async fn a_revoked_manage_stays_revoked_across_restart_and_rediscovery() {
    let harness = Harness::new();
    copy_dir(&fixture("hello"), &harness.path().join("docs/apps/hello"));
    let store = harness.store();
    let admin = store.create_user("ada", UserRole::Admin, PASSWORD).unwrap();
    let staff = store.create_user("sam", UserRole::Staff, PASSWORD).unwrap();
    let all = scopes(&[Scope::ChatUse, Scope::AppsInvoke]);
    let admin_token = store
        .mint_token(&admin.id, TokenKind::Access, &all, None)
        .unwrap();
    let staff_token = store
        .mint_token(&staff.id, TokenKind::Access, &all, None)
        .unwrap();

    let stack = Stack::start(harness).await;
    let http = stack.http();
    let listing = call(http, "GET", "/api/apps", Some(&staff_token), "", None)
        .await
        .json();
    assert_eq!(listing["apps"][0]["access"], "manage");
    let revoked = call(
        http,
        "DELETE",
        &format!("/api/apps/hello/access/{}", staff.id),
        Some(&admin_token),
        "",
        None,
    )
    .await;
    assert_eq!(revoked.status, 204);
    assert!(
        store.audit_entries(Some("hello")).unwrap().len() >= 2,
        "first-discovery grants and the revoke are audited"
    );

    // Restart studio-core on the same state: rediscovery must not restore it.
    let Stack {
        harness,
        _data,
        core,
    } = stack;
    core.stop().await;
    drop(_data);
    let stack = Stack::start(harness).await;
    let listing = call(
        stack.http(),
        "GET",
        "/api/apps",
        Some(&staff_token),
        "",
        None,
    )
    .await
    .json();
    assert_eq!(listing["apps"], serde_json::json!([]), "{listing}");
    // A staff user created after the first discovery gets nothing either.
    let late = stack
        .store()
        .create_user("lee", UserRole::Staff, PASSWORD)
        .unwrap();
    let late_token = stack
        .store()
        .mint_token(&late.id, TokenKind::Access, &all, None)
        .unwrap();
    let listing = call(
        stack.http(),
        "GET",
        "/api/apps",
        Some(&late_token),
        "",
        None,
    )
    .await
    .json();
    assert_eq!(listing["apps"], serde_json::json!([]));

    // Nobody restores or raises their own access (issue 21): neither the
    // staff user whose manage was revoked, nor the late staff user, nor an
    // admin lowering themselves; a second admin or staff member still can.
    for (token, target, access) in [
        (&staff_token, &staff.id, "manage"),
        (&staff_token, &staff.id, "use"),
        (&late_token, &late.id, "manage"),
        (&admin_token, &admin.id, "use"),
    ] {
        let raised = call(
            stack.http(),
            "PUT",
            &format!("/api/apps/hello/access/{target}"),
            Some(token),
            "",
            Some(&format!(r#"{{"access":"{access}"}}"#)),
        )
        .await;
        assert_eq!(raised.status, 403, "{raised:?}");
        assert_eq!(raised.json()["code"], "APP_ACCESS_DENIED");
        assert!(
            raised.json()["message"]
                .as_str()
                .unwrap()
                .contains("your own access"),
            "{raised:?}"
        );
    }
    let dropped = call(
        stack.http(),
        "DELETE",
        &format!("/api/apps/hello/access/{}", admin.id),
        Some(&admin_token),
        "",
        None,
    )
    .await;
    assert_eq!(dropped.status, 403, "{dropped:?}");
    let grants: Vec<_> = stack
        .store()
        .grants("hello")
        .unwrap()
        .into_iter()
        .map(|grant| (grant.username, grant.access.as_str().to_owned()))
        .collect();
    assert_eq!(
        grants,
        [("ada".to_owned(), "manage".to_owned())],
        "no refused change touched a grant"
    );
    let restored = call(
        stack.http(),
        "PUT",
        &format!("/api/apps/hello/access/{}", staff.id),
        Some(&admin_token),
        "",
        Some(r#"{"access":"manage"}"#),
    )
    .await;
    assert_eq!(restored.status, 200, "{restored:?}");
}

/// Behind https the session cookie is `__Host-` prefixed and Secure (security
/// catalogue F4): host-only, path `/`, never a Domain.
#[tokio::test]
async fn https_studio_sets_a_host_prefixed_secure_cookie() {
    let harness = Harness::new();
    let store = harness.store();
    store.create_user("ada", UserRole::Admin, PASSWORD).unwrap();
    let data = harness.start(Role::DataWorker, &[]).await;
    let core = harness
        .start(
            Role::StudioCore,
            &[
                (
                    "SASHA_DATA_GRPC_URL",
                    format!("https://{}", data.listener("grpc")),
                ),
                ("SASHA_PUBLIC_ORIGIN", "https://studio.example.com".into()),
                (
                    "SASHA_APP_SANDBOX_ORIGIN",
                    "https://views.example.net".into(),
                ),
            ],
        )
        .await;
    let body = format!(r#"{{"username":"ada","password":"{PASSWORD}"}}"#);
    let login = raw_http(
        core.listener("http"),
        &format!(
            "POST /api/auth/login HTTP/1.1\r\nHost: studio.example.com\r\nOrigin: https://studio.example.com\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
    .await;
    assert_eq!(login.status, 200, "{login:?}");
    let cookie = login.header("set-cookie").unwrap();
    assert!(cookie.starts_with("__Host-sasha_session="), "{cookie}");
    for part in ["Secure", "HttpOnly", "Path=/", "SameSite=Lax"] {
        assert!(cookie.contains(part), "{cookie} lacks {part}");
    }
    assert!(!cookie.contains("Domain"), "{cookie}");
    // The sandbox hostname is not served by Studio at all.
    let other_host = raw_http(
        core.listener("http"),
        "GET /api/me HTTP/1.1\r\nHost: views.example.net\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(other_host.status, 404);
}

/// Fault injection: the core database damaged under the running studio-core
/// (every page after the first overwritten on disk). A sign-in is the
/// retryable 503 `APP_NOT_READY` saying the database cannot be read and
/// sets no cookie, never a raw SQLite error; once an administrator renames
/// the backup into place, the next sign-in succeeds with no restart (the
/// store notices the new file at its path and opens it).
#[tokio::test]
async fn a_damaged_core_database_is_a_retryable_503_until_a_backup_is_restored() {
    let harness = Harness::new();
    let file = harness.path().join("core.sqlite");
    let backup = harness.path().join("core.backup.sqlite");
    Store::open(&file)
        .unwrap()
        .create_user("ada", UserRole::Staff, PASSWORD)
        .unwrap();
    let stack = Stack::start(harness).await;
    let body = serde_json::json!({"username": "ada", "password": PASSWORD}).to_string();
    let origin = format!("Origin: http://{STUDIO}\r\n");
    let sign_in = || {
        call(
            stack.http(),
            "POST",
            "/api/auth/login",
            None,
            &origin,
            Some(&body),
        )
    };
    assert_eq!(sign_in().await.status, 200, "signs in before the damage");

    common::back_up_sqlite_file(&file, &backup);
    common::damage_sqlite_file(&file);
    let refused = sign_in().await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    let envelope = refused.json();
    assert_eq!(envelope["code"], "APP_NOT_READY", "{envelope}");
    assert_eq!(envelope["retryable"], true, "{envelope}");
    let message = envelope["message"].as_str().unwrap();
    assert!(message.contains("cannot be read"), "{message}");
    assert!(message.contains("restore it from a backup"), "{message}");
    assert!(
        refused.header("set-cookie").is_none(),
        "no cookie when refused"
    );

    common::restore_sqlite_file(&backup, &file);
    let restored = sign_in().await;
    assert_eq!(restored.status, 200, "{}", restored.body);
}
