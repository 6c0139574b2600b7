//! Runs a `tests/browser/<script>.mjs` scenario (playwright-core driving
//! Debian's Chromium) for a browser test: spawns it with piped output, answers
//! its optional `HARNESS {json}` handshake, and collects its output, failing
//! with the script's output and the caller's diagnostics.

use std::ffi::OsStr;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use super::{UpProcess, chromium, node_program, root};

/// Node.js with playwright-core installed, or a failure saying how to get it.
pub fn node() -> String {
    node_program(
        "the browser tests",
        Some("tests/browser/node_modules/playwright-core"),
    )
}

/// Fails early (before any setup) when Chromium or Node.js with playwright-core
/// is missing.
pub fn require() {
    chromium();
    node();
}

/// One running browser scenario script. Killed when dropped.
pub struct BrowserScript {
    /// How failures name the script (e.g. `sandbox.mjs`).
    pub label: String,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    stderr: ChildStderr,
    /// What the script printed before `finish` (the handshake lines).
    output: String,
}

impl BrowserScript {
    /// Starts `node tests/browser/<script>.mjs` in `tests/browser`, with
    /// `CHROMIUM` and `env` set.
    pub fn start(script: &str, env: &[(&str, &dyn AsRef<OsStr>)]) -> BrowserScript {
        let browser = root().join("tests/browser");
        let file = format!("{script}.mjs");
        let mut command = Command::new(node());
        command
            .arg(browser.join(&file))
            .current_dir(&browser)
            .env("CHROMIUM", chromium());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start node");
        BrowserScript {
            label: file,
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            stderr: child.stderr.take().unwrap(),
            child,
            output: String::new(),
        }
    }

    /// Reads the script's `HARNESS {json}` line, allowing `preamble` other lines
    /// before it, each within `timeout`; fails with the script's stderr if it
    /// does not come.
    pub async fn handshake(&mut self, timeout: Duration, preamble: usize) -> serde_json::Value {
        let mut read = Ok(Ok(0));
        let mut line = String::new();
        for _ in 0..=preamble {
            line.clear();
            read = tokio::time::timeout(timeout, self.stdout.read_line(&mut line)).await;
            self.output.push_str(&line);
            if line.starts_with("HARNESS ") {
                break;
            }
        }
        let Some(info) = line.strip_prefix("HARNESS ") else {
            let mut errors = String::new();
            let _ = self.stderr.read_to_string(&mut errors).await;
            panic!(
                "{} did not start ({read:?}): {}\n{errors}",
                self.label, self.output
            );
        };
        serde_json::from_str(info).expect("handshake JSON")
    }

    /// Answers the handshake with one JSON line. A script that already died
    /// shows why in its output at `finish`.
    pub async fn answer(&mut self, value: serde_json::Value) {
        let stdin = self.stdin.as_mut().expect("stdin");
        let _ = stdin.write_all(format!("{value}\n").as_bytes()).await;
        let _ = stdin.flush().await;
    }

    /// Waits up to `timeout` for the script to exit, then asserts it succeeded
    /// and printed "checks passed", and prints its output. Failures add
    /// `context()` (e.g. the server's stderr).
    pub async fn finish(mut self, timeout: Duration, context: impl Fn() -> String) -> String {
        let outcome = tokio::time::timeout(timeout, async {
            let mut rest = String::new();
            let mut errors = String::new();
            let (out, err) = tokio::join!(
                self.stdout.read_to_string(&mut rest),
                self.stderr.read_to_string(&mut errors)
            );
            out.and(err).expect("read the script's output");
            let status = self.child.wait().await.expect("wait for node");
            (status, rest, errors)
        })
        .await;
        let label = &self.label;
        let Ok((status, rest, errors)): Result<(ExitStatus, String, String), _> = outcome else {
            panic!("{label} did not finish in {timeout:?}.\n{}", context());
        };
        let mut output = std::mem::take(&mut self.output);
        output.push_str(&rest);
        assert!(
            status.success(),
            "{label} failed ({status}).\n--- stdout\n{output}\n--- stderr\n{errors}\n{}",
            context()
        );
        assert!(output.contains("checks passed"), "{output}");
        println!("{output}");
        output
    }
}

/// The last `lines` lines of `text`.
/// The screenshots a scenario printed (`screenshot <path>` lines): at least
/// `at_least` of them, each a file that exists.
pub fn screenshots(output: &str, at_least: usize) -> Vec<&str> {
    let taken: Vec<&str> = output
        .lines()
        .filter_map(|line| line.strip_prefix("screenshot "))
        .collect();
    assert!(taken.len() >= at_least, "{output}");
    for file in &taken {
        assert!(std::path::Path::new(file).is_file(), "{file}");
    }
    taken
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Failure diagnostics for a scenario run against `sasha up`: the last lines of
/// its stderr.
pub fn up_stderr_tail(up: &UpProcess) -> impl Fn() -> String + '_ {
    || {
        format!(
            "--- sasha up stderr (last lines)\n{}",
            tail(&up.stderr_text(), 60)
        )
    }
}
