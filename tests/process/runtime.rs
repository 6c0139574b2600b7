//! The browser runtime (`runtime/sasha-runtime.js`, `window.Sasha`): its
//! behaviour tests run under Node's built-in test runner (`node --test`, no npm
//! packages), and the assembled resource carries it with the app's identity.
//!
//! Node is required: a missing `node` fails these tests, it never skips them
//! (`SASHA_NODE` names another Node binary).

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use common::{node_program, root, run_node};
use sasha_package::assemble::runtime_script;
use sasha_package::manifest::{Capabilities, DataCapability, Manifest, Theme};
use sasha_package::validate::validate_dir;

fn runtime_dir() -> PathBuf {
    root().join("package/runtime")
}

fn node() -> Command {
    Command::new(node_program("the runtime tests", None))
}

#[test]
fn runtime_behaviour_tests_pass_under_node() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(runtime_dir().join("tests"))
        .expect("runtime/tests")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.to_string_lossy().ends_with(".test.mjs"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "runtime tests are missing: {files:?}");
    let mut command = node();
    command.arg("--test").args(&files);
    let stdout = run_node(command);
    assert!(stdout.contains("# fail 0"), "{stdout}");
    assert!(!stdout.contains("# pass 0"), "no test ran:\n{stdout}");
}

fn manifest(version: &str, capabilities: Capabilities) -> Manifest {
    Manifest {
        id: "time-sheets".to_owned(),
        name: "Time Sheets".to_owned(),
        description: "Track hours".to_owned(),
        version: version.to_owned(),
        theme: Theme::None,
        capabilities,
        tables: BTreeMap::new(),
        actions: Vec::new(),
    }
}

#[test]
fn the_config_line_carries_id_version_and_capabilities_and_cannot_end_the_script() {
    let capabilities = Capabilities {
        chat: true,
        files: false,
        data: DataCapability::Read,
    };
    let script = runtime_script(&manifest("1.0 </script><!-- & >", capabilities));
    let (config, runtime) = script.split_once('\n').expect("a config line");
    assert_eq!(
        runtime,
        include_str!("../../package/runtime/sasha-runtime.js"),
        "then the pinned runtime"
    );
    let json = config
        .strip_prefix("window.__SASHA_APP__ = ")
        .and_then(|rest| rest.strip_suffix(';'))
        .expect("one assignment");
    assert!(!json.contains(['<', '>', '&']), "{json}");
    let parsed: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(
        parsed,
        serde_json::json!({
            "id": "time-sheets",
            "version": "1.0 </script><!-- & >",
            "capabilities": {"chat": true, "files": false, "data": "read"},
        })
    );
    let lower = script.to_ascii_lowercase();
    for forbidden in ["</script", "<script", "<!--"] {
        assert!(!lower.contains(forbidden), "runtime contains {forbidden}");
    }
}

#[test]
fn the_assembled_runtime_is_hashed_into_the_csp_and_runs_with_the_apps_identity() {
    let fixture = root().join("tests/packages/valid/expense-log");
    let package = validate_dir(&fixture).package.expect("valid fixture");
    let script = runtime_script(&package.manifest);
    let html = &package.resource.html;
    assert!(
        html.contains(&format!("<script>{script}</script>")),
        "the resource inlines the configured runtime"
    );
    let hash = {
        use base64::Engine as _;
        use sha2::Digest as _;
        base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(script.as_bytes()))
    };
    assert!(
        package.resource.csp.contains(&format!("'sha256-{hash}'")),
        "{}",
        package.resource.csp
    );

    // The exact inline text, run in a fake window: the first message is the
    // initialize request naming the app.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inline.js");
    std::fs::write(&path, &script).unwrap();
    let mut command = node();
    command.arg("-e").arg(
        r#"
const src = require("fs").readFileSync(process.argv[1], "utf8");
const sent = [];
const window = { document: { documentElement: { style: {} } }, crypto: require("crypto").webcrypto,
  setTimeout: () => 0, clearTimeout() {}, addEventListener() {}, parent: { postMessage: (m) => sent.push(m) } };
new Function("window", src)(window);
console.log(JSON.stringify({ first: sent[0], config: "__SASHA_APP__" in window, sasha: Object.keys(window.Sasha) }));
"#,
    );
    command.arg(&path);
    let stdout = run_node(command);
    let outcome: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        outcome["first"]["params"]["appInfo"],
        serde_json::json!({"name": "expense-log", "version": "1.2.0"})
    );
    assert_eq!(outcome["first"]["method"], "ui/initialize");
    assert_eq!(outcome["config"], false, "the config global is consumed");
    assert_eq!(
        outcome["sasha"],
        serde_json::json!([
            "ready",
            "connected",
            "capabilities",
            "hostContext",
            "data",
            "actions",
            "chat",
            "files",
            "onToolResult"
        ])
    );
}
