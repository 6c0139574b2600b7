//! Signing in through a real OpenID provider end to end: starts
//! `oidc-provider` (OpenID Certified, `tests/oidc/provider.mjs`, pinned in
//! `tests/oidc/package.json`) on loopback, whose accounts' groups come from
//! a file this test writes, and the real system with `sasha up` configured
//! for it (`SASHA_OIDC_*`, groups mapped to roles), then runs
//! `tests/browser/sso.mjs` in Debian's Chromium: the first sign-in makes the
//! person with the mapped role, a role changed at the provider follows at
//! the next sign-in, a person in no mapped group sees the refusal page, a
//! replayed callback is refused, and an MCP client's consent card is reached
//! through the provider. Then the same Studio with `SASHA_SSO_ONLY=1`: the
//! sign-in page hides the password form behind "Administrator sign-in", a
//! password person is refused there, and the break-glass admin signs in.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::core_database::core_store;
use common::{UpProcess, browser_artifacts, copy_dir, free_port, node_program, root};
use studio_store::UserRole;
use tokio::io::AsyncBufReadExt as _;

/// How long the whole browser scenario may take (it needs about 15 s).
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);
const CLIENT_ID: &str = "sasha-studio";
const CLIENT_SECRET: &str = "a client secret for the sign-in test";
/// A person with a password, refused once passwords are off.
const PASSWORD_USER: &str = "pam";
const PASSWORD: &str = "correct horse battery";

#[tokio::test]
async fn people_sign_in_through_a_real_openid_provider() {
    browser::require();
    let node = node_program(
        "the OpenID provider of the sign-in test",
        Some("tests/oidc/node_modules/oidc-provider"),
    );
    let started = Instant::now();
    let work = tempfile::tempdir().unwrap();
    let groups = work.path().join("groups.json");
    std::fs::write(&groups, r#"{"alice": ["sasha-members"], "bob": ["sales"]}"#).unwrap();
    let secret = work.path().join("client-secret");
    std::fs::write(&secret, format!("{CLIENT_SECRET}\n")).unwrap();

    let port = free_port();
    let studio = format!("http://localhost:{port}");
    let provider_port = free_port();
    let mut provider = tokio::process::Command::new(node)
        .arg(root().join("tests/oidc/provider.mjs"))
        .current_dir(root().join("tests/oidc"))
        .env("PORT", provider_port.to_string())
        .env("GROUPS_FILE", &groups)
        .env("REDIRECT_URI", format!("{studio}/auth/oidc/callback"))
        .env("CLIENT_ID", CLIENT_ID)
        .env("CLIENT_SECRET", CLIENT_SECRET)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start the OpenID provider");
    let mut lines = tokio::io::BufReader::new(provider.stdout.take().unwrap()).lines();
    let issuer = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(issuer) = line.strip_prefix("ready ") {
                return issuer.to_owned();
            }
        }
        panic!("the OpenID provider stopped before it was ready");
    })
    .await
    .expect("the OpenID provider did not start within 30 s");

    let state = tempfile::tempdir().unwrap();
    for app in ["hello", "expense-log"] {
        copy_dir(
            &root().join("tests/packages/valid").join(app),
            &state.path().join("docs/apps").join(app),
        );
    }
    let secret_path = secret.to_str().unwrap();
    let provider_env = [
        ("SASHA_BUNDLED_APPS", "off"),
        ("SASHA_OIDC_ISSUER", issuer.as_str()),
        ("SASHA_OIDC_CLIENT_ID", CLIENT_ID),
        ("SASHA_OIDC_CLIENT_SECRET_FILE", secret_path),
        ("SASHA_OIDC_PROVIDER_NAME", "Test IdP"),
        ("SASHA_SSO_ADMIN_GROUPS", "sasha-admins"),
        ("SASHA_SSO_STAFF_GROUPS", "sasha-staff"),
        ("SASHA_SSO_MEMBER_GROUPS", "sasha-members"),
    ];
    let mut up = UpProcess::start_with(state.path(), port, &provider_env).await;
    let booted = started.elapsed();
    // A person with a password, for the phase with passwords turned off.
    core_store(state.path())
        .create_user(PASSWORD_USER, UserRole::Member, PASSWORD)
        .unwrap();

    let artifacts = browser_artifacts().join("sso");
    BrowserScript::start(
        "sso",
        &[
            ("STUDIO_URL", &studio),
            ("ISSUER", &issuer),
            ("GROUPS_FILE", &groups),
            ("ARTIFACTS", &artifacts),
            ("PHASE", &"provider"),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;

    // The same Studio again with passwords off but for the dev admin.
    up.signal(nix::sys::signal::Signal::SIGTERM);
    up.wait(Duration::from_secs(30)).await;
    let admin: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
    )
    .unwrap();
    let admin_name = admin["username"].as_str().unwrap();
    let mut sso_only = provider_env.to_vec();
    sso_only.push(("SASHA_SSO_ONLY", "1"));
    sso_only.push(("SASHA_SSO_BREAK_GLASS_ADMIN", admin_name));
    let up = UpProcess::start_with(state.path(), port, &sso_only).await;
    BrowserScript::start(
        "sso",
        &[
            ("STUDIO_URL", &studio),
            ("ISSUER", &issuer),
            ("GROUPS_FILE", &groups),
            ("ARTIFACTS", &artifacts),
            ("PHASE", &"sso-only"),
            ("ADMIN_USER", &admin_name),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("MEMBER_USER", &PASSWORD_USER),
            ("MEMBER_PASSWORD", &PASSWORD),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;

    println!(
        "browser sign-in test took {:?} (sasha up ready after {booted:?}); screenshots in {}",
        started.elapsed(),
        artifacts.display()
    );
}
