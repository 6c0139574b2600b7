//! `sasha certs`: the deployment PKI's layout and modes, kept on a second run,
//! minted again with `--force`, a partial set refused, and the roles talking
//! mutual TLS with exactly these files.

use crate::common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Output;

use common::Harness;
use sasha_service::Role;

const ROLES: [&str; 3] = ["data-worker", "studio-core", "mcp-gateway"];

async fn certs(out: &Path, force: bool) -> Output {
    let mut command = tokio::process::Command::new(common::sasha_bin());
    command.args(["certs", "--out"]).arg(out).env_clear();
    if force {
        command.arg("--force");
    }
    command.output().await.unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every file of the set, with its contents.
fn snapshot(out: &Path) -> Vec<(String, String)> {
    let mut files = vec![("ca.pem".to_owned(), read(&out.join("ca.pem")))];
    for role in ROLES {
        for file in ["cert.pem", "key.pem"] {
            let name = format!("{role}/{file}");
            files.push((name.clone(), read(&out.join(&name))));
        }
    }
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|_| panic!("{} is missing", path.display()))
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn certs_are_written_once_kept_then_forced_and_serve_mtls() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pki");

    let first = certs(&out, false).await;
    assert!(first.status.success(), "{}", text(&first.stderr));
    let stdout = text(&first.stdout);
    assert!(stdout.starts_with("Minted a new internal CA"), "{stdout}");
    for role in ROLES {
        assert!(
            stdout.contains(&format!(
                "{}/{role}/key.pem  SASHA_TLS_KEY of {role}",
                out.display()
            )),
            "{stdout}"
        );
        assert_eq!(mode(&out.join(role).join("key.pem")), 0o600, "{role}");
        assert_eq!(mode(&out.join(role).join("cert.pem")), 0o644, "{role}");
    }
    assert!(stdout.contains(&format!(
        "{}/ca.pem  SASHA_TLS_CA of every role",
        out.display()
    )));
    assert!(
        !out.join("edge-sandbox").exists(),
        "the sandbox holds no credentials"
    );
    let minted = snapshot(&out);

    // The one-shot service runs it on every start: the set is kept.
    let again = certs(&out, false).await;
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("already present, kept"),
        "{}",
        text(&again.stdout)
    );
    assert_eq!(snapshot(&out), minted);

    // The roles use exactly these files and reach each other over mTLS.
    let harness = Harness::new();
    let tls = |role: &str| {
        vec![
            ("SASHA_TLS_CA", out.join("ca.pem").display().to_string()),
            (
                "SASHA_TLS_CERT",
                out.join(role).join("cert.pem").display().to_string(),
            ),
            (
                "SASHA_TLS_KEY",
                out.join(role).join("key.pem").display().to_string(),
            ),
        ]
    };
    let data = harness.start(Role::DataWorker, &tls("data-worker")).await;
    let data_url = format!("https://{}", data.listener("grpc"));
    let mut core_env = tls("studio-core");
    core_env.push(("SASHA_DATA_GRPC_URL", data_url.clone()));
    let core = harness.start(Role::StudioCore, &core_env).await;
    let mut gateway_env = tls("mcp-gateway");
    gateway_env.push(("SASHA_DATA_GRPC_URL", data_url));
    gateway_env.push((
        "SASHA_CORE_GRPC_URL",
        format!("https://{}", core.listener("grpc")),
    ));
    let gateway = harness.start(Role::McpGateway, &gateway_env).await;
    let health = common::get(gateway.listener("http"), "localhost:3007", "/healthz", "").await;
    assert_eq!(health.status, 200, "{}", health.body);
    // A development certificate (another CA) is refused by these roles.
    let stranger = harness
        .start(
            Role::McpGateway,
            &[
                (
                    "SASHA_DATA_GRPC_URL",
                    format!("https://{}", data.listener("grpc")),
                ),
                (
                    "SASHA_CORE_GRPC_URL",
                    format!("https://{}", core.listener("grpc")),
                ),
            ],
        )
        .await;
    let refused = common::get(stranger.listener("http"), "localhost:3007", "/healthz", "").await;
    assert_eq!(refused.status, 503, "{}", refused.body);

    // --force mints a new set, keys still 0600.
    let forced = certs(&out, true).await;
    assert!(forced.status.success(), "{}", text(&forced.stderr));
    assert!(text(&forced.stdout).starts_with("Minted a new internal CA"));
    let reminted = snapshot(&out);
    for ((name, before), (_, after)) in minted.iter().zip(&reminted) {
        assert_ne!(before, after, "{name} minted again");
    }
    assert_eq!(mode(&out.join("studio-core/key.pem")), 0o600);

    // A partial set cannot be completed (the CA key was never kept): refused
    // with one line, nothing touched; --force replaces it.
    std::fs::remove_file(out.join("mcp-gateway/key.pem")).unwrap();
    let partial = certs(&out, false).await;
    assert_eq!(partial.status.code(), Some(1));
    let stderr = text(&partial.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("holds part of a certificate set"),
        "{stderr}"
    );
    assert_eq!(read(&out.join("ca.pem")), reminted[0].1);
    assert!(certs(&out, true).await.status.success());
    assert_eq!(snapshot(&out).len(), 7);
}
