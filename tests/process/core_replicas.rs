//! studio-core in two replicas on one PostgreSQL core database (the shared
//! test server of `sasha-testkit`, a fresh database per test), each a real
//! process with a `DOCS_ROOT` of its own (no shared disk): what one replica
//! records, the other acts on. A source tool's change through one is served
//! by the other; a session made on one is honoured by the other; a grant
//! revoked through one refuses the very next MCP call through a gateway
//! pinned to the other; a sessionless
//! confirmation issued through one replica is redeemed through the other;
//! an MCP client's OAuth connection changes replica at every step.
//! Then, behind nginx (the production template) and two gateways that know
//! both replicas, one replica is SIGKILLed under 8 clients of mixed traffic:
//! no acknowledged write is lost or doubled, every error a client saw was
//! retryable, and the sessions go on working. A wrong or unreachable
//! `DATABASE_URL` stops the role with one line naming it.
//!
//! `scripts/test.sh` installs PostgreSQL and nginx; without them these tests
//! fail rather than skipping.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::mcp::{Mcp, structured};
use common::{Harness, RoleProcess, copy_dir, free_port, nginx, root};
use sasha_service::Role;
use serde_json::{Value, json};
use studio_store::{AppAccess, Scope, Store, TokenKind, UserRole};

const PASSWORD: &str = "correct horse battery";
const STUDIO_HOST: &str = "studio.sasha.test";
const SANDBOX_HOST: &str = "views.sasha-sandbox.test";
const CLIENTS: usize = 8;
const WRITES_PER_CLIENT: usize = 60;

/// Runs blocking store work (PostgreSQL's client blocks) off the test's
/// async runtime, as studio-core does with `blocking`.
fn off_runtime<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| scope.spawn(work).join().unwrap())
}

/// Runs `work` on a store of its own on `url`, off the test's async runtime
/// (PostgreSQL's blocking client may neither run nor be dropped on it, as
/// studio-core's own store work runs in `blocking`).
fn with_store<T: Send>(url: &str, work: impl FnOnce(&Store) -> T + Send) -> T {
    off_runtime(|| {
        let store = Store::connect(url, 1, None, Arc::new(studio_store::system_clock)).unwrap();
        work(&store)
    })
}

/// A harness whose studio-core replicas share a fresh PostgreSQL database,
/// with the expense-log app in the first replica's docs (the others take it
/// from the database), and the database's URL.
fn harness_on_postgres() -> (Harness, String) {
    let mut harness = Harness::new();
    let url = off_runtime(sasha_testkit::postgres_database);
    harness.env.insert("DATABASE_URL".into(), url.clone());
    copy_dir(
        &common::mcp::fixture("expense-log"),
        &harness.path().join("docs/apps/expense-log"),
    );
    (harness, url)
}

/// A studio-core replica on `data`, with a `DOCS_ROOT` of its own
/// (`<harness>/<docs>`): replicas share the core database, never a disk.
async fn core(harness: &Harness, data: &RoleProcess, docs: &str) -> RoleProcess {
    harness
        .start(
            Role::StudioCore,
            &[
                (
                    "SASHA_DATA_GRPC_URL",
                    format!("https://{}", data.listener("grpc")),
                ),
                ("DOCS_ROOT", harness.path().join(docs).display().to_string()),
            ],
        )
        .await
}

/// A gateway reaching `cores` (several: balanced) and `data`.
async fn gateway(harness: &Harness, data: &RoleProcess, cores: &[&RoleProcess]) -> RoleProcess {
    let urls: Vec<String> = cores
        .iter()
        .map(|core| format!("https://{}", core.listener("grpc")))
        .collect();
    harness
        .start(
            Role::McpGateway,
            &[
                (
                    "SASHA_DATA_GRPC_URL",
                    format!("https://{}", data.listener("grpc")),
                ),
                ("SASHA_CORE_GRPC_URL", urls.join(",")),
            ],
        )
        .await
}

/// An access token of `user_id` with `scopes`, minted in the database.
fn access_token(url: &str, user_id: &str, scopes: &[Scope]) -> String {
    let scopes: BTreeSet<Scope> = scopes.iter().copied().collect();
    with_store(url, |store| {
        store
            .mint_token(user_id, TokenKind::Access, &scopes, None)
            .unwrap()
    })
}

