//! The CLI's help is complete: every command and role is described, and
//! `sasha serve --help` lists every environment variable.

use crate::common;

use std::process::Command;

fn run(args: &[&str]) -> (bool, String) {
    let output = Command::new(common::sasha_bin())
        .args(args)
        .output()
        .unwrap();
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

#[test]
fn help_describes_every_command_role_and_variable() {
    let (ok, help) = run(&["--help"]);
    assert!(ok);
    assert!(help.contains("up") && help.contains("serve"), "{help}");

    let (ok, help) = run(&["up", "--help"]);
    assert!(ok);
    for needle in [
        "--state-dir",
        "--port",
        "3007",
        "SASHA_STATE_DIR",
        "127.0.0.1",
    ] {
        assert!(help.contains(needle), "up --help lacks {needle}:\n{help}");
    }

    let (ok, help) = run(&["serve", "--help"]);
    assert!(ok);
    for role in ["edge-sandbox", "studio-core", "data-worker", "mcp-gateway"] {
        assert!(help.contains(role), "serve --help lacks {role}");
    }
    for variable in sasha_service::config::VARIABLES {
        assert!(
            help.contains(variable.name),
            "serve --help lacks {}",
            variable.name
        );
    }
}

#[test]
fn unknown_roles_and_commands_are_refused() {
    let (ok, text) = run(&["serve", "admin"]);
    assert!(!ok);
    assert!(text.contains("invalid value 'admin'"), "{text}");
    let (ok, _) = run(&["frobnicate"]);
    assert!(!ok);
}
