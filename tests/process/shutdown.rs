//! Probes and graceful shutdown of the real processes: every role's
//! `SASHA_HEALTH_ADDR` listener (`/livez`, `/readyz`, nothing else), readiness
//! following what each role needs, and SIGTERM as a drain. A chat turn that
//! streams for seconds (the fake provider's `Behaviour::Stream`) runs through
//! mcp-gateway and studio-core while one of them is told to stop: the turn
//! completes, new connections are refused, `/readyz` says 503 meanwhile, and
//! the process exits 0. A turn that outlives `SASHA_SHUTDOWN_GRACE_SECS` is
//! cut, and the process exits anyway.

use crate::common;
use crate::common::eventually;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::fake_llm::{Behaviour, FakeLlm};
use common::mcp::{self, Exchange, Mcp, structured};
use common::{Harness, RoleProcess};
use sasha_service::Role;
use serde_json::json;
use studio_store::UserRole;

const APP: &str = "document-summariser";
const STUDIO: &str = "http://localhost:3007";

/// data-worker, studio-core (chat pointing at `fake`) and mcp-gateway, each
/// with a probe listener, and a Studio session of a staff user.
struct Stack {
    harness: Harness,
    data: RoleProcess,
    core: RoleProcess,
    gateway: RoleProcess,
    session: String,
}

impl Stack {
    async fn start(fake: &FakeLlm, gateway_env: &[(&str, String)]) -> Stack {
        let harness = Harness::new();
        let apps = harness.path().join("docs/apps");
        common::copy_dir(&common::root().join("examples").join(APP), &apps.join(APP));
        let store = harness.store();
        let staff = store
            .create_user("sam", UserRole::Staff, "correct horse battery")
            .unwrap();
        let session = store.create_session(&staff.id).unwrap();
        let probe = ("SASHA_HEALTH_ADDR", "127.0.0.1:0".to_owned());
        let data = harness
            .start(Role::DataWorker, std::slice::from_ref(&probe))
            .await;
        let data_url = format!("https://{}", data.listener("grpc"));
        let core = harness
            .start(
                Role::StudioCore,
                &[
                    probe.clone(),
                    ("SASHA_DATA_GRPC_URL", data_url.clone()),
                    ("SASHA_CHAT_BASE_URL", fake.base_url.clone()),
                    ("SASHA_CHAT_MODEL", "fake-model".to_owned()),
                ],
            )
            .await;
        let mut env = vec![
            probe,
            ("SASHA_DATA_GRPC_URL", data_url),
            (
                "SASHA_CORE_GRPC_URL",
                format!("https://{}", core.listener("grpc")),
            ),
        ];
        env.extend(gateway_env.iter().cloned());
        let gateway = harness.start(Role::McpGateway, &env).await;
        Stack {
            harness,
            data,
            core,
            gateway,
            session,
        }
    }

    /// The Studio page with the summariser open, as a sessionless MCP client.
    fn studio(&self) -> Mcp {
        Mcp::new(
            &format!("http://{}/mcp", self.gateway.listener("http")),
            vec![
                (
                    "cookie".to_owned(),
                    format!("sasha_session={}", self.session),
                ),
                ("origin".to_owned(), STUDIO.to_owned()),
                ("sasha-app".to_owned(), APP.to_owned()),
            ],
            mcp::SESSIONLESS,
        )
    }

    /// Starts one chat turn in the background.
    fn chat(&self) -> tokio::task::JoinHandle<Result<Exchange, String>> {
        let mut client = self.studio();
        tokio::spawn(async move {
            client
                .try_request(
                    "tools/call",
                    json!({
                        "name": "sasha__chat_execute",
                        "arguments": {"prompt": "Summarise the plan", "newSession": true},
                        "_meta": {"progressToken": "turn"},
                    }),
                )
                .await
        })
    }
}