/// A sessionless MCP client of the gateway `gateway` with `token`.
fn through(gateway: &RoleProcess, token: &str) -> Mcp {
    Mcp::sessionless(&format!("http://{}/mcp", gateway.listener("http")), token)
}

/// Signs `username` in through the replica at `core` (its own listener):
/// the session cookie `name=value`.
async fn sign_in(core: &RoleProcess, username: &str) -> String {
    let login = common::http_client()
        .post(format!("http://{}/api/auth/login", core.listener("http")))
        .header("host", "localhost:3007")
        .header("origin", common::mcp::STUDIO_ORIGIN)
        .json(&json!({"username": username, "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert!(login.status().is_success(), "{}", login.status());
    login
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok()?.split(';').next().map(str::to_owned))
        .find(|pair| pair.starts_with("sasha_session"))
        .expect("the sign-in sets the session cookie")
}

async fn me(core: &RoleProcess, cookie: &str) -> reqwest::StatusCode {
    common::http_client()
        .get(format!("http://{}/api/me", core.listener("http")))
        .header("host", "localhost:3007")
        .header("cookie", cookie)
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn what_one_replica_records_the_other_acts_on() {
    let (harness, url) = harness_on_postgres();
    let admin = with_store(&url, |store| {
        store.create_user("ada", UserRole::Admin, PASSWORD).unwrap()
    });
    let member = with_store(&url, |store| {
        store
            .create_user("mia", UserRole::Member, PASSWORD)
            .unwrap()
    });
    let data = harness.start(Role::DataWorker, &[]).await;
    let one = core(&harness, &data, "docs").await;
    let two = core(&harness, &data, "docs-two").await;
    let via_one = gateway(&harness, &data, &[&one]).await;
    let via_two = gateway(&harness, &data, &[&two]).await;

    // A session made on one replica is honoured by the other.
    let cookie = sign_in(&one, "ada").await;
    assert_eq!(me(&two, &cookie).await, 200);
    assert_eq!(me(&one, &cookie).await, 200);

    // The member's access, granted through one replica's API.
    let grant = common::http_client()
        .put(format!(
            "http://{}/api/apps/expense-log/access/{}",
            one.listener("http"),
            member.id
        ))
        .header("host", "localhost:3007")
        .header("origin", common::mcp::STUDIO_ORIGIN)
        .header("cookie", &cookie)
        .json(&json!({"access": "use"}))
        .send()
        .await
        .unwrap();
    assert!(grant.status().is_success(), "{}", grant.status());
    let token = access_token(&url, &member.id, &[Scope::AppsInvoke]);
    let mcp = |gateway: &RoleProcess| through(gateway, &token).eliciting(|_| json!({}));
    for gateway in [&via_one, &via_two] {
        let listed = mcp(gateway)
            .call("app__expense_log__categories__list", json!({}))
            .await;
        assert!(listed.result()["isError"] != true, "{}", listed.body);
    }

    // A sessionless confirmation: asked through the gateway of one replica,
    // answered through the gateway of the other.
    let tool = "app__expense_log__categories__create";
    let arguments = json!({"values": {"name": "Travel"}, "idempotencyKey": "cross-1"});
    let asked = mcp(&via_one)
        .request("tools/call", json!({"name": tool, "arguments": arguments}))
        .await;
    let state = asked.result()["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("no input request: {}", asked.body))
        .to_owned();
    let answered = mcp(&via_two)
        .request(
            "tools/call",
            json!({"name": tool, "arguments": arguments, "requestState": state,
                   "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}}),
        )
        .await;
    assert_eq!(structured(&answered)["name"], "Travel", "{}", answered.body);

    // A source tool's change through one replica is served by the other,
    // whose DOCS_ROOT is its own: the package travels through the database.
    let writer = access_token(
        &url,
        &admin.id,
        &[Scope::ChatUse, Scope::AppsInvoke, Scope::AppsWrite],
    );
    let source = |gateway: &RoleProcess| through(gateway, &writer);
    let read = |gateway: &RoleProcess| {
        let mut mcp = source(gateway);
        async move {
            let read = mcp
                .call(
                    "readAppFile",
                    json!({"app": "expense-log", "path": "APP.md"}),
                )
                .await;
            structured(&read).clone()
        }
    };
    let before = read(&via_one).await;
    let changed = format!(
        "{}\n<!-- changed through one replica -->\n",
        before["content"].as_str().unwrap()
    );
    let written = source(&via_one)
        .call(
            "writeAppFile",
            json!({"app": "expense-log", "path": "APP.md", "content": changed,
                   "expectedVersion": before["version"]}),
        )
        .await;
    assert_eq!(
        structured(&written)["status"]["ok"],
        true,
        "{}",
        written.body
    );
    common::eventually(
        Duration::from_secs(10),
        "the change served by the other replica",
        || {
            let read = read(&via_two);
            let changed = changed.clone();
            async move { read.await["content"].as_str() == Some(changed.as_str()) }
        },
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(harness.path().join("docs-two/apps/expense-log/APP.md")).unwrap(),
        changed,
        "written into the other replica's own folder"
    );

    // Revoked through the other replica: the very next call through either
    // gateway is refused.
    let revoked = common::http_client()
        .delete(format!(
            "http://{}/api/apps/expense-log/access/{}",
            two.listener("http"),
            member.id
        ))
        .header("host", "localhost:3007")
        .header("origin", common::mcp::STUDIO_ORIGIN)
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert!(revoked.status().is_success(), "{}", revoked.status());
    assert_eq!(
        with_store(&url, |store| store
            .access("expense-log", &member.id)
            .unwrap()),
        None
    );
    for gateway in [&via_one, &via_two] {
        let refused = mcp(gateway)
            .call("app__expense_log__categories__list", json!({}))
            .await;
        // The tool is no longer the member's: not listed, so not found.
        let text = refused.body.to_string();
        assert!(
            refused.body["error"]["code"] == -32602 && text.contains("not found"),
            "refused after the revocation: {text}"
        );
    }
    // The admin's own access was never touched.
    assert_eq!(
        with_store(&url, |store| store
            .access("expense-log", &admin.id)
            .unwrap()),
        Some(AppAccess::Manage)
    );
}

/// An MCP client's OAuth connection made across the replicas, each step on
/// another process than the one before: registered through one, its
/// authorization request parked by one and approved by a person signed in
/// on the other, its code exchanged through the first and its refresh token
/// spent through the second; the access token then works through a gateway
/// pinned to either, and the spent refresh token replayed through the first
/// ends the connection on both.
#[tokio::test]
async fn an_oauth_connection_moves_between_replicas_at_every_step() {
    let (harness, url) = harness_on_postgres();
    with_store(&url, |store| {
        store.create_user("ada", UserRole::Admin, PASSWORD).unwrap();
    });
    let data = harness.start(Role::DataWorker, &[]).await;
    let one = core(&harness, &data, "docs").await;
    let two = core(&harness, &data, "docs-two").await;
    let via_one = gateway(&harness, &data, &[&one]).await;
    let via_two = gateway(&harness, &data, &[&two]).await;
    // Installs the TLS provider every client of the harness uses.
    let _ = common::http_client();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let at = |core: &RoleProcess, path: &str| format!("http://{}{path}", core.listener("http"));
    let studio = common::mcp::STUDIO_ORIGIN;
    let resource = format!("{studio}/mcp");
    let redirect = "http://127.0.0.1:4567/callback";
    let verifier = "a-verifier-long-enough-to-satisfy-rfc-7636-rules-0123456789";
    let challenge = {
        use base64::Engine as _;
        use sha2::Digest as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
    };

    let registered: Value = http
        .post(at(&one, "/oauth/register"))
        .header("host", "localhost:3007")
        .json(&json!({
            "client_name": "Across replicas",
            "redirect_uris": [redirect],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let client = registered["client_id"].as_str().unwrap().to_owned();

    let mut authorize = url::Url::parse(&at(&one, "/oauth/authorize")).unwrap();
    authorize.query_pairs_mut().extend_pairs([
        ("response_type", "code"),
        ("client_id", client.as_str()),
        ("redirect_uri", redirect),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("state", "st-1"),
        ("scope", "apps:invoke"),
        ("resource", resource.as_str()),
    ]);
    let parked = http
        .get(authorize)
        .header("host", "localhost:3007")
        .send()
        .await
        .unwrap();
    assert_eq!(parked.status(), 303);
    let request = parked.headers()["location"]
        .to_str()
        .unwrap()
        .strip_prefix("/#/connect/")
        .expect("a redirect to the consent page")
        .to_owned();

    // The person signs in on the other replica, which finds the request.
    let cookie = sign_in(&two, "ada").await;
    let approved: Value = http
        .post(at(&two, &format!("/api/oauth/requests/{request}/approve")))
        .header("host", "localhost:3007")
        .header("origin", studio)
        .header("cookie", &cookie)
        .json(&json!({"scopes": ["apps:invoke"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let back = url::Url::parse(approved["redirectTo"].as_str().unwrap()).unwrap();
    let code = back
        .query_pairs()
        .find(|(name, _)| name == "code")
        .map(|(_, value)| value.into_owned())
        .expect("a code");

    let token = |core: &RoleProcess, form: Vec<(&'static str, String)>| {
        let request = http
            .post(at(core, "/oauth/token"))
            .header("host", "localhost:3007")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(
                url::form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(&form)
                    .finish(),
            );
        async move {
            let response = request.send().await.unwrap();
            let status = response.status();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    let (status, tokens) = token(
        &one,
        vec![
            ("grant_type", "authorization_code".into()),
            ("client_id", client.clone()),
            ("code", code.clone()),
            ("redirect_uri", redirect.into()),
            ("code_verifier", verifier.into()),
            ("resource", resource.clone()),
        ],
    )
    .await;
    assert_eq!(status, 200, "{tokens}");

    let refresh = |core: &RoleProcess, refresh_token: &str| {
        token(
            core,
            vec![
                ("grant_type", "refresh_token".into()),
                ("client_id", client.clone()),
                ("refresh_token", refresh_token.to_owned()),
            ],
        )
    };
    let first_refresh = tokens["refresh_token"].as_str().unwrap().to_owned();
    let (status, renewed) = refresh(&two, &first_refresh).await;
    assert_eq!(status, 200, "{renewed}");
    let access = renewed["access_token"].as_str().unwrap();
    let listed = |gateway: &RoleProcess| {
        let mut mcp = through(gateway, access);
        async move { mcp.request("tools/list", json!({})).await.status }
    };
    assert_eq!((listed(&via_one).await, listed(&via_two).await), (200, 200));

    // The spent refresh token, replayed through the first replica, is
    // refused there and ends the whole connection (RFC 9700 §4.14.2): the
    // token the second replica issued stops working through either gateway.
    let (status, replayed) = refresh(&one, &first_refresh).await;
    assert_eq!(
        (status.as_u16(), &replayed["error"]),
        (400, &json!("invalid_grant")),
        "{replayed}"
    );
    assert_eq!((listed(&via_one).await, listed(&via_two).await), (401, 401));
}

/// One MCP create through nginx with the Studio page's credentials; `Err`
/// for what a client retries (a transport failure, a gateway or proxy
/// status, or an answer the envelope marks retryable), a panic for anything
/// else.
async fn create_through_nginx(
    http: &reqwest::Client,
    studio: &str,
    session: &str,
    arguments: &Value,
) -> Result<Value, String> {
    let (status, message) = common::mcp::studio_call_through_proxy(
        http,
        studio,
        session,
        "expense-log",
        "app__expense_log__categories__create",
        arguments,
    )
    .await?;
    if matches!(status, 502..=504) {
        return Err(format!("status {status}"));
    }
    let result = &message["result"];
    if status == 200 && result["isError"] != true {
        return Ok(result["structuredContent"].clone());
    }
    let envelope = if result["isError"] == true {
        result["structuredContent"]["error"].clone()
    } else {
        message["error"]["data"].clone()
    };
    assert_eq!(
        envelope["retryable"], true,
        "only retryable errors while a replica dies: {status} {message}"
    );
    Err(format!("retryable: {envelope}"))
}

#[tokio::test]
async fn a_replica_killed_under_load_loses_no_write_and_no_session() {
    let (mut harness, url) = harness_on_postgres();
    let nginx_port = free_port();
    let studio = format!("https://{STUDIO_HOST}:{nginx_port}");
    harness
        .env
        .insert("SASHA_PUBLIC_ORIGIN".into(), studio.clone());
    harness.env.insert(
        "SASHA_APP_SANDBOX_ORIGIN".into(),
        format!("https://{SANDBOX_HOST}:{nginx_port}"),
    );
    let staff = with_store(&url, |store| {
        store.create_user("sam", UserRole::Staff, PASSWORD).unwrap()
    });
    let data = harness.start(Role::DataWorker, &[]).await;
    let one = core(&harness, &data, "docs").await;
    let two = core(&harness, &data, "docs-two").await;
    let gateways = [
        gateway(&harness, &data, &[&one, &two]).await,
        gateway(&harness, &data, &[&two, &one]).await,
    ];
    let edge = harness.start(Role::EdgeSandbox, &[]).await;

    let tls = harness.path().join("public-tls");
    let cert_pem = nginx::public_tls(&tls, &[STUDIO_HOST, SANDBOX_HOST]);
    let server = |process: &RoleProcess| format!("server {};", process.listener("http"));
    let mut values = BTreeMap::from([
        ("SASHA_STUDIO_HOST", STUDIO_HOST.to_owned()),
        ("SASHA_SANDBOX_HOST", SANDBOX_HOST.to_owned()),
        ("SASHA_LISTEN", format!("127.0.0.1:{nginx_port} ssl")),
        (
            "STUDIO_CORE_SERVERS",
            format!("{}\n    {}", server(&one), server(&two)),
        ),
        ("EDGE_SANDBOX_HTTP", edge.listener("http").to_string()),
        (
            "MCP_GATEWAY_SERVERS",
            format!("{}\n    {}", server(&gateways[0]), server(&gateways[1])),
        ),
    ]);
    values.extend(nginx::tls_values(&tls));
    let _proxy = nginx::start(
        &harness.path().join("nginx"),
        &root().join("deploy/nginx/sasha.conf.template"),
        values,
    );
    let http = nginx::client(nginx_port, &cert_pem, &[STUDIO_HOST, SANDBOX_HOST]);
    common::eventually(Duration::from_secs(5), "nginx answering", || {
        let (http, health) = (http.clone(), format!("{studio}/healthz"));
        async move { http.get(health).send().await.is_ok() }
    })
    .await;
    let sessions: Vec<String> = (0..CLIENTS)
        .map(|_| with_store(&url, |store| store.create_session(&staff.id).unwrap()))
        .collect();

    // Each client: a keyed write, then its session read back, over and over.
    let done = Arc::new(AtomicUsize::new(0));
    let retried = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for (client, session) in sessions.iter().enumerate() {
        let (http, studio, session, done, retried) = (
            http.clone(),
            studio.clone(),
            session.clone(),
            done.clone(),
            retried.clone(),
        );
        clients.push(tokio::spawn(async move {
            let mut rows = Vec::new();
            let mut latencies = Vec::new();
            for n in 0..WRITES_PER_CLIENT {
                let name = format!("c{client}-{n}");
                let arguments =
                    json!({"values": {"name": name}, "idempotencyKey": format!("k-{client}-{n}")});
                let mut attempts = 0;
                let row = loop {
                    attempts += 1;
                    let started = Instant::now();
                    match create_through_nginx(&http, &studio, &session, &arguments).await {
                        Ok(row) => {
                            latencies.push((Instant::now(), started.elapsed()));
                            break row;
                        }
                        Err(error) => {
                            assert!(attempts < 40, "write {name} keeps failing: {error}");
                            retried.fetch_add(1, Ordering::SeqCst);
                            // A client's back-off before it retries.
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                };
                assert_eq!(row["name"], name);
                rows.push(row["id"].as_i64().unwrap());
                let me = http
                    .get(format!("{studio}/api/me"))
                    .header("cookie", format!("__Host-sasha_session={session}"))
                    .send()
                    .await;
                if let Ok(me) = me {
                    assert!(
                        me.status() == 200 || me.status().as_u16() >= 502,
                        "the session keeps working: {}",
                        me.status()
                    );
                }
                done.fetch_add(1, Ordering::SeqCst);
            }
            (rows, latencies)
        }));
    }
    common::eventually(Duration::from_secs(60), "a third of the writes", || {
        let done = done.clone();
        async move { done.load(Ordering::SeqCst) >= CLIENTS * WRITES_PER_CLIENT / 3 }
    })
    .await;
    let served = |process: &RoleProcess| {
        process
            .stderr()
            .lines()
            .filter(|line| line.contains(" path=/api/me "))
            .count()
    };
    assert!(
        served(&one) > 0 && served(&two) > 0,
        "nginx spreads Studio requests over both replicas"
    );
    let mut one = one;
    one.child.start_kill().unwrap();
    one.child.wait().await.unwrap();
    let killed = Instant::now();

    let mut ids = BTreeSet::new();
    let mut after = Vec::new();
    for client in clients {
        let (rows, latencies) = client.await.unwrap();
        for id in rows {
            assert!(ids.insert(id), "row {id} answered to two writes");
        }
        after.extend(
            latencies
                .into_iter()
                .filter(|(at, _)| *at > killed + Duration::from_secs(2))
                .map(|(_, latency)| latency),
        );
    }
    assert_eq!(ids.len(), CLIENTS * WRITES_PER_CLIENT);
    let data_file = rusqlite::Connection::open_with_flags(
        harness.path().join("apps/expense-log.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let count = |sql: &str| -> i64 { data_file.query_row(sql, [], |row| row.get(0)).unwrap() };
    assert_eq!(
        count("SELECT COUNT(*) FROM categories"),
        (CLIENTS * WRITES_PER_CLIENT) as i64,
        "no write lost, none doubled"
    );
    // Every session still works through the survivor.
    for session in &sessions {
        let me = http
            .get(format!("{studio}/api/me"))
            .header("cookie", format!("__Host-sasha_session={session}"))
            .send()
            .await
            .unwrap();
        assert_eq!(me.status(), 200);
    }
    after.sort();
    let p99 = after
        .get((after.len() * 99 / 100).min(after.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default();
    println!(
        "{} writes by {CLIENTS} clients through nginx; {} retried after a replica was killed; p99 of writes from 2 s after the kill: {:.1} ms over {} writes",
        CLIENTS * WRITES_PER_CLIENT,
        retried.load(Ordering::SeqCst),
        p99.as_secs_f64() * 1000.0,
        after.len()
    );
}

#[tokio::test]
async fn a_wrong_or_unreachable_database_url_stops_the_role_naming_it() {
    let harness = Harness::new();
    let url = off_runtime(sasha_testkit::postgres_database);
    let wrong_database = format!("{}_missing", url);
    let closed = format!("postgres://sasha:s3cret@127.0.0.1:{}/sasha", free_port());
    for (value, says) in [
        (wrong_database.as_str(), "does not exist"),
        (closed.as_str(), "DATABASE_URL"),
        ("mysql://sasha:s3cret@127.0.0.1/sasha", "scheme"),
    ] {
        let (status, stderr) = harness
            .boot_failure(Role::StudioCore, &[("DATABASE_URL", value)])
            .await;
        assert!(!status.success(), "{value}");
        assert!(stderr.contains("DATABASE_URL"), "{value}: {stderr}");
        assert!(stderr.contains(says), "{value}: {stderr}");
        assert!(
            !stderr.contains("s3cret"),
            "the password is never printed: {stderr}"
        );
    }
}

#[tokio::test]
async fn a_postgresql_restart_gives_retryable_errors_and_studio_core_recovers_by_itself() {
    let server = off_runtime(sasha_testkit::PrivateServer::start);
    let url = off_runtime(|| server.database());
    let mut harness = Harness::new();
    harness.env.insert("DATABASE_URL".into(), url.clone());
    with_store(&url, |store| {
        store.create_user("ada", UserRole::Admin, PASSWORD).unwrap()
    });
    let data = harness.start(Role::DataWorker, &[]).await;
    let studio = core(&harness, &data, "docs").await;
    let cookie = sign_in(&studio, "ada").await;
    assert_eq!(me(&studio, &cookie).await, 200);

    off_runtime(|| server.stop());
    let down = common::http_client()
        .get(format!("http://{}/api/me", studio.listener("http")))
        .header("host", "localhost:3007")
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(down.status(), 503);
    let envelope: Value = down.json().await.unwrap();
    assert_eq!(envelope["code"], "APP_NOT_READY", "{envelope}");
    assert_eq!(envelope["retryable"], true, "{envelope}");
    assert!(
        !envelope.to_string().contains("postgres"),
        "no database detail reaches the caller: {envelope}"
    );

    off_runtime(|| server.start_again());
    // The pool drops the broken connections and opens new ones on the
    // next calls; the same process answers again.
    common::eventually(
        Duration::from_secs(10),
        "studio-core answering again without a restart",
        || {
            let (studio, cookie) = (&studio, &cookie);
            async move { me(studio, cookie).await == 200 }
        },
    )
    .await;
    assert!(common::process_alive(studio.child.id().unwrap()));
}

/// One turn's server-sent events, read until an event of `kind` (or the
/// end: `None`).
async fn event_of(
    response: &mut reqwest::Response,
    buffer: &mut String,
    kind: &str,
) -> Option<Value> {
    while let Some(event) = common::next_sse_event(response, buffer).await {
        if event["type"] == kind {
            return Some(event);
        }
    }
    None
}

#[tokio::test]
async fn an_assistant_card_shown_by_one_replica_is_approved_through_the_other() {
    use common::fake_llm::{FakeLlm, Step, script};

    let fake = FakeLlm::start(script(vec![Step::Calls(vec![(
        "createApp".to_owned(),
        json!({"app": "field-log", "name": "Field log", "description": "What we saw", "withTable": false}),
    )])]))
    .await;
    let (mut harness, url) = harness_on_postgres();
    let gateway_port = free_port();
    harness.env.extend([
        ("SASHA_CHAT_BASE_URL".to_owned(), fake.base_url.clone()),
        ("SASHA_CHAT_MODEL".to_owned(), "fake".to_owned()),
        (
            "SASHA_ASSISTANT_MCP_URL".to_owned(),
            format!("http://127.0.0.1:{gateway_port}/mcp"),
        ),
    ]);
    with_store(&url, |store| {
        store.create_user("ada", UserRole::Admin, PASSWORD).unwrap()
    });
    let data = harness.start(Role::DataWorker, &[]).await;
    let one = core(&harness, &data, "docs").await;
    let two = core(&harness, &data, "docs-two").await;
    let _gateway = harness
        .start(
            Role::McpGateway,
            &[
                (
                    "SASHA_DATA_GRPC_URL",
                    format!("https://{}", data.listener("grpc")),
                ),
                (
                    "SASHA_CORE_GRPC_URL",
                    format!(
                        "https://{},https://{}",
                        one.listener("grpc"),
                        two.listener("grpc")
                    ),
                ),
                (
                    "SASHA_GATEWAY_HTTP_ADDR",
                    format!("127.0.0.1:{gateway_port}"),
                ),
            ],
        )
        .await;
    let cookie = sign_in(&one, "ada").await;
    let post = |core: &RoleProcess, path: &str, body: Value| {
        common::http_client()
            .post(format!("http://{}{path}", core.listener("http")))
            .header("host", "localhost:3007")
            .header("origin", common::mcp::STUDIO_ORIGIN)
            .header("cookie", &cookie)
            .json(&body)
            .send()
    };
    let created = post(&one, "/api/assistant/conversations", json!({}))
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let conversation = created.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // The turn runs on the first replica and waits there for the click.
    let mut turn = post(
        &one,
        &format!("/api/assistant/conversations/{conversation}/turn"),
        json!({"prompt": "make me a field log"}),
    )
    .await
    .unwrap();
    assert_eq!(turn.status(), 200);
    let mut buffer = String::new();
    let card = event_of(&mut turn, &mut buffer, "confirmation")
        .await
        .expect("a card");
    let id = card["id"].as_str().unwrap().to_owned();
    // The second replica lists it and takes the click.
    let listed: Value = common::http_client()
        .get(format!(
            "http://{}/api/assistant/confirmations",
            two.listener("http")
        ))
        .header("host", "localhost:3007")
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["confirmations"][0]["id"], id.as_str(), "{listed}");
    let decided = post(
        &two,
        &format!("/api/assistant/confirmations/{id}"),
        json!({"approve": true, "conversation": conversation}),
    )
    .await
    .unwrap();
    assert_eq!(
        decided.status(),
        200,
        "{}",
        decided.text().await.unwrap_or_default()
    );
    // The turn on the first replica runs the approved call and ends.
    let done = event_of(&mut turn, &mut buffer, "done").await;
    assert!(done.is_some(), "the turn ended: {buffer}");
    let registered = with_store(&url, |store| store.registered_app("field-log").unwrap());
    assert!(registered.is_some(), "the approved createApp ran");
}
