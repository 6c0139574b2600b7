//! `sasha up`: four child roles behind one development ingress that routes like
//! the production proxy; a dead child is named and ends the supervisor.

use crate::common;

use std::time::Duration;

use common::mcp::{Mcp, SESSIONLESS};
use common::{UpProcess, free_port, get, raw_http, sign_in_dev_admin, wait_gone};
use nix::sys::signal::Signal;
use sasha_service::Role;
use serde_json::json;

#[tokio::test]
async fn routes_by_host_and_path_like_the_production_proxy() {
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    // As a developer runs it: studio-core seeds the bundled apps.
    let mut up = UpProcess::start_with(state.path(), port, &[]).await;
    let addr = up.addr();
    let studio = format!("localhost:{port}");
    let sandbox = format!("127.0.0.1:{port}");

    let health = get(addr, &studio, "/healthz", "").await;
    assert_eq!(health.status, 200, "{health:?}");
    let report = health.json();
    assert_eq!(report["ok"], true, "{report}");
    for role in Role::ALL {
        assert_eq!(
            report["roles"][role.as_str()]["ok"],
            true,
            "{role}: {report}"
        );
    }

    let page = get(addr, &sandbox, "/app-sandbox", "").await;
    assert_eq!(page.status, 200);
    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(
        csp.contains(&format!("frame-ancestors http://localhost:{port}")),
        "{csp}"
    );
    assert!(page.header("set-cookie").is_none());

    // The sandbox host serves nothing else, not even the Studio's routes.
    for path in ["/api/apps", "/mcp", "/", "/healthz"] {
        let response = get(addr, &sandbox, path, "").await;
        assert_eq!(response.status, 404, "sandbox {path}: {response:?}");
        assert!(response.header("set-cookie").is_none());
    }
    // Studio refuses sandbox paths and answers unknown API routes in the envelope.
    let response = get(addr, &studio, "/app-sandbox", "").await;
    assert_eq!(response.status, 404);
    let response = get(addr, &studio, "/api/nope", "").await;
    assert_eq!(response.status, 404);
    let body = response.json();
    assert_eq!(body["code"], "APP_NOT_FOUND");
    assert!(body["diagnosticId"].is_string());
    let response = get(addr, &studio, "/api/apps", "").await;
    assert_eq!(response.status, 401);
    assert_eq!(response.json()["code"], "APP_UNAUTHENTICATED");
    // /mcp reaches the gateway.
    let mcp = raw_http(
        addr,
        &format!("POST /mcp HTTP/1.1\r\nHost: {studio}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"),
    )
    .await;
    assert_eq!(mcp.status, 401, "{mcp:?}");
    assert_eq!(mcp.json()["code"], "APP_UNAUTHENTICATED");
    assert!(
        mcp.header("www-authenticate")
            .is_some_and(|value| value.starts_with("Bearer"))
    );
    // The Studio page is served on the Studio host.
    let landing = get(addr, &studio, "/", "").await;
    assert_eq!(landing.status, 200);
    assert!(landing.body.contains("Sasha Studio"));
    // Any other Host is misdirected.
    for host in [
        "evil.test",
        "studio.example.com",
        &format!("localhost:{}", port + 1),
    ] {
        let response = get(addr, host, "/", "").await;
        assert_eq!(response.status, 421, "Host {host}");
    }
    // Forged forwarding headers do not change the route.
    let response = get(
        addr,
        &sandbox,
        "/api/apps",
        "X-Forwarded-Host: localhost\r\nX-Original-URL: /app-sandbox\r\n",
    )
    .await;
    assert_eq!(response.status, 404);

    // The banner names the URL and the dev admin; the record is private.
    let banner = up.stdout_text();
    assert!(
        banner.contains(&format!("Studio     http://localhost:{port}")),
        "{banner}"
    );
    let admin: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
    )
    .unwrap();
    let password = admin["password"].as_str().unwrap().to_owned();
    // Piped output is what a log collector keeps: it names the user and
    // the record, never the password.
    assert!(banner.contains("admin"), "{banner}");
    assert!(banner.contains("dev-admin.json"), "{banner}");
    assert!(!banner.contains(&password), "{banner}");
    assert!(!up.stderr_text().contains(&password));
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(state.path().join("dev-admin.json"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o077, 0);
    let ca = std::fs::read_to_string(state.path().join("certs/ca.pem")).unwrap();

    // The printed dev admin signs in through the ingress.
    let login_body = format!(r#"{{"username":"admin","password":"{password}"}}"#);
    let login = raw_http(
        addr,
        &format!(
            "POST /api/auth/login HTTP/1.1\r\nHost: {studio}\r\nOrigin: http://localhost:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{login_body}",
            login_body.len()
        ),
    )
    .await;
    assert_eq!(login.status, 200, "{login:?}");
    assert_eq!(login.json()["role"], "admin");
    let session = login
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let me = get(addr, &studio, "/api/me", &format!("Cookie: {session}\r\n")).await;
    assert_eq!(me.json()["username"], "admin");
    // The bundled Time Sheet Entry was seeded on first start; the dev admin,
    // existing when it was first registered, manages it.
    let apps = get(
        addr,
        &studio,
        "/api/apps",
        &format!("Cookie: {session}\r\n"),
    )
    .await;
    assert_eq!(apps.status, 200, "{apps:?}");
    let apps = apps.json();
    let listed: Vec<(&str, &str)> = apps["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|app| {
            (
                app["name"].as_str().unwrap(),
                app["access"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(listed, [("Time Sheet Entry", "manage")], "{apps}");
    assert!(state.path().join("docs/apps/_shared").is_dir());
    // The Studio page's session reaches /mcp through the ingress (Host check,
    // cookie from the Studio origin, the sessionless protocol).
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}"#;
    let listed = raw_http(
        addr,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: {studio}\r\nOrigin: http://localhost:{port}\r\nCookie: {session}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{list}",
            list.len()
        ),
    )
    .await;
    assert_eq!(listed.status, 200, "{listed:?}");
    assert!(listed.json()["result"]["tools"].is_array(), "{listed:?}");

    // SIGTERM stops every child and exits cleanly.
    let pids: Vec<u32> = Role::ALL.iter().map(|role| up.child_pid(*role)).collect();
    up.signal(Signal::SIGTERM);
    let status = up.wait(Duration::from_secs(30)).await;
    assert!(status.success(), "{status}: {}", up.stderr_text());
    wait_gone(&pids, Duration::from_secs(10)).await;

    // A second start reuses the certificates and the dev admin.
    let mut again = UpProcess::start_with(state.path(), port, &[]).await;
    assert_eq!(
        std::fs::read_to_string(state.path().join("certs/ca.pem")).unwrap(),
        ca
    );
    assert!(
        !again
            .stdout_text()
            .contains("Minted development certificates")
    );
    // The same dev admin, its password kept, and still never printed.
    let kept: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(kept["password"], password.as_str());
    assert!(!again.stdout_text().contains(&password));
    let health = get(again.addr(), &studio, "/healthz", "").await;
    assert_eq!(health.status, 200);
    again.signal(Signal::SIGINT);
    assert!(again.wait(Duration::from_secs(30)).await.success());
}

#[tokio::test]
async fn a_killed_child_is_named_and_ends_up() {
    let state = tempfile::tempdir().unwrap();
    let mut up = UpProcess::start(state.path(), free_port()).await;
    let victim = up.child_pid(Role::StudioCore);
    let others: Vec<u32> = [Role::DataWorker, Role::McpGateway, Role::EdgeSandbox]
        .iter()
        .map(|role| up.child_pid(*role))
        .collect();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(victim as i32), Signal::SIGKILL).unwrap();
    let status = up.wait(Duration::from_secs(30)).await;
    assert!(!status.success(), "sasha up must fail when a role dies");
    let stderr = up.stderr_text();
    assert!(
        stderr.contains(&format!(
            "sasha up: studio-core (pid {victim}) exited unexpectedly: killed by signal 9 (SIGKILL)"
        )),
        "{stderr}"
    );
    wait_gone(&others, Duration::from_secs(15)).await;
}

#[tokio::test]
async fn children_stop_when_up_is_killed_outright() {
    let state = tempfile::tempdir().unwrap();
    let up = UpProcess::start(state.path(), free_port()).await;
    let pids: Vec<u32> = Role::ALL.iter().map(|role| up.child_pid(*role)).collect();
    up.signal(Signal::SIGKILL);
    // No supervisor is left to signal them: their stdin pipe closing stops them.
    wait_gone(&pids, Duration::from_secs(15)).await;
}

#[tokio::test]
async fn a_taken_port_is_refused_before_anything_starts() {
    let state = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let output = tokio::process::Command::new(common::sasha_bin())
        .args(["up", "--state-dir"])
        .arg(state.path())
        .args(["--port", &port.to_string()])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on 127.0.0.1:{port}")),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&output.stdout).contains("Started"));
}

#[tokio::test]
async fn a_fresh_start_a_sign_in_and_an_app_open_stay_under_twenty_log_lines() {
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    // The default filter (an empty RUST_LOG is unset), as a developer runs it.
    let up = UpProcess::start_with(state.path(), port, &[("RUST_LOG", "")]).await;
    let studio = format!("http://localhost:{port}");
    let (_, cookie) = sign_in_dev_admin(state.path(), &studio).await;
    let http = common::http_client();
    let page = |path: &str| {
        http.get(format!("{studio}{path}"))
            .header("cookie", &cookie)
            .send()
    };
    // What the page loads: itself, its modules, who is signed in, the apps.
    for path in [
        "/",
        "/studio/app.js",
        "/studio/api.js",
        "/studio/host.js",
        "/api/me",
    ] {
        assert!(page(path).await.unwrap().status().is_success(), "{path}");
    }
    let apps: serde_json::Value = page("/api/apps").await.unwrap().json().await.unwrap();
    let app = &apps["apps"][0];
    let (id, revision) = (
        app["id"].as_str().unwrap(),
        app["revision"].as_str().unwrap(),
    );
    assert!(
        page(&format!("/api/apps/{id}/resource?revision={revision}"))
            .await
            .unwrap()
            .status()
            .is_success()
    );
    // The open app's host lists its tools and the app reads its rows.
    let mut host = Mcp::new(
        &format!("{studio}/mcp"),
        vec![
            ("cookie".into(), cookie.clone()),
            ("origin".into(), studio.clone()),
            ("sasha-app".into(), id.to_owned()),
        ],
        SESSIONLESS,
    );
    let tools = host.request("tools/list", json!({})).await;
    let list = tools.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .find(|name| name.ends_with("__list"))
        .expect("the app has a list tool");
    let rows = host.call(&list, json!({})).await;
    assert_ne!(rows.result()["isError"], true, "{:?}", rows.result());
    // The gateway writes a call's access line before it answers, but the
    // children's stderr reaches this test through `sasha up` and a pipe
    // reader: wait for the last call's line, not for a fixed time.
    let calls_logged = || {
        up.stderr_text()
            .lines()
            .filter(|line| line.contains(r#"route="/mcp""#))
            .count()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while calls_logged() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the MCP calls were not logged:\n{}",
            up.stderr_text()
        );
        tokio::task::yield_now().await;
    }

    let stderr = up.stderr_text();
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines.len() < 20, "{} log lines:\n{stderr}", lines.len());
    // Start-up is one line per role; the libraries' chatter is not there.
    assert_eq!(
        lines.iter().filter(|line| line.contains(" ready ")).count(),
        Role::ALL.len(),
        "{stderr}"
    );
    assert!(!stderr.contains("foster parenting"), "{stderr}");
    assert!(
        !stderr.contains("/studio/app.js"),
        "static files stay below info: {stderr}"
    );
    // Every request line names its method, route, status, latency and trace.
    let requests: Vec<&&str> = lines
        .iter()
        .filter(|line| line.contains(" request "))
        .collect();
    assert!(requests.len() >= 5, "{stderr}");
    for line in requests {
        for field in ["method=", "route=", "status=", "ms=", "trace_id="] {
            assert!(line.contains(field), "{field} in {line}");
        }
        assert!(
            !line.contains("trace_id=00000000000000000000000000000000"),
            "{line}"
        );
    }
}

/// `sasha up --core-replicas 2` on a PostgreSQL core database: two
/// studio-core processes behind the ingress, the dev admin made once in
/// PostgreSQL, a sign-in through one honoured by both as the ingress takes
/// turns, the health report whole, and the second replica's own `DOCS_ROOT`
/// filled from the database with what the first seeded.
#[tokio::test]
async fn two_core_replicas_on_postgresql_serve_one_sign_in() {
    let state = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let url = std::thread::spawn(sasha_testkit::postgres_database)
        .join()
        .unwrap();
    let up = UpProcess::start_with_args(
        state.path(),
        port,
        &["--core-replicas", "2"],
        &[("DATABASE_URL", &url)],
    )
    .await;
    let stdout = up.stdout_text();
    assert_eq!(
        stdout.matches("Started studio-core (pid").count(),
        2,
        "{stdout}"
    );
    assert!(stdout.contains("Replicas   2 of studio-core"), "{stdout}");
    assert!(stdout.contains("Core DB    postgres://"), "{stdout}");
    assert!(!state.path().join("core.sqlite").exists());

    let studio = format!("http://localhost:{port}");
    let (_, cookie) = common::sign_in_dev_admin(state.path(), &studio).await;
    for turn in 0..6 {
        let me = common::http_client()
            .get(format!("{studio}/api/me"))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(me.status(), 200, "request {turn}");
    }
    let health: serde_json::Value = common::http_client()
        .get(format!("{studio}/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["ok"], true, "{health}");

    // The second replica works in a folder of its own, filled from the
    // core database with the packages the first seeded into DOCS_ROOT.
    let packages = |docs: &std::path::Path| -> Vec<String> {
        let mut ids: Vec<String> = std::fs::read_dir(docs.join("apps"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|id| !id.starts_with('.') && id != "_shared")
            .collect();
        ids.sort();
        ids
    };
    let first = packages(&state.path().join("docs"));
    assert!(first.contains(&"time-sheet-entry".to_owned()), "{first:?}");
    let second = state.path().join("core-replicas/2/docs");
    assert_eq!(packages(&second), first);
    assert_eq!(
        std::fs::read(second.join("apps/time-sheet-entry/APP.md")).unwrap(),
        std::fs::read(state.path().join("docs/apps/time-sheet-entry/APP.md")).unwrap()
    );
}

/// Replication beside a PostgreSQL core database: PostgreSQL keeps the
/// core database, so studio-core runs without a replicator and with
/// `SASHA_REPLICA_URL` empty (it refuses one over PostgreSQL), while
/// data-worker keeps replicating. Before, studio-core was handed the
/// variable and stopped at boot, and `sasha up` with it.
#[tokio::test]
async fn replication_beside_a_postgresql_core_database_is_data_workers_alone() {
    let storage = common::replica::ObjectStorage::start().await;
    let state = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let url = std::thread::spawn(sasha_testkit::postgres_database)
        .join()
        .unwrap();
    let replica_url = storage.url("core-on-postgresql");
    let litestream = common::replica::litestream().display().to_string();
    let up = UpProcess::start_with_args(
        state.path(),
        port,
        &["--core-replicas", "2"],
        &[
            ("DATABASE_URL", &url),
            ("SASHA_BUNDLED_APPS", "off"),
            ("SASHA_REPLICA_URL", &replica_url),
            ("SASHA_LITESTREAM", &litestream),
            ("AWS_ACCESS_KEY_ID", common::replica::ACCESS_KEY),
            ("AWS_SECRET_ACCESS_KEY", common::replica::SECRET_KEY),
        ],
    )
    .await;
    let stdout = up.stdout_text();
    assert_eq!(
        stdout.matches("Started studio-core (pid").count(),
        2,
        "{stdout}"
    );
    assert!(
        stdout.contains("Started the replicator of data-worker (pid"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("Started the replicator of studio-core"),
        "{stdout}"
    );
    let health: serde_json::Value = common::http_client()
        .get(format!("http://localhost:{port}/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["ok"], true, "{health}");
}

/// Runs `sasha up` on `state` with `args` and without the variables
/// `unset`, expecting it to refuse before it starts anything: its stderr.
async fn up_refused(state: &std::path::Path, args: &[&str], unset: &[&str]) -> String {
    let mut command = tokio::process::Command::new(common::sasha_bin());
    command
        .args(["up", "--state-dir"])
        .arg(state)
        .args(["--port", &common::free_port().to_string()])
        .args(args)
        .stdin(std::process::Stdio::null());
    for name in unset {
        command.env_remove(name);
    }
    let output = command.output().await.unwrap();
    assert!(!output.status.success(), "{output:?}");
    assert!(!String::from_utf8_lossy(&output.stdout).contains("Started"));
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// More than one studio-core needs a core database they all share: without
/// `DATABASE_URL` nothing starts and the line says what to set.
#[tokio::test]
async fn several_core_replicas_on_the_sqlite_file_are_refused() {
    let state = tempfile::tempdir().unwrap();
    let stderr = up_refused(
        state.path(),
        &["--core-replicas", "2"],
        &["DATABASE_URL", "DATABASE_URL_FILE"],
    )
    .await;
    assert!(stderr.contains("--core-replicas 2"), "{stderr}");
    assert!(stderr.contains("DATABASE_URL"), "{stderr}");
}

/// Several data-workers share the apps by leases, and a worker taking over
/// a lost one's apps restores them from object storage: without
/// `SASHA_REPLICA_URL` nothing starts and the line says what to set.
#[tokio::test]
async fn several_data_workers_without_object_storage_are_refused() {
    let state = tempfile::tempdir().unwrap();
    let stderr = up_refused(state.path(), &["--workers", "2"], &["SASHA_REPLICA_URL"]).await;
    assert!(stderr.contains("--workers 2"), "{stderr}");
    assert!(stderr.contains("SASHA_REPLICA_URL"), "{stderr}");
    assert!(!state.path().join("workers").exists());

    // No data-worker at all is not a layout.
    let stderr = up_refused(state.path(), &["--workers", "0"], &[]).await;
    assert!(stderr.contains("--workers"), "{stderr}");
}
