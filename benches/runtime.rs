//! What the realm lockdown (`package/runtime/sasha-lockdown.js`) costs an app:
//! bytes in every assembled resource, and in Chromium the time from the end
//! of the response to `DOMContentLoaded` and per HTML sink assignment (the
//! lockdown's Trusted Types policy checks every string), each against the same
//! resource with the lockdown cut out. The app is the bundled Time Sheet
//! Entry. Run with `cargo bench --bench runtime` (`-- --quick` for 6 runs of
//! each instead of 30); needs Chromium and `tests/browser/node_modules`, which
//! `scripts/test.sh` installs.

#[path = "../tests/common/lockdown.rs"]
mod lockdown;

use std::path::Path;
use std::process::Command;

fn main() {
    let quick = std::env::args().any(|argument| argument == "--quick");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let validation = sasha_package::validate::validate_dir(&root.join("apps/time-sheet-entry"));
    let package = validation.package.expect("Time Sheet Entry validates");
    let locked = &package.resource.html;
    let unlocked = lockdown::without_lockdown(&package.resource);
    let facade = sasha_package::assemble::runtime_script(&package.manifest);

    let scratch = tempfile::tempdir().unwrap();
    let locked_path = scratch.path().join("locked.html");
    let unlocked_path = scratch.path().join("unlocked.html");
    std::fs::write(&locked_path, locked).unwrap();
    std::fs::write(&unlocked_path, &unlocked).unwrap();
    let lockdown_path = scratch.path().join("lockdown.js");
    std::fs::write(&lockdown_path, sasha_package::assemble::LOCKDOWN).unwrap();

    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    let node = std::env::var("SASHA_NODE").unwrap_or_else(|_| "node".to_owned());
    let output = Command::new(node)
        .arg(root.join("tests/browser/runtime-cost.mjs"))
        .current_dir(root.join("tests/browser"))
        .env("CHROMIUM", chromium)
        .env("LOCKED_HTML", &locked_path)
        .env("UNLOCKED_HTML", &unlocked_path)
        .env("LOCKDOWN_JS", &lockdown_path)
        .env("RUNS", if quick { "6" } else { "30" })
        .output()
        .expect("run node tests/browser/runtime-cost.mjs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let Some(line) = stdout.lines().find_map(|line| line.strip_prefix("RESULT ")) else {
        panic!(
            "runtime-cost.mjs printed no result ({}):\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let result: serde_json::Value = serde_json::from_str(line).unwrap();

    println!("| | without the lockdown | with it | difference |");
    println!("|---|---|---|---|");
    println!(
        "| lockdown script | – | {} B | +{} B |",
        sasha_package::assemble::LOCKDOWN.len(),
        sasha_package::assemble::LOCKDOWN.len()
    );
    println!(
        "| facade script (unchanged) | {} B | {} B | 0 |",
        facade.len(),
        facade.len()
    );
    println!(
        "| assembled Time Sheet Entry | {} B | {} B | +{} B |",
        unlocked.len(),
        locked.len(),
        locked.len() - unlocked.len()
    );
    for (label, key, unit) in [
        (
            "response end → DOMContentLoaded (median)",
            "parseToDomContentLoadedMs",
            "ms",
        ),
        (
            "one `innerHTML` of a table row (median)",
            "innerHTMLMicroseconds",
            "µs",
        ),
    ] {
        let before = result["unlocked"][key].as_f64().unwrap();
        let after = result["locked"][key].as_f64().unwrap();
        println!(
            "| {label} | {before:.2} {unit} | {after:.2} {unit} | {:+.2} {unit} |",
            after - before
        );
    }
    println!(
        "| the lockdown script's own run, in a blank page (median) | – | {:.2} ms | +{:.2} ms |",
        result["lockdownRunMs"].as_f64().unwrap(),
        result["lockdownRunMs"].as_f64().unwrap()
    );
    println!(
        "\n{} runs of each, alternating; Chromium headless.",
        result["runs"]
    );
}