/// A provider answer of `words` deltas, `delay` apart.
fn slow_answer(words: usize, delay: Duration) -> (Behaviour, String) {
    let deltas: Vec<String> = (0..words).map(|n| format!("word{n} ")).collect();
    let text = deltas.concat();
    (Behaviour::Stream(deltas, delay), text)
}

async fn probe(addr: SocketAddr, path: &str) -> common::RawResponse {
    common::get(addr, "probe.internal", path, "").await
}

fn sigterm(process: &RoleProcess) {
    let pid = process.child.id().expect("running") as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("signal");
}

/// Waits until the provider has received `count` requests.
/// Starts a chat turn from the Studio page and, once its stream is flowing
/// (the provider has the request, a few words have gone out), sends SIGTERM
/// to `process`; the turn and the moment of the signal.
async fn sigterm_mid_turn(
    stack: &Stack,
    fake: &FakeLlm,
    process: &RoleProcess,
) -> (tokio::task::JoinHandle<Result<Exchange, String>>, Instant) {
    let turn = stack.chat();
    wait_for_requests(fake, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let signalled = Instant::now();
    sigterm(process);
    (turn, signalled)
}

/// The turn in flight completes with every word of `text`, and `process`
/// then exits 0 within the default grace period.
async fn turn_completes_then_exit_0(
    turn: tokio::task::JoinHandle<Result<Exchange, String>>,
    text: &str,
    process: &mut RoleProcess,
    signalled: Instant,
) {
    let exchange = turn.await.unwrap().expect("the turn's response completes");
    assert_eq!(structured(&exchange)["text"], text);
    let status = tokio::time::timeout(Duration::from_secs(20), process.child.wait())
        .await
        .expect("the role exits after the drain")
        .unwrap();
    assert!(status.success(), "{status}: {}", process.stderr());
    assert!(
        signalled.elapsed() < Duration::from_secs(20),
        "within the default grace period"
    );
}

async fn wait_for_requests(fake: &FakeLlm, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while fake.requests().len() < count {
        assert!(
            Instant::now() < deadline,
            "the turn never reached the provider"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn refused(addr: SocketAddr) -> bool {
    tokio::net::TcpStream::connect(addr).await.is_err()
}

/// `/readyz` answers 503 `draining: true` and `/livez` still 200.
async fn assert_draining(health: SocketAddr) {
    eventually(
        Duration::from_secs(5),
        "/readyz turning 503",
        || async move { probe(health, "/readyz").await.status == 503 },
    )
    .await;
    let ready = probe(health, "/readyz").await;
    assert_eq!(ready.json()["draining"], true, "{}", ready.body);
    assert_eq!(ready.json()["ok"], false);
    assert_eq!(
        probe(health, "/livez").await.status,
        200,
        "alive while draining"
    );
}

#[tokio::test]
async fn every_role_answers_probes_on_its_own_listener() {
    let fake = FakeLlm::start(Behaviour::Echo).await;
    let mut stack = Stack::start(&fake, &[]).await;
    let edge = stack
        .harness
        .start(
            Role::EdgeSandbox,
            &[("SASHA_HEALTH_ADDR", "127.0.0.1:0".to_owned())],
        )
        .await;
    for process in [&stack.data, &stack.core, &stack.gateway, &edge] {
        let health = process.listener("health");
        let role = process.role.as_str();
        let live = probe(health, "/livez").await;
        assert_eq!(live.status, 200, "{role} /livez");
        assert_eq!(live.json()["ok"], true);
        assert_eq!(live.json()["role"], role);
        let ready = probe(health, "/readyz").await;
        assert_eq!(ready.status, 200, "{role} /readyz: {}", ready.body);
        assert_eq!(ready.json()["role"], role);
        assert_eq!(ready.json()["draining"], false);
        assert_eq!(ready.header("cache-control"), Some("no-store"));
        for path in ["/", "/healthz", "/readyz/", "/mcp", "/app-sandbox"] {
            assert_eq!(probe(health, path).await.status, 404, "{role} {path}");
        }
        let posted = common::raw_http(
            health,
            "POST /readyz HTTP/1.1\r\nHost: probe\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert_eq!(posted.status, 404, "{role} POST /readyz");
    }
    // What readiness checks, per role.
    let core_ready = probe(stack.core.listener("health"), "/readyz").await.json();
    let checked: Vec<&str> = core_ready["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|dependency| dependency["role"].as_str().unwrap())
        .collect();
    assert_eq!(checked, ["core-database", "data-worker"]);
    let data_ready = probe(stack.data.listener("health"), "/readyz").await.json();
    assert_eq!(data_ready["dependencies"][0]["role"], "app-data-root");

    // The sandbox's public surface is unchanged: no probe paths there.
    for path in ["/livez", "/readyz"] {
        let response = common::get(edge.listener("http"), "127.0.0.1:3007", path, "").await;
        assert_eq!(response.status, 404, "edge-sandbox {path}");
    }
    edge.stop().await;

    // data-worker is not ready when APP_DATA_ROOT is no longer a folder.
    let app_data = stack.harness.path().join("apps");
    std::fs::create_dir_all(&app_data).unwrap();
    std::fs::remove_dir_all(&app_data).unwrap();
    std::fs::write(&app_data, "not a folder").unwrap();
    let ready = probe(stack.data.listener("health"), "/readyz").await;
    assert_eq!(ready.status, 503, "{}", ready.body);
    assert_eq!(ready.json()["dependencies"][0]["ok"], false);
    std::fs::remove_file(&app_data).unwrap();
    std::fs::create_dir(&app_data).unwrap();
    assert_eq!(
        probe(stack.data.listener("health"), "/readyz").await.status,
        200
    );

    // Without data-worker neither core nor the gateway is ready; both stay alive.
    sigterm(&stack.data);
    let status = tokio::time::timeout(Duration::from_secs(15), stack.data.child.wait())
        .await
        .expect("data-worker stops")
        .unwrap();
    assert!(status.success());
    for process in [&stack.core, &stack.gateway] {
        let health = process.listener("health");
        let ready = probe(health, "/readyz").await;
        assert_eq!(ready.status, 503, "{} {}", process.role, ready.body);
        assert_eq!(ready.json()["draining"], false);
        assert_eq!(probe(health, "/livez").await.status, 200);
    }
}

#[tokio::test]
async fn a_draining_gateway_finishes_the_turn_in_flight_and_exits_0() {
    let (behaviour, text) = slow_answer(12, Duration::from_millis(500));
    let fake = FakeLlm::start(behaviour).await;
    let mut stack = Stack::start(&fake, &[]).await;
    let http = stack.gateway.listener("http");
    let health = stack.gateway.listener("health");
    assert_eq!(probe(health, "/readyz").await.status, 200);

    let (turn, signalled) = sigterm_mid_turn(&stack, &fake, &stack.gateway).await;

    // Mid-stream: new connections are refused and readiness is 503.
    eventually(Duration::from_secs(5), "the HTTP listener closing", || {
        refused(http)
    })
    .await;
    assert_draining(health).await;
    assert!(
        !turn.is_finished(),
        "the checks ran while the turn streamed"
    );

    // The turn in flight completes with every word.
    turn_completes_then_exit_0(turn, &text, &mut stack.gateway, signalled).await;
    assert_eq!(
        fake.disconnects.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

#[tokio::test]
async fn a_draining_core_finishes_the_chat_stream_in_flight_and_exits_0() {
    let (behaviour, text) = slow_answer(12, Duration::from_millis(500));
    let fake = FakeLlm::start(behaviour).await;
    let mut stack = Stack::start(&fake, &[]).await;
    let grpc = stack.core.listener("grpc");
    let http = stack.core.listener("http");
    let health = stack.core.listener("health");

    let (turn, signalled) = sigterm_mid_turn(&stack, &fake, &stack.core).await;

    // Mid-stream: both of core's listeners refuse, readiness is 503.
    eventually(
        Duration::from_secs(5),
        "core's listeners closing",
        || async move { refused(grpc).await && refused(http).await },
    )
    .await;
    assert_draining(health).await;
    assert!(
        !turn.is_finished(),
        "the checks ran while the turn streamed"
    );

    // The CoreService.Chat stream in flight runs to its end.
    turn_completes_then_exit_0(turn, &text, &mut stack.core, signalled).await;

    // With core gone the gateway is alive but not ready.
    let gateway_health = stack.gateway.listener("health");
    assert_eq!(probe(gateway_health, "/readyz").await.status, 503);
    assert_eq!(probe(gateway_health, "/livez").await.status, 200);
}

#[tokio::test]
async fn a_turn_outliving_the_grace_period_is_cut_and_the_process_exits() {
    let (behaviour, _) = slow_answer(60, Duration::from_secs(1));
    let fake = FakeLlm::start(behaviour).await;
    let mut stack = Stack::start(&fake, &[("SASHA_SHUTDOWN_GRACE_SECS", "2".to_owned())]).await;
    let (turn, signalled) = sigterm_mid_turn(&stack, &fake, &stack.gateway).await;
    assert_draining(stack.gateway.listener("health")).await;

    let status = tokio::time::timeout(Duration::from_secs(15), stack.gateway.child.wait())
        .await
        .expect("the gateway exits once the grace period is over")
        .unwrap();
    let took = signalled.elapsed();
    assert!(status.success(), "{status}: {}", stack.gateway.stderr());
    assert!(
        took >= Duration::from_millis(1900),
        "it waited for the grace period first: {took:?}"
    );
    // The exited child's last lines may still be on their way through the
    // pipe to the harness's reader.
    let gateway = &stack.gateway;
    eventually(
        Duration::from_secs(5),
        "the gateway's line about cutting in-flight requests",
        || async move {
            gateway
                .stderr()
                .contains("in-flight requests did not finish in time")
        },
    )
    .await;
    // The client's response was cut, and studio-core, seeing its stream
    // dropped, cancelled the provider request.
    let outcome = tokio::time::timeout(Duration::from_secs(10), turn)
        .await
        .expect("the client sees the cut")
        .unwrap();
    assert!(outcome.is_err(), "no complete response: {outcome:?}");
    assert!(
        fake.wait_for_disconnects(1, Duration::from_secs(10)).await,
        "the upstream turn was cancelled"
    );
}

#[tokio::test]
async fn unusable_probe_and_grace_settings_stop_a_role_at_boot() {
    let harness = Harness::new();
    for (env, var) in [
        (("SASHA_HEALTH_ADDR", "9090"), "SASHA_HEALTH_ADDR"),
        (
            ("SASHA_SHUTDOWN_GRACE_SECS", "-1"),
            "SASHA_SHUTDOWN_GRACE_SECS",
        ),
        (
            ("SASHA_SHUTDOWN_GRACE_SECS", "3601"),
            "SASHA_SHUTDOWN_GRACE_SECS",
        ),
    ] {
        for role in [Role::EdgeSandbox, Role::DataWorker] {
            let (status, stderr) = harness.boot_failure(role, &[env]).await;
            assert_eq!(status.code(), Some(2), "{role} {env:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(
                stderr.contains(&format!("invalid configuration: {var}: ")),
                "{stderr}"
            );
        }
    }
    // A probe port already taken is a start-up failure naming the variable.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (status, stderr) = harness
        .boot_failure(Role::EdgeSandbox, &[("SASHA_HEALTH_ADDR", &addr)])
        .await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("SASHA_HEALTH_ADDR: cannot listen on {addr}")),
        "{stderr}"
    );
}
