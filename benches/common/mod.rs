//! What the benchmarks share: starting one role of the `sasha` binary on
//! loopback ([`start_role`]), what they set up alike: seeded dates, the staff
//! user, the roles and the whole MCP stack ([`fixture`]), the MCP client
//! ([`mcp`]), the pieces of a report: results folder, percentiles, charts
//! ([`report`]), the load benchmark's peers ([`peers`]), and replication's
//! real peers, SeaweedFS and Litestream ([`replica`], shared with the
//! process tests).

use std::io::BufRead as _;
use std::path::Path;
use std::process::{Command, Stdio};

use sasha_service::Role;
use sasha_service::identity::DevPki;
use serde_json::Value;

/// Starts one role of the `sasha` binary on loopback (errors only on stderr)
/// and returns it with its readiness line's listeners.
pub(crate) fn start_role(
    role: Role,
    state: &Path,
    pki: &DevPki,
    extra: &[(&str, String)],
) -> (std::process::Child, Value) {
    let files = pki.files(role);
    let mut command = Command::new(env!("CARGO_BIN_EXE_sasha"));
    command
        .args(["serve", role.as_str()])
        .env("SASHA_STATE_DIR", state)
        .env("SASHA_TLS_CA", &files.ca)
        .env("SASHA_TLS_CERT", &files.cert)
        .env("SASHA_TLS_KEY", &files.key)
        .env("SASHA_DATA_GRPC_ADDR", "127.0.0.1:0")
        .env("SASHA_CORE_HTTP_ADDR", "127.0.0.1:0")
        .env("SASHA_CORE_GRPC_ADDR", "127.0.0.1:0")
        .env("SASHA_GATEWAY_HTTP_ADDR", "127.0.0.1:0")
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped());
    for (key, value) in extra {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("start a role");
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(stdout).lines();
    let ready: Value = loop {
        let line = lines.next().expect("readiness line").unwrap();
        if let Ok(value) = serde_json::from_str::<Value>(&line)
            && value["event"] == "ready"
        {
            break value;
        }
    };
    (child, ready["listeners"].clone())
}

// Every benchmark compiles `common` on its own and uses only some of these.
#[allow(
    dead_code,
    reason = "each benchmark compiles this module and uses only part of it"
)]
pub(crate) mod fixture;
#[allow(
    dead_code,
    reason = "each benchmark compiles this module and uses only part of it"
)]
pub(crate) mod mcp;
#[allow(
    dead_code,
    unreachable_pub,
    reason = "shared with the process tests, which use all of it"
)]
#[path = "../../tests/common/nginx.rs"]
pub(crate) mod nginx;
#[allow(
    dead_code,
    reason = "each benchmark compiles this module and uses only part of it"
)]
pub(crate) mod peers;
#[allow(
    dead_code,
    unreachable_pub,
    reason = "shared with the process tests, which use all of it"
)]
#[path = "../../tests/common/replica.rs"]
pub(crate) mod replica;
#[allow(
    dead_code,
    reason = "each benchmark compiles this module and uses only part of it"
)]
pub(crate) mod report;
