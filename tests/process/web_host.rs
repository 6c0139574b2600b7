//! The Studio page's modules: the MCP Apps host's (`web/host.js`) and the
//! other panes' behaviour tests (`web/tests/*.test.mjs`) run
//! under Node's built-in test runner (`node --test`, no npm packages) with a
//! fake window, frame, clock and fetch, and every module the page loads must
//! parse (`node --check`).
//!
//! Node is required: a missing `node` fails these tests, it never skips them
//! (`SASHA_NODE` names another Node binary).

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use common::{node_program, root, run_node};

fn web_dir() -> PathBuf {
    root().join("studio-core/web")
}

fn node() -> Command {
    Command::new(node_program("the Studio page tests", None))
}

#[test]
fn every_module_parses() {
    let mut modules: Vec<PathBuf> = std::fs::read_dir(web_dir())
        .expect("web/")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "js"))
        .collect();
    modules.sort();
    assert!(modules.len() >= 5, "modules are missing: {modules:?}");
    for module in modules {
        let mut command = node();
        command.arg("--check").arg(&module);
        run_node(command);
    }
}

/// Every `web/tests/*.test.mjs`: the host's, the assistant pane's, the
/// lifecycle controls'.
#[test]
fn studio_behaviour_tests_pass_under_node() {
    let mut suites: Vec<PathBuf> = std::fs::read_dir(web_dir().join("tests"))
        .expect("web/tests/")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| {
            path.to_str()
                .is_some_and(|name| name.ends_with(".test.mjs"))
        })
        .collect();
    suites.sort();
    assert!(suites.len() >= 3, "suites are missing: {suites:?}");
    let mut command = node();
    command.arg("--test").args(&suites);
    let stdout = run_node(command);
    assert!(stdout.contains("# fail 0"), "{stdout}");
    assert!(stdout.contains("# cancelled 0"), "{stdout}");
    assert!(!stdout.contains("# pass 0"), "no test ran:\n{stdout}");
}
